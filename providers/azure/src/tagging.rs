//! The machine's tags on the NIC and the disks its VM PUT makes.
//!
//! The VM PUT makes the NIC (`networkInterfaceConfigurations`), the OS disk
//! and the empty data disks, and ARM makes them without tags: Compute
//! 2024-07-01 takes no tags for them (and refuses members it does not know).
//! The Go provider tags the NIC it makes itself with the class's tags
//! (pkg/azure/provider/helpers/driver.go `createNICParams`: `createNICTags(providerSpec.Tags)`),
//! and its orphan collector lists VMs, NICs and disks by the class's two tag
//! keys (helpers/resourcegraphprocessor.go `listVmsNICsAndDisksQueryTemplate`):
//! untagged, a leftover NIC or disk of this driver's VM would be invisible to
//! it after a rollback, and to this driver's own ListMachines.
//!
//! So each is tagged once, afterwards, with the VM's tags (the class's, its
//! markers, and the machine's uid): one `tags.updateAtScope` (`PATCH
//! {resource}/providers/Microsoft.Resources/tags/default`, operation `Merge`:
//! tags others put there stay) per resource, on the first GetMachineStatus
//! that finds the VM of a create of this process (not failed, not being
//! deleted): the disks first, the NIC last. CreateMachine stays one call.
//!
//! What is left is kept for the next poll only when it may succeed then: a
//! resource ARM does not show yet (404: the VM is still being made), or ARM
//! throttled or was unavailable (UNAVAILABLE, a deadline). Any other refusal
//! (403: the identity lacks [`TAGS_WRITE_ACTION`]; 400; 401) would be the
//! same on every poll: the rest is dropped and one warning names the missing
//! permission or ARM's reason (never the credentials), so a machine costs
//! one failed PATCH, not one per poll for its life.
//!
//! What is left is remembered with the uid of the machine it was created for,
//! and applied only to a VM of that uid, polled for that machine: a Machine of
//! the same name made again since (another uid, e.g. by another process after
//! a delete) is not tagged with the earlier machine's uid; the entry is
//! forgotten instead.
//!
//! What a process created but had not tagged when it stopped stays untagged
//! (the window is a create's first seconds); ListMachines still lists the VM,
//! and a leftover of it is deleted by its name with the machine's uid.

use std::collections::BTreeMap;
use std::sync::Arc;

use machine_driver_api::{CallFailure, ErrorKind, KeyedCache};
use serde_json::json;

use crate::clients::Api;
use crate::errors::ArmFailure;
use crate::naming::{VmRef, data_disk_name};
use crate::spec::AzureProviderSpec;

/// `api-version` of the Tags API (Microsoft.Resources).
const TAGS_API_VERSION: &str = "2021-04-01";
/// Most VMs waiting for their resources' tags.
const MAX_PENDING: usize = 16_384;
/// The RBAC action tagging a resource at its scope needs (Tags API; Contributor
/// and Tag Contributor have it).
pub(crate) const TAGS_WRITE_ACTION: &str = "Microsoft.Resources/tags/write";

/// What is left to tag of one VM's resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingTags {
    /// ARM ids, in the order they are tagged (disks first, the NIC last).
    pub(crate) resources: Vec<String>,
    /// The tags.
    pub(crate) tags: BTreeMap<String, String>,
    /// The uid of the machine the VM was created for (empty: the create carried none).
    pub(crate) uid: String,
}

impl PendingTags {
    /// The resources the VM PUT of `vm` (with NIC `nic_name`) for the machine
    /// of uid `uid` makes, to be tagged with `tags`: the OS disk, the data disks
    /// made empty (those made before the VM are tagged when made), and the NIC.
    pub(crate) fn of_create(
        spec: &AzureProviderSpec,
        vm: &VmRef,
        nic_name: &str,
        uid: &str,
        tags: BTreeMap<String, String>,
    ) -> Self {
        let mut resources = vec![vm.resource_id("Microsoft.Compute/disks", &vm.os_disk_name())];
        resources.extend(
            spec.properties
                .storage_profile
                .data_disks
                .iter()
                .filter(|d| !d.made_before_vm())
                .map(|d| vm.resource_id("Microsoft.Compute/disks", &data_disk_name(&vm.name, d))),
        );
        resources.push(vm.resource_id("Microsoft.Network/networkInterfaces", nic_name));
        Self { resources, tags, uid: uid.to_string() }
    }

    /// Whether these are the resources of the VM found, tagged with uid
    /// `vm_uid` (its machine-uid tag), polled for the machine of uid
    /// `machine_uid` (empty: the request carries none).
    fn belong_to(&self, machine_uid: &str, vm_uid: Option<&str>) -> bool {
        vm_uid.unwrap_or("") == self.uid && (machine_uid.is_empty() || machine_uid == self.uid)
    }
}

/// What to do with the rest after a tagging call failed.
#[derive(Debug, PartialEq, Eq)]
enum AfterFailure {
    /// It may succeed on a later poll: kept.
    Later,
    /// It would fail the same way on every poll: dropped, and why.
    GiveUp(String),
}

impl AfterFailure {
    /// Later for a resource ARM does not show yet (404), throttling,
    /// unavailability and deadlines; otherwise given up, saying why.
    fn of(failure: &CallFailure<ArmFailure>) -> Self {
        let CallFailure::Cloud(_, f) = failure else { return Self::Later };
        if f.is_not_found() {
            return Self::Later;
        }
        match f.kind() {
            ErrorKind::Unavailable => Self::Later,
            ErrorKind::PermissionDenied => {
                Self::GiveUp(format!("the identity lacks the permission {TAGS_WRITE_ACTION}"))
            }
            kind => Self::GiveUp(format!(
                "ARM refused it: {} ({kind:?}{})",
                f.code.as_deref().filter(|c| !c.is_empty()).unwrap_or("no error code"),
                f.http_status.map(|s| format!(", HTTP {s}")).unwrap_or_default()
            )),
        }
    }
}

/// VMs created by this process whose resources are not tagged yet.
#[derive(Debug)]
pub(crate) struct TagsToApply {
    pending: KeyedCache<VmRef, PendingTags>,
}

impl Default for TagsToApply {
    fn default() -> Self {
        Self { pending: KeyedCache::new(MAX_PENDING) }
    }
}

impl TagsToApply {
    /// Remembers what the create of `vm` leaves to tag.
    pub(crate) fn record(&self, vm: &VmRef, pending: PendingTags) {
        self.pending.insert(vm.clone(), Arc::new(pending));
    }

    /// Forgets `vm` (deleted, failed, made again).
    pub(crate) fn forget(&self, vm: &VmRef) {
        self.pending.remove(vm);
    }

    /// After a hot update of `vm` to `tags`: what is left of its create is
    /// tagged with those (the class's of now), never with the create's.
    pub(crate) fn retarget(&self, vm: &VmRef, tags: &BTreeMap<String, String>) {
        if let Some(pending) = self.pending.get(vm) {
            let updated =
                PendingTags { resources: pending.resources.clone(), tags: tags.clone(), uid: pending.uid.clone() };
            self.pending.insert(vm.clone(), Arc::new(updated));
        }
    }

    /// Whether something of `vm` is left to tag.
    pub(crate) fn contains(&self, vm: &VmRef) -> bool {
        self.pending.get(vm).is_some()
    }

    /// Tags what is left of `vm`'s resources, when they are those of the VM
    /// found (tagged with machine uid `vm_uid`) and the machine polled (uid
    /// `machine_uid`); else forgets them. One call each; stops at the first
    /// failure: a resource ARM does not show yet, throttling or
    /// unavailability keep the rest for the next poll, any other refusal
    /// drops it with a warning. Never answered: the status answer goes on without.
    pub(crate) async fn apply(&self, api: &Api<'_>, vm: &VmRef, machine_uid: &str, vm_uid: Option<&str>) {
        let Some(pending) = self.pending.get(vm) else { return };
        if !pending.belong_to(machine_uid, vm_uid) {
            tracing::info!(
                vm = %vm.name,
                "the VM of the name is not the one this process created (another machine uid): its NIC and disks are left as they are"
            );
            self.pending.remove(vm);
            return;
        }
        let mut left = pending.resources.clone();
        while let Some(id) = left.first().cloned() {
            match merge_tags(api, &id, &pending.tags).await {
                Ok(()) => {
                    left.remove(0);
                }
                Err(failure) => match AfterFailure::of(&failure) {
                    AfterFailure::Later => {
                        tracing::debug!(vm = %vm.name, resource = %id, call = %failure.call(), "tagging the VM's resource: not yet");
                        break;
                    }
                    AfterFailure::GiveUp(why) => {
                        tracing::warn!(
                            vm = %vm.name,
                            resource = %id,
                            left = left.len(),
                            "the VM's NIC and disks are left untagged: tagging them failed and would fail again ({why}); \
                             the Go provider's orphan collector and ListMachines do not see them as leftovers"
                        );
                        self.pending.remove(vm);
                        return;
                    }
                },
            }
        }
        if left.is_empty() {
            self.pending.remove(vm);
        } else if left.len() < pending.resources.len() {
            self.pending.insert(
                vm.clone(),
                Arc::new(PendingTags { resources: left, tags: pending.tags.clone(), uid: pending.uid.clone() }),
            );
        }
    }
}

/// `PATCH {id}/providers/Microsoft.Resources/tags/default` with operation `Merge`.
async fn merge_tags(api: &Api<'_>, id: &str, tags: &BTreeMap<String, String>) -> Result<(), CallFailure<ArmFailure>> {
    patch_tags(api, id, "Merge", tags).await
}

/// The Tags API URL of the resource `id` (an ARM id the driver built from
/// checked names): each segment percent-encoded on its own.
fn tags_url(api: &Api<'_>, id: &str) -> azure_core::Url {
    let mut segments: Vec<&str> = id.split('/').filter(|s| !s.is_empty()).collect();
    segments.extend(["providers", "Microsoft.Resources", "tags", "default"]);
    api.arm_url(&segments, TAGS_API_VERSION)
}

/// `tags.updateAtScope` (`PATCH {id}/providers/Microsoft.Resources/tags/default`,
/// learn.microsoft.com/rest/api/resources/tags/update-at-scope) with
/// `operation` `Merge` (set these, keep the rest), `Replace` (exactly these)
/// or `Delete` (remove these names; one given with a value only while it has
/// that value). Synchronous: 200 with the resource's tags.
pub(crate) async fn patch_tags(
    api: &Api<'_>,
    id: &str,
    operation: &str,
    tags: &BTreeMap<String, String>,
) -> Result<(), CallFailure<ArmFailure>> {
    let url = tags_url(api, id);
    // A map of strings always serializes.
    let body = serde_json::to_vec(&json!({"operation": operation, "properties": {"tags": tags}})).unwrap_or_default();
    api.patch_raw("resources", "tags.updateAtScope", &url, &body).await.map(|_| ())
}

/// `tags.getAtScope` (`GET {id}/providers/Microsoft.Resources/tags/default`,
/// learn.microsoft.com/rest/api/resources/tags/get-at-scope): the resource's
/// tags (values that are not strings skipped), `None` when ARM does not show it.
pub(crate) async fn read_tags_at_scope(
    api: &Api<'_>,
    id: &str,
) -> Result<Option<BTreeMap<String, String>>, machine_driver_api::DriverError> {
    let url = tags_url(api, id);
    let answer = match api.get_raw("resources", "tags.getAtScope", &url).await {
        Ok(answer) => answer,
        Err(CallFailure::Cloud(_, f)) if f.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let body: serde_json::Value = serde_json::from_slice(&answer.body).map_err(|_| {
        machine_driver_api::DriverError::internal("resources tags.getAtScope answered a body that is not JSON")
    })?;
    Ok(Some(string_tags(body.pointer("/properties/tags"))))
}

/// The string-valued tags of an ARM `tags` object (absent: none).
pub(crate) fn string_tags(tags: Option<&serde_json::Value>) -> BTreeMap<String, String> {
    tags.and_then(serde_json::Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_disks_are_tagged_before_the_nic() {
        let spec = AzureProviderSpec::parse(
            &serde_json::to_vec(&{
                let mut v = crate::spec::tests_support::example();
                v["properties"]["storageProfile"]["dataDisks"] = json!([
                    {"name": "containerd", "lun": 0, "storageAccountType": "Standard_LRS", "diskSizeGB": 10},
                    {"lun": 1, "storageAccountType": "Standard_LRS", "diskSizeGB": 10,
                     "imageRef": {"urn": "sap:gardenlinux:greatest:1443.3.0"}}
                ]);
                v
            })
            .unwrap(),
        )
        .unwrap();
        let vm =
            VmRef { subscription: "s".into(), resource_group: "rg".into(), location: "l".into(), name: "m".into() };
        let pending = PendingTags::of_create(&spec, &vm, "m-nic-1", "u-1", BTreeMap::new());
        let names: Vec<&str> = pending.resources.iter().map(|id| id.rsplit('/').next().unwrap()).collect();
        // The image disk is tagged by its own PUT.
        assert_eq!(names, ["m-os-disk", "m-containerd-0-data-disk", "m-nic-1"]);
        assert!(pending.resources[2].contains("/providers/Microsoft.Network/networkInterfaces/"));
    }

    fn cloud(status: u16, code: &str) -> CallFailure<ArmFailure> {
        let call =
            machine_driver_api::CloudCall { provider: "azure", service: "resources", operation: "tags.updateAtScope" };
        CallFailure::Cloud(call, ArmFailure::http(status, Some(code.into()), "x"))
    }

    /// Only what may succeed on a later poll keeps the rest; a refusal that would be
    /// the same on every poll drops it, naming the missing permission or ARM's reason.
    #[test]
    fn only_not_yet_and_transient_failures_keep_the_rest() {
        assert_eq!(AfterFailure::of(&cloud(404, "ResourceNotFound")), AfterFailure::Later);
        assert_eq!(AfterFailure::of(&cloud(429, "TooManyRequests")), AfterFailure::Later);
        assert_eq!(AfterFailure::of(&cloud(503, "ServiceUnavailable")), AfterFailure::Later);
        let call =
            machine_driver_api::CloudCall { provider: "azure", service: "resources", operation: "tags.updateAtScope" };
        assert_eq!(AfterFailure::of(&CallFailure::Deadline(call)), AfterFailure::Later);
        assert_eq!(
            AfterFailure::of(&cloud(403, "AuthorizationFailed")),
            AfterFailure::GiveUp("the identity lacks the permission Microsoft.Resources/tags/write".into())
        );
        let AfterFailure::GiveUp(why) = AfterFailure::of(&cloud(400, "InvalidTag")) else { panic!("a 400 is kept") };
        assert!(why.contains("InvalidTag") && why.contains("HTTP 400"), "{why}");
        assert!(matches!(AfterFailure::of(&cloud(401, "InvalidAuthenticationToken")), AfterFailure::GiveUp(_)));
    }

    /// The resources are the VM's only when the VM carries the uid they were recorded
    /// with, and the poll is for that machine (or carries no uid).
    #[test]
    fn the_rest_belongs_to_the_machine_it_was_created_for() {
        let vm =
            VmRef { subscription: "s".into(), resource_group: "rg".into(), location: "l".into(), name: "m".into() };
        let spec =
            AzureProviderSpec::parse(&serde_json::to_vec(&crate::spec::tests_support::example()).unwrap()).unwrap();
        let pending = PendingTags::of_create(&spec, &vm, "m-nic", "u-1", BTreeMap::new());
        assert!(pending.belong_to("u-1", Some("u-1")));
        assert!(pending.belong_to("", Some("u-1")), "the orphan collector's poll carries no uid");
        assert!(!pending.belong_to("u-2", Some("u-2")), "the name made again for another machine");
        assert!(!pending.belong_to("u-1", Some("u-2")));
        assert!(!pending.belong_to("u-1", None), "a VM without the uid tag is not the one created");
        let without_uid = PendingTags::of_create(&spec, &vm, "m-nic", "", BTreeMap::new());
        assert!(without_uid.belong_to("", None));
        assert!(!without_uid.belong_to("", Some("u-1")));
    }
}
