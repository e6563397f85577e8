//! `DescribeDisks`, `ResizeDisk`, `DescribeNetworkInterfaces` and
//! `ModifyInstanceAttribute` (`SecurityGroupIds.N` only), as the ECS API
//! reference (2014-05-26) describes them:
//!
//! - DescribeDisks (<https://www.alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-describedisks>):
//!   `RegionId` (required), filters `InstanceId`, `DiskIds` (JSON array, ≤ 100),
//!   `DiskType` (`all`, `system`, `data`), `PageNumber`/`PageSize` (1–100);
//!   `Disks.Disk[]` with `DiskId`, `DiskName`, `Type`, `Category`, `Size`,
//!   `PerformanceLevel`, `Status` (`In_use`, `Available`), `InstanceId`,
//!   `DeleteWithInstance` and `Tags.Tag[]` (`TagKey`, `TagValue`).
//! - ResizeDisk (<https://www.alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-resizedisk>):
//!   `DiskId`, `NewSize` (GiB, larger than now: else 403 `InvalidDiskSize.TooSmall`;
//!   within the category's range, 20–32768, a system disk 20–2048, basic `cloud`
//!   5–2000: else 403 `InvalidParameter`), `Type` `offline` (default) or `online`
//!   (else 400 `InvalidParameter`). Online resizing is for ultra disks, standard
//!   SSDs, ESSDs, ESSD AutoPL and ESSD Entry (`cloud_efficiency`, `cloud_ssd`,
//!   `cloud_essd`, `cloud_auto`, `cloud_essd_entry`): another category online →
//!   403 `OperationDenied` ("The type of the disk does not support the operation");
//!   local disks (`ephemeral_ssd`) cannot be resized at all (same code). The
//!   disk's instance must be `Running` (online) or `Running`/`Stopped`
//!   (offline), else 403 `IncorrectInstanceStatus`; a disk of an instance being
//!   released → 403 `IncorrectDiskStatus`. An unknown disk (or another
//!   account's) → 404 `InvalidDiskId.NotFound`. The new size shows at once.
//! - DescribeNetworkInterfaces (<https://www.alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-describenetworkinterfaces>):
//!   `RegionId` (required), filters `InstanceId`, `NetworkInterfaceId.N` (≤ 100),
//!   `Type`; `NetworkInterfaceSets.NetworkInterfaceSet[]` with
//!   `NetworkInterfaceId`, `Type`, `Status` `InUse`, `InstanceId`,
//!   `SecurityGroupIds.SecurityGroupId[]`, `Tags.Tag[]` (`TagKey`, `TagValue`).
//!   The fake keeps only primary ENIs (one per instance).
//! - ModifyInstanceAttribute (<https://www.alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-modifyinstanceattribute>):
//!   `InstanceId` (unknown → 404 `InvalidInstanceId.NotFound`), `SecurityGroupIds.N`:
//!   the instance's (and its primary ENI's) new security groups, replacing the
//!   old ones; each must exist in the caller's account (404
//!   `InvalidSecurityGroupId.NotFound`) and in the instance's VPC (400
//!   `InvalidSecurityGroupId.VPCMismatch`), none repeated (400
//!   `InvalidParameter.Duplicated`). Other attributes are not modelled: 400
//!   `InvalidParameter` naming them, never silently ignored.

use std::time::Instant;

use axum::response::Response;
use serde_json::{Value, json};

use super::{Call, Ctx, check_region, page_window};
use crate::REGION;
use crate::error::{EcsError, ok};
use crate::state::{DataDisk, Instance, State};

/// Categories ResizeDisk `Type=online` takes.
pub(crate) const ONLINE_RESIZE: &[&str] =
    &["cloud_efficiency", "cloud_ssd", "cloud_essd", "cloud_auto", "cloud_essd_entry"];

fn disk_not_found() -> EcsError {
    EcsError::not_found("InvalidDiskId.NotFound", "The specified disk does not exist.")
}

fn tags_json(tags: &[(String, String)]) -> Value {
    json!({"Tag": tags.iter().map(|(k, v)| json!({"TagKey": k, "TagValue": v})).collect::<Vec<_>>()})
}

/// A JSON array of ids (`DiskIds`), at most 100.
fn json_ids(p: &crate::params::Params, name: &str) -> Result<Option<Vec<String>>, EcsError> {
    let Some(text) = p.get(name) else { return Ok(None) };
    let ids: Vec<String> = serde_json::from_str(text).map_err(|_| {
        EcsError::bad_request(
            &format!("Invalid{name}.Malformed"),
            format!("The specified parameter {name} is not valid."),
        )
    })?;
    if ids.len() > 100 {
        return Err(EcsError::invalid_parameter(name));
    }
    Ok(Some(ids))
}

/// One disk as DescribeDisks shows it.
fn render_disk(disk: &DataDisk, kind: &str, instance: Option<&Instance>, zone: &str, device: usize) -> Value {
    json!({
        "DiskId": disk.id,
        "DiskName": disk.name.clone().unwrap_or_default(),
        "Description": disk.description.clone().unwrap_or_default(),
        "Type": kind,
        "Category": disk.category,
        "Size": disk.size,
        "PerformanceLevel": disk.performance_level.clone().unwrap_or_default(),
        "Encrypted": disk.encrypted,
        "Status": if instance.is_some() { "In_use" } else { "Available" },
        "InstanceId": instance.map_or("", |i| i.id.as_str()),
        "Device": instance.map_or(String::new(), |_| format!("/dev/xvd{}", char::from(b'a' + u8::try_from(device % 26).unwrap_or(0)))),
        "DeleteWithInstance": disk.delete_with_instance,
        "Portable": kind == "data",
        "RegionId": REGION,
        "ZoneId": zone,
        "Tags": tags_json(&disk.tags),
    })
}

/// Every disk `account` sees at `now`: `(disk, Type, its instance, zone)`, attached first in instance order.
fn visible_disks<'a>(
    state: &'a State,
    account: &str,
    now: Instant,
) -> Vec<(&'a DataDisk, &'static str, Option<&'a Instance>, &'a str)> {
    let mut instances: Vec<&Instance> =
        state.instances.values().filter(|i| i.account == account && now >= i.visible_at).collect();
    instances.sort_by_key(|i| i.seq);
    let mut out = Vec::new();
    for i in instances {
        for (n, d) in i.disks().enumerate() {
            out.push((d, if n == 0 { "system" } else { "data" }, Some(i), i.zone.as_str()));
        }
    }
    out.extend(
        state
            .detached_disks
            .values()
            .filter(|d| d.account == account)
            .map(|d| (&d.disk, "data", None, d.zone.as_str())),
    );
    out
}

/// `DescribeDisks`.
pub(super) fn describe_disks(ctx: &Ctx, call: &Call) -> Result<Response, EcsError> {
    let p = &call.params;
    check_region(p, true)?;
    let ids = json_ids(p, "DiskIds")?;
    let instance = p.get("InstanceId");
    let kind = p.get("DiskType").unwrap_or("all");
    if !["all", "system", "data"].contains(&kind) {
        return Err(EcsError::invalid_parameter("DiskType"));
    }
    let (size, number) = super::page_params(p, 100)?;
    let now = Instant::now();
    let state = ctx.store.lock_at(now);
    let matches: Vec<Value> = visible_disks(&state, call.account, now)
        .into_iter()
        .filter(|(d, _, _, _)| ids.as_ref().is_none_or(|ids| ids.contains(&d.id)))
        .filter(|(_, _, i, _)| instance.is_none_or(|want| i.is_some_and(|i| i.id == want)))
        .filter(|(_, t, _, _)| kind == "all" || *t == kind)
        .map(|(d, t, i, zone)| {
            let device = i.and_then(|i| i.disks().position(|x| x.id == d.id)).unwrap_or(0);
            render_disk(d, t, i, zone, device)
        })
        .collect();
    let (start, end) = page_window(matches.len(), size, number);
    Ok(ok(json!({
        "TotalCount": matches.len(),
        "PageSize": size,
        "PageNumber": number,
        "NextToken": "",
        "Disks": {"Disk": matches[start..end].to_vec()},
    })))
}

/// `ResizeDisk`.
pub(super) fn resize_disk(ctx: &Ctx, call: &Call) -> Result<Response, EcsError> {
    let p = &call.params;
    check_region(p, false)?;
    let id = p.required("DiskId")?;
    let new_size = p
        .required("NewSize")?
        .parse::<u64>()
        .map_err(|_| EcsError::forbidden("InvalidParameter", "The specified parameter \"NewSize\" is not valid."))?;
    let online = match p.get("Type").unwrap_or("offline") {
        "offline" => false,
        "online" => true,
        _ => return Err(EcsError::invalid_parameter("Type")),
    };
    let now = Instant::now();
    let mut state = ctx.store.lock_at(now);
    let account = call.account;
    let owner = state
        .instances
        .values()
        .find(|i| i.account == account && now >= i.visible_at && i.disks().any(|d| d.id == id))
        .map(|i| (i.id.clone(), i.status(now), i.system_disk.id == id));
    let (disk, system) = match &owner {
        Some((instance, status, system)) => {
            match *status {
                "Stopping" => {
                    return Err(EcsError::forbidden(
                        "IncorrectDiskStatus",
                        "The current disk status does not support this operation.",
                    ));
                }
                "Running" => {}
                "Stopped" if !online => {}
                _ => return Err(EcsError::incorrect_instance_status()),
            }
            let disk = state.instances.get_mut(instance).and_then(|i| i.disk_mut(id)).ok_or_else(disk_not_found)?;
            (disk, *system)
        }
        None => match state.detached_disks.get_mut(id).filter(|d| d.account == account) {
            Some(kept) => (&mut kept.disk, false),
            None => return Err(disk_not_found()),
        },
    };
    if disk.category == "ephemeral_ssd" || (online && !ONLINE_RESIZE.contains(&disk.category.as_str())) {
        return Err(EcsError::forbidden("OperationDenied", "The type of the disk does not support the operation"));
    }
    if new_size <= disk.size {
        return Err(EcsError::forbidden(
            "InvalidDiskSize.TooSmall",
            "Specified new disk size is less than the original disk size",
        ));
    }
    let max = match (disk.category.as_str(), system) {
        ("cloud", _) => 2000,
        (_, true) => 2048,
        _ => 32_768,
    };
    if new_size > max {
        return Err(EcsError::forbidden("InvalidParameter", "The specified parameter \"NewSize\" is not valid."));
    }
    disk.size = new_size;
    Ok(ok(json!({})))
}

/// `DescribeNetworkInterfaces`: the primary ENIs of the caller's visible instances.
pub(super) fn describe_network_interfaces(ctx: &Ctx, call: &Call) -> Result<Response, EcsError> {
    let p = &call.params;
    check_region(p, true)?;
    let ids: Vec<String> = p.list("NetworkInterfaceId").into_iter().map(|(_, id)| id).collect();
    if ids.len() > 100 {
        return Err(EcsError::invalid_parameter("NetworkInterfaceId.N"));
    }
    let instance = p.get("InstanceId");
    let kind = p.get("Type");
    let (size, number) = super::page_params(p, 1000)?;
    let now = Instant::now();
    let state = ctx.store.lock_at(now);
    let mut instances: Vec<&Instance> = state
        .instances
        .values()
        .filter(|i| i.account == call.account && now >= i.visible_at)
        .filter(|i| ids.is_empty() || ids.contains(&i.eni_id))
        .filter(|i| instance.is_none_or(|want| i.id == want))
        .filter(|_| kind.is_none_or(|k| k == "Primary"))
        .collect();
    instances.sort_by_key(|i| i.seq);
    let sets: Vec<Value> = instances
        .iter()
        .map(|i| {
            json!({
                "NetworkInterfaceId": i.eni_id,
                "Type": "Primary",
                "Status": "InUse",
                "InstanceId": i.id,
                "VpcId": i.vpc,
                "VSwitchId": i.vswitch,
                "ZoneId": i.zone,
                "MacAddress": super::instances::mac_of(&i.eni_id),
                "PrivateIpAddress": i.private_ip,
                "SecurityGroupIds": {"SecurityGroupId": i.security_groups},
                "Tags": tags_json(&i.eni_tags),
            })
        })
        .collect();
    let (start, end) = page_window(sets.len(), size, number);
    Ok(ok(json!({
        "TotalCount": sets.len(),
        "PageSize": size,
        "PageNumber": number,
        "NextToken": "",
        "NetworkInterfaceSets": {"NetworkInterfaceSet": sets[start..end].to_vec()},
    })))
}

/// The ModifyInstanceAttribute parameters the reference lists besides
/// `InstanceId` and `SecurityGroupIds.N`, which the fake does not model.
const UNMODELLED: &[&str] = &[
    "Password",
    "HostName",
    "InstanceName",
    "Description",
    "UserData",
    "CreditSpecification",
    "DeletionProtection",
    "NetworkInterfaceQueueNumber",
    "EnableJumboFrame",
    "EnableNetworkEncryption",
    "CpuOptions.Core",
    "CpuOptions.ThreadsPerCore",
    "CpuOptions.TopologyType",
    "RemoteConnectionOptions.Password",
    "RemoteConnectionOptions.Type",
];

/// `ModifyInstanceAttribute` with `SecurityGroupIds.N`.
pub(super) fn modify_instance_attribute(ctx: &Ctx, call: &Call) -> Result<Response, EcsError> {
    let p = &call.params;
    check_region(p, false)?;
    let id = p.required("InstanceId")?;
    if let Some(name) = UNMODELLED.iter().find(|name| p.get(name).is_some()) {
        return Err(EcsError::bad_request(
            "InvalidParameter",
            format!("The specified parameter \"{name}\" is not modelled by fake-ecs (only SecurityGroupIds.N)."),
        ));
    }
    let groups: Vec<String> = p.list("SecurityGroupIds").into_iter().map(|(_, g)| g).collect();
    let now = Instant::now();
    let mut state = ctx.store.lock_at(now);
    let vpc = state
        .instances
        .get(id)
        .filter(|i| i.account == call.account && now >= i.visible_at)
        .map(|i| i.vpc.clone())
        .ok_or_else(EcsError::instance_not_found)?;
    for (n, group) in groups.iter().enumerate() {
        if groups[..n].contains(group) {
            return Err(EcsError::bad_request(
                "InvalidParameter.Duplicated",
                "The specified parameter \"SecurityGroupIds\" has duplicated values.",
            ));
        }
        let found = state.security_groups.get(group).filter(|g| g.account == call.account).ok_or_else(|| {
            EcsError::not_found("InvalidSecurityGroupId.NotFound", "The specified SecurityGroupId does not exist.")
        })?;
        if found.vpc != vpc {
            return Err(EcsError::bad_request(
                "InvalidSecurityGroupId.VPCMismatch",
                "The specified security group and the instance are not in the same VPC.",
            ));
        }
    }
    if !groups.is_empty()
        && let Some(instance) = state.instances.get_mut(id)
    {
        instance.security_groups = groups;
    }
    Ok(ok(json!({})))
}
