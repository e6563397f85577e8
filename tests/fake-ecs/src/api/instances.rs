//! `RunInstances`, `DescribeInstances` and `DeleteInstance`.

use std::net::Ipv4Addr;
use std::time::{Instant, SystemTime};

use axum::response::Response;
use base64::Engine;
use fake_cloud_support::Replay;
use serde_json::{Value, json};

use super::tags::tag_key_valid;
use super::{Call, Ctx, check_region, page_window};
use crate::error::{EcsError, ok};
use crate::state::{DataDisk, Instance, Phase, SpotTerms, State};
use crate::wire::{creation_time, instance_id, order_id};
use crate::{INSTANCE_TYPES, REGION};

/// Maximum decoded `UserData` size.
const MAX_USER_DATA: usize = 32 * 1024;
/// Maximum number of tags per instance.
const MAX_TAGS: usize = 20;
/// Maximum number of data disks per instance.
const MAX_DATA_DISKS: usize = 16;
/// Disk categories RunInstances accepts.
const DISK_CATEGORIES: &[&str] =
    &["cloud", "cloud_efficiency", "cloud_ssd", "cloud_essd", "cloud_auto", "cloud_essd_entry", "ephemeral_ssd"];

/// `(vCPUs, memory MiB)` of a seeded instance type.
fn shape(instance_type: &str) -> (u32, u32) {
    match instance_type {
        "ecs.g7.xlarge" => (4, 16_384),
        "ecs.g7.large" => (2, 8192),
        _ => (2, 4096),
    }
}

/// The RunInstances answer for `ids`.
fn run_answer(ids: &[String]) -> Response {
    ok(json!({"InstanceIdSets": {"InstanceIdSet": ids}, "OrderId": order_id(), "TradePrice": 0}))
}

fn one_of(
    value: Option<&str>,
    default: &str,
    allowed: &[&str],
    error: impl FnOnce() -> EcsError,
) -> Result<String, EcsError> {
    match value {
        None => Ok(default.to_owned()),
        Some(v) if allowed.contains(&v) => Ok(v.to_owned()),
        Some(_) => Err(error()),
    }
}

fn valid_instance_name(name: &str) -> bool {
    let count = name.chars().count();
    (2..=128).contains(&count)
        && name.chars().next().is_some_and(char::is_alphabetic)
        && !name.starts_with("http://")
        && !name.starts_with("https://")
}

/// Everything RunInstances validated, ready to create `amount` instances.
struct Plan {
    amount: usize,
    image_id: String,
    instance_type: String,
    vswitch: String,
    vpc: String,
    zone: String,
    private_ip: Option<String>,
    security_groups: Vec<String>,
    tags: Vec<(String, String)>,
    user_data: Option<String>,
    name: Option<String>,
    host_name: Option<String>,
    instance_charge_type: String,
    internet_charge_type: String,
    bandwidth_in: u64,
    bandwidth_out: u64,
    spot_strategy: String,
    spot: Option<SpotTerms>,
    io_optimized: bool,
    key_pair: Option<String>,
    system_disk: (String, u64),
    system_performance_level: Option<String>,
    data_disks: Vec<DataDisk>,
}

/// The ESSD `PerformanceLevel` values (ECS's default `PL1`).
pub(crate) const PERFORMANCE_LEVELS: &[&str] = &["PL0", "PL1", "PL2", "PL3"];

/// `SpotPriceLimit` (at most 3 decimals, > 0) and `SpotDuration` (0 or 1 hours,
/// default 1) as the RunInstances reference documents them: 400
/// `InvalidSpotPriceLimit` / `InvalidSpotDuration` otherwise, and 400
/// `InvalidSpotPrepaid` for a spot strategy on a `PrePaid` instance. ECS uses
/// the limit only with `SpotWithPriceLimit` and the duration only with a spot
/// strategy; elsewhere they are ignored, as ECS ignores them (still validated).
fn spot_terms(p: &crate::params::Params, strategy: &str, charge_type: &str) -> Result<Option<SpotTerms>, EcsError> {
    let price_limit = match p.get("SpotPriceLimit") {
        None => None,
        Some(text) => {
            let decimals = text.split_once('.').map_or(0, |(_, frac)| frac.len());
            match text.parse::<f64>() {
                Ok(v) if v.is_finite() && v > 0.0 && decimals <= 3 => Some(text.to_owned()),
                _ => {
                    return Err(EcsError::bad_request(
                        "InvalidSpotPriceLimit",
                        "The specified SpotPriceLimit is not valid.",
                    ));
                }
            }
        }
    };
    let duration = match p.get("SpotDuration") {
        None => 1,
        Some("0") => 0,
        Some("1") => 1,
        Some(_) => {
            return Err(EcsError::bad_request("InvalidSpotDuration", "The specified SpotDuration is not valid."));
        }
    };
    if strategy == "NoSpot" {
        return Ok(None);
    }
    if charge_type == "PrePaid" {
        return Err(EcsError::bad_request(
            "InvalidSpotPrepaid",
            "The specified Spot type is not support PrePay Instance.",
        ));
    }
    let price_limit = price_limit.filter(|_| strategy == "SpotWithPriceLimit");
    Ok(Some(SpotTerms { price_limit, duration }))
}

fn plan(state: &State, call: &Call, amount: usize) -> Result<Plan, EcsError> {
    let p = &call.params;
    let account = call.account;
    let image_id = p.required("ImageId")?;
    let instance_type = p.required("InstanceType")?;
    if !state.images.get(image_id).is_some_and(|image| image.visible_to(account)) {
        return Err(EcsError::image_not_found());
    }
    if !INSTANCE_TYPES.contains(&instance_type) {
        return Err(EcsError::bad_request(
            "InvalidInstanceType.NotSupported",
            "The specified InstanceType is not Supported.",
        ));
    }
    let vswitch_id = p
        .get("VSwitchId")
        .ok_or_else(|| EcsError::bad_request("InvalidVSwitchId.Necessary", "The VSwitchId is necessary."))?;
    let vswitch =
        state.vswitches.get(vswitch_id).filter(|v| v.account == account).ok_or_else(|| {
            EcsError::not_found("InvalidVSwitchId.NotFound", "Specified virtual switch does not exist.")
        })?;
    if let Some(zone) = p.get("ZoneId")
        && zone != vswitch.zone
    {
        return Err(EcsError::bad_request(
            "InvalidParameter.Mismatch",
            "Specified virtual switch is not in the specified zone.",
        ));
    }
    let mut security_groups: Vec<String> = p.get("SecurityGroupId").map(str::to_owned).into_iter().collect();
    security_groups.extend(p.list("SecurityGroupIds").into_iter().map(|(_, id)| id));
    security_groups.dedup();
    if security_groups.is_empty() {
        return Err(EcsError::missing("SecurityGroupId"));
    }
    for id in &security_groups {
        let group = state.security_groups.get(id).filter(|g| g.account == account).ok_or_else(|| {
            EcsError::not_found("InvalidSecurityGroupId.NotFound", "The specified SecurityGroupId does not exist.")
        })?;
        if group.vpc != vswitch.vpc {
            return Err(EcsError::bad_request(
                "InvalidParameter.Mismatch",
                "Specified security group and virtual switch are not in the same VPC.",
            ));
        }
    }
    let private_ip = match p.get("PrivateIpAddress") {
        None => None,
        Some(text) => {
            let ip: Ipv4Addr = text.parse().map_err(|_| {
                EcsError::bad_request("InvalidPrivateIpAddress.Malformed", "Specified private IP address is malformed.")
            })?;
            if !vswitch.contains(ip) {
                return Err(EcsError::bad_request(
                    "InvalidPrivateIpAddress",
                    "Specified private IP address is not in the CIDR block of virtual switch.",
                ));
            }
            if state.ip_in_use(&vswitch.id, text) {
                return Err(EcsError::bad_request(
                    "InvalidPrivateIpAddress.Duplicated",
                    "Specified private IP address is duplicated.",
                ));
            }
            if amount > 1 {
                return Err(EcsError::bad_request(
                    "InvalidParameter.Conflict",
                    "PrivateIpAddress can only be specified when Amount is 1.",
                ));
            }
            Some(ip.to_string())
        }
    };
    let user_data = match p.get("UserData") {
        None => None,
        Some(encoded) => {
            let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).map_err(|_| {
                EcsError::forbidden("InvalidUserData.Base64FormatInvalid", "The specified UserData is not valid")
            })?;
            if decoded.len() > MAX_USER_DATA {
                return Err(EcsError::bad_request(
                    "InvalidUserData.SizeExceeded",
                    "The specified parameter \"UserData\" exceeds the size.",
                ));
            }
            Some(encoded.to_owned())
        }
    };
    let requested_tags = p.tags();
    if requested_tags.len() > MAX_TAGS {
        return Err(EcsError::bad_request("InvalidParameter.TagCount", "The number of tags exceeds the limit of 20."));
    }
    let mut tags: Vec<(String, String)> = Vec::new();
    for (key, value) in requested_tags {
        if !tag_key_valid(&key) {
            return Err(EcsError::bad_request("InvalidTagKey.Malformed", "The specified Tag.n.Key is not valid."));
        }
        let value = value.unwrap_or_default();
        if value.chars().count() > 128 || value.to_ascii_lowercase().starts_with("acs:") {
            return Err(EcsError::bad_request("InvalidTagValue.Malformed", "The specified Tag.n.Value is not valid."));
        }
        match tags.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => tags.push((key, value)),
        }
    }
    let name = p.get("InstanceName").map(str::to_owned);
    if name.as_deref().is_some_and(|n| !valid_instance_name(n)) {
        return Err(EcsError::bad_request(
            "InvalidInstanceName.Malformed",
            "The specified parameter \"InstanceName\" is not valid.",
        ));
    }
    let host_name = p.get("HostName").map(str::to_owned);
    if host_name.as_deref().is_some_and(|h| h.len() < 2 || h.len() > 64 || h.starts_with('.') || h.starts_with('-')) {
        return Err(EcsError::bad_request(
            "InvalidHostName.Malformed",
            "The specified parameter \"HostName\" is not valid.",
        ));
    }
    let instance_charge_type = one_of(p.get("InstanceChargeType"), "PostPaid", &["PostPaid", "PrePaid"], || {
        EcsError::not_found(
            "InvalidInstanceChargeType.NotFound",
            "The InstanceChargeType does not exist in our records",
        )
    })?;
    let internet_charge_type =
        one_of(p.get("InternetChargeType"), "PayByTraffic", &["PayByTraffic", "PayByBandwidth"], || {
            EcsError::bad_request(
                "InvalidInternetChargeType.ValueNotSupported",
                "The specified InternetChargeType is not valid.",
            )
        })?;
    let spot_strategy =
        one_of(p.get("SpotStrategy"), "NoSpot", &["NoSpot", "SpotWithPriceLimit", "SpotAsPriceGo"], || {
            EcsError::bad_request("InvalidSpotStrategy", "The specified SpotStrategy is not valid.")
        })?;
    let spot = spot_terms(p, &spot_strategy, &instance_charge_type)?;
    let io_optimized = one_of(p.get("IoOptimized"), "optimized", &["optimized", "none"], || {
        EcsError::bad_request("InvalidIoOptimizedValue.ValueNotSupported", "IoOptimized value not supported.")
    })? == "optimized";
    let bandwidth_in = p.int("InternetMaxBandwidthIn", 10, 1..=10_000)?;
    let bandwidth_out = p.int("InternetMaxBandwidthOut", 0, 0..=100)?;
    let system_category = one_of(p.get("SystemDisk.Category"), "cloud_essd", DISK_CATEGORIES, || {
        EcsError::bad_request(
            "InvalidSystemDiskCategory.ValueNotSupported",
            "The specified parameter \"SystemDisk.Category\" is not valid.",
        )
    })?;
    let system_size = p.int("SystemDisk.Size", 40, 0..=u64::MAX).and_then(|size| {
        if (20..=2048).contains(&size) {
            Ok(size)
        } else {
            Err(EcsError::bad_request(
                "InvalidSystemDiskSize.ValueNotSupported",
                "The specified parameter SystemDisk.Size is invalid.",
            ))
        }
    })?;
    let system_performance_level = match p.get("SystemDisk.PerformanceLevel") {
        None => None,
        Some(level) if system_category == "cloud_essd" && PERFORMANCE_LEVELS.contains(&level) => Some(level.to_owned()),
        Some(_) => {
            return Err(EcsError::bad_request(
                "InvalidPerformanceLevel.Malformed",
                "The specified parameter \"SystemDisk.PerformanceLevel\" is not valid.",
            ));
        }
    };
    let indices = p.indices("DataDisk");
    if indices.len() > MAX_DATA_DISKS {
        return Err(EcsError::bad_request(
            "InstanceDiskNumber.LimitExceed",
            "The total number of specified disk in an instance exceeds.",
        ));
    }
    let mut data_disks = Vec::new();
    for n in indices {
        let category = one_of(p.field("DataDisk", n, "Category"), "cloud_efficiency", DISK_CATEGORIES, || {
            EcsError::bad_request(
                "InvalidDataDiskCategory.ValueNotSupported",
                "The specified parameter \"DataDisk.n.Category\" is not valid.",
            )
        })?;
        let size = p
            .field("DataDisk", n, "Size")
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|s| (20..=32_768).contains(s))
            .ok_or_else(|| {
                EcsError::bad_request(
                    "InvalidDataDiskSize.ValueNotSupported",
                    "The specified DataDisk.n.Size beyond the permitted range, or the capacity of snapshot exceeds the size limit of the specified disk category.",
                )
            })?;
        let flag = |field: &str, default: bool| p.flag(&format!("DataDisk.{n}.{field}"), default);
        let mut disk = DataDisk::new(&category, size);
        disk.encrypted = flag("Encrypted", false)?;
        disk.name = p.field("DataDisk", n, "DiskName").map(str::to_owned);
        disk.description = p.field("DataDisk", n, "Description").map(str::to_owned);
        disk.delete_with_instance = flag("DeleteWithInstance", true)?;
        if let Some(level) = p.field("DataDisk", n, "PerformanceLevel") {
            if category != "cloud_essd" || !PERFORMANCE_LEVELS.contains(&level) {
                return Err(EcsError::bad_request(
                    "InvalidPerformanceLevel.Malformed",
                    "The specified parameter \"DataDisk.n.PerformanceLevel\" is not valid.",
                ));
            }
            disk.performance_level = Some(level.to_owned());
        }
        data_disks.push(disk);
    }
    Ok(Plan {
        amount,
        image_id: image_id.to_owned(),
        instance_type: instance_type.to_owned(),
        vswitch: vswitch.id.clone(),
        vpc: vswitch.vpc.clone(),
        zone: vswitch.zone.clone(),
        private_ip,
        security_groups,
        tags,
        user_data,
        name,
        host_name,
        instance_charge_type,
        internet_charge_type,
        bandwidth_in,
        bandwidth_out,
        spot_strategy,
        spot,
        io_optimized,
        key_pair: p.get("KeyPairName").map(str::to_owned),
        system_disk: (system_category, system_size),
        system_performance_level,
        data_disks,
    })
}

/// `RunInstances`: validates, honours `ClientToken`, creates `Amount` instances (Pending).
pub(super) fn run(ctx: &Ctx, call: &Call) -> Result<Response, EcsError> {
    let p = &call.params;
    check_region(p, true)?;
    let amount = usize::try_from(p.int("Amount", 1, 1..=100)?).unwrap_or(1);
    let dry_run = p.flag("DryRun", false)?;
    let token = p.get("ClientToken");
    if token.is_some_and(|t| t.len() > 64 || !t.is_ascii()) {
        return Err(EcsError::bad_request(
            "InvalidClientToken.Malformed",
            "The specified parameter \"ClientToken\" is not valid: at most 64 ASCII characters.",
        ));
    }
    let timing = ctx.admin.timing();
    let invisible = ctx.admin.consistency().invisible();
    let now = Instant::now();
    let mut state = ctx.store.lock_at(now);
    let key = token.map(|t| (call.account.to_owned(), t.to_owned()));
    let fingerprint = p.fingerprint();
    if !dry_run && let Some(key) = &key {
        match state.tokens.check(key, &fingerprint, now) {
            Replay::Same(ids) => return Ok(run_answer(ids)),
            Replay::Mismatch => return Err(EcsError::idempotent_mismatch()),
            Replay::New => {}
        }
    }
    let plan = plan(&state, call, amount)?;
    if dry_run {
        return Err(EcsError::bad_request(
            "DryRunOperation",
            "Request validation has been passed with DryRun flag set.",
        ));
    }
    let created = creation_time(SystemTime::now());
    let mut ids = Vec::with_capacity(plan.amount);
    for _ in 0..plan.amount {
        let id = instance_id();
        let private_ip = match &plan.private_ip {
            Some(ip) => ip.clone(),
            None => state.allocate_ip(&plan.vswitch).ok_or_else(|| {
                EcsError::bad_request("QuotaExceeded.PrivateIpAddress", "Don't have enough private IPs in this switch.")
            })?,
        };
        let seq = state.next_seq;
        state.next_seq += 1;
        let boot = timing.boot();
        let instance = Instance {
            seq,
            id: id.clone(),
            account: call.account.to_owned(),
            name: plan.name.clone().unwrap_or_else(|| id.clone()),
            host_name: plan.host_name.clone().unwrap_or_else(|| format!("iz{}z", &id[2..])),
            zone: plan.zone.clone(),
            instance_type: plan.instance_type.clone(),
            image_id: plan.image_id.clone(),
            vswitch: plan.vswitch.clone(),
            vpc: plan.vpc.clone(),
            private_ip,
            security_groups: plan.security_groups.clone(),
            tags: plan.tags.clone(),
            user_data: plan.user_data.clone(),
            client_token: token.map(str::to_owned),
            creation_time: created.clone(),
            visible_at: now + invisible,
            phase: Phase::Booting { starting_at: now + boot / 2, until: now + boot },
            instance_charge_type: plan.instance_charge_type.clone(),
            internet_charge_type: plan.internet_charge_type.clone(),
            bandwidth_in: plan.bandwidth_in,
            bandwidth_out: plan.bandwidth_out,
            spot_strategy: plan.spot_strategy.clone(),
            io_optimized: plan.io_optimized,
            key_pair: plan.key_pair.clone(),
            // Each instance gets disks of its own (new ids), tagged with RunInstances'
            // tags as ECS tags the instance, its disks and its primary ENI.
            system_disk: {
                let mut disk = DataDisk::new(&plan.system_disk.0, plan.system_disk.1);
                disk.tags.clone_from(&plan.tags);
                disk.performance_level = plan.system_performance_level.clone().or(disk.performance_level);
                disk
            },
            data_disks: plan
                .data_disks
                .iter()
                .map(|d| DataDisk { id: crate::wire::disk_id(), tags: plan.tags.clone(), ..d.clone() })
                .collect(),
            eni_id: crate::wire::eni_id(),
            eni_tags: plan.tags.clone(),
            recycling: false,
        };
        state.instances.insert(id.clone(), instance);
        if let Some(terms) = &plan.spot {
            state.spot_terms.insert(id.clone(), terms.clone());
        }
        ids.push(id);
    }
    state.advance(now);
    if let Some(key) = key {
        state.tokens.record(key, fingerprint, ids.clone(), now);
    }
    Ok(run_answer(&ids))
}

/// The `Instance` object of DescribeInstances.
fn render(instance: &Instance, spot: Option<&SpotTerms>, now: Instant) -> Value {
    let (cpu, memory) = shape(&instance.instance_type);
    let price_limit = spot.and_then(|s| s.price_limit.as_deref()).and_then(|p| p.parse::<f64>().ok()).unwrap_or(0.0);
    // DescribeInstances' shape (alibaba-cloud-sdk-go `OperationLocksInDescribeInstances`:
    // `{"LockReason": [{"LockReason", "LockMsg"}]}`); empty unless ECS locked the instance.
    let locks: Vec<Value> =
        instance.lock_reasons().iter().map(|reason| json!({"LockReason": reason, "LockMsg": ""})).collect();
    json!({
        "SpotPriceLimit": price_limit,
        "SpotDuration": spot.map_or(0, |s| s.duration),
        "InstanceId": instance.id,
        "InstanceName": instance.name,
        "HostName": instance.host_name,
        "Description": "",
        "Status": instance.status(now),
        "RegionId": REGION,
        "ZoneId": instance.zone,
        "InstanceType": instance.instance_type,
        "InstanceTypeFamily": instance.instance_type.rsplit_once('.').map_or("", |(family, _)| family),
        "Cpu": cpu,
        "Memory": memory,
        "ImageId": instance.image_id,
        "OSType": "linux",
        "CreationTime": instance.creation_time,
        "StartTime": instance.creation_time,
        "ExpiredTime": "2099-12-31T15:59Z",
        "InstanceNetworkType": "vpc",
        "InstanceChargeType": instance.instance_charge_type,
        "InternetChargeType": instance.internet_charge_type,
        "InternetMaxBandwidthIn": instance.bandwidth_in,
        "InternetMaxBandwidthOut": instance.bandwidth_out,
        "SpotStrategy": instance.spot_strategy,
        "IoOptimized": instance.io_optimized,
        "KeyPairName": instance.key_pair.clone().unwrap_or_default(),
        "DeletionProtection": false,
        "OperationLocks": {"LockReason": locks},
        "VpcAttributes": {
            "VSwitchId": instance.vswitch,
            "VpcId": instance.vpc,
            "NatIpAddress": "",
            "PrivateIpAddress": {"IpAddress": [instance.private_ip]},
        },
        "PublicIpAddress": {"IpAddress": []},
        "InnerIpAddress": {"IpAddress": []},
        "EipAddress": {"AllocationId": "", "IpAddress": "", "InternetChargeType": ""},
        "SecurityGroupIds": {"SecurityGroupId": instance.security_groups},
        // The primary ENI (DescribeInstances' `NetworkInterfaces.NetworkInterface[]`:
        // id, type, MAC and primary IP; its tags only DescribeNetworkInterfaces shows).
        "NetworkInterfaces": {"NetworkInterface": [{
            "NetworkInterfaceId": instance.eni_id,
            "Type": "Primary",
            "MacAddress": mac_of(&instance.eni_id),
            "PrimaryIpAddress": instance.private_ip,
        }]},
        "Tags": {"Tag": instance.tags.iter().map(|(k, v)| json!({"TagKey": k, "TagValue": v})).collect::<Vec<_>>()},
    })
}

/// A stable MAC address for ENI `id` (`00:16:3e:..`, Alibaba's OUI).
pub(crate) fn mac_of(id: &str) -> String {
    let sum = id.bytes().fold(0u32, |acc, b| acc.wrapping_mul(31).wrapping_add(u32::from(b)));
    let [_, a, b, c] = sum.to_be_bytes();
    format!("00:16:3e:{a:02x}:{b:02x}:{c:02x}")
}

/// A NextToken for "after the instance with `seq`".
fn next_token(seq: u64) -> String {
    format!("{seq:032x}")
}

fn parse_next_token(token: &str) -> Result<u64, EcsError> {
    if token.len() != 32 {
        return Err(EcsError::bad_request(
            "InvalidParameter.NextToken",
            "The specified parameter NextToken is not valid.",
        ));
    }
    u64::from_str_radix(token, 16).map_err(|_| {
        EcsError::bad_request("InvalidParameter.NextToken", "The specified parameter NextToken is not valid.")
    })
}

/// `DescribeInstances`: the caller's visible instances, filtered, paged by NextToken or PageNumber.
pub(super) fn describe(ctx: &Ctx, call: &Call) -> Result<Response, EcsError> {
    let p = &call.params;
    check_region(p, true)?;
    let ids: Option<Vec<String>> = match p.get("InstanceIds") {
        None => None,
        Some(text) => {
            let ids: Vec<String> = serde_json::from_str(text).map_err(|_| {
                EcsError::bad_request(
                    "InvalidInstanceIds.Malformed",
                    "The specified parameter InstanceIds is not valid.",
                )
            })?;
            if ids.len() > 100 {
                return Err(EcsError::bad_request(
                    "InvalidParameter",
                    "The specified parameter \"InstanceIds\" is not valid: at most 100 instance ids.",
                ));
            }
            Some(ids)
        }
    };
    let max_results = match p.get("MaxResults") {
        None => None,
        Some(_) => Some(p.int("MaxResults", 10, 1..=100)?),
    };
    let (page_size, page_number) = super::page_params(p, 100)?;
    let size = max_results.map_or(page_size, |m| usize::try_from(m).unwrap_or(10));
    let after = p.get("NextToken").map(parse_next_token).transpose()?;
    let tags = p.tags();
    let name = p.get("InstanceName");
    let status = p.get("Status");
    let zone = p.get("ZoneId");
    let vswitch = p.get("VSwitchId");
    let vpc = p.get("VpcId");

    let now = Instant::now();
    let state = ctx.store.lock_at(now);
    let mut matches: Vec<&Instance> = state
        .instances
        .values()
        .filter(|i| i.account == call.account && now >= i.visible_at)
        .filter(|i| ids.as_ref().is_none_or(|ids| ids.contains(&i.id)))
        .filter(|i| name.is_none_or(|n| i.name == n))
        .filter(|i| status.is_none_or(|s| i.status(now) == s))
        .filter(|i| zone.is_none_or(|z| i.zone == z))
        .filter(|i| vswitch.is_none_or(|v| i.vswitch == v))
        .filter(|i| vpc.is_none_or(|v| i.vpc == v))
        .filter(|i| {
            tags.iter()
                .all(|(key, value)| i.tags.iter().any(|(k, v)| k == key && value.as_ref().is_none_or(|want| v == want)))
        })
        .collect();
    matches.sort_by_key(|i| i.seq);
    let total = matches.len();
    let (start, end, number) = match after {
        Some(seq) => {
            let start = matches.iter().position(|i| i.seq > seq).unwrap_or(total);
            (start, start.saturating_add(size).min(total), start / size.max(1) + 1)
        }
        None => {
            let (start, end) = page_window(total, size, page_number);
            (start, end, page_number)
        }
    };
    let page: Vec<Value> = matches[start..end].iter().map(|i| render(i, state.spot_terms.get(&i.id), now)).collect();
    let token = if end < total && end > 0 { next_token(matches[end - 1].seq) } else { String::new() };
    Ok(ok(json!({
        "TotalCount": total,
        "PageSize": size,
        "PageNumber": number,
        "NextToken": token,
        "Instances": {"Instance": page},
    })))
}

/// `DeleteInstance`: Running (with `Force=true`) or Stopped (a reclaimed spot instance
/// waiting for release; the DeleteInstance reference releases a stopped instance without
/// `Force`) → Stopping → gone after `stop_ms`.
pub(super) fn delete(ctx: &Ctx, call: &Call) -> Result<Response, EcsError> {
    let p = &call.params;
    check_region(p, false)?;
    let id = p.required("InstanceId")?;
    let force = p.flag("Force", false)?;
    p.flag("TerminateSubscription", false)?;
    let stop = ctx.admin.timing().stop();
    let now = Instant::now();
    let mut state = ctx.store.lock_at(now);
    let instance = state
        .instances
        .get_mut(id)
        .filter(|i| i.account == call.account && now >= i.visible_at)
        .ok_or_else(EcsError::instance_not_found)?;
    match instance.status(now) {
        "Running" if force => instance.phase = Phase::Stopping { until: now + stop },
        "Stopped" => instance.phase = Phase::Stopping { until: now + stop },
        _ => return Err(EcsError::incorrect_instance_status()),
    }
    state.advance(now);
    Ok(ok(json!({})))
}
