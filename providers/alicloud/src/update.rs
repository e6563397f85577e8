//! UpdateMachine (hot update) on ECS: one `DescribeInstances` by id (the read
//! GetMachineStatus makes, shared with concurrent polls, judged by the kit the
//! same way), then at most one `UntagResources` and one `TagResources` on the
//! instance (ECS API reference, `TagResources` and `UntagResources`,
//! <https://www.alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-tagresources>,
//! <https://www.alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-untagresources>).
//!
//! - **Tags** (`providerSpec.tags`, in place): the instance should carry exactly
//!   what CreateMachine gives it ([`instance_tags`]: the class's tags and the
//!   machine uid tag, so an update never strips the driver's own marker). The
//!   kit's [`TagPlan`] decides what to set and, with the previous class, what to
//!   remove (only keys that class set and the new one lacks). Removal goes
//!   first, so that the 20 tags an ECS resource holds are counted after it; a
//!   result beyond 20 (the class's tags plus tags set by others) is refused
//!   INVALID_ARGUMENT before any write. `TagResources` overwrites, so a retry
//!   after a lost answer converges and a repeat writes nothing.
//! - **Replacement only**: `instanceType`, `imageID`, `zoneID`, `vSwitchID` and
//!   the region (the providerID's) are compared with the `DescribeInstances`
//!   record (no further call) and reported, never applied.
//! - Not updated here: the disks' and the primary ENI's tags (RunInstances
//!   tags them too; reading them costs `DescribeDisks` and
//!   `DescribeNetworkInterfaces`, not done yet), security groups.
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
use crate::ecs::model::{Empty, Tag, Tags};
use crate::naming::{MACHINE_UID_TAG, parse_provider_id, provider_id};
use crate::spec::{AlicloudProviderSpec, MAX_INSTANCE_TAGS};

/// The class field tags are named by.
const TAGS_FIELD: &str = "providerSpec.tags";

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
                    "NOT_VISIBLE_YET",
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

        let mut plan = UpdatePlan::new(pid, req.validate_only);
        let current = instance.tag_map();
        let desired = tag_set(&spec, &req.machine.uid);
        let previous = previous.map(|p| tag_set(&p, &req.machine.uid));
        let tags = TagPlan::new(&current, &desired, previous.as_ref());
        let after = tags.apply_to(&current);
        if after.len() > MAX_INSTANCE_TAGS {
            return Err(DriverError::invalid_argument(
                TAGS_FIELD,
                format!(
                    "{what} would carry {} tags: an ECS resource holds at most {MAX_INSTANCE_TAGS} \
                     (the class's, the machine uid tag and the tags others set on it count)",
                    after.len()
                ),
            ));
        }
        plan.tags(TAGS_FIELD, [(what.as_str(), &tags)]);
        plan.compare_replacement("providerSpec.region", &region, &spec.region);
        plan.compare_replacement("providerSpec.instanceType", &instance.instance_type, &spec.instance_type);
        plan.compare_replacement("providerSpec.imageID", &instance.image_id, &spec.image_id);
        plan.compare_replacement("providerSpec.zoneID", &instance.zone_id, &spec.zone_id);
        plan.compare_replacement("providerSpec.vSwitchID", instance.v_switch_id(), &spec.v_switch_id);

        if !req.validate_only && !tags.is_empty() {
            apply_tags(&api, &region, &id, &tags).await?;
            let mut updated = instance.clone();
            updated.tags =
                Some(Tags { tag: after.into_iter().map(|(tag_key, tag_value)| Tag { tag_key, tag_value }).collect() });
            self.records.record(key.fingerprint, &region, &updated);
        }
        plan.finish()
    }
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

/// `UntagResources` of the keys to remove, then `TagResources` of the tags to
/// set, on instance `id` (one call each, only when it has something to do; a
/// plan holds at most 20 of each, ECS's `TagKey.N` and `Tag.N` limit).
async fn apply_tags(api: &Api<'_>, region: &str, id: &str, tags: &TagPlan) -> Result<(), DriverError> {
    let mut base = Params::default();
    base.set("RegionId", region).set("ResourceType", "instance").set("ResourceId.1", id);
    if !tags.remove.is_empty() {
        let mut p = base.clone();
        for (i, k) in tags.remove.iter().enumerate() {
            p.set(format!("TagKey.{}", i + 1), k);
        }
        api.ecs::<Empty>("UntagResources", &p).await?;
    }
    if !tags.set.is_empty() {
        let mut p = base;
        for (i, (k, v)) in tags.set.iter().enumerate() {
            p.set(format!("Tag.{}.Key", i + 1), k).set(format!("Tag.{}.Value", i + 1), v);
        }
        api.ecs::<Empty>("TagResources", &p).await?;
    }
    Ok(())
}
