//! UpdateMachine on Compute Engine (hot update, issue 32): the instance's
//! labels and network tags, and the labels, size and Hyperdisk performance of
//! the disks made with it, changed in place; machine type, zone, IP
//! forwarding, network, subnetwork, disk type and image reported as needing a
//! replacement.
//!
//! Compute Engine REST reference v1
//! (<https://cloud.google.com/compute/docs/reference/rest/v1/instances>,
//! <https://cloud.google.com/compute/docs/reference/rest/v1/disks>):
//!
//! 1. The class (and the previous class, when given) is parsed and validated
//!    as CreateMachine does (INVALID_ARGUMENT naming the field).
//! 2. One `instances.get` (never the coalesced status read: the write needs the
//!    fingerprints of now), judged as every path that acts on an instance
//!    judges it ([`crate::ownership`]): another cluster's, a hand-made or an
//!    earlier machine's instance is NOT_FOUND and nothing is written; absent
//!    is NOT_FOUND; this machine's Spot VM that Compute stopped is
//!    SPOT_RECLAIMED, as GetMachineStatus answers.
//! 3. The disks the instance owns: those the insert made from the class
//!    (`initializeParams`, the driver names no device): the class's disk `i`
//!    is the attached disk of `index` `i`, PERSISTENT, the boot disk or one
//!    whose `deviceName` is GCE's default `persistent-disk-x` (a disk
//!    attached later, a PersistentVolume's, has the CSI driver's device name
//!    and is never touched). Each is read with one `disks.get` (labels,
//!    `labelFingerprint`, `sizeGb`, `type`, `sourceImage`, provisioned
//!    performance).
//! 4. One [`TagPlan`] per label set: the instance's (desired = what create
//!    sets: the class's labels, the cluster and role labels, the machine uid
//!    label), the network tags (desired = the class's `tags`), each disk's
//!    (desired = the class disk's `labels`). Only what the previous class set
//!    and the new one lacks is removed; a label or tag of someone else stays.
//! 5. Unless `validate_only`, what differs is written: `instances.setLabels`
//!    and `instances.setTags` with the fingerprints read (the whole set:
//!    GCE replaces it), `disks.setLabels` with the disk's `labelFingerprint`,
//!    `disks.resize` to grow a disk (a smaller `sizeGb` only a new VM can
//!    have: NEEDS_REPLACEMENT), `disks.update` (`paths=provisionedIops` /
//!    `provisionedThroughput`, one call each) on a Hyperdisk. Then each
//!    write's zone operation is waited for as CreateMachine waits for an
//!    insert (`zoneOperations.wait`, or the zone's shared `zoneOperations.list`
//!    polls: [`crate::operations`]); a failed operation answers its classified
//!    error, one still running at the deadline UNAVAILABLE `UPDATE_IN_PROGRESS`.
//!
//! A fingerprint that changed between the read and the write (someone else
//! wrote; GCE answers 412, or 400, `conditionNotMet`) is UNAVAILABLE
//! `FINGERPRINT_CHANGED`, retryable: the retry reads the fingerprints anew.
//! A repeat after success, and a retry after a lost answer, read what is and
//! write nothing more than what still differs.
//!
//! Cost: 1 `instances.get` + 1 `disks.get` per owned disk (1 for the example
//! class), then per differing field one write and its operation wait (usually
//! one `zoneOperations.wait`): a label change on the VM and its boot disk is
//! 2 reads + 2 writes + 2 waits = 6; a repeat is 2 reads.

use std::collections::{BTreeMap, HashMap};

use google_cloud_compute_v1::model::{
    Disk, DisksResizeRequest, Instance, InstancesSetLabelsRequest, Operation, Tags, ZoneSetLabelsRequest,
};
use machine_driver_api::{
    CallContext, CallFailure, DriverError, MachineRef, Ownership, TagPlan, UpdateMachine, UpdatePlan, UpdatedMachine,
    foreign_not_found,
};

use crate::clients::Api;
use crate::credentials::GcpCredentials;
use crate::driver::GcpDriver;
use crate::errors::{GceFailure, RETRY_SOON};
use crate::instance::spot_reclaim;
use crate::naming::{InstanceRef, MACHINE_UID_LABEL, MEMBERSHIP_LABEL_VALUE, is_gce_name, uid_label_value};
use crate::operations::is_done;
use crate::ownership;
use crate::spec::{DISK_TYPE_SCRATCH, GcpProviderSpec};

/// The class's instance label field.
const LABELS_FIELD: &str = "providerSpec.labels";
/// The class's network tag field.
const TAGS_FIELD: &str = "providerSpec.tags";
/// Most labels GCE keeps on one resource.
const MAX_LABELS: usize = 64;
/// Most network tags GCE keeps on one instance.
const MAX_TAGS: usize = 64;
/// GCE's name for a disk attached without a device name: `persistent-disk-x`,
/// "where x is a number assigned by Google Compute Engine" (AttachedDisk.deviceName).
const DEFAULT_DEVICE_PREFIX: &str = "persistent-disk-";
/// Disk types whose provisioned IOPS and throughput `disks.update` changes.
const HYPERDISK_PREFIX: &str = "hyperdisk-";

/// One disk the instance owns: the class's disk `index` and what `disks.get` shows of it.
#[derive(Debug)]
struct OwnedDisk {
    index: usize,
    name: String,
    disk: Disk,
}

/// A write made, whose zone operation is still to be waited for.
#[derive(Debug)]
struct Written {
    call: &'static str,
    op: Operation,
}

impl GcpDriver {
    /// UpdateMachine: see the module documentation.
    pub(crate) async fn update(&self, ctx: &CallContext, req: UpdateMachine) -> Result<UpdatedMachine, DriverError> {
        let spec = GcpProviderSpec::parse(&req.class.provider_spec)?;
        let markers = spec.markers()?;
        let previous = match &req.previous_class {
            Some(class) => Some(GcpProviderSpec::parse(&class.provider_spec).map_err(of_previous)?),
            None => None,
        };
        let key = GcpCredentials::from_secret(&req.secret, "secret")?;
        let addressed =
            MachineRef { machine: req.machine.clone(), class: req.class.clone(), secret: req.secret.clone() };
        let Some(target) = Self::locate(&addressed, &key, &spec)? else {
            return Err(DriverError::not_found(format!(
                "machine {:?}: no GCE instance can have this name",
                req.machine.name
            )));
        };
        let api = self.pool.api(&key, ctx).await?;
        let Some(instance) = crate::create::get_instance(&api, &target).await? else {
            return Err(DriverError::not_found(format!("instance {}", target.provider_id())));
        };
        if let Ownership::Foreign(why) = ownership::judge(&markers, &instance, &req.machine) {
            tracing::info!(provider_id = %target.provider_id(), %why, "update: the instance is not this machine's; untouched");
            return Err(foreign_not_found(format!("instance {}", target.provider_id()), why));
        }
        if let Some(shown) = spot_reclaim(&instance) {
            return Err(DriverError::spot_reclaimed(target.provider_id(), shown));
        }

        let mut plan = UpdatePlan::for_request(target.provider_id(), &req);
        compare_replacements(&mut plan, &spec, &instance);
        let owned = self.owned_disks(&api, &target, &spec, &instance, &mut plan).await?;

        let desired_labels = instance_labels(&spec, &markers, &req.machine.uid);
        let previous_labels = previous.as_ref().map(|p| instance_labels(p, &markers, &req.machine.uid));
        let current_labels = sorted(&instance.labels);
        let label_plan = TagPlan::new(&current_labels, &desired_labels, previous_labels.as_ref());
        check_count(LABELS_FIELD, "the instance", label_plan.apply_to(&current_labels).len(), MAX_LABELS)?;
        plan.tags(LABELS_FIELD, [("the instance", &label_plan)]);

        let current_items: &[String] = instance.tags.as_ref().map_or(&[], |t| t.items.as_slice());
        let current_tags = tag_set(current_items);
        let tag_plan =
            TagPlan::new(&current_tags, &tag_set(&spec.tags), previous.as_ref().map(|p| tag_set(&p.tags)).as_ref());
        check_count(TAGS_FIELD, "the instance", tag_plan.apply_to(&current_tags).len(), MAX_TAGS)?;
        plan.tags(TAGS_FIELD, [("the instance", &tag_plan)]);

        let mut disk_plans = Vec::new();
        for d in &owned {
            let field = format!("providerSpec.disks[{}].labels", d.index);
            let current = sorted(&d.disk.labels);
            let previous_labels = previous.as_ref().and_then(|p| p.disks.get(d.index)).map(|pd| pd.labels.clone());
            let p = TagPlan::new(&current, &spec.disks[d.index].labels, previous_labels.as_ref());
            check_count(&field, &format!("disk {}", d.name), p.apply_to(&current).len(), MAX_LABELS)?;
            plan.tags(field, [(format!("disk {}", d.name).as_str(), &p)]);
            disk_plans.push(p);
        }
        let disk_changes: Vec<DiskChange> = owned.iter().map(|d| disk_change(&spec, d, &mut plan)).collect();

        if !req.validate_only {
            let mut written = Vec::new();
            if !label_plan.is_empty() {
                let labels = label_plan.apply_to(&current_labels);
                written.push(set_instance_labels(&api, &target, &instance, labels).await?);
            }
            if !tag_plan.is_empty() {
                // The instance's order kept, the new ones after it in the class's order.
                let mut items: Vec<String> =
                    current_items.iter().filter(|t| !tag_plan.remove.contains(*t)).cloned().collect();
                for t in &spec.tags {
                    if !items.contains(t) {
                        items.push(t.clone());
                    }
                }
                written.push(set_instance_tags(&api, &target, &instance, items).await?);
            }
            for ((d, p), change) in owned.iter().zip(&disk_plans).zip(&disk_changes) {
                if !p.is_empty() {
                    let labels = p.apply_to(&sorted(&d.disk.labels));
                    written.push(set_disk_labels(&api, &target, d, labels).await?);
                }
                if let Some(size) = change.size {
                    written.push(resize_disk(&api, &target, d, size).await?);
                }
                for (path, value) in &change.performance {
                    written.push(update_disk(&api, &target, d, path, *value).await?);
                }
            }
            for w in written {
                self.wait_written(&api, &key, &target, w).await?;
            }
            tracing::info!(machine = %req.machine.name, provider_id = %target.provider_id(), "machine updated in place");
        }
        plan.finish()
    }

    /// The disks the insert made from the class, each read with one
    /// `disks.get` (see the module documentation); a class disk the instance
    /// lacks needs a replacement (`providerSpec.disks[i]`).
    async fn owned_disks(
        &self,
        api: &Api<'_>,
        target: &InstanceRef,
        spec: &GcpProviderSpec,
        instance: &Instance,
        plan: &mut UpdatePlan,
    ) -> Result<Vec<OwnedDisk>, DriverError> {
        let mut out = Vec::new();
        for (index, class_disk) in spec.disks.iter().enumerate() {
            if class_disk.disk_type == DISK_TYPE_SCRATCH {
                continue;
            }
            let attached = instance.disks.iter().find(|a| {
                a.index.and_then(|i| usize::try_from(i).ok()) == Some(index)
                    && a.r#type.as_ref().and_then(|t| t.name()) != Some("SCRATCH")
                    && (a.boot == Some(true)
                        || a.device_name.as_deref().is_some_and(|n| n.starts_with(DEFAULT_DEVICE_PREFIX)))
            });
            let name = attached.and_then(|a| own_disk_name(a.source.as_deref()?, target));
            let Some(name) = name else {
                plan.compare_replacement(format!("providerSpec.disks[{index}]"), "", "a disk made with the instance");
                continue;
            };
            match get_disk(api, target, &name).await? {
                Some(disk) => out.push(OwnedDisk { index, name, disk }),
                None => {
                    plan.compare_replacement(
                        format!("providerSpec.disks[{index}]"),
                        "",
                        "a disk made with the instance",
                    );
                }
            }
        }
        Ok(out)
    }

    /// Waits for a write's zone operation within the deadline (as create
    /// waits for an insert): its failure classified, UNAVAILABLE
    /// `UPDATE_IN_PROGRESS` when it is not done by then.
    async fn wait_written(
        &self,
        api: &Api<'_>,
        key: &GcpCredentials,
        target: &InstanceRef,
        w: Written,
    ) -> Result<(), DriverError> {
        let done = if is_done(&w.op) {
            Some(w.op)
        } else {
            match w.op.name.as_deref() {
                Some(name) => self.wait_for(api, key, target, name).await?,
                None => None,
            }
        };
        let Some(done) = done else {
            return Err(DriverError::unavailable(
                crate::errors::UPDATE_IN_PROGRESS,
                format!("compute {} of instance {} is still running; retry", w.call, target.provider_id()),
                RETRY_SOON,
            ));
        };
        match GceFailure::from_operation(&done) {
            None => Ok(()),
            Some(f) => Err(f.driver_error(w.call)),
        }
    }
}

/// An error of the previous class, named as the request names it.
fn of_previous(e: DriverError) -> DriverError {
    match e.field().map(str::to_string) {
        Some(field) => {
            let problem = e.message().strip_prefix(&format!("{field}: ")).unwrap_or(e.message()).to_string();
            DriverError::invalid_argument(format!("previous_machine_class.{field}"), problem)
        }
        None => e,
    }
}

/// The labels create gives the instance ([`crate::instance::build_instance`]):
/// the class's, the cluster and role labels and, with a uid, the machine uid label.
fn instance_labels(
    spec: &GcpProviderSpec,
    markers: &machine_driver_api::ClusterMarkers,
    uid: &str,
) -> BTreeMap<String, String> {
    let mut labels = spec.labels.clone();
    labels.insert(markers.cluster().to_string(), MEMBERSHIP_LABEL_VALUE.to_string());
    labels.insert(markers.role().to_string(), MEMBERSHIP_LABEL_VALUE.to_string());
    if !uid.is_empty() {
        labels.insert(MACHINE_UID_LABEL.to_string(), uid_label_value(uid));
    }
    labels
}

fn sorted(labels: &HashMap<String, String>) -> BTreeMap<String, String> {
    labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Network tags as a [`TagPlan`] input: each tag a key with an empty value.
fn tag_set(tags: &[String]) -> BTreeMap<String, String> {
    tags.iter().map(|t| (t.clone(), String::new())).collect()
}

fn check_count(field: &str, what: &str, after: usize, max: usize) -> Result<(), DriverError> {
    if after > max {
        return Err(DriverError::invalid_argument(
            field,
            format!("{what} would carry {after} with the ones others put there; GCE keeps at most {max}"),
        ));
    }
    Ok(())
}

/// The last segment of a (partial) URL: `n1-standard-2` of `.../machineTypes/n1-standard-2`.
fn last(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or_default()
}

/// Machine type, zone, IP forwarding and each interface's network and
/// subnetwork: only a new instance can have others.
fn compare_replacements(plan: &mut UpdatePlan, spec: &GcpProviderSpec, i: &Instance) {
    plan.compare_replacement(
        "providerSpec.machineType",
        last(i.machine_type.as_deref().unwrap_or_default()),
        last(&spec.machine_type),
    );
    plan.compare_replacement("providerSpec.zone", last(i.zone.as_deref().unwrap_or_default()), &spec.zone);
    plan.compare_replacement(
        "providerSpec.canIpForward",
        &i.can_ip_forward.unwrap_or(false).to_string(),
        &spec.can_ip_forward.to_string(),
    );
    for (n, nic) in spec.network_interfaces.iter().enumerate() {
        let have = i.network_interfaces.get(n);
        if !nic.network.is_empty() {
            let current = have.and_then(|h| h.network.as_deref()).map(last).unwrap_or_default();
            plan.compare_replacement(
                format!("providerSpec.networkInterfaces[{n}].network"),
                current,
                last(&nic.network),
            );
        }
        if !nic.subnetwork.is_empty() {
            let current = have.and_then(|h| h.subnetwork.as_deref()).map(last).unwrap_or_default();
            plan.compare_replacement(
                format!("providerSpec.networkInterfaces[{n}].subnetwork"),
                current,
                last(&nic.subnetwork),
            );
        }
    }
}

/// The name of the disk `source` names when it is in the instance's project
/// and zone and a GCE name (it goes into a URL path), else `None`.
fn own_disk_name(source: &str, target: &InstanceRef) -> Option<String> {
    let path = source.split_once("/compute/v1/").map_or(source, |(_, p)| p);
    match path.split('/').collect::<Vec<_>>().as_slice() {
        ["projects", p, "zones", z, "disks", d] if *p == target.project && *z == target.zone && is_gce_name(d) => {
            Some((*d).to_string())
        }
        _ => None,
    }
}

/// The image a class disk names, as `project/name`, when it names one
/// image (not a family): what the disk's `sourceImage` is compared with.
fn image_key(image: &str) -> Option<String> {
    let path = image.split_once("/compute/v1/").map_or(image, |(_, p)| p);
    match path.trim_start_matches('/').split('/').collect::<Vec<_>>().as_slice() {
        ["projects", p, "global", "images", n] => Some(format!("{p}/{n}")),
        _ => None,
    }
}

/// What one disk's writes change beside its labels.
#[derive(Debug, Default)]
struct DiskChange {
    /// `disks.resize` to this size (GB).
    size: Option<i64>,
    /// `disks.update` paths with their new values.
    performance: Vec<(&'static str, i64)>,
}

/// The size and performance changes of one owned disk; the type and image
/// compared (a replacement when they differ), UNCHANGED recorded for what matches.
fn disk_change(spec: &GcpProviderSpec, d: &OwnedDisk, plan: &mut UpdatePlan) -> DiskChange {
    let want = &spec.disks[d.index];
    let field = |name: &str| format!("providerSpec.disks[{}].{name}", d.index);
    let mut change = DiskChange::default();
    let current_type = last(d.disk.r#type.as_deref().unwrap_or_default());
    plan.compare_replacement(field("type"), current_type, last(&want.disk_type));
    if let (Some(want_image), Some(have)) = (image_key(&want.image), d.disk.source_image.as_deref().and_then(image_key))
    {
        plan.compare_replacement(field("image"), &have, &want_image);
    }
    let size = d.disk.size_gb.unwrap_or_default();
    if want.size_gb > size {
        change.size = Some(want.size_gb);
        plan.applied(field("sizeGb"), format!("{size} -> {} GB on disk {}", want.size_gb, d.name));
    } else if want.size_gb < size {
        // A disk only grows (disks.resize).
        plan.compare_replacement(field("sizeGb"), &size.to_string(), &want.size_gb.to_string());
    } else {
        plan.unchanged(field("sizeGb"));
    }
    let hyperdisk = current_type.starts_with(HYPERDISK_PREFIX);
    for (path, wanted, have) in [
        ("provisionedIops", want.provisioned_iops, d.disk.provisioned_iops),
        ("provisionedThroughput", want.provisioned_throughput, d.disk.provisioned_throughput),
    ] {
        let Some(want) = wanted.filter(|v| *v > 0) else { continue };
        if have == Some(want) {
            plan.unchanged(field(path));
        } else if hyperdisk {
            change.performance.push((path, want));
            plan.applied(field(path), format!("{} -> {want} on disk {}", have.unwrap_or(0), d.name));
        } else {
            // Only a Hyperdisk's provisioned performance changes in place.
            plan.compare_replacement(field(path), &have.unwrap_or(0).to_string(), &want.to_string());
        }
    }
    change
}

/// The disk, `None` when Compute does not show it (1 `disks.get`).
async fn get_disk(api: &Api<'_>, target: &InstanceRef, name: &str) -> Result<Option<Disk>, DriverError> {
    let got = api
        .call("disks.get", || {
            api.clients.disks.get().set_project(&target.project).set_zone(&target.zone).set_disk(name).send()
        })
        .await;
    match got {
        Ok(disk) => Ok(Some(disk)),
        Err(f) if f.cloud().is_some_and(GceFailure::is_not_found) => Ok(None),
        Err(f) => Err(f.into_driver_error()),
    }
}

/// A write's failure: a stale fingerprint (412, or 400, `conditionNotMet`)
/// UNAVAILABLE `FINGERPRINT_CHANGED` (the retry reads it anew), anything else classified.
fn write_failure(call: &str, target: &InstanceRef, f: CallFailure<GceFailure>) -> DriverError {
    let stale = f.cloud().is_some_and(GceFailure::is_stale_fingerprint);
    if stale {
        return DriverError::unavailable(
            crate::errors::FINGERPRINT_CHANGED,
            format!(
                "compute {call} of {}: the resource changed since it was read (fingerprint); retry",
                target.provider_id()
            ),
            RETRY_SOON,
        );
    }
    f.into_driver_error()
}

async fn set_instance_labels(
    api: &Api<'_>,
    target: &InstanceRef,
    instance: &Instance,
    labels: BTreeMap<String, String>,
) -> Result<Written, DriverError> {
    let mut body = InstancesSetLabelsRequest::new();
    body.labels = labels.into_iter().collect();
    body.label_fingerprint = instance.label_fingerprint.clone();
    let op = api
        .call("instances.setLabels", || {
            api.clients
                .instances
                .set_labels()
                .set_project(&target.project)
                .set_zone(&target.zone)
                .set_instance(&target.name)
                .set_body(body.clone())
                .send()
        })
        .await
        .map_err(|f| write_failure("instances.setLabels", target, f))?;
    Ok(Written { call: "instances.setLabels", op })
}

async fn set_instance_tags(
    api: &Api<'_>,
    target: &InstanceRef,
    instance: &Instance,
    items: Vec<String>,
) -> Result<Written, DriverError> {
    let mut body = Tags::new();
    body.items = items;
    body.fingerprint = instance.tags.as_ref().and_then(|t| t.fingerprint.clone());
    let op = api
        .call("instances.setTags", || {
            api.clients
                .instances
                .set_tags()
                .set_project(&target.project)
                .set_zone(&target.zone)
                .set_instance(&target.name)
                .set_body(body.clone())
                .send()
        })
        .await
        .map_err(|f| write_failure("instances.setTags", target, f))?;
    Ok(Written { call: "instances.setTags", op })
}

async fn set_disk_labels(
    api: &Api<'_>,
    target: &InstanceRef,
    d: &OwnedDisk,
    labels: BTreeMap<String, String>,
) -> Result<Written, DriverError> {
    let mut body = ZoneSetLabelsRequest::new();
    body.labels = labels.into_iter().collect();
    body.label_fingerprint = d.disk.label_fingerprint.clone();
    let op = api
        .call("disks.setLabels", || {
            api.clients
                .disks
                .set_labels()
                .set_project(&target.project)
                .set_zone(&target.zone)
                .set_resource(&d.name)
                .set_body(body.clone())
                .send()
        })
        .await
        .map_err(|f| write_failure("disks.setLabels", target, f))?;
    Ok(Written { call: "disks.setLabels", op })
}

async fn resize_disk(api: &Api<'_>, target: &InstanceRef, d: &OwnedDisk, size: i64) -> Result<Written, DriverError> {
    let mut body = DisksResizeRequest::new();
    body.size_gb = Some(size);
    let op = api
        .call("disks.resize", || {
            api.clients
                .disks
                .resize()
                .set_project(&target.project)
                .set_zone(&target.zone)
                .set_disk(&d.name)
                .set_body(body.clone())
                .send()
        })
        .await
        .map_err(|f| field_failure("disks.resize", target, f, format!("providerSpec.disks[{}].sizeGb", d.index)))?;
    Ok(Written { call: "disks.resize", op })
}

async fn update_disk(
    api: &Api<'_>,
    target: &InstanceRef,
    d: &OwnedDisk,
    path: &'static str,
    value: i64,
) -> Result<Written, DriverError> {
    let mut body = Disk::new();
    match path {
        "provisionedIops" => body.provisioned_iops = Some(value),
        _ => body.provisioned_throughput = Some(value),
    }
    let op = api
        .call("disks.update", || {
            api.clients
                .disks
                .update()
                .set_project(&target.project)
                .set_zone(&target.zone)
                .set_disk(&d.name)
                .set_paths(path)
                .set_body(body.clone())
                .send()
        })
        .await
        .map_err(|f| field_failure("disks.update", target, f, format!("providerSpec.disks[{}].{path}", d.index)))?;
    Ok(Written { call: "disks.update", op })
}

/// A disk write's failure: Compute refusing the value (400) INVALID_ARGUMENT
/// naming the class field, anything else as [`write_failure`].
fn field_failure(call: &str, target: &InstanceRef, f: CallFailure<GceFailure>, field: String) -> DriverError {
    let refused = f.cloud().filter(|c| c.is_value_refused());
    if let Some(c) = refused {
        return DriverError::invalid_argument(field, format!("compute {call} refused it: {}", c.message));
    }
    write_failure(call, target, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> InstanceRef {
        InstanceRef { project: "p".into(), zone: "europe-west1-b".into(), name: "m-1".into() }
    }

    #[test]
    fn only_disks_of_the_instance_s_project_and_zone_are_owned() {
        let t = target();
        let own = "https://www.googleapis.com/compute/v1/projects/p/zones/europe-west1-b/disks/m-1";
        assert_eq!(own_disk_name(own, &t).as_deref(), Some("m-1"));
        assert_eq!(own_disk_name("projects/p/zones/europe-west1-b/disks/m-1", &t).as_deref(), Some("m-1"));
        assert_eq!(own_disk_name("projects/q/zones/europe-west1-b/disks/m-1", &t), None);
        assert_eq!(own_disk_name("projects/p/zones/europe-west1-c/disks/m-1", &t), None);
        assert_eq!(own_disk_name("projects/p/zones/europe-west1-b/disks/M_1", &t), None);
    }

    #[test]
    fn images_compare_by_project_and_name_and_families_are_not_compared() {
        assert_eq!(
            image_key("projects/debian-cloud/global/images/debian-12").as_deref(),
            Some("debian-cloud/debian-12")
        );
        assert_eq!(
            image_key("https://www.googleapis.com/compute/v1/projects/debian-cloud/global/images/debian-12").as_deref(),
            Some("debian-cloud/debian-12")
        );
        assert_eq!(image_key("projects/debian-cloud/global/images/family/debian-12"), None);
    }
}
