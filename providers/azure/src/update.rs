//! UpdateMachine on Azure (hot update): the machine's tags changed in place
//! on the VM, its NIC and its disks; the VM size, image and zone compared and
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
//!    previous class) as the VM record lists them attached, each read with one
//!    `tags.getAtScope`, all at once.
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
//! A plan that would leave a resource with more than 50 tags (others' tags
//! counted) is FAILED_PRECONDITION `TOO_MANY_TAGS` before anything is
//! written. A repeat after success reads the same and writes nothing. A lost
//! answer (the write done, its answer dropped) is converged by the retry,
//! which reads the tags as they are now.
//!
//! Cost: 1 + (NIC and disks, 3 for a class with one data disk) reads, plus one
//! write per resource whose tags differ (0 on a repeat).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::join_all;
use machine_driver_api::{
    CallContext, DriverError, ErrorKind, MachineRef, Ownership, TagPlan, UpdateMachine, UpdatePlan, UpdatedMachine,
    foreign_not_found,
};
use serde_json::Value;

use crate::credentials::AzureCredentials;
use crate::driver::AzureDriver;
use crate::naming::{NIC_GENERATIONS, VmRef, data_disk_name};
use crate::ownership::Marks;
use crate::spec::{AzureProviderSpec, MAX_TAGS, Placement};
use crate::tagging::{patch_tags, read_tags_at_scope, string_tags};
use crate::vm::{self, Provisioning};

/// The class's tag field.
const TAGS_FIELD: &str = "providerSpec.tags";
/// The replacement-only fields compared.
const VM_SIZE_FIELD: &str = "providerSpec.properties.hardwareProfile.vmSize";
const IMAGE_FIELD: &str = "providerSpec.properties.storageProfile.imageReference";
const ZONE_FIELD: &str = "providerSpec.properties.zone";
/// The reason of a plan that would leave a resource with more tags than ARM keeps.
const TOO_MANY_TAGS: &str = "TOO_MANY_TAGS";
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
                "VM_DELETING",
                format!("VM {} is being deleted", target.provider_id()),
                RETRY_WHILE_DELETING,
            ));
        }
        let record = serde_json::to_value(&found)
            .map_err(|_| DriverError::internal("compute virtualMachines.get answered a VM that does not serialize"))?;

        let mut plan = UpdatePlan::new(target.provider_id(), req.validate_only);
        compare_replacements(&mut plan, &record, &spec);

        let desired = vm::machine_tags(&spec, &req.machine.uid);
        let before = previous.as_ref().map(|p| vm::machine_tags(p, &req.machine.uid));
        let mut resources = vec![Tagged {
            what: "the VM".to_string(),
            id: target.resource_id("Microsoft.Compute/virtualMachines", &target.name),
            current: align(string_tags(record.get("tags")), &desired, before.as_ref()),
        }];
        let reads = join_all(dependents(&record, &target, &spec, previous.as_ref()).into_iter().map(|(what, id)| {
            let api = &api;
            async move { read_tags_at_scope(api, &id).await.map(|tags| tags.map(|tags| (what, id, tags))) }
        }))
        .await;
        for read in reads {
            // A dependent ARM no longer shows (detached and deleted since the VM read) has nothing to tag.
            if let Some((what, id, tags)) = read? {
                resources.push(Tagged { what, id, current: align(tags, &desired, before.as_ref()) });
            }
        }

        let plans: Vec<TagPlan> =
            resources.iter().map(|r| TagPlan::new(&r.current, &desired, before.as_ref())).collect();
        for (resource, p) in resources.iter().zip(&plans) {
            let count = p.apply_to(&resource.current).len();
            if count > MAX_TAGS {
                return Err(DriverError::new(
                    ErrorKind::FailedPrecondition,
                    TOO_MANY_TAGS,
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
            // A poll's tagging of this process's create, still to come, carries the class's tags of now.
            self.tags_to_apply.retarget(&target, &desired);
        }
        plan.tags(TAGS_FIELD, resources.iter().zip(&plans).map(|(r, p)| (r.what.as_str(), p)));
        plan.finish()
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
) -> Vec<(String, String)> {
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
            out.push((format!("NIC {name}"), id));
        }
    }
    let mut disks = ids("/properties/storageProfile/dataDisks", "/managedDisk/id");
    disks.extend(
        record.pointer("/properties/storageProfile/osDisk/managedDisk/id").and_then(Value::as_str).map(str::to_string),
    );
    let mut names = vec![target.os_disk_name()];
    for s in std::iter::once(spec).chain(previous) {
        names.extend(s.properties.storage_profile.data_disks.iter().map(|d| data_disk_name(&target.name, d)));
    }
    let mut seen = std::collections::BTreeSet::new();
    for name in names {
        if seen.insert(name.to_ascii_lowercase())
            && let Some(id) = attached("Microsoft.Compute/disks", &name, &disks)
        {
            out.push((format!("disk {name}"), id));
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
        let found: Vec<String> = dependents(&record, &vm, &spec, None).into_iter().map(|(what, _)| what).collect();
        assert_eq!(found, ["NIC m-nic-1", "disk m-os-disk"]);
    }
}
