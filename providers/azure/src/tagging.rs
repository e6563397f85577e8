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
//! deleted): the disks first, the NIC last. CreateMachine stays one call. A
//! resource ARM does not show yet (404: the VM is still being made) leaves
//! the rest for the next poll. What a process created but had not tagged
//! when it stopped stays untagged (the window is a create's first seconds);
//! ListMachines still lists the VM, and a leftover of it is deleted by its name
//! with the machine's uid.

use std::collections::BTreeMap;
use std::sync::Arc;

use machine_driver_api::{DriverError, KeyedCache};
use serde_json::json;

use crate::clients::Api;
use crate::naming::{VmRef, data_disk_name};
use crate::spec::AzureProviderSpec;

/// `api-version` of the Tags API (Microsoft.Resources).
const TAGS_API_VERSION: &str = "2021-04-01";
/// Most VMs waiting for their resources' tags.
const MAX_PENDING: usize = 16_384;

/// What is left to tag of one VM's resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingTags {
    /// ARM ids, in the order they are tagged (disks first, the NIC last).
    pub(crate) resources: Vec<String>,
    /// The tags.
    pub(crate) tags: BTreeMap<String, String>,
}

impl PendingTags {
    /// The resources the VM PUT of `vm` (with NIC `nic_name`) makes, to be tagged with `tags`:
    /// the OS disk, the data disks made empty (those made from an image are tagged when made),
    /// and the NIC.
    pub(crate) fn of_create(
        spec: &AzureProviderSpec,
        vm: &VmRef,
        nic_name: &str,
        tags: BTreeMap<String, String>,
    ) -> Self {
        let mut resources = vec![vm.resource_id("Microsoft.Compute/disks", &vm.os_disk_name())];
        resources.extend(
            spec.properties
                .storage_profile
                .data_disks
                .iter()
                .filter(|d| d.image_ref.is_none())
                .map(|d| vm.resource_id("Microsoft.Compute/disks", &data_disk_name(&vm.name, d))),
        );
        resources.push(vm.resource_id("Microsoft.Network/networkInterfaces", nic_name));
        Self { resources, tags }
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

    /// Whether something of `vm` is left to tag.
    pub(crate) fn contains(&self, vm: &VmRef) -> bool {
        self.pending.get(vm).is_some()
    }

    /// Tags what is left of `vm`'s resources: one call each; stops at the
    /// first resource ARM does not show yet (the rest waits for the next poll)
    /// or at a failure, which is logged, never answered (the status answer
    /// goes on without).
    pub(crate) async fn apply(&self, api: &Api<'_>, vm: &VmRef) {
        let Some(pending) = self.pending.get(vm) else { return };
        let mut left = pending.resources.clone();
        while let Some(id) = left.first().cloned() {
            match merge_tags(api, &id, &pending.tags).await {
                Ok(()) => {
                    left.remove(0);
                }
                Err(e) => {
                    tracing::debug!(vm = %vm.name, resource = %id, error = %e, "tagging the VM's resource: not yet");
                    break;
                }
            }
        }
        if left.is_empty() {
            self.pending.remove(vm);
        } else if left.len() < pending.resources.len() {
            self.pending.insert(vm.clone(), Arc::new(PendingTags { resources: left, tags: pending.tags.clone() }));
        }
    }
}

/// `PATCH {id}/providers/Microsoft.Resources/tags/default` with operation `Merge`.
async fn merge_tags(api: &Api<'_>, id: &str, tags: &BTreeMap<String, String>) -> Result<(), DriverError> {
    let mut segments: Vec<&str> = id.split('/').filter(|s| !s.is_empty()).collect();
    segments.extend(["providers", "Microsoft.Resources", "tags", "default"]);
    let url = api.arm_url(&segments, TAGS_API_VERSION);
    let body = serde_json::to_vec(&json!({"operation": "Merge", "properties": {"tags": tags}}))
        .map_err(|_| DriverError::internal("building the tags request failed"))?;
    api.patch_raw("resources", "tags.updateAtScope", &url, &body).await.map(|_| ()).map_err(Into::into)
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
        let pending = PendingTags::of_create(&spec, &vm, "m-nic-1", BTreeMap::new());
        let names: Vec<&str> = pending.resources.iter().map(|id| id.rsplit('/').next().unwrap()).collect();
        // The image disk is tagged by its own PUT.
        assert_eq!(names, ["m-os-disk", "m-containerd-0-data-disk", "m-nic-1"]);
        assert!(pending.resources[2].contains("/providers/Microsoft.Network/networkInterfaces/"));
    }
}
