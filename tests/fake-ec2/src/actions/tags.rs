//! CreateTags on instances, interfaces, volumes, images and snapshots.

use crate::actions::run::read_tags;
use crate::actions::{Ctx, returns_true};
use crate::errors::Ec2Error;
use crate::model::Tags;
use crate::query::Params;
use crate::store::World;
use crate::xml::Xml;

fn not_found(id: &str) -> Ec2Error {
    let (code, noun) = match id.split_once('-').map(|(p, _)| p) {
        Some("i") => ("InvalidInstanceID.NotFound", "instance"),
        Some("eni") => ("InvalidNetworkInterfaceID.NotFound", "networkInterface"),
        Some("vol") => ("InvalidVolume.NotFound", "volume"),
        Some("ami") => ("InvalidAMIID.NotFound", "image"),
        Some("snap") => ("InvalidSnapshot.NotFound", "snapshot"),
        _ => return Ec2Error::client("InvalidID", format!("The ID '{id}' is not valid")),
    };
    Ec2Error::not_found(code, noun, &[id.to_owned()])
}

/// The tags of the caller's resource `id`, or its family's NotFound error.
fn tags_of<'w>(world: &'w mut World, ctx: &Ctx<'_>, id: &str) -> Result<&'w mut Tags, Ec2Error> {
    let account = ctx.caller.account.as_str();
    let found = match id.split_once('-').map(|(p, _)| p) {
        Some("i") => world
            .instances
            .iter_mut()
            .filter(|i| i.visible_to(account, ctx.now))
            .find(|i| i.id == id)
            .map(|i| &mut i.tags),
        Some("eni") => world
            .instances
            .iter_mut()
            .filter(|i| i.visible_to(account, ctx.now))
            .flat_map(|i| i.interfaces.iter_mut())
            .find(|e| e.id == id)
            .map(|e| &mut e.tags),
        Some("vol") => world
            .instances
            .iter_mut()
            .filter(|i| i.visible_to(account, ctx.now))
            .flat_map(|i| i.volumes.iter_mut())
            .find(|v| v.id == id)
            .map(|v| &mut v.tags),
        Some("ami") => world.images.iter_mut().find(|i| i.id == id && i.owner == account).map(|i| &mut i.tags),
        Some("snap") => world.snapshots.iter_mut().find(|s| s.id == id && s.owner == account).map(|s| &mut s.tags),
        _ => None,
    };
    found.ok_or_else(|| not_found(id))
}

/// CreateTags: `ResourceId.N`, `Tag.N.Key` / `Tag.N.Value`; all resources or none are tagged.
pub(crate) fn create_tags(world: &mut World, ctx: &Ctx<'_>, params: &Params) -> Result<Xml, Ec2Error> {
    let resources = params.list("ResourceId");
    if resources.is_empty() {
        return Err(Ec2Error::missing_parameter("ResourceId"));
    }
    let tags = read_tags(params, "Tag")?;
    if tags.is_empty() {
        return Err(Ec2Error::missing_parameter("Tag"));
    }
    for id in &resources {
        let current = tags_of(world, ctx, id)?;
        let keys = current.keys().chain(tags.keys()).collect::<std::collections::BTreeSet<_>>().len();
        if keys > 50 {
            return Err(Ec2Error::client(
                "TagLimitExceeded",
                "The maximum number of Tags for a resource has been reached.",
            ));
        }
    }
    for id in &resources {
        tags_of(world, ctx, id)?.extend(tags.clone());
    }
    Ok(returns_true())
}
