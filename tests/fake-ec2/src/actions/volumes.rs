//! EBS volumes of the fake's instances: DescribeVolumes, ModifyVolume and
//! DescribeVolumesModifications, as the EC2 API reference describes them
//! (<https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeVolumes.html>,
//! <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ModifyVolume.html>,
//! <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeVolumesModifications.html>)
//! and the EBS User Guide ("Modify a volume using Amazon EBS Elastic Volumes",
//! "Monitor the progress of Amazon EBS volume modifications").
//!
//! A modification is `modifying`, then `optimizing` (from here the volume shows
//! its new size and performance), then `completed`, each of the first two
//! for the fake's `boot_ms` ([`crate::model::VolumeModification`]). A volume
//! can be modified again only once its last modification is completed and
//! six hours after it started: `IncorrectModificationState` before it
//! completed, `VolumeModificationRateExceeded` within the six hours.

use std::time::{Duration, SystemTime};

use crate::actions::{Ctx, ids};
use crate::clock::iso8601;
use crate::errors::Ec2Error;
use crate::model::{Instance, InstanceState, Volume, VolumeModification, VolumePerformance};
use crate::pagination::paginate;
use crate::query::Params;
use crate::render::tag_set;
use crate::store::World;
use crate::xml::Xml;

/// How long after a modification started EC2 refuses the next one.
const COOLDOWN: Duration = Duration::from_secs(6 * 3600);

/// Largest size in GiB of each volume type, and smallest.
fn size_range(volume_type: &str) -> (i64, i64) {
    match volume_type {
        "io1" | "io2" => (4, 16_384),
        "st1" | "sc1" => (125, 16_384),
        "standard" => (1, 1_024),
        _ => (1, 16_384),
    }
}

/// The IOPS a volume type may be given (`None`: IOPS cannot be set).
fn iops_range(volume_type: &str) -> Option<(i64, i64)> {
    match volume_type {
        "gp3" => Some((3_000, 16_000)),
        "io1" => Some((100, 64_000)),
        "io2" => Some((100, 256_000)),
        _ => None,
    }
}

/// Whether the volume still exists: its instance is visible and the volume
/// was not deleted with it.
fn volume_exists(instance: &Instance, volume: &Volume, ctx: &Ctx<'_>) -> bool {
    instance.visible_to(&ctx.caller.account, ctx.now)
        && !(instance.state(ctx.now) == InstanceState::Terminated && volume.delete_on_termination)
}

/// The caller's volumes with their instances.
fn visible<'w>(world: &'w World, ctx: &Ctx<'_>) -> Vec<(&'w Instance, &'w Volume)> {
    world
        .instances
        .iter()
        .flat_map(|i| i.volumes.iter().map(move |v| (i, v)))
        .filter(|(i, v)| volume_exists(i, v, ctx))
        .collect()
}

/// The caller's volumes named by `VolumeId.N` (all of them when none is
/// named); `InvalidVolume.NotFound` naming every unknown id.
fn selected<'w>(world: &'w World, ctx: &Ctx<'_>, params: &Params) -> Result<Vec<(&'w Instance, &'w Volume)>, Ec2Error> {
    let wanted = ids(params, "VolumeId", "vol", "InvalidVolumeID.Malformed")?;
    let all = visible(world, ctx);
    let missing: Vec<String> = wanted.iter().filter(|id| !all.iter().any(|(_, v)| &v.id == *id)).cloned().collect();
    if !missing.is_empty() {
        return Err(Ec2Error::not_found("InvalidVolume.NotFound", "volume", &missing));
    }
    Ok(all.into_iter().filter(|(_, v)| wanted.is_empty() || wanted.contains(&v.id)).collect())
}

/// DescribeVolumes by `VolumeId.N` (or all, paged with `MaxResults`, which
/// cannot be combined with volume ids).
pub(crate) fn describe_volumes(world: &mut World, ctx: &Ctx<'_>, params: &Params) -> Result<Xml, Ec2Error> {
    if !params.list("VolumeId").is_empty() && params.get("MaxResults").is_some() {
        return Err(Ec2Error::combination("The parameter volumeSet cannot be used with the parameter maxResults"));
    }
    let found = selected(world, ctx, params)?;
    let page = paginate(found, params, "DescribeVolumes", 5)?;
    let mut x = Xml::new();
    x.items("volumeSet", page.items, |x, (instance, volume)| {
        let shown = volume.performance(ctx.now);
        x.leaf("volumeId", &volume.id)
            .leaf("size", shown.size_gib)
            .leaf("snapshotId", volume.snapshot_id.as_deref().unwrap_or(""))
            .leaf("availabilityZone", &instance.availability_zone)
            .leaf("status", if instance.state(ctx.now) == InstanceState::Terminated { "available" } else { "in-use" })
            .leaf("createTime", iso8601(instance.launch_time));
        if instance.state(ctx.now) != InstanceState::Terminated {
            x.items("attachmentSet", [volume], |x, v| {
                x.leaf("volumeId", &v.id)
                    .leaf("instanceId", &instance.id)
                    .leaf("device", &v.device_name)
                    .leaf("status", "attached")
                    .leaf("attachTime", iso8601(instance.launch_time))
                    .leaf("deleteOnTermination", v.delete_on_termination);
            });
        }
        x.leaf("volumeType", &shown.volume_type)
            .opt_leaf("iops", shown.iops)
            .opt_leaf("throughput", shown.throughput)
            .leaf("encrypted", volume.encrypted)
            .opt_leaf("kmsKeyId", volume.kms_key_id.as_deref())
            .leaf("multiAttachEnabled", "false");
        tag_set(x, &volume.tags);
    });
    x.opt_leaf("nextToken", page.next_token);
    Ok(x)
}

/// The `volumeModification` structure.
fn modification_xml(x: &mut Xml, volume_id: &str, m: &VolumeModification, ctx: &Ctx<'_>) {
    let state = m.state(ctx.now);
    x.leaf("volumeId", volume_id)
        .leaf("modificationState", state)
        .leaf("targetSize", m.target.size_gib)
        .opt_leaf("targetIops", m.target.iops)
        .leaf("targetVolumeType", &m.target.volume_type)
        .opt_leaf("targetThroughput", m.target.throughput)
        .leaf("targetMultiAttachEnabled", "false")
        .leaf("originalSize", m.original.size_gib)
        .opt_leaf("originalIops", m.original.iops)
        .leaf("originalVolumeType", &m.original.volume_type)
        .opt_leaf("originalThroughput", m.original.throughput)
        .leaf("originalMultiAttachEnabled", "false")
        .leaf("progress", m.progress(ctx.now))
        .leaf("startTime", iso8601(m.started_wall));
    if state == "completed" {
        x.leaf("endTime", iso8601(m.started_wall + m.phase * 2));
    }
}

/// ModifyVolume: `VolumeId` and at least one of `Size`, `VolumeType`, `Iops`,
/// `Throughput`; what is not given is kept (IOPS of a gp3, io1 or io2 target
/// default to the volume's own when it keeps a type that has IOPS, else 3000).
/// The size can only grow; each value must suit the target type.
pub(crate) fn modify_volume(world: &mut World, ctx: &Ctx<'_>, params: &Params) -> Result<Xml, Ec2Error> {
    let id = params.required("VolumeId")?.to_owned();
    if !crate::ids::well_formed("vol", &id) {
        return Err(Ec2Error::malformed("InvalidVolumeID.Malformed", &id));
    }
    let size = params.int("Size")?;
    let volume_type = params.get("VolumeType").map(str::to_owned);
    let iops = params.int("Iops")?;
    let throughput = params.int("Throughput")?;
    if size.is_none() && volume_type.is_none() && iops.is_none() && throughput.is_none() {
        return Err(Ec2Error::missing_parameter("Size, VolumeType, Iops or Throughput"));
    }
    let not_found = || Ec2Error::not_found("InvalidVolume.NotFound", "volume", std::slice::from_ref(&id));
    let (instance_index, volume_index) = world
        .instances
        .iter()
        .enumerate()
        .flat_map(|(n, i)| i.volumes.iter().enumerate().map(move |(k, v)| (n, i, k, v)))
        .find(|(_, i, _, v)| v.id == id && volume_exists(i, v, ctx))
        .map(|(n, _, k, _)| (n, k))
        .ok_or_else(not_found)?;
    let volume = &mut world.instances[instance_index].volumes[volume_index];
    if let Some(m) = &volume.modification {
        if m.state(ctx.now) != "completed" {
            return Err(Ec2Error::client(
                "IncorrectModificationState",
                format!("Cannot modify volume {id} as it is currently being modified."),
            ));
        }
        if ctx.now < m.started + COOLDOWN {
            return Err(Ec2Error::client(
                "VolumeModificationRateExceeded",
                "You've reached the maximum modification rate per volume limit. Wait at least 6 hours between \
                 modifications per EBS volume.",
            ));
        }
    }
    let original = volume.own_performance();
    let target_type = volume_type.unwrap_or_else(|| original.volume_type.clone());
    if !["gp2", "gp3", "io1", "io2", "st1", "sc1", "standard"].contains(&target_type.as_str()) {
        return Err(Ec2Error::client(
            "InvalidParameterValue",
            format!("Value ({target_type}) for parameter volumeType is invalid."),
        ));
    }
    let target_size = size.unwrap_or(original.size_gib);
    if target_size < original.size_gib {
        return Err(Ec2Error::client(
            "InvalidParameterValue",
            format!("New size cannot be smaller than existing size ({} GiB)", original.size_gib),
        ));
    }
    let (min, max) = size_range(&target_type);
    if !(min..=max).contains(&target_size) {
        return Err(Ec2Error::client(
            "InvalidParameterValue",
            format!("Volume of {target_size}GiB is not valid for volume type {target_type} ({min}-{max} GiB)"),
        ));
    }
    let target_iops = match (iops_range(&target_type), iops) {
        (None, Some(_)) => {
            return Err(Ec2Error::combination(format!(
                "The parameter iops is not supported for {target_type} volumes."
            )));
        }
        // gp2: its baseline for the new size (st1, sc1, standard: none).
        (None, None) => crate::model::default_iops(&target_type, target_size),
        (Some((lo, hi)), Some(v)) if !(lo..=hi).contains(&v) => {
            return Err(Ec2Error::client(
                "InvalidParameterValue",
                format!("Volume iops of {v} is not valid for volume type {target_type} ({lo}-{hi})"),
            ));
        }
        (Some(_), Some(v)) => Some(v),
        (Some(_), None) if iops_range(&original.volume_type).is_some() => original.iops.or(Some(3_000)),
        (Some(_), None) => Some(3_000),
    };
    let target_throughput = match (target_type.as_str(), throughput) {
        ("gp3", Some(t)) if !(125..=1_000).contains(&t) => {
            return Err(Ec2Error::client(
                "InvalidParameterValue",
                format!("Throughput of {t} MiB/s is not valid for gp3 volumes (125-1000)"),
            ));
        }
        ("gp3", Some(t)) => Some(t),
        ("gp3", None) => original.throughput.or(Some(125)),
        (_, Some(_)) => {
            return Err(Ec2Error::combination(format!(
                "The parameter throughput is not supported for {target_type} volumes."
            )));
        }
        (_, None) => None,
    };
    let target = VolumePerformance {
        size_gib: target_size,
        volume_type: target_type,
        iops: target_iops,
        throughput: target_throughput,
    };
    volume.size_gib = target.size_gib;
    volume.volume_type = target.volume_type.clone();
    volume.iops = target.iops;
    volume.throughput = target.throughput;
    let modification = VolumeModification {
        started: ctx.now,
        started_wall: SystemTime::now(),
        phase: ctx.timing.boot(),
        original,
        target,
    };
    let mut x = Xml::new();
    x.elem("volumeModification", |x| modification_xml(x, &id, &modification, ctx));
    volume.modification = Some(modification);
    Ok(x)
}

/// DescribeVolumesModifications by `VolumeId.N`: the most recent
/// modification of each named volume that was ever modified (a volume never
/// modified has none to show).
pub(crate) fn describe_volumes_modifications(
    world: &mut World,
    ctx: &Ctx<'_>,
    params: &Params,
) -> Result<Xml, Ec2Error> {
    let found = selected(world, ctx, params)?;
    let modified: Vec<_> =
        found.into_iter().filter_map(|(_, v)| v.modification.as_ref().map(|m| (v.id.as_str(), m))).collect();
    let page = paginate(modified, params, "DescribeVolumesModifications", 5)?;
    let mut x = Xml::new();
    x.items("volumeModificationSet", page.items, |x, (id, m)| modification_xml(x, id, m, ctx));
    x.opt_leaf("nextToken", page.next_token);
    Ok(x)
}
