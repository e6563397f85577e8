//! UpdateMachine (hot update, issue 32): the tags of the instance and of the
//! EBS volumes and network interfaces launched with it, the size, type,
//! IOPS and throughput of the class's EBS volumes, the security groups and
//! source/destination check of its interfaces and the instance metadata
//! options (those three in `update_settings`), changed in place; the
//! instance type, AMI, zone, region and subnet reported as needing a
//! replacement.
//!
//! What the driver tags at launch (`tags::tag_specifications`: ResourceType
//! `instance`, `volume` and `network-interface`) is what gets a plan: the
//! instance, the volumes created at launch (the AMI's root device and the
//! class's block devices, by device name in DescribeInstances'
//! `blockDeviceMapping`; a volume attached later, a PersistentVolume's, is
//! never touched) and the interfaces of the class (by device index in
//! `networkInterfaceSet`; one a CNI attached later is never touched). Each
//! gets the set create gives it (`tags::machine_tags`: the class's tags,
//! `Name` and the machine uid tag).
//!
//! EC2 calls (EC2 API reference: CreateTags
//! <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateTags.html>,
//! DeleteTags <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DeleteTags.html>,
//! ModifyVolume <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ModifyVolume.html>,
//! DescribeVolumesModifications
//! <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeVolumesModifications.html>):
//! - reads: DescribeInstances (1, by id, as GetMachineStatus), DescribeVolumes
//!   (1 for all launch volumes: their tags and performance), DescribeNetworkInterfaces
//!   (1 for all launch interfaces: DescribeInstances shows no interface tags),
//!   and DescribeVolumesModifications (1, only when a volume differs from the class);
//! - writes (none with `validate_only`): one DeleteTags per distinct set of
//!   keys to remove (a key alone removes the tag whatever its value), one
//!   CreateTags per distinct set of tags to set, each naming every resource
//!   that needs it (usually one of each for the instance, its volumes and
//!   interfaces together), then one ModifyVolume per volume to change, then
//!   the ModifyNetworkInterfaceAttribute and ModifyInstanceMetadataOptions
//!   calls of `update_settings` (from the same DescribeInstances record).
//!
//! A retry after a lost answer converges: tags are compared again, and a
//! volume whose modification toward the class's values is still `modifying`
//! (DescribeVolumes shows the new values only from `optimizing` on) is not
//! modified again.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::{Instance, NetworkInterface, Tag, Volume, VolumeModificationState, VolumeType};
use machine_driver_api::{
    CallContext, DriverError, ErrorKind, Result, TagPlan, UpdateMachine, UpdatePlan, UpdatedMachine,
};

use crate::clients::AwsClients;
use crate::driver::AwsDriver;
use crate::lookup::{self, Lookup};
use crate::spec::{AwsProviderSpec, BlockDevice, ROOT_DEVICE_NAME};
use crate::{aws_call, provider_id, spot, tags, update_settings};

/// The tag field of the class.
const TAGS_FIELD: &str = "providerSpec.tags";
/// Most user tags EC2 keeps on one resource (`aws:` tags do not count).
const MAX_TAGS: usize = 50;
/// Longest tag value EC2 accepts, in characters.
const MAX_TAG_VALUE: usize = 256;

/// One resource the driver tagged at launch, with its tags now.
#[derive(Debug)]
struct Tagged {
    /// `instance i-…`, `volume vol-… (/dev/xvda)`, `network interface eni-…`.
    what: String,
    id: String,
    current: BTreeMap<String, String>,
}

/// One volume of the class with what EC2 shows of it.
#[derive(Debug)]
struct ClassVolume<'a> {
    /// Index in `providerSpec.blockDevices`.
    index: usize,
    device: &'a BlockDevice,
    volume: Volume,
}

/// What a ModifyVolume of one volume would send.
#[derive(Debug, Default, Clone, PartialEq)]
struct VolumeChange {
    size: Option<i32>,
    volume_type: Option<String>,
    iops: Option<i32>,
    throughput: Option<i32>,
}

impl VolumeChange {
    fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

impl AwsDriver {
    /// UpdateMachine: see the module documentation.
    pub(crate) async fn update(&self, ctx: &CallContext, req: UpdateMachine) -> Result<UpdatedMachine> {
        let (spec, markers) = crate::ownership::class(&req.class.provider_spec)?;
        crate::ownership::check_machine_name(&req.machine.name)?;
        let placement = crate::spec::placement_annotation(&req.machine)?;
        let previous = match &req.previous_class {
            Some(class) => Some(crate::spec_validation::parse_and_validate(&class.provider_spec).map_err(|e| {
                DriverError::invalid_argument(
                    format!("previous_machine_class.{}", e.field().unwrap_or("providerSpec")),
                    e.message().to_string(),
                )
            })?),
            None => None,
        };
        let desired = desired_tags(&spec, &req.machine.name, &req.machine.uid)?;
        let previous_tags = previous.as_ref().map(|p| desired_tags_unchecked(p, &req.machine.name, &req.machine.uid));
        let (region, instance_id) = Self::locate(&spec, &req.machine)?;
        let c = self.clients(ctx, &req.secret, &region).await?;
        let instance = match lookup::machine_instance(ctx, &c, &markers, &req.machine, instance_id.as_deref()).await? {
            Lookup::Live(i) => match spot::reclaimed_error(&i) {
                Some(reclaimed) => return Err(reclaimed),
                None => *i,
            },
            Lookup::Dead(i) => return Err(spot::dead_answer(&i, &markers, &req.machine)),
            Lookup::Missing => return Err(DriverError::not_found(format!("instance of machine {}", req.machine.name))),
        };
        let id = instance.instance_id().unwrap_or_default().to_string();
        let mut plan = UpdatePlan::for_request(provider_id::encode(&region, &id), &req);

        compare_replacements(&mut plan, &spec, placement.as_ref(), &region, &instance);

        let volume_ids = launch_volumes(&spec, &instance);
        let volumes = describe_volumes(ctx, &c, volume_ids.iter().map(|(_, v)| v.clone()).collect()).await?;
        let interfaces = describe_interfaces(ctx, &c, launch_interfaces(&spec, &instance)).await?;

        let mut resources =
            vec![Tagged { what: format!("instance {id}"), id: id.clone(), current: tag_map(instance.tags()) }];
        for (device, vid) in &volume_ids {
            if let Some(v) = volumes.iter().find(|v| v.volume_id() == Some(vid.as_str())) {
                resources.push(Tagged {
                    what: format!("volume {vid} ({device})"),
                    id: vid.clone(),
                    current: tag_map(v.tags()),
                });
            }
        }
        for eni in &interfaces {
            let eid = eni.network_interface_id().unwrap_or_default().to_string();
            resources.push(Tagged {
                what: format!("network interface {eid}"),
                id: eid,
                current: tag_map(eni.tag_set()),
            });
        }
        let plans: Vec<TagPlan> =
            resources.iter().map(|r| TagPlan::new(&r.current, &desired, previous_tags.as_ref())).collect();
        for (r, p) in resources.iter().zip(&plans) {
            let after = p.apply_to(&r.current).keys().filter(|k| !is_aws_key(k)).count();
            if after > MAX_TAGS {
                return Err(DriverError::invalid_argument(
                    TAGS_FIELD,
                    format!("{} would carry {after} tags; EC2 allows {MAX_TAGS} per resource", r.what),
                ));
            }
        }
        plan.tags(TAGS_FIELD, resources.iter().zip(&plans).map(|(r, p)| (r.what.as_str(), p)));

        let class_volumes = class_volumes(&spec, &instance, &volumes, &mut plan);
        let mut changes = Vec::new();
        for cv in &class_volumes {
            let change = volume_change(cv, &mut plan);
            if !change.is_empty() {
                changes.push((cv, change));
            }
        }
        let (changes, pending) = without_pending(ctx, &c, changes).await?;
        for (cv, change) in &pending {
            record_pending(&mut plan, cv, change);
        }
        let interface_changes = update_settings::interface_changes(&spec, previous.as_ref(), &instance, &mut plan);
        let metadata_change = update_settings::metadata_change(&spec, &instance, &mut plan);

        if !req.validate_only {
            apply_tags(ctx, &c, &resources, &plans).await?;
            for (cv, change) in &changes {
                modify_volume(ctx, &c, cv, change).await?;
            }
            update_settings::apply_interface_changes(ctx, &c, &interface_changes).await?;
            if let Some(m) = &metadata_change {
                update_settings::apply_metadata_change(ctx, &c, &id, m).await?;
            }
        }
        for (cv, change) in &changes {
            record_volume_change(&mut plan, cv, change);
        }
        if !req.validate_only {
            tracing::info!(machine = %req.machine.name, instance_id = %id, "machine updated in place");
        }
        plan.finish()
    }
}

/// The tags create gives the machine's resources, checked against EC2's
/// limits (INVALID_ARGUMENT `providerSpec.tags`). Without a machine uid the
/// uid tag is left as the instance has it.
fn desired_tags(spec: &AwsProviderSpec, name: &str, uid: &str) -> Result<BTreeMap<String, String>> {
    let desired = desired_tags_unchecked(spec, name, uid);
    let user = desired.len();
    if user > MAX_TAGS {
        return Err(DriverError::invalid_argument(
            TAGS_FIELD,
            format!(
                "the class gives {user} tags with Name and the machine uid tag; EC2 allows {MAX_TAGS} per resource"
            ),
        ));
    }
    if let Some((k, _)) = desired.iter().find(|(_, v)| v.chars().count() > MAX_TAG_VALUE) {
        return Err(DriverError::invalid_argument(
            format!("{TAGS_FIELD}[{k}]"),
            format!("tag values must be at most {MAX_TAG_VALUE} characters"),
        ));
    }
    Ok(desired)
}

fn desired_tags_unchecked(spec: &AwsProviderSpec, name: &str, uid: &str) -> BTreeMap<String, String> {
    let mut desired = tags::machine_tags(spec, name, uid);
    if uid.is_empty() {
        desired.remove(tags::MACHINE_UID_TAG);
    }
    desired
}

fn is_aws_key(key: &str) -> bool {
    key.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("aws:"))
}

fn tag_map(tags: &[Tag]) -> BTreeMap<String, String> {
    tags.iter().filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string()))).collect()
}

/// Instance type, AMI, region, zone and the primary interface's subnet:
/// only a new instance can have others (read from the DescribeInstances record).
fn compare_replacements(
    plan: &mut UpdatePlan,
    spec: &AwsProviderSpec,
    placement: Option<&crate::spec::Placement>,
    region: &str,
    i: &Instance,
) {
    let current_type = i.instance_type().map_or("", |t| t.as_str());
    plan.compare_replacement("providerSpec.machineType", current_type, &spec.machine_type);
    plan.compare_replacement("providerSpec.ami", i.image_id().unwrap_or_default(), &spec.ami);
    plan.compare_replacement("providerSpec.region", region, &spec.region);
    let zone = i.placement().and_then(|p| p.availability_zone()).unwrap_or_default();
    if let Some(want) = placement.or(spec.placement.as_ref()).and_then(|p| p.availability_zone.as_deref()) {
        plan.compare_replacement("providerSpec.placement.availabilityZone", zone, want);
    }
    if let Some(at) = (0..spec.network_interfaces.len()).find(|n| spec.device_index(*n) == 0) {
        let current = i
            .network_interfaces()
            .iter()
            .find(|e| e.attachment().and_then(|a| a.device_index()) == Some(0))
            .and_then(|e| e.subnet_id())
            .or(i.subnet_id())
            .unwrap_or_default();
        plan.compare_replacement(
            format!("providerSpec.networkInterfaces[{at}].subnetID"),
            current,
            &spec.network_interfaces[at].subnet_id,
        );
    }
}

/// The device name a class block device has on the instance (`/root` and
/// the single unnamed device are the AMI's root device).
fn device_on_instance<'a>(spec: &'a AwsProviderSpec, d: &'a BlockDevice, i: &'a Instance) -> &'a str {
    if d.device_name == ROOT_DEVICE_NAME || spec.block_devices.len() == 1 {
        i.root_device_name().unwrap_or_default()
    } else {
        &d.device_name
    }
}

/// The instance's volumes created at launch, as (device name, volume id):
/// the root device and the class's block devices.
fn launch_volumes(spec: &AwsProviderSpec, i: &Instance) -> Vec<(String, String)> {
    let mut devices: BTreeSet<&str> = spec.block_devices.iter().map(|d| device_on_instance(spec, d, i)).collect();
    devices.extend(i.root_device_name());
    i.block_device_mappings()
        .iter()
        .filter(|m| m.device_name().is_some_and(|d| devices.contains(d)))
        .filter_map(|m| Some((m.device_name()?.to_string(), m.ebs()?.volume_id()?.to_string())))
        .collect()
}

/// The ids of the instance's interfaces the class made (by device index).
fn launch_interfaces(spec: &AwsProviderSpec, i: &Instance) -> Vec<String> {
    let indexes: BTreeSet<i32> = (0..spec.network_interfaces.len()).map(|n| spec.device_index(n)).collect();
    i.network_interfaces()
        .iter()
        .filter(|e| e.attachment().and_then(|a| a.device_index()).is_some_and(|d| indexes.contains(&d)))
        .filter_map(|e| e.network_interface_id().map(str::to_string))
        .collect()
}

async fn describe_volumes(ctx: &CallContext, c: &AwsClients, ids: Vec<String>) -> Result<Vec<Volume>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = machine_driver_api::PageTokens::new("ec2.DescribeVolumes");
    loop {
        let req = c.ec2.describe_volumes().set_volume_ids(Some(ids.clone())).set_next_token(token.take());
        let page = aws_call::ec2(ctx, c, "DescribeVolumes", || req.clone().send()).await?;
        out.extend(page.volumes().iter().cloned());
        match pages.next(page.next_token())? {
            Some(t) => token = Some(t),
            None => return Ok(out),
        }
    }
}

async fn describe_interfaces(ctx: &CallContext, c: &AwsClients, ids: Vec<String>) -> Result<Vec<NetworkInterface>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = machine_driver_api::PageTokens::new("ec2.DescribeNetworkInterfaces");
    loop {
        let req = c
            .ec2
            .describe_network_interfaces()
            .set_network_interface_ids(Some(ids.clone()))
            .set_next_token(token.take());
        let page = aws_call::ec2(ctx, c, "DescribeNetworkInterfaces", || req.clone().send()).await?;
        out.extend(page.network_interfaces().iter().cloned());
        match pages.next(page.next_token())? {
            Some(t) => token = Some(t),
            None => return Ok(out),
        }
    }
}

/// The class's block devices with their volumes; a device the instance
/// lacks needs a replacement (`providerSpec.blockDevices[i]`).
fn class_volumes<'a>(
    spec: &'a AwsProviderSpec,
    i: &Instance,
    volumes: &[Volume],
    plan: &mut UpdatePlan,
) -> Vec<ClassVolume<'a>> {
    let mut out = Vec::new();
    for (index, d) in spec.block_devices.iter().enumerate() {
        let device = device_on_instance(spec, d, i);
        let volume = i
            .block_device_mappings()
            .iter()
            .find(|m| m.device_name() == Some(device))
            .and_then(|m| m.ebs()?.volume_id())
            .and_then(|id| volumes.iter().find(|v| v.volume_id() == Some(id)));
        match volume {
            Some(v) => out.push(ClassVolume { index, device: d, volume: v.clone() }),
            None => {
                plan.compare_replacement(format!("providerSpec.blockDevices[{index}]"), "", device);
            }
        }
    }
    out
}

fn ebs_field(index: usize, name: &str) -> String {
    format!("providerSpec.blockDevices[{index}].ebs.{name}")
}

/// What ModifyVolume must change on one volume; UNCHANGED recorded for what
/// already matches, NEEDS_REPLACEMENT for a smaller size (EBS volumes only grow).
fn volume_change(cv: &ClassVolume<'_>, plan: &mut UpdatePlan) -> VolumeChange {
    let (e, v, i) = (&cv.device.ebs, &cv.volume, cv.index);
    let mut change = VolumeChange::default();
    let size = v.size().unwrap_or_default();
    if e.volume_size > size {
        change.size = Some(e.volume_size);
    } else if e.volume_size < size {
        plan.compare_replacement(ebs_field(i, "volumeSize"), &size.to_string(), &e.volume_size.to_string());
    } else {
        plan.unchanged(ebs_field(i, "volumeSize"));
    }
    let current_type = v.volume_type().map_or("", |t| t.as_str());
    if current_type == e.volume_type {
        plan.unchanged(ebs_field(i, "volumeType"));
    } else {
        change.volume_type = Some(e.volume_type.clone());
    }
    if e.iops > 0 {
        if v.iops() == Some(e.iops) {
            plan.unchanged(ebs_field(i, "iops"));
        } else {
            change.iops = Some(e.iops);
        }
    }
    if let Some(t) = e.throughput {
        if v.throughput() == Some(t) {
            plan.unchanged(ebs_field(i, "throughput"));
        } else {
            change.throughput = Some(t);
        }
    }
    change
}

/// A volume and what ModifyVolume changes on it.
type Change<'a> = (&'a ClassVolume<'a>, VolumeChange);

/// `changes` split into those to make and those whose volume's last
/// modification, still under way, goes to exactly these values (an earlier
/// call's whose answer was lost: UNCHANGED). A volume being modified to
/// other values cannot be modified now: FAILED_PRECONDITION.
async fn without_pending<'a>(
    ctx: &CallContext,
    c: &AwsClients,
    changes: Vec<Change<'a>>,
) -> Result<(Vec<Change<'a>>, Vec<Change<'a>>)> {
    if changes.is_empty() {
        return Ok((changes, Vec::new()));
    }
    let ids: Vec<String> = changes.iter().filter_map(|(cv, _)| cv.volume.volume_id().map(str::to_string)).collect();
    let req = c.ec2.describe_volumes_modifications().set_volume_ids(Some(ids));
    let out = aws_call::ec2(ctx, c, "DescribeVolumesModifications", || req.clone().send()).await?;
    let mut kept = Vec::new();
    let mut pending_to_these = Vec::new();
    for (cv, change) in changes {
        let vid = cv.volume.volume_id().unwrap_or_default();
        let pending = out.volumes_modifications().iter().find(|m| {
            m.volume_id() == Some(vid)
                && matches!(
                    m.modification_state(),
                    Some(VolumeModificationState::Modifying | VolumeModificationState::Optimizing)
                )
        });
        let Some(m) = pending else {
            kept.push((cv, change));
            continue;
        };
        let reaches = change.size.is_none_or(|s| m.target_size() == Some(s))
            && change.volume_type.as_deref().is_none_or(|t| m.target_volume_type().map(|x| x.as_str()) == Some(t))
            && change.iops.is_none_or(|s| m.target_iops() == Some(s))
            && change.throughput.is_none_or(|s| m.target_throughput() == Some(s));
        if !reaches {
            return Err(DriverError::new(
                ErrorKind::FailedPrecondition,
                crate::errors::VOLUME_MODIFICATION_IN_PROGRESS,
                format!(
                    "volume {vid} (providerSpec.blockDevices[{}]) is being modified to other values; EC2 takes the \
                     next modification only once this one completed (and 6 hours after it started)",
                    cv.index
                ),
            ));
        }
        pending_to_these.push((cv, change));
    }
    Ok((kept, pending_to_these))
}

/// A volume already being modified to the class's values: UNCHANGED.
fn record_pending(plan: &mut UpdatePlan, cv: &ClassVolume<'_>, change: &VolumeChange) {
    let fields = [
        ("volumeSize", change.size.is_some()),
        ("volumeType", change.volume_type.is_some()),
        ("iops", change.iops.is_some()),
        ("throughput", change.throughput.is_some()),
    ];
    for (name, _) in fields.iter().filter(|(_, set)| *set) {
        plan.unchanged(ebs_field(cv.index, name));
    }
}

fn record_volume_change(plan: &mut UpdatePlan, cv: &ClassVolume<'_>, change: &VolumeChange) {
    let (v, i) = (&cv.volume, cv.index);
    let vid = v.volume_id().unwrap_or_default();
    if let Some(s) = change.size {
        plan.applied(ebs_field(i, "volumeSize"), format!("{} -> {s} GiB on volume {vid}", v.size().unwrap_or(0)));
    }
    if let Some(t) = &change.volume_type {
        plan.applied(
            ebs_field(i, "volumeType"),
            format!("{} -> {t} on volume {vid}", v.volume_type().map_or("", |t| t.as_str())),
        );
    }
    if let Some(n) = change.iops {
        plan.applied(ebs_field(i, "iops"), format!("{} -> {n} on volume {vid}", v.iops().unwrap_or(0)));
    }
    if let Some(n) = change.throughput {
        plan.applied(
            ebs_field(i, "throughput"),
            format!("{} -> {n} MiB/s on volume {vid}", v.throughput().unwrap_or(0)),
        );
    }
}

/// Removes, then sets, the planned tags: one DeleteTags per distinct set of
/// keys and one CreateTags per distinct set of tags, each over every resource
/// that needs it (removing first keeps a resource under EC2's 50 tags).
async fn apply_tags(ctx: &CallContext, c: &AwsClients, resources: &[Tagged], plans: &[TagPlan]) -> Result<()> {
    let mut removals: BTreeMap<&BTreeSet<String>, Vec<String>> = BTreeMap::new();
    let mut sets: BTreeMap<&BTreeMap<String, String>, Vec<String>> = BTreeMap::new();
    for (r, p) in resources.iter().zip(plans) {
        if !p.remove.is_empty() {
            removals.entry(&p.remove).or_default().push(r.id.clone());
        }
        if !p.set.is_empty() {
            sets.entry(&p.set).or_default().push(r.id.clone());
        }
    }
    for (keys, ids) in removals {
        let keys: Vec<Tag> = keys.iter().map(|k| Tag::builder().key(k).build()).collect();
        let req = c.ec2.delete_tags().set_resources(Some(ids)).set_tags(Some(keys));
        aws_call::ec2(ctx, c, "DeleteTags", || req.clone().send()).await?;
    }
    for (set, ids) in sets {
        let req = c.ec2.create_tags().set_resources(Some(ids)).set_tags(Some(tags::as_ec2_tags(set)));
        aws_call::ec2(ctx, c, "CreateTags", || req.clone().send()).await?;
    }
    Ok(())
}

async fn modify_volume(ctx: &CallContext, c: &AwsClients, cv: &ClassVolume<'_>, change: &VolumeChange) -> Result<()> {
    let vid = cv.volume.volume_id().unwrap_or_default();
    let req = c
        .ec2
        .modify_volume()
        .volume_id(vid)
        .set_size(change.size)
        .set_volume_type(change.volume_type.as_deref().map(VolumeType::from))
        .set_iops(change.iops)
        .set_throughput(change.throughput);
    match aws_call::ec2(ctx, c, "ModifyVolume", || req.clone().send()).await {
        Ok(_) => Ok(()),
        Err(f)
            if f.cloud().and_then(|a| a.code()).is_some_and(|code| {
                matches!(code, "IncorrectModificationState" | "VolumeModificationRateExceeded")
            }) =>
        {
            Err(DriverError::new(
                ErrorKind::FailedPrecondition,
                crate::errors::VOLUME_MODIFICATION_COOLDOWN,
                format!(
                    "volume {vid} (providerSpec.blockDevices[{}]): EC2 takes one modification per volume at a time \
                     and at most one every 6 hours",
                    cv.index
                ),
            ))
        }
        Err(f) => {
            let e: DriverError = f.into();
            if e.kind() == ErrorKind::InvalidArgument {
                return Err(DriverError::invalid_argument(
                    format!("providerSpec.blockDevices[{}].ebs", cv.index),
                    e.message().to_string(),
                ));
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn desired_tags_are_create_s_and_respect_ec2_limits() {
        let mut spec = AwsProviderSpec::default();
        spec.tags.insert("team".into(), "a".into());
        let d = desired_tags(&spec, "m-1", "u-1").unwrap();
        assert_eq!(d, tags::machine_tags(&spec, "m-1", "u-1"));
        assert!(!desired_tags(&spec, "m-1", "").unwrap().contains_key(tags::MACHINE_UID_TAG), "no uid: left alone");
        for n in 0..49 {
            spec.tags.insert(format!("k{n}"), "v".into());
        }
        assert_eq!(desired_tags(&spec, "m-1", "u-1").unwrap_err().field(), Some(TAGS_FIELD));
        let mut long = AwsProviderSpec::default();
        long.tags.insert("team".into(), "x".repeat(257));
        assert_eq!(desired_tags(&long, "m-1", "u-1").unwrap_err().field(), Some("providerSpec.tags[team]"));
        assert!(is_aws_key("AWS:cloudformation:stack") && !is_aws_key("team"));
    }
}
