//! UpdateMachine (hot update) on ECS: the tags of the instance and of the disks
//! and primary ENI it was launched with, its security groups and the size of
//! its disks, changed in place; the rest reported as needing a replacement.
//!
//! Reads (ECS API reference, 2014-05-26): one `DescribeInstances` by id (the
//! read GetMachineStatus makes, shared with concurrent polls, judged by the kit
//! the same way: tags, `SecurityGroupIds`, the primary ENI's id in
//! `NetworkInterfaces`), one `DescribeDisks` by `InstanceId` (its disks' tags,
//! category and size; DescribeInstances shows none of them) and one
//! `DescribeNetworkInterfaces` of the primary ENI (its tags: DescribeInstances
//! shows none). Writes (none with `validate_only`, none when all is as the
//! class asks), in this order:
//!
//! - **Tags** (`providerSpec.tags`): RunInstances puts its `Tag.N` on the
//!   instance, its disks and its primary ENI, so each should carry what create
//!   gives it ([`instance_tags`]: the class's tags and the machine uid tag, so an
//!   update never strips the driver's own marker). The disks are the system disk
//!   and the data disks the class names (`DiskName` `<machine>-<name>-data-disk`,
//!   as create names them, in the class or the previous one): a disk attached
//!   later (a PersistentVolume's) is never touched. The kit's [`TagPlan`] decides
//!   per resource what to set and, with the previous class, what to remove (only
//!   keys that class set and the new one lacks). One `UntagResources` then one
//!   `TagResources` per resource type (`instance`, `disk`, `eni`) and distinct
//!   plan, naming every resource that needs it
//!   (<https://www.alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-tagresources>,
//!   <https://www.alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-untagresources>;
//!   one `ResourceType` a call). Removal goes first, so that the 20 tags an ECS
//!   resource holds are counted after it; a result beyond 20 on any resource is
//!   refused INVALID_ARGUMENT before any write. `TagResources` overwrites, so a
//!   retry after a lost answer converges and a repeat writes nothing.
//! - **Security groups** (`providerSpec.securityGroupID`): one
//!   `ModifyInstanceAttribute` with `SecurityGroupIds.N`, which for a VPC
//!   instance replaces the groups of the instance (its primary ENI)
//!   (<https://www.alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-modifyinstanceattribute>;
//!   JoinSecurityGroup/LeaveSecurityGroup would cost a call per group and refuse
//!   to leave the last one). The list sent is the instance's groups with the
//!   previous class's group replaced by the new one; a group someone else added
//!   stays, and without the previous class nothing is removed.
//! - **Disk size** (`providerSpec.systemDisk.size`, `providerSpec.dataDisks[i].size`):
//!   one `ResizeDisk` with `Type=online` per disk to grow
//!   (<https://www.alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-resizedisk>):
//!   online resizing needs no restart and is offered for ultra disks, standard
//!   SSDs, ESSDs, ESSD AutoPL and ESSD Entry disks ([`ONLINE_RESIZE`]). A disk
//!   of another category (a basic `cloud` disk resizes offline only, that is
//!   with a restart; a local `ephemeral_ssd` not at all), a smaller size (ECS
//!   disks only grow) or a class data disk the instance lacks is reported as
//!   needing a replacement. The disk's file system is not grown (ECS does not
//!   either): the node's OS grows its partition.
//! - **Replacement only**: `instanceType`, `imageID`, `zoneID`, `vSwitchID`,
//!   the region (the providerID's) and a disk's `category` are compared with
//!   what was read (no further call) and reported, never applied. The ESSD
//!   performance level (ModifyDiskSpec) is not a class field (neither the Go
//!   provider's nor the Gardener extension's providerSpec carries one).
//!
//! The Go provider (gardener/machine-controller-manager-provider-alicloud) has no
//! update; its `pkg/spi/spi.go` `NewRunInstanceTags` is the tag set create follows.

use std::collections::BTreeMap;

use machine_driver_api::{
    CallContext, DriverError, Ownership, TagPlan, UpdateMachine, UpdatePlan, UpdatedMachine, foreign_not_found,
};

use crate::clients::Api;
use crate::create::instance_tags;
use crate::credentials::AccessKey;
use crate::driver::AlicloudDriver;
use crate::ecs::client::Params;
use crate::ecs::model::{
    DescribeDisksAnswer, DescribeNetworkInterfacesAnswer, Disk, Empty, Instance, SecurityGroupIds, Tag, Tags,
};
use crate::naming::{MACHINE_UID_TAG, parse_provider_id, provider_id};
use crate::spec::{AlicloudProviderSpec, MAX_INSTANCE_TAGS};

/// The class field tags are named by.
const TAGS_FIELD: &str = "providerSpec.tags";
/// The class field of the security group.
const SECURITY_GROUP_FIELD: &str = "providerSpec.securityGroupID";
/// The disk categories ResizeDisk `Type=online` grows (the reference's list).
pub(crate) const ONLINE_RESIZE: &[&str] =
    &["cloud_efficiency", "cloud_ssd", "cloud_essd", "cloud_auto", "cloud_essd_entry"];

/// One resource RunInstances tagged, with its plan.
#[derive(Debug)]
struct Tagged {
    /// TagResources' `ResourceType`: `instance`, `disk`, `eni`.
    resource_type: &'static str,
    /// `d-...`, `eni-...`, `i-...`.
    id: String,
    /// `instance eu-central-1.i-…`, `system disk d-…`, `ENI eni-…`.
    what: String,
    current: BTreeMap<String, String>,
    plan: TagPlan,
}

/// One disk of the class, with what ECS shows of it.
#[derive(Debug)]
struct ClassDisk<'a> {
    /// `providerSpec.systemDisk`, `providerSpec.dataDisks[0]`.
    field: String,
    /// The size the class asks for.
    size: Option<i64>,
    /// The category the class asks for.
    category: Option<&'a str>,
    /// The disk, when the instance has it.
    disk: Option<&'a Disk>,
    /// `DiskName` looked for (data disks).
    name: Option<String>,
}

/// One `ResizeDisk` to send.
#[derive(Debug)]
struct Resize {
    disk_id: String,
    size: i64,
}

impl AlicloudDriver {
    /// UpdateMachine (see the module docs).
    pub(crate) async fn update(&self, ctx: &CallContext, req: UpdateMachine) -> Result<UpdatedMachine, DriverError> {
        let key = AccessKey::from_secret(&req.secret, "secret")?;
        let (spec, markers) = AlicloudProviderSpec::parse(&req.class.provider_spec)?;
        let previous = match &req.previous_class {
            Some(class) => Some(AlicloudProviderSpec::parse(&class.provider_spec).map_err(previous_field)?.0),
            None => None,
        };
        let pid = req
            .machine
            .provider_id
            .as_deref()
            .ok_or_else(|| DriverError::invalid_argument("machine.providerID", "is required"))?;
        let (region, id) = parse_provider_id(pid)?;
        let api = self.pool.api(&key, &region, ctx)?;
        let what = format!("instance {}", provider_id(&region, &id));
        let Some(instance) = self.lookups.get(&api, &key, &region, &id).await? else {
            if self.recent.contains(&id) {
                return Err(DriverError::unavailable(
                    machine_driver_api::reasons::NOT_VISIBLE_YET,
                    format!("{what} was created a moment ago and ECS does not list it yet"),
                    crate::errors::RETRY_SOON,
                ));
            }
            return Err(DriverError::not_found(what));
        };
        self.records.record(key.fingerprint, &region, &instance);
        if let Ownership::Foreign(why) = markers.judge(&instance, &req.machine) {
            return Err(foreign_not_found(what, why));
        }
        if instance.is_recycling() {
            return Err(DriverError::spot_reclaimed(pid.to_string(), crate::status::reclaim_detail(&instance)));
        }

        let disks = describe_disks(&api, &region, &id).await?;
        let eni = match instance.primary_eni() {
            Some(eni) => describe_eni(&api, &region, eni).await?,
            None => None,
        };
        let mut plan = UpdatePlan::for_request(pid, &req);

        // Tags on the instance, its launch disks and its primary ENI.
        let desired = tag_set(&spec, &req.machine.uid);
        let previous_tags = previous.as_ref().map(|p| tag_set(p, &req.machine.uid));
        let mut tagged = vec![Tagged::new("instance", &id, what.clone(), instance.tag_map())];
        let names = data_disk_names(&instance.instance_name, &spec, previous.as_ref());
        for d in disks.iter().filter(|d| d.kind == "system" || names.contains(&d.disk_name)) {
            let word = if d.kind == "system" { "system disk" } else { "data disk" };
            tagged.push(Tagged::new("disk", &d.disk_id, format!("{word} {}", d.disk_id), d.tag_map()));
        }
        if let Some(eni) = &eni {
            let word = format!("ENI {}", eni.network_interface_id);
            tagged.push(Tagged::new("eni", &eni.network_interface_id, word, eni.tag_map()));
        }
        for t in &mut tagged {
            t.plan = TagPlan::new(&t.current, &desired, previous_tags.as_ref());
            let after = t.plan.apply_to(&t.current);
            if after.len() > MAX_INSTANCE_TAGS {
                return Err(DriverError::invalid_argument(
                    TAGS_FIELD,
                    format!(
                        "{} would carry {} tags: an ECS resource holds at most {MAX_INSTANCE_TAGS} \
                         (the class's, the machine uid tag and the tags others set on it count)",
                        t.what,
                        after.len()
                    ),
                ));
            }
        }
        plan.tags(TAGS_FIELD, tagged.iter().map(|t| (t.what.as_str(), &t.plan)));

        // Security groups.
        let groups = &instance.security_group_ids.security_group_id;
        let previous_group = previous.as_ref().map(|p| p.security_group_id.as_str());
        let new_groups = security_groups(groups, &spec.security_group_id, previous_group);
        match &new_groups {
            Some(next) => {
                plan.applied(SECURITY_GROUP_FIELD, format!("{} -> {} on {what}", groups.join(","), next.join(",")))
            }
            None => plan.unchanged(SECURITY_GROUP_FIELD),
        }

        // Disk sizes (and categories, replacement only).
        let resizes = compare_disks(&mut plan, &class_disks(&spec, &instance, &disks));

        plan.compare_replacement("providerSpec.region", &region, &spec.region);
        plan.compare_replacement("providerSpec.instanceType", &instance.instance_type, &spec.instance_type);
        plan.compare_replacement("providerSpec.imageID", &instance.image_id, &spec.image_id);
        plan.compare_replacement("providerSpec.zoneID", &instance.zone_id, &spec.zone_id);
        plan.compare_replacement("providerSpec.vSwitchID", instance.v_switch_id(), &spec.v_switch_id);

        if !req.validate_only {
            apply_tags(&api, &region, &tagged).await?;
            let mut updated = instance.clone();
            let after = tagged[0].plan.apply_to(&tagged[0].current);
            updated.tags =
                Some(Tags { tag: after.into_iter().map(|(tag_key, tag_value)| Tag { tag_key, tag_value }).collect() });
            if let Some(next) = new_groups {
                let mut p = Params::default();
                p.set("RegionId", &region).set("InstanceId", &id);
                for (i, g) in next.iter().enumerate() {
                    p.set(format!("SecurityGroupIds.{}", i + 1), g);
                }
                api.ecs::<Empty>("ModifyInstanceAttribute", &p).await?;
                updated.security_group_ids = SecurityGroupIds { security_group_id: next };
            }
            self.records.record(key.fingerprint, &region, &updated);
            for r in &resizes {
                let mut p = Params::default();
                p.set("RegionId", &region).set("DiskId", &r.disk_id).set("NewSize", r.size).set("Type", "online");
                api.ecs::<Empty>("ResizeDisk", &p).await?;
            }
        }
        plan.finish()
    }
}

impl Tagged {
    fn new(resource_type: &'static str, id: &str, what: String, current: BTreeMap<String, String>) -> Self {
        Self { resource_type, id: id.to_string(), what, current, plan: TagPlan::default() }
    }
}

/// The `DiskName`s create gives the data disks of the class and of the
/// previous one, on the instance named `instance_name`.
fn data_disk_names(
    instance_name: &str,
    spec: &AlicloudProviderSpec,
    previous: Option<&AlicloudProviderSpec>,
) -> Vec<String> {
    spec.data_disks
        .iter()
        .chain(previous.into_iter().flat_map(|p| &p.data_disks))
        .map(|d| crate::create::data_disk_name(instance_name, &d.name))
        .collect()
}

/// The security groups the instance should have: `current` with the previous
/// class's group (when it differs) replaced by `desired`; `None` when that is
/// what it has.
fn security_groups(current: &[String], desired: &str, previous: Option<&str>) -> Option<Vec<String>> {
    let dropped = previous.filter(|p| *p != desired);
    let mut next: Vec<String> = current.iter().filter(|g| Some(g.as_str()) != dropped).cloned().collect();
    if !next.iter().any(|g| g == desired) {
        next.push(desired.to_string());
    }
    (next != current).then_some(next)
}

/// The class's disks, each with the instance's disk it describes: the system
/// disk (`Type` `system`) and each data disk by the `DiskName` create gives it.
fn class_disks<'a>(spec: &'a AlicloudProviderSpec, instance: &Instance, disks: &'a [Disk]) -> Vec<ClassDisk<'a>> {
    let mut out = Vec::new();
    if let Some(system) = &spec.system_disk {
        out.push(ClassDisk {
            field: "providerSpec.systemDisk".into(),
            size: system.size,
            category: system.category.as_deref(),
            disk: disks.iter().find(|d| d.kind == "system"),
            name: None,
        });
    }
    for (i, d) in spec.data_disks.iter().enumerate() {
        let name = crate::create::data_disk_name(&instance.instance_name, &d.name);
        out.push(ClassDisk {
            field: format!("providerSpec.dataDisks[{i}]"),
            size: Some(d.size),
            category: d.category.as_deref(),
            disk: disks.iter().find(|x| x.kind == "data" && x.disk_name == name),
            name: Some(name),
        });
    }
    out
}

/// Records each class disk's size (APPLIED by an online resize, UNCHANGED, or
/// NEEDS_REPLACEMENT) and category (UNCHANGED or NEEDS_REPLACEMENT, when the
/// class names one); the resizes to send.
fn compare_disks(plan: &mut UpdatePlan, disks: &[ClassDisk<'_>]) -> Vec<Resize> {
    let mut resizes = Vec::new();
    for c in disks {
        let Some(disk) = c.disk else {
            let name = c.name.as_deref().unwrap_or("system");
            plan.compare_replacement(c.field.clone(), "", &format!("a disk named {name}"));
            continue;
        };
        if let Some(category) = c.category {
            plan.compare_replacement(format!("{}.category", c.field), &disk.category, category);
        }
        let Some(want) = c.size else { continue };
        let field = format!("{}.size", c.field);
        let what = format!("disk {}", disk.disk_id);
        if want == disk.size {
            plan.unchanged(field);
        } else if want < disk.size {
            let now = format!("{} GiB on {what}", disk.size);
            plan.compare_replacement(field, &now, &format!("{want} GiB (ECS disks only grow)"));
        } else if !ONLINE_RESIZE.contains(&disk.category.as_str()) {
            let how =
                if disk.category == "cloud" { "resize offline only, with a restart" } else { "cannot be resized" };
            let now = format!("{} GiB on {what}", disk.size);
            plan.compare_replacement(field, &now, &format!("{want} GiB ({} disks {how})", disk.category));
        } else {
            plan.applied(field, format!("{} -> {want} GiB on {what} (ResizeDisk online)", disk.size));
            resizes.push(Resize { disk_id: disk.disk_id.clone(), size: want });
        }
    }
    resizes
}

/// The instance's disks (1 `DescribeDisks` by `InstanceId`; an instance has at most 17).
async fn describe_disks(api: &Api<'_>, region: &str, id: &str) -> Result<Vec<Disk>, DriverError> {
    let mut p = Params::default();
    p.set("RegionId", region).set("InstanceId", id).set("PageSize", 100);
    Ok(api.ecs::<DescribeDisksAnswer>("DescribeDisks", &p).await?.disks.disk)
}

/// ENI `eni` with its tags (1 `DescribeNetworkInterfaces`).
async fn describe_eni(
    api: &Api<'_>,
    region: &str,
    eni: &str,
) -> Result<Option<crate::ecs::model::NetworkInterfaceSet>, DriverError> {
    let mut p = Params::default();
    p.set("RegionId", region).set("NetworkInterfaceId.1", eni);
    let answer = api.ecs::<DescribeNetworkInterfacesAnswer>("DescribeNetworkInterfaces", &p).await?;
    Ok(answer.network_interface_sets.network_interface_set.into_iter().find(|n| n.network_interface_id == eni))
}

/// The tags create gives the instance of machine `uid` with `spec`, by key. An
/// empty uid (a caller that does not know it) sets no uid tag: the instance's
/// own is kept.
fn tag_set(spec: &AlicloudProviderSpec, uid: &str) -> BTreeMap<String, String> {
    let mut tags: BTreeMap<String, String> = instance_tags(spec, uid).into_iter().collect();
    if uid.is_empty() {
        tags.remove(MACHINE_UID_TAG);
    }
    tags
}

/// A previous class's INVALID_ARGUMENT, named as the request names it.
fn previous_field(e: DriverError) -> DriverError {
    match e.field() {
        Some(field) => DriverError::invalid_argument(format!("previous_machine_class.{field}"), e.message()),
        None => e,
    }
}

/// The tags of one plan, in key order, for grouping the resources that share them.
type TagList<'a> = Vec<(&'a String, &'a String)>;

/// `UntagResources` of the keys to remove, then `TagResources` of the tags to
/// set: one call per resource type and distinct plan, naming every resource
/// that needs it (ECS takes 50 `ResourceId.N`; a plan holds at most 20 keys or
/// tags, ECS's `TagKey.N` and `Tag.N` limit). Nothing when every plan is empty.
async fn apply_tags(api: &Api<'_>, region: &str, tagged: &[Tagged]) -> Result<(), DriverError> {
    let mut removals: BTreeMap<(&str, Vec<&String>), Vec<&str>> = BTreeMap::new();
    let mut sets: BTreeMap<(&str, TagList<'_>), Vec<&str>> = BTreeMap::new();
    for t in tagged {
        if !t.plan.remove.is_empty() {
            removals.entry((t.resource_type, t.plan.remove.iter().collect())).or_default().push(&t.id);
        }
        if !t.plan.set.is_empty() {
            sets.entry((t.resource_type, t.plan.set.iter().collect())).or_default().push(&t.id);
        }
    }
    let base = |resource_type: &str, ids: &[&str]| {
        let mut p = Params::default();
        p.set("RegionId", region).set("ResourceType", resource_type);
        for (i, id) in ids.iter().enumerate() {
            p.set(format!("ResourceId.{}", i + 1), id);
        }
        p
    };
    for ((resource_type, keys), ids) in &removals {
        let mut p = base(resource_type, ids);
        for (i, k) in keys.iter().enumerate() {
            p.set(format!("TagKey.{}", i + 1), k);
        }
        api.ecs::<Empty>("UntagResources", &p).await?;
    }
    for ((resource_type, tags), ids) in &sets {
        let mut p = base(resource_type, ids);
        for (i, (k, v)) in tags.iter().enumerate() {
            p.set(format!("Tag.{}.Key", i + 1), k).set(format!("Tag.{}.Value", i + 1), v);
        }
        api.ecs::<Empty>("TagResources", &p).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|g| (*g).to_string()).collect()
    }

    #[test]
    fn the_previous_group_is_replaced_and_others_kept() {
        let current = groups(&["sg-a", "sg-ops"]);
        assert_eq!(security_groups(&current, "sg-b", Some("sg-a")), Some(groups(&["sg-ops", "sg-b"])));
        assert_eq!(security_groups(&current, "sg-b", None), Some(groups(&["sg-a", "sg-ops", "sg-b"])));
        assert_eq!(security_groups(&current, "sg-a", Some("sg-a")), None);
        assert_eq!(security_groups(&current, "sg-a", None), None);
        assert_eq!(security_groups(&groups(&["sg-b"]), "sg-b", Some("sg-a")), None, "a retry after it applied");
    }

    #[test]
    fn disks_grow_online_only_where_ecs_allows_it() {
        let disk = |category: &str, size: i64| Disk {
            disk_id: "d-1".into(),
            kind: "system".into(),
            category: category.into(),
            size,
            ..Disk::default()
        };
        let outcome = |d: &Disk, want: i64| {
            let mut plan = UpdatePlan::new("p", false);
            let class = ClassDisk {
                field: "providerSpec.systemDisk".into(),
                size: Some(want),
                category: None,
                disk: Some(d),
                name: None,
            };
            let resizes = compare_disks(&mut plan, &[class]);
            let answer = plan.finish();
            (answer.map(|a| a.changes[0].outcome).ok(), resizes.len())
        };
        use machine_driver_api::ChangeOutcome::{Applied, Unchanged};
        assert_eq!(outcome(&disk("cloud_essd", 50), 60), (Some(Applied), 1));
        assert_eq!(outcome(&disk("cloud_auto", 50), 60), (Some(Applied), 1));
        assert_eq!(outcome(&disk("cloud_essd", 50), 50), (Some(Unchanged), 0));
        // Only replacements differ: FAILED_PRECONDITION, nothing to send.
        assert_eq!(outcome(&disk("cloud_essd", 50), 40), (None, 0));
        assert_eq!(outcome(&disk("cloud", 50), 60), (None, 0));
        assert_eq!(outcome(&disk("ephemeral_ssd", 50), 60), (None, 0));
    }
}
