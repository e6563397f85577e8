//! CreateTags and DeleteTags on instances, interfaces, volumes, images and
//! snapshots (EC2 API reference, CreateTags,
//! <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateTags.html>, and DeleteTags,
//! <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DeleteTags.html>): several
//! `ResourceId.N` in one call, all or none changed.

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

/// DeleteTags: `ResourceId.N` and `Tag.N.Key` with an optional `Tag.N.Value`.
/// A key alone deletes the tag whatever its value; a key with a value
/// deletes it only when the value matches (an empty value matches only an
/// empty value); no `Tag.N` at all deletes every user tag of the resources.
/// Keys starting with `aws:` are refused (`InvalidParameterValue`), and so is
/// a resource that does not exist (its family's NotFound, nothing deleted).
pub(crate) fn delete_tags(world: &mut World, ctx: &Ctx<'_>, params: &Params) -> Result<Xml, Ec2Error> {
    let resources = params.list("ResourceId");
    if resources.is_empty() {
        return Err(Ec2Error::missing_parameter("ResourceId"));
    }
    let mut wanted: Vec<(String, Option<String>)> = Vec::new();
    for tag in params.members("Tag") {
        let key = tag.get("Key").ok_or_else(|| Ec2Error::missing_parameter("Tag.Key"))?;
        if key.to_ascii_lowercase().starts_with("aws:") {
            return Err(Ec2Error::client(
                "InvalidParameterValue",
                "Tag keys starting with 'aws:' are reserved for internal use",
            ));
        }
        wanted.push((key.to_owned(), tag.get("Value").map(str::to_owned)));
    }
    for id in &resources {
        tags_of(world, ctx, id)?;
    }
    for id in &resources {
        let tags = tags_of(world, ctx, id)?;
        if wanted.is_empty() {
            tags.retain(|k, _| k.to_ascii_lowercase().starts_with("aws:"));
            continue;
        }
        for (key, value) in &wanted {
            if value.as_ref().is_none_or(|v| tags.get(key) == Some(v)) {
                tags.remove(key);
            }
        }
    }
    Ok(returns_true())
}
