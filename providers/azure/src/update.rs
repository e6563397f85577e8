//! UpdateMachine on Azure (hot update): the machine's tags changed in place
//! on the VM, its NIC and its disks, a data disk grown and an Ultra Disk's or
//! Premium SSD v2's IOPS and throughput changed; the VM size, image and zone,
//! and what Azure changes on a disk only with the VM deallocated, compared and
//! reported when only a new VM can have them.
//!
//! 1. The class (and the previous class, when given) is parsed and validated
//!    as CreateMachine does, with ARM's tag limits (50 a resource, one of them
//!    the driver's machine-uid tag; names 1–512 characters without
//!    `<>%&\?/` or control characters; values up to 256).
//! 2. One `virtualMachines.get` (no instance view), judged as every path that
//!    acts on a VM judges it ([`crate::ownership`]): another cluster's VM, one
//!    made by hand or another machine's is NOT_FOUND and untouched; absent is
//!    NOT_FOUND; one being deleted is UNAVAILABLE.
//! 3. From that record: `hardwareProfile.vmSize`, `storageProfile.imageReference`
//!    and `zones` are compared with the class (names case-insensitively, as ARM
//!    compares them): a difference is NEEDS_REPLACEMENT, never applied.
//! 4. The NIC and the disks the driver tags ([`crate::tagging`]: the NIC
//!    `<vm>-nic[-1|-2]`, the OS disk, the data disks of the class or of the
//!    previous class) as the VM record lists them attached, all at once: the
//!    NIC with one `tags.getAtScope`, each disk with one `disks.get` (its tags,
//!    type, size, `maxShares` and performance: the one read its tags and its
//!    other fields need).
//! 5. One [`TagPlan`] per resource: desired = exactly what CreateMachine puts
//!    on each ([`vm::machine_tags`]: the class's tags, its markers and the
//!    machine's uid; the Go provider tags its VM and NIC with the class's tags,
//!    pkg/azure/provider/helpers/driver.go `createVMCreationParams` and
//!    `createNICTags`; it has no update), removed = what the previous class's set had and the new
//!    one lacks. Tag names are case-insensitive in ARM: a resource's tag
//!    named as a class tag in another casing is that tag.
//! 6. Unless `validate_only`, each non-empty plan is one synchronous
//!    `tags.updateAtScope` (`PATCH {resource}/providers/Microsoft.Resources/tags/default`,
//!    learn.microsoft.com/rest/api/resources/tags/update-at-scope, api-version
//!    2021-04-01; the path the driver already tags NICs and disks with, RBAC
//!    `Microsoft.Resources/tags/write`), all at once: `Merge` when tags are
//!    only set (nobody else's tag is touched), `Delete` with the values read
//!    when they are only removed (a tag changed by someone since stays), and
//!    `Replace` with the resource's tags as read plus the plan when both (one
//!    call; a tag someone else adds to that resource between the read and the
//!    write is lost). The Tags API rather than the VM's `PATCH` (UpdateTags):
//!    it is the same call for VM, NIC and disk, synchronous (a VM PATCH is a
//!    long-running Compute operation that re-provisions nothing but answers
//!    202 + `Azure-AsyncOperation`), and it can merge instead of replacing the
//!    whole map.
//!
//! 7. Each disk of the class compared with the disk read ([`compare_disks`]):
//!    a data disk's growth where Azure grows it attached, and an Ultra Disk's
//!    or Premium SSD v2's `diskIOPSReadWrite`/`diskMBpsReadWrite`, are one
//!    `disks.update` per disk (a long-running operation, waited for); an OS
//!    disk's growth, one past 4 TiB, a shared disk's, a shrink, a type change
//!    and performance on another type are NEEDS_REPLACEMENT with the reason
//!    (the VM is never stopped); a class data disk the VM lacks too.
//!
//! A plan that would leave a resource with more than 50 tags (others' tags
//! counted) is FAILED_PRECONDITION `TOO_MANY_TAGS` before anything is
//! written. A repeat after success reads the same and writes nothing. A lost
//! answer (the write done, its answer dropped) is converged by the retry,
//! which reads the tags as they are now.
//!
//! Cost: 1 + (NIC and disks, 3 for a class with one data disk) reads, plus one
//! write per resource whose tags differ and one `disks.update` (+ its
//! operation's polls) per disk whose size or performance changes (0 on a repeat).

use std::collections::BTreeMap;
use std::time::Duration;

use azure_mgmt_compute::package_2024_07_01::models::{DiskUpdate, DiskUpdateProperties};
use futures::future::join_all;
use machine_driver_api::{
    CallContext, CallFailure, ChangeOutcome, DriverError, ErrorKind, MachineRef, NEEDS_REPLACEMENT, Ownership, TagPlan,
    UpdateMachine, UpdatePlan, UpdatedMachine, foreign_not_found,
};
use serde_json::Value;

use crate::clients::Api;
use crate::credentials::AzureCredentials;
use crate::driver::AzureDriver;
use crate::errors::ArmFailure;
use crate::lro::{self, Outcome, Tracker};
use crate::naming::{NIC_GENERATIONS, VmRef, data_disk_name};
use crate::ownership::Marks;
use crate::spec::{AzureProviderSpec, MAX_TAGS, Placement, has_provisioned_performance};
use crate::tagging::{patch_tags, read_tags_at_scope, string_tags};
use crate::vm::{self, Provisioning};

/// The class's tag field.
const TAGS_FIELD: &str = "providerSpec.tags";
/// The replacement-only fields compared.
const VM_SIZE_FIELD: &str = "providerSpec.properties.hardwareProfile.vmSize";
const IMAGE_FIELD: &str = "providerSpec.properties.storageProfile.imageReference";
const ZONE_FIELD: &str = "providerSpec.properties.zone";
/// Retry delay for a VM being deleted.
const RETRY_WHILE_DELETING: Duration = Duration::from_secs(10);

/// One resource whose tags the update compares.
#[derive(Debug)]
struct Tagged {
    /// How the answer names it ("the VM", "NIC m-nic", "disk m-os-disk").
    what: String,
    /// Its ARM id, built from checked names.
    id: String,
    /// Its tags as read, names in the class's casing where they match a class tag.
    current: BTreeMap<String, String>,
}

impl AzureDriver {
    /// UpdateMachine (see the module docs).
    pub(crate) async fn update(&self, ctx: &CallContext, req: UpdateMachine) -> Result<UpdatedMachine, DriverError> {
        let creds = AzureCredentials::from_secret(&req.secret, "secret")?;
        let addressed =
            MachineRef { machine: req.machine.clone(), class: req.class.clone(), secret: req.secret.clone() };
        let (target, spec, markers) = self.locate(&addressed, &creds)?;
        let previous = match &req.previous_class {
            Some(class) => Some(AzureProviderSpec::parse_with_markers(&class.provider_spec).map_err(of_previous)?.0),
            None => None,
        };
        let api = self.pool.api(&creds, spec.cloud(), ctx)?;

        let Some(found) = crate::create::get_vm(&api, &target, false).await? else {
            return Err(DriverError::not_found(format!("VM {}", target.provider_id())));
        };
        if let Ownership::Foreign(why) = markers.judge(&Marks::of_vm(&found), &req.machine) {
            return Err(foreign_not_found(format!("VM {}", target.provider_id()), why));
        }
        if vm::provisioning(&found) == Provisioning::Deleting {
            return Err(DriverError::unavailable(
                crate::errors::VM_DELETING,
                format!("VM {} is being deleted", target.provider_id()),
                RETRY_WHILE_DELETING,
            ));
        }
        let record = serde_json::to_value(&found)
            .map_err(|_| DriverError::internal("compute virtualMachines.get answered a VM that does not serialize"))?;

        let mut plan = UpdatePlan::for_request(target.provider_id(), &req);
        compare_replacements(&mut plan, &record, &spec);

        let desired = vm::machine_tags(&spec, &req.machine.uid);
        let before = previous.as_ref().map(|p| vm::machine_tags(p, &req.machine.uid));
        let mut resources = vec![Tagged {
            what: "the VM".to_string(),
            id: target.resource_id("Microsoft.Compute/virtualMachines", &target.name),
            current: align(string_tags(record.get("tags")), &desired, before.as_ref()),
        }];
        let found_dependents = dependents(&record, &target, &spec, previous.as_ref());
        let reads = join_all(found_dependents.iter().map(|d| {
            let (api, target) = (&api, &target);
            async move {
                match d.disk {
                    // A disk's one read gives its tags, size, type and performance.
                    Some(_) => get_disk(api, target, &d.name)
                        .await
                        .map(|disk| disk.map(|disk| (string_tags(disk.get("tags")), Some(disk)))),
                    None => read_tags_at_scope(api, &d.id).await.map(|tags| tags.map(|tags| (tags, None))),
                }
            }
        }))
        .await;
        let mut disks = Vec::new();
        for (d, read) in found_dependents.iter().zip(reads) {
            // A dependent ARM no longer shows (detached and deleted since the VM read) has nothing to tag.
            if let Some((tags, disk)) = read? {
                resources.push(Tagged {
                    what: d.what.clone(),
                    id: d.id.clone(),
                    current: align(tags, &desired, before.as_ref()),
                });
                if let (Some(role), Some(disk)) = (d.disk, disk) {
                    disks.push((d.name.clone(), role, disk));
                }
            }
        }
        let mut reasons = Vec::new();
        let disk_writes = compare_disks(&mut plan, &mut reasons, &spec, &disks);

        let plans: Vec<TagPlan> =
            resources.iter().map(|r| TagPlan::new(&r.current, &desired, before.as_ref())).collect();
        for (resource, p) in resources.iter().zip(&plans) {
            let count = p.apply_to(&resource.current).len();
            if count > MAX_TAGS {
                return Err(DriverError::new(
                    ErrorKind::FailedPrecondition,
                    crate::errors::TOO_MANY_TAGS,
                    format!(
                        "{TAGS_FIELD}: {} would carry {count} tags with the ones others put there; ARM keeps at most {MAX_TAGS} \
                         (nothing was changed)",
                        resource.what
                    ),
                ));
            }
        }
        if !req.validate_only {
            let api = &api;
            let writes =
                join_all(resources.iter().zip(&plans).filter(|(_, p)| !p.is_empty()).map(|(r, p)| async move {
                    let (operation, tags) = write_of(p, &r.current);
                    patch_tags(api, &r.id, operation, &tags).await
                }))
                .await;
            for written in writes {
                written?;
            }
            let resized = join_all(disk_writes.iter().map(|w| update_disk(api, &target, w))).await;
            for written in resized {
                written?;
            }
            // A poll's tagging of this process's create, still to come, carries the class's tags of now.
            self.tags_to_apply.retarget(&target, &desired);
        }
        plan.tags(TAGS_FIELD, resources.iter().zip(&plans).map(|(r, p)| (r.what.as_str(), p)));
        with_reasons(plan.finish(), &reasons)
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

/// The VM size, image and zone of the VM `record` compared with `spec`.
fn compare_replacements(plan: &mut UpdatePlan, record: &Value, spec: &AzureProviderSpec) {
    let same_or = |current: &str, desired: String| {
        if current.eq_ignore_ascii_case(&desired) { current.to_string() } else { desired }
    };
    let size = record.pointer("/properties/hardwareProfile/vmSize").and_then(Value::as_str).unwrap_or("");
    plan.compare_replacement(
        VM_SIZE_FIELD,
        size,
        &same_or(size, spec.properties.hardware_profile.vm_size.trim().into()),
    );
    let image = describe_image(record.pointer("/properties/storageProfile/imageReference"));
    let wanted = describe_image(Some(&vm::image_reference(&spec.properties.storage_profile.image_reference)));
    plan.compare_replacement(IMAGE_FIELD, &image, &same_or(&image, wanted));
    let zone = record.pointer("/zones/0").and_then(Value::as_str).unwrap_or("");
    let wanted = match spec.placement() {
        Placement::Zone(z) => z,
        _ => String::new(),
    };
    plan.compare_replacement(ZONE_FIELD, zone, &wanted);
}

/// An `imageReference` (as the VM PUT sends it, or as ARM answers it) in
/// words: `urn P:O:S:V`, or the gallery or image id it names.
fn describe_image(image: Option<&Value>) -> String {
    let text =
        |key: &str| image.and_then(|i| i.get(key)).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    if let (Some(p), Some(o), Some(s), Some(v)) = (text("publisher"), text("offer"), text("sku"), text("version")) {
        return format!("urn {p}:{o}:{s}:{v}");
    }
    for (key, name) in [
        ("sharedGalleryImageId", "sharedGalleryImageID"),
        ("communityGalleryImageId", "communityGalleryImageID"),
        ("id", "id"),
    ] {
        if let Some(id) = text(key) {
            return format!("{name} {id}");
        }
    }
    "none".to_string()
}

/// The NIC and disks of the VM `record` that the driver tags: attached, in
/// the VM's resource group, under the names the driver gives them (from the
/// class's data disks or the previous class's). Their ARM ids are built from
/// those names, never taken from the record.
fn dependents(
    record: &Value,
    target: &VmRef,
    spec: &AzureProviderSpec,
    previous: Option<&AzureProviderSpec>,
) -> Vec<Dependent> {
    let ids = |pointer: &str, item: &str| -> Vec<String> {
        record
            .pointer(pointer)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.pointer(item).and_then(Value::as_str).map(str::to_string))
            .collect()
    };
    let attached = |kind: &str, name: &str, among: &[String]| {
        let id = target.resource_id(kind, name);
        among.iter().any(|a| a.eq_ignore_ascii_case(&id)).then_some(id)
    };
    let mut out = Vec::new();
    let nics = ids("/properties/networkProfile/networkInterfaces", "/id");
    for name in (0..NIC_GENERATIONS).map(|g| target.nic_name(g)) {
        if let Some(id) = attached("Microsoft.Network/networkInterfaces", &name, &nics) {
            out.push(Dependent { what: format!("NIC {name}"), id, name, disk: None });
        }
    }
    let mut disks = ids("/properties/storageProfile/dataDisks", "/managedDisk/id");
    disks.extend(
        record.pointer("/properties/storageProfile/osDisk/managedDisk/id").and_then(Value::as_str).map(str::to_string),
    );
    let mut names = vec![(target.os_disk_name(), DiskRole::Os)];
    names.extend(
        spec.properties
            .storage_profile
            .data_disks
            .iter()
            .enumerate()
            .map(|(i, d)| (data_disk_name(&target.name, d), DiskRole::Data(i))),
    );
    if let Some(p) = previous {
        names.extend(
            p.properties
                .storage_profile
                .data_disks
                .iter()
                .map(|d| (data_disk_name(&target.name, d), DiskRole::Previous)),
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for (name, role) in names {
        if seen.insert(name.to_ascii_lowercase())
            && let Some(id) = attached("Microsoft.Compute/disks", &name, &disks)
        {
            out.push(Dependent { what: format!("disk {name}"), id, name, disk: Some(role) });
        }
    }
    out
}

/// `current` with each name that matches a name of `desired` or `previous`
/// case-insensitively (ARM's tag names are) renamed to that casing.
fn align(
    current: BTreeMap<String, String>,
    desired: &BTreeMap<String, String>,
    previous: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let known: Vec<&String> = desired.keys().chain(previous.into_iter().flat_map(BTreeMap::keys)).collect();
    current
        .into_iter()
        .map(|(k, v)| match known.iter().find(|n| n.eq_ignore_ascii_case(&k)) {
            Some(n) => ((*n).clone(), v),
            None => (k, v),
        })
        .collect()
}

/// The Tags API operation that applies `plan` to a resource whose tags are
/// `current`, in one call, and its tags (see the module docs).
fn write_of(plan: &TagPlan, current: &BTreeMap<String, String>) -> (&'static str, BTreeMap<String, String>) {
    if plan.remove.is_empty() {
        ("Merge", plan.set.clone())
    } else if plan.set.is_empty() {
        (
            "Delete",
            current.iter().filter(|(k, _)| plan.remove.contains(*k)).map(|(k, v)| (k.clone(), v.clone())).collect(),
        )
    } else {
        ("Replace", plan.apply_to(current))
    }
}

/// A NIC or disk of the VM that the update reads (see [`dependents`]).
#[derive(Debug)]
struct Dependent {
    /// How the answer names it.
    what: String,
    /// Its ARM id, built from checked names.
    id: String,
    /// Its name.
    name: String,
    /// For a disk, which of the class's disks it is.
    disk: Option<DiskRole>,
}

/// Which disk of the class a disk of the VM is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DiskRole {
    /// The OS disk.
    Os,
    /// The class's data disk of this index.
    Data(usize),
    /// A data disk only the previous class has (its tags are compared, nothing else).
    Previous,
}

/// One `disks.update` to make: the disk and what changes.
#[derive(Debug, Default, PartialEq, Eq)]
struct DiskWrite {
    /// The disk's name.
    name: String,
    /// The class fields it applies, in the order of the body's properties.
    fields: Vec<(String, &'static str)>,
    /// The new `diskSizeGB`.
    size_gb: Option<i64>,
    /// The new `diskIOPSReadWrite`.
    iops: Option<i64>,
    /// The new `diskMBpsReadWrite`.
    mbps: Option<i64>,
}

/// The size beyond which a Standard HDD, Standard SSD or Premium SSD grows
/// while attached (GiB): one of 4 TiB or less grows past 4 TiB only with the
/// VM deallocated (learn.microsoft.com/azure/virtual-machines/linux/expand-disks,
/// "Expand without downtime").
const LIVE_RESIZE_BOUNDARY_GB: i64 = 4096;
/// When to retry a disk update still running at the deadline.
const DISK_WAIT_RETRY: Duration = Duration::from_secs(5);
/// Time kept for the answer when waiting for a disk update.
const ANSWER_MARGIN: Duration = Duration::from_secs(2);

/// `disks.get` (learn.microsoft.com/rest/api/compute/disks/get): the disk as
/// ARM shows it, `None` when it does not.
async fn get_disk(api: &Api<'_>, target: &VmRef, name: &str) -> Result<Option<Value>, DriverError> {
    let (sub, rg) = (&target.subscription, &target.resource_group);
    let answer = api.call("compute", "disks.get", || api.compute().disks_client().get(sub, rg, name).send()).await;
    let response = match answer {
        Ok(a) => a.into_raw_response(),
        Err(CallFailure::Cloud(_, f)) if f.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|_| DriverError::internal("reading compute disks.get's answer failed"))?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|_| DriverError::internal("compute disks.get answered a body that is not JSON"))
}

/// The class field of disk `role`'s `key` (`diskSizeGB`).
fn disk_field(role: DiskRole, key: &str) -> String {
    match role {
        DiskRole::Data(i) => format!("providerSpec.properties.storageProfile.dataDisks[{i}].{key}"),
        _ => format!("providerSpec.properties.storageProfile.osDisk.{key}"),
    }
}

/// The size, type and performance of each disk read compared with the class:
/// what can change while the VM runs becomes a [`DiskWrite`] (APPLIED), the
/// rest NEEDS_REPLACEMENT with its reason in `reasons` (the Azure rules:
/// learn.microsoft.com/azure/virtual-machines/linux/expand-disks "Expand
/// without downtime": data disks only, not shared ones, a Standard HDD/SSD or
/// Premium SSD of 4 TiB or less not past 4 TiB; a managed disk never shrinks;
/// only an Ultra Disk's or Premium SSD v2's IOPS and throughput are set, at
/// most four times a day, learn.microsoft.com/azure/virtual-machines/disks-types).
/// A class data disk the VM lacks is a replacement too.
fn compare_disks(
    plan: &mut UpdatePlan,
    reasons: &mut Vec<(String, String)>,
    spec: &AzureProviderSpec,
    disks: &[(String, DiskRole, Value)],
) -> Vec<DiskWrite> {
    let storage = &spec.properties.storage_profile;
    let mut writes = Vec::new();
    for (i, _) in storage.data_disks.iter().enumerate() {
        if !disks.iter().any(|(_, role, _)| *role == DiskRole::Data(i)) {
            let field = format!("providerSpec.properties.storageProfile.dataDisks[{i}]");
            plan.compare_replacement(&field, "", "a disk made with the VM");
            reasons.push((field, "the VM has no such disk; the driver adds no disk to a running VM".into()));
        }
    }
    for (name, role, disk) in disks {
        let (want_size, want_type, want_iops, want_mbps) = match role {
            DiskRole::Os => (
                storage.os_disk.disk_size_gb,
                storage.os_disk.managed_disk.storage_account_type.clone().filter(|t| !t.trim().is_empty()),
                None,
                None,
            ),
            DiskRole::Data(i) => {
                let d = &storage.data_disks[*i];
                (d.disk_size_gb, Some(d.storage_account_type.clone()), d.disk_iops_read_write, d.disk_mbps_read_write)
            }
            DiskRole::Previous => continue,
        };
        let number = |pointer: &str| disk.pointer(pointer).and_then(Value::as_i64);
        let sku = disk.pointer("/sku/name").and_then(Value::as_str).unwrap_or("").to_string();
        let mut write = DiskWrite { name: name.clone(), ..DiskWrite::default() };
        if let Some(want) = want_type {
            let key = if *role == DiskRole::Os { "managedDisk.storageAccountType" } else { "storageAccountType" };
            let field = disk_field(*role, key);
            let shown = if sku.eq_ignore_ascii_case(want.trim()) { sku.clone() } else { want.trim().to_string() };
            if plan.compare_replacement(&field, &sku, &shown) {
                reasons.push((field, format!("disk {name}: a disk's type changes only with its VM deallocated")));
            }
        }
        let size_field = disk_field(*role, "diskSizeGB");
        let size = number("/properties/diskSizeGB").unwrap_or(0);
        if want_size == size {
            plan.unchanged(&size_field);
        } else if want_size < size {
            plan.compare_replacement(&size_field, &size.to_string(), &want_size.to_string());
            reasons.push((size_field, format!("disk {name}: a managed disk cannot shrink ({size} GB)")));
        } else {
            let shared = number("/properties/maxShares").unwrap_or(1) > 1;
            let why_not = if *role == DiskRole::Os {
                Some("an OS disk grows only with its VM deallocated, and the driver never stops a VM".to_string())
            } else if shared {
                Some("a shared disk (maxShares > 1) grows only detached".to_string())
            } else if !has_provisioned_performance(&sku)
                && size <= LIVE_RESIZE_BOUNDARY_GB
                && want_size > LIVE_RESIZE_BOUNDARY_GB
            {
                Some(format!("a {sku} disk of 4 TiB or less grows past 4 TiB only with its VM deallocated"))
            } else {
                None
            };
            match why_not {
                Some(why) => {
                    plan.compare_replacement(&size_field, &size.to_string(), &want_size.to_string());
                    reasons.push((size_field, format!("disk {name}: {why}")));
                }
                None => {
                    plan.applied(&size_field, format!("{size} -> {want_size} GB on disk {name}"));
                    write.size_gb = Some(want_size);
                    write.fields.push((size_field, "diskSizeGB"));
                }
            }
        }
        for (key, want, pointer) in [
            ("diskIOPSReadWrite", want_iops, "/properties/diskIOPSReadWrite"),
            ("diskMBpsReadWrite", want_mbps, "/properties/diskMBpsReadWrite"),
        ] {
            let Some(want) = want else { continue };
            let field = disk_field(*role, key);
            let have = number(pointer).unwrap_or(0);
            if have == want {
                plan.unchanged(&field);
            } else if has_provisioned_performance(&sku) {
                plan.applied(&field, format!("{have} -> {want} on disk {name}"));
                if key == "diskIOPSReadWrite" {
                    write.iops = Some(want);
                } else {
                    write.mbps = Some(want);
                }
                write.fields.push((field, key));
            } else {
                plan.compare_replacement(&field, &have.to_string(), &want.to_string());
                reasons.push((
                    field,
                    format!(
                        "disk {name} is {sku}: only an Ultra Disk or a Premium SSD v2 takes provisioned performance"
                    ),
                ));
            }
        }
        if !write.fields.is_empty() {
            writes.push(write);
        }
    }
    writes
}

/// One `disks.update` (`PATCH .../disks/{name}`, learn.microsoft.com/rest/api/compute/disks/update,
/// api-version 2024-03-02, RBAC `Microsoft.Compute/disks/write`): the new
/// size and performance in one body, then its operation waited for
/// (`Azure-AsyncOperation`) within the deadline. ARM refusing a value (400) is
/// INVALID_ARGUMENT naming the class field; any other refusal (409
/// `OperationNotAllowed`: a resize needing the VM deallocated, a fifth
/// performance change within 24 hours) keeps its classification, the fields
/// named; still running at the deadline UNAVAILABLE `DISK_UPDATING`.
async fn update_disk(api: &Api<'_>, target: &VmRef, w: &DiskWrite) -> Result<(), DriverError> {
    let fields = w.fields.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>().join(", ");
    let failed = |f: ArmFailure| -> DriverError {
        if f.is_value_refused() {
            let field = w.fields.iter().find(|(_, key)| f.names_parameter(key)).or(w.fields.first());
            let field = field.map(|(f, _)| f.clone()).unwrap_or_default();
            let problem = format!("compute disks.update of disk {} refused it: {}", w.name, f.message);
            return DriverError::invalid_argument(field, problem);
        }
        let e = f.driver_error("compute disks.update");
        if e.kind() == ErrorKind::Unavailable {
            return e;
        }
        DriverError::new(e.kind(), e.reason().to_string(), format!("{fields}: {}", e.message()))
    };
    let body = DiskUpdate {
        properties: Some(DiskUpdateProperties {
            disk_size_gb: w.size_gb.map(|s| i32::try_from(s).unwrap_or(i32::MAX)),
            disk_iops_read_write: w.iops,
            disk_m_bps_read_write: w.mbps,
            ..DiskUpdateProperties::default()
        }),
        ..DiskUpdate::default()
    };
    let (sub, rg) = (&target.subscription, &target.resource_group);
    let answer = match api
        .call("compute", "disks.update", || api.compute().disks_client().update(sub, rg, &w.name, body.clone()).send())
        .await
    {
        Ok(answer) => answer,
        Err(CallFailure::Cloud(_, f)) => return Err(failed(f)),
        Err(e) => return Err(e.into()),
    };
    let Some(tracker) = Tracker::from_headers(answer.as_raw_response().headers()) else { return Ok(()) };
    match lro::wait(api, "compute", &tracker, ANSWER_MARGIN).await? {
        Outcome::Succeeded => Ok(()),
        Outcome::Failed(f) => Err(failed(f)),
        Outcome::Running => Err(DriverError::unavailable(
            crate::errors::DISK_UPDATING,
            format!("{fields}: disk {} is still being updated; retry", w.name),
            DISK_WAIT_RETRY,
        )),
    }
}

/// The answer with each replacement's reason: in its detail, and in the
/// FAILED_PRECONDITION answered when only replacements differ.
fn with_reasons(
    answer: Result<UpdatedMachine, DriverError>,
    reasons: &[(String, String)],
) -> Result<UpdatedMachine, DriverError> {
    let reason_of = |field: &str| reasons.iter().find(|(f, _)| f == field).map(|(_, r)| r.as_str());
    match answer {
        Ok(mut answer) => {
            for change in &mut answer.changes {
                if let (ChangeOutcome::NeedsReplacement, Some(why)) = (change.outcome, reason_of(&change.field)) {
                    change.detail = format!("{}: {why}", change.detail);
                }
            }
            Ok(answer)
        }
        Err(e) if e.reason() == NEEDS_REPLACEMENT && !reasons.is_empty() => {
            let why: Vec<String> = reasons.iter().map(|(f, r)| format!("{f}: {r}")).collect();
            Err(DriverError::new(e.kind(), NEEDS_REPLACEMENT, format!("{} ({})", e.message(), why.join("; "))))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn one_call_per_resource_with_the_fewest_others_touched() {
        let current = tags(&[("team", "a"), ("old", "x"), ("operator", "o")]);
        let only_set = TagPlan::new(&current, &tags(&[("team", "b"), ("old", "x")]), None);
        assert_eq!(write_of(&only_set, &current), ("Merge", tags(&[("team", "b")])));
        let previous = tags(&[("team", "a"), ("old", "x")]);
        let only_remove = TagPlan::new(&current, &tags(&[("team", "a")]), Some(&previous));
        assert_eq!(
            write_of(&only_remove, &current),
            ("Delete", tags(&[("old", "x")])),
            "the value read: a changed one stays"
        );
        let both = TagPlan::new(&current, &tags(&[("team", "b")]), Some(&previous));
        assert_eq!(write_of(&both, &current), ("Replace", tags(&[("operator", "o"), ("team", "b")])));
    }

    #[test]
    fn tag_names_are_matched_as_arm_matches_them() {
        let desired = tags(&[("Team", "a")]);
        let current = align(tags(&[("team", "a"), ("Other", "1")]), &desired, None);
        assert_eq!(current, tags(&[("Other", "1"), ("Team", "a")]));
        assert!(TagPlan::new(&current, &desired, None).is_empty(), "the same tag in another casing");
    }

    #[test]
    fn images_compare_as_the_vm_record_shows_them() {
        let urn = json!({"publisher": "sap", "offer": "gardenlinux", "sku": "greatest", "version": "1443.3.0", "exactVersion": "1443.3.0"});
        assert_eq!(describe_image(Some(&urn)), "urn sap:gardenlinux:greatest:1443.3.0");
        assert_eq!(describe_image(Some(&json!({"communityGalleryImageId": "/C/x"}))), "communityGalleryImageID /C/x");
        assert_eq!(describe_image(Some(&json!({"id": "/subscriptions/s/i"}))), "id /subscriptions/s/i");
        assert_eq!(describe_image(None), "none");
    }

    #[test]
    fn only_the_drivers_attached_nic_and_disks_in_the_vms_group_are_dependents() {
        let spec =
            AzureProviderSpec::parse(&serde_json::to_vec(&crate::spec::tests_support::example()).unwrap()).unwrap();
        let vm =
            VmRef { subscription: "s".into(), resource_group: "rg".into(), location: "l".into(), name: "m".into() };
        let nic = vm.resource_id("Microsoft.Network/networkInterfaces", "m-nic-1");
        let record = json!({"properties": {
            "networkProfile": {"networkInterfaces": [{"id": nic.to_uppercase()}, {"id": vm.resource_id("Microsoft.Network/networkInterfaces", "by-hand")}]},
            "storageProfile": {
                "osDisk": {"managedDisk": {"id": vm.resource_id("Microsoft.Compute/disks", "m-os-disk")}},
                "dataDisks": [{"managedDisk": {"id": "/subscriptions/s/resourceGroups/other/providers/Microsoft.Compute/disks/m-os-disk"}}]
            }
        }});
        let found: Vec<String> = dependents(&record, &vm, &spec, None).into_iter().map(|d| d.what).collect();
        assert_eq!(found, ["NIC m-nic-1", "disk m-os-disk"]);
    }

    fn disk_record(sku: &str, size: i64, extra: serde_json::Value) -> Value {
        let mut d = json!({"sku": {"name": sku}, "properties": {"diskSizeGB": size, "diskIOPSReadWrite": 3000, "diskMBpsReadWrite": 125}});
        if let Some(map) = extra.as_object() {
            for (k, v) in map {
                d["properties"][k] = v.clone();
            }
        }
        d
    }

    fn class_disk(disk: serde_json::Value) -> AzureProviderSpec {
        let mut v = crate::spec::tests_support::example();
        v["properties"]["storageProfile"]["dataDisks"] = json!([disk]);
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn only_what_azure_changes_while_attached_is_written() {
        let field = "providerSpec.properties.storageProfile.dataDisks[0].diskSizeGB";
        let outcome_of = |spec: &AzureProviderSpec, disk: Value| {
            let mut plan = UpdatePlan::new("p", false);
            let mut reasons = Vec::new();
            let writes = compare_disks(&mut plan, &mut reasons, spec, &[("d".into(), DiskRole::Data(0), disk)]);
            let answer = with_reasons(plan.finish(), &reasons);
            (writes, answer)
        };
        // An Ultra Disk grows past 4 TiB while attached; a Premium SSD does not.
        let ultra = class_disk(json!({"lun": 0, "storageAccountType": "UltraSSD_LRS", "diskSizeGB": 5000}));
        let (writes, _) = outcome_of(&ultra, disk_record("UltraSSD_LRS", 1024, json!({})));
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].size_gb, Some(5000));
        let premium = class_disk(json!({"lun": 0, "storageAccountType": "Premium_LRS", "diskSizeGB": 5000}));
        let (writes, answer) = outcome_of(&premium, disk_record("Premium_LRS", 1024, json!({})));
        assert!(writes.is_empty());
        assert!(answer.unwrap_err().message().contains("past 4 TiB"));
        // Beyond 4 TiB already: it grows.
        let (writes, _) = outcome_of(&premium, disk_record("Premium_LRS", 4097, json!({})));
        assert_eq!(writes.len(), 1);
        // A shared disk grows only detached.
        let small = class_disk(json!({"lun": 0, "storageAccountType": "Premium_LRS", "diskSizeGB": 128}));
        let (writes, answer) = outcome_of(&small, disk_record("Premium_LRS", 64, json!({"maxShares": 2})));
        assert!(writes.is_empty());
        let err = answer.unwrap_err();
        assert!(err.message().contains(field) && err.message().contains("shared"), "{}", err.message());
        // Performance set only on the disk type that takes it; a type change is a replacement.
        let v2 = class_disk(
            json!({"lun": 0, "storageAccountType": "PremiumV2_LRS", "diskSizeGB": 64, "diskIOPSReadWrite": 5000}),
        );
        let (writes, _) = outcome_of(&v2, disk_record("PremiumV2_LRS", 64, json!({})));
        assert_eq!(
            writes,
            [DiskWrite {
                name: "d".into(),
                fields: vec![(
                    "providerSpec.properties.storageProfile.dataDisks[0].diskIOPSReadWrite".into(),
                    "diskIOPSReadWrite"
                )],
                iops: Some(5000),
                ..DiskWrite::default()
            }]
        );
        let (writes, answer) = outcome_of(&v2, disk_record("Premium_LRS", 64, json!({})));
        assert!(writes.is_empty());
        let message = answer.unwrap_err().message().to_string();
        assert!(
            message.contains("dataDisks[0].storageAccountType") && message.contains("dataDisks[0].diskIOPSReadWrite"),
            "{message}"
        );
    }

    #[test]
    fn a_disk_of_the_previous_class_only_is_compared_for_its_tags() {
        let spec = class_disk(json!({"lun": 0, "storageAccountType": "Premium_LRS", "diskSizeGB": 64}));
        let mut plan = UpdatePlan::new("p", false);
        let mut reasons = Vec::new();
        let disks = [
            ("d".to_string(), DiskRole::Data(0), disk_record("Premium_LRS", 64, json!({}))),
            ("old".to_string(), DiskRole::Previous, disk_record("Premium_LRS", 512, json!({}))),
        ];
        assert!(compare_disks(&mut plan, &mut reasons, &spec, &disks).is_empty());
        assert!(reasons.is_empty());
        assert!(plan.finish().unwrap().changes.iter().all(|c| c.outcome == ChangeOutcome::Unchanged));
    }
}
