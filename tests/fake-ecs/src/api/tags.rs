//! `TagResources` and `UntagResources` (ECS 2014-05-26) on instances, as the API
//! reference describes them
//! (<https://www.alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-tagresources>,
//! <https://www.alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-untagresources>):
//! `RegionId`, `ResourceType`, `ResourceId.N` (N 1–50), and `Tag.N.Key`/`Tag.N.Value`
//! (N 1–20; a key is set or overwritten, keys must be unique) or `TagKey.N` (N 1–20) /
//! `All`. A resource holds at most 20 tags ("Tag limits": Alibaba checks the count
//! before it attaches tags). Every resource id is checked before anything changes: one
//! unknown id (or another account's) fails the call and tags nothing.
//!
//! This fake keeps tags on instances, their disks (`disk`, also a disk kept after its
//! instance) and their primary ENIs (`eni`): RunInstances puts its `Tag.N` on all
//! three. The other resource types the reference lists answer
//! `InvalidResourceId.NotFound`, as for ids ECS does not know.

use std::time::Instant;

use axum::response::Response;
use serde_json::json;

use super::{Call, Ctx, check_region};
use crate::error::{EcsError, ok};
use crate::params::Params;
use crate::state::{Instance, State};

/// Most resources per call (`ResourceId.N`).
const MAX_RESOURCES: usize = 50;
/// Most tags per call (`Tag.N`, `TagKey.N`) and on one resource.
const MAX_TAGS: usize = 20;
/// The `ResourceType` values of the reference.
const RESOURCE_TYPES: &[&str] = &[
    "instance",
    "disk",
    "snapshot",
    "image",
    "securitygroup",
    "volume",
    "eni",
    "ddh",
    "ddhcluster",
    "keypair",
    "launchtemplate",
    "reservedinstance",
    "snapshotpolicy",
    "elasticityassurance",
    "capacityreservation",
    "command",
    "invocation",
    "activation",
    "managedinstance",
];

fn resource_not_found() -> EcsError {
    EcsError::not_found("InvalidResourceId.NotFound", "The specified ResourceIds are not found in our records.")
}

/// `RegionId`, `ResourceType` and `ResourceId.N` (1–50, none empty), checked.
fn resources(p: &Params) -> Result<(String, Vec<String>), EcsError> {
    check_region(p, true)?;
    let kind = p.required("ResourceType")?.to_ascii_lowercase();
    if !RESOURCE_TYPES.contains(&kind.as_str()) {
        return Err(EcsError::bad_request(
            "InvalidResourceType.NotFound",
            "The specified parameter \"ResourceType\" is not valid.",
        ));
    }
    let ids: Vec<String> = p.list("ResourceId").into_iter().map(|(_, id)| id).collect();
    if ids.is_empty() {
        return Err(EcsError::missing("ResourceId.1"));
    }
    if ids.len() > MAX_RESOURCES || p.indices("ResourceId").iter().any(|&n| n as usize > MAX_RESOURCES) {
        return Err(EcsError::invalid_parameter("ResourceId.N"));
    }
    Ok((kind, ids))
}

/// Whether `key` is a tag key the reference allows: 1–128 characters, not starting
/// with `aliyun` or `acs:`, without `http://` or `https://`.
pub(crate) fn tag_key_valid(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    (1..=128).contains(&key.chars().count())
        && !lower.starts_with("aliyun")
        && !lower.starts_with("acs:")
        && !lower.contains("http://")
        && !lower.contains("https://")
}

/// Whether `value` is a tag value the reference allows: up to 128 characters (empty
/// allowed), not starting with `acs:`, without `http://` or `https://`.
pub(crate) fn tag_value_valid(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    value.chars().count() <= 128
        && !lower.starts_with("acs:")
        && !lower.contains("http://")
        && !lower.contains("https://")
}

/// The tags of resource `id` of type `kind` that `account` sees at `now`
/// (an instance visible to it, a disk of one or a disk kept after one, the
/// primary ENI of one); `None` when there is no such resource.
fn tags_of<'a>(
    state: &'a mut State,
    account: &str,
    kind: &str,
    id: &str,
    now: Instant,
) -> Option<&'a mut Vec<(String, String)>> {
    let mine = |i: &Instance| i.account == account && now >= i.visible_at;
    match kind {
        "instance" => state.instances.get_mut(id).filter(|i| mine(i)).map(|i| &mut i.tags),
        "eni" => state.instances.values_mut().find(|i| mine(i) && i.eni_id == id).map(|i| &mut i.eni_tags),
        "disk" => {
            let attached = state.instances.values().any(|i| mine(i) && i.disks().any(|d| d.id == id));
            if attached {
                state.instances.values_mut().find_map(|i| i.disk_mut(id)).map(|d| &mut d.tags)
            } else {
                state.detached_disks.get_mut(id).filter(|d| d.account == account).map(|d| &mut d.disk.tags)
            }
        }
        _ => None,
    }
}

/// `TagResources`: sets (adds or overwrites) `Tag.N` on every `ResourceId.N`.
pub(super) fn tag(ctx: &Ctx, call: &Call) -> Result<Response, EcsError> {
    let p = &call.params;
    let (kind, ids) = resources(p)?;
    let requested = p.tags();
    if requested.is_empty() {
        return Err(EcsError::missing("Tag.1.Key"));
    }
    if requested.len() > MAX_TAGS || p.indices("Tag").iter().any(|&n| n as usize > MAX_TAGS) {
        return Err(EcsError::bad_request("InvalidParameter.TagCount", "The number of tags exceeds the limit of 20."));
    }
    let mut tags: Vec<(String, String)> = Vec::new();
    for (key, value) in requested {
        if !tag_key_valid(&key) {
            return Err(EcsError::bad_request("InvalidTagKey.Malformed", "The specified Tag.n.Key is not valid."));
        }
        let value = value.unwrap_or_default();
        if !tag_value_valid(&value) {
            return Err(EcsError::bad_request("InvalidTagValue.Malformed", "The specified Tag.n.Value is not valid."));
        }
        if tags.iter().any(|(k, _)| *k == key) {
            return Err(EcsError::bad_request("InvalidTagKey.Duplicated", "The specified Tag.n.Key is duplicated."));
        }
        tags.push((key, value));
    }
    let now = Instant::now();
    let mut state = ctx.store.lock_at(now);
    for id in &ids {
        let Some(have) = tags_of(&mut state, call.account, &kind, id, now) else { return Err(resource_not_found()) };
        let added = tags.iter().filter(|(k, _)| !have.iter().any(|(h, _)| h == k)).count();
        if have.len() + added > MAX_TAGS {
            return Err(EcsError::forbidden(
                "OperationDenied.QuotaExceed",
                "The quota of tags on resource is beyond permitted range.",
            ));
        }
    }
    for id in &ids {
        if let Some(have) = tags_of(&mut state, call.account, &kind, id, now) {
            for (key, value) in &tags {
                match have.iter_mut().find(|(k, _)| k == key) {
                    Some(entry) => entry.1.clone_from(value),
                    None => have.push((key.clone(), value.clone())),
                }
            }
        }
    }
    Ok(ok(json!({})))
}

/// `UntagResources`: removes `TagKey.N` (absent keys are no-ops), or every tag with
/// `All=true` when no `TagKey.N` is given, from every `ResourceId.N`.
pub(super) fn untag(ctx: &Ctx, call: &Call) -> Result<Response, EcsError> {
    let p = &call.params;
    let (kind, ids) = resources(p)?;
    let keys: Vec<String> = p.list("TagKey").into_iter().map(|(_, k)| k).collect();
    if keys.len() > MAX_TAGS || p.indices("TagKey").iter().any(|&n| n as usize > MAX_TAGS) {
        return Err(EcsError::invalid_parameter("TagKey.N"));
    }
    let all = p.flag("All", false)?;
    let now = Instant::now();
    let mut state = ctx.store.lock_at(now);
    if !ids.iter().all(|id| tags_of(&mut state, call.account, &kind, id, now).is_some()) {
        return Err(resource_not_found());
    }
    for id in &ids {
        if let Some(have) = tags_of(&mut state, call.account, &kind, id, now) {
            if keys.is_empty() {
                if all {
                    have.clear();
                }
            } else {
                have.retain(|(k, _)| !keys.contains(k));
            }
        }
    }
    Ok(ok(json!({})))
}
