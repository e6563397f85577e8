//! DescribeImages, image launch permissions and snapshot create-volume permissions.

use std::collections::BTreeSet;

use crate::actions::{Ctx, ids, returns_true};
use crate::errors::Ec2Error;
use crate::filters::{matches_all, parse_filters, tag_values};
use crate::ids::is_account_id;
use crate::model::{Image, Snapshot};
use crate::pagination::paginate;
use crate::query::Params;
use crate::render;
use crate::store::World;
use crate::xml::Xml;

fn image_attribute(image: &Image, name: &str) -> Option<Vec<String>> {
    if let Some(values) = tag_values(name, &image.tags) {
        return Some(values);
    }
    let one = |v: &str| Some(vec![v.to_owned()]);
    match name {
        "image-id" => one(&image.id),
        "name" => one(&image.name),
        "owner-id" => one(&image.owner),
        "owner-alias" => Some(image.owner_alias.iter().cloned().collect()),
        "is-public" => one(&image.public.to_string()),
        "state" => one("available"),
        "architecture" => one(&image.architecture),
        "image-type" => one("machine"),
        "root-device-type" => one("ebs"),
        "virtualization-type" => one("hvm"),
        "block-device-mapping.snapshot-id" => one(&image.snapshot_id),
        _ => None,
    }
}

fn owner_matches(image: &Image, owner: &str, account: &str) -> bool {
    match owner {
        "self" => image.owner == account,
        "amazon" | "aws-marketplace" | "aws-backup-vault" => image.owner_alias.as_deref() == Some(owner),
        other => image.owner == other,
    }
}

/// `ExecutableBy.N` as EC2 documents it: `all` → public images; `self` (or the caller's own
/// account id) → images the caller owns or that are shared with it explicitly; another
/// account id → only images shared with that account explicitly (not public ones).
fn executable_by(image: &Image, who: &str, account: &str) -> bool {
    match who {
        "all" => image.public,
        "self" => image.owner == account || image.launch_users.contains(account),
        other if other == account => executable_by(image, "self", account),
        other => image.launch_users.contains(other),
    }
}

/// DescribeImages: `ImageId.N`, `Owner.N`, `ExecutableBy.N`, `Filter.N`; only images the caller may launch.
pub(crate) fn describe_images(world: &mut World, ctx: &Ctx<'_>, params: &Params) -> Result<Xml, Ec2Error> {
    let account = ctx.caller.account.as_str();
    let ids = ids(params, "ImageId", "ami", "InvalidAMIID.Malformed")?;
    let owners = params.list("Owner");
    let executable = params.list("ExecutableBy");
    if let Some(bad) = owners.iter().find(|o| {
        !is_account_id(o) && !matches!(o.as_str(), "self" | "amazon" | "aws-marketplace" | "aws-backup-vault")
    }) {
        return Err(Ec2Error::client("InvalidUserID.Malformed", format!("Invalid user id: \"{bad}\"")));
    }
    let filters = parse_filters(params)?;
    let visible: Vec<&Image> = world.images.iter().filter(|i| i.launchable_by(account)).collect();
    let missing: Vec<String> = ids.iter().filter(|id| !visible.iter().any(|i| &i.id == *id)).cloned().collect();
    if !missing.is_empty() {
        return Err(Ec2Error::client(
            "InvalidAMIID.NotFound",
            format!("The image id '[{}]' does not exist", missing.join(", ")),
        ));
    }
    let mut selected = Vec::new();
    for image in visible {
        if (ids.is_empty() || ids.contains(&image.id))
            && (owners.is_empty() || owners.iter().any(|o| owner_matches(image, o, account)))
            && (executable.is_empty() || executable.iter().any(|e| executable_by(image, e, account)))
            && matches_all(&filters, |n| image_attribute(image, n))?
        {
            selected.push(image);
        }
    }
    let page = paginate(selected, params, "DescribeImages", 6)?;
    let mut x = Xml::new();
    x.items("imagesSet", page.items, render::image);
    x.opt_leaf("nextToken", page.next_token);
    Ok(x)
}

fn owned_image<'w>(world: &'w mut World, ctx: &Ctx<'_>, id: &str) -> Result<&'w mut Image, Ec2Error> {
    if !crate::ids::well_formed("ami", id) {
        return Err(Ec2Error::malformed("InvalidAMIID.Malformed", id));
    }
    let account = ctx.caller.account.as_str();
    let image =
        world.images.iter_mut().find(|i| i.id == id && i.launchable_by(account)).ok_or_else(|| {
            Ec2Error::client("InvalidAMIID.NotFound", format!("The image id '[{id}]' does not exist"))
        })?;
    if image.owner != account {
        return Err(Ec2Error::auth_failure(format!("Not authorized for image:{id}")));
    }
    Ok(image)
}

fn owned_snapshot<'w>(world: &'w mut World, ctx: &Ctx<'_>, id: &str) -> Result<&'w mut Snapshot, Ec2Error> {
    if !crate::ids::well_formed("snap", id) {
        return Err(Ec2Error::malformed("InvalidSnapshotID.Malformed", id));
    }
    let account = ctx.caller.account.as_str();
    let snapshot = world
        .snapshots
        .iter_mut()
        .find(|s| s.id == id && (s.owner == account || s.public || s.create_volume_users.contains(account)))
        .ok_or_else(|| Ec2Error::client("InvalidSnapshot.NotFound", format!("The snapshot '{id}' does not exist.")))?;
    if snapshot.owner != account {
        return Err(Ec2Error::auth_failure(format!("Not authorized for snapshot:{id}")));
    }
    Ok(snapshot)
}

fn permissions(x: &mut Xml, tag: &str, users: &BTreeSet<String>, public: bool) {
    x.elem(tag, |x| {
        if public {
            x.elem("item", |x| {
                x.leaf("group", "all");
            });
        }
        for user in users {
            x.elem("item", |x| {
                x.leaf("userId", user);
            });
        }
    });
}

/// Permission changes: `{prefix}.Add.N.UserId|Group`, `{prefix}.Remove.N...`, or the flat
/// `OperationType` + `UserId.N` + `UserGroup.N` form.
struct PermissionChange {
    add_users: Vec<String>,
    remove_users: Vec<String>,
    add_public: bool,
    remove_public: bool,
}

fn permission_change(params: &Params, prefix: &str, invalid_code: &str) -> Result<PermissionChange, Ec2Error> {
    let mut change =
        PermissionChange { add_users: vec![], remove_users: vec![], add_public: false, remove_public: false };
    for (direction, adding) in [("Add", true), ("Remove", false)] {
        for item in params.members(&format!("{prefix}.{direction}")) {
            if let Some(user) = item.get("UserId") {
                if adding { change.add_users.push(user.to_owned()) } else { change.remove_users.push(user.to_owned()) }
            }
            if let Some(group) = item.get("Group") {
                if group != "all" {
                    return Err(Ec2Error::client(
                        invalid_code,
                        format!("Invalid attribute item value \"{group}\" for group item type."),
                    ));
                }
                if adding { change.add_public = true } else { change.remove_public = true }
            }
        }
    }
    if let Some(operation) = params.get("OperationType") {
        let adding = match operation {
            "add" => true,
            "remove" => false,
            other => return Err(Ec2Error::invalid_value("OperationType", other)),
        };
        let users = params.list("UserId");
        let groups = params.list("UserGroup");
        if let Some(bad) = groups.iter().find(|g| g.as_str() != "all") {
            return Err(Ec2Error::client(
                invalid_code,
                format!("Invalid attribute item value \"{bad}\" for group item type."),
            ));
        }
        if adding {
            change.add_users.extend(users);
            change.add_public |= !groups.is_empty();
        } else {
            change.remove_users.extend(users);
            change.remove_public |= !groups.is_empty();
        }
    }
    if let Some(bad) = change.add_users.iter().chain(&change.remove_users).find(|u| !is_account_id(u)) {
        return Err(Ec2Error::client(
            invalid_code,
            format!("Invalid attribute item value \"{bad}\" for userId item type."),
        ));
    }
    if change.add_users.is_empty() && change.remove_users.is_empty() && !change.add_public && !change.remove_public {
        return Err(Ec2Error::missing_parameter(prefix));
    }
    Ok(change)
}

fn apply(change: PermissionChange, users: &mut BTreeSet<String>, public: &mut bool) {
    users.extend(change.add_users);
    for user in &change.remove_users {
        users.remove(user);
    }
    if change.add_public {
        *public = true;
    }
    if change.remove_public {
        *public = false;
    }
}

fn require_attribute(params: &Params, allowed: &[&str]) -> Result<String, Ec2Error> {
    let attribute = params.required("Attribute")?;
    if !allowed.contains(&attribute) {
        return Err(Ec2Error::client(
            "InvalidParameterValue",
            format!("Value ({attribute}) for parameter attribute is invalid. Unknown attribute."),
        ));
    }
    Ok(attribute.to_owned())
}

/// DescribeImageAttribute: `launchPermission` or `description`, owner only.
pub(crate) fn describe_image_attribute(world: &mut World, ctx: &Ctx<'_>, params: &Params) -> Result<Xml, Ec2Error> {
    let attribute = require_attribute(params, &["launchPermission", "description"])?;
    let image = owned_image(world, ctx, params.required("ImageId")?)?;
    let mut x = Xml::new();
    x.leaf("imageId", &image.id);
    if attribute == "launchPermission" {
        permissions(&mut x, "launchPermission", &image.launch_users, image.public);
    } else {
        x.elem("description", |x| {
            x.leaf("value", &image.description);
        });
    }
    Ok(x)
}

/// ModifyImageAttribute: launch permissions (owner only).
pub(crate) fn modify_image_attribute(world: &mut World, ctx: &Ctx<'_>, params: &Params) -> Result<Xml, Ec2Error> {
    if let Some(attribute) = params.get("Attribute")
        && attribute != "launchPermission"
    {
        return Err(Ec2Error::client(
            "InvalidParameterValue",
            format!(
                "Value ({attribute}) for parameter attribute is invalid. Only launchPermission is supported by this fake."
            ),
        ));
    }
    let change = permission_change(params, "LaunchPermission", "InvalidAMIAttributeItemValue")?;
    let image = owned_image(world, ctx, params.required("ImageId")?)?;
    apply(change, &mut image.launch_users, &mut image.public);
    Ok(returns_true())
}

/// DescribeSnapshotAttribute: `createVolumePermission`, owner only.
pub(crate) fn describe_snapshot_attribute(world: &mut World, ctx: &Ctx<'_>, params: &Params) -> Result<Xml, Ec2Error> {
    require_attribute(params, &["createVolumePermission"])?;
    let snapshot = owned_snapshot(world, ctx, params.required("SnapshotId")?)?;
    let mut x = Xml::new();
    x.leaf("snapshotId", &snapshot.id);
    permissions(&mut x, "createVolumePermission", &snapshot.create_volume_users, snapshot.public);
    Ok(x)
}

/// ModifySnapshotAttribute: create-volume permissions (owner only).
pub(crate) fn modify_snapshot_attribute(world: &mut World, ctx: &Ctx<'_>, params: &Params) -> Result<Xml, Ec2Error> {
    if let Some(attribute) = params.get("Attribute")
        && attribute != "createVolumePermission"
    {
        return Err(Ec2Error::invalid_value("Attribute", attribute));
    }
    let change = permission_change(params, "CreateVolumePermission", "InvalidParameterValue")?;
    let snapshot = owned_snapshot(world, ctx, params.required("SnapshotId")?)?;
    apply(change, &mut snapshot.create_volume_users, &mut snapshot.public);
    Ok(returns_true())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(owner: &str, public: bool, shared_with: &[&str]) -> Image {
        Image {
            id: "ami-0123456789abcdef0".into(),
            name: "n".into(),
            description: String::new(),
            owner: owner.into(),
            owner_alias: None,
            public,
            launch_users: shared_with.iter().map(|s| (*s).to_owned()).collect(),
            architecture: "x86_64".into(),
            root_device_name: "/dev/xvda".into(),
            snapshot_id: "snap-0123456789abcdef0".into(),
            volume_size: 8,
            creation_date: String::new(),
            tags: Default::default(),
        }
    }

    #[test]
    fn executable_by_follows_the_documented_scopes() {
        let (me, other) = ("222222222222", "333333333333");
        let public = image("137112412989", true, &[]);
        let shared = image("111111111111", false, &[me]);
        let own = image(me, false, &[other]);
        assert!(executable_by(&public, "all", me));
        assert!(!executable_by(&shared, "all", me));
        for who in ["self", me] {
            assert!(!executable_by(&public, who, me), "{who}: public images are not explicit permissions");
            assert!(executable_by(&shared, who, me), "{who}: shared with me");
            assert!(executable_by(&own, who, me), "{who}: my own");
        }
        assert!(executable_by(&own, other, me), "shared with the other account");
        assert!(!executable_by(&public, other, me), "public is not shared with the other account");
        assert!(!executable_by(&shared, other, me));
    }
}
