//! The ARM side of the shared admin API: operation classes, the real ARM error per
//! fault kind, the inventory and reset.

use std::sync::Arc;
use std::time::Instant;

use axum::response::{IntoResponse, Response};
use fake_cloud_support::{CloudHooks, FaultKind, Inventory, OpClass, PlantError, PlantRequest, Planted, Reclaim};
use serde_json::json;

use crate::api::routes::action_of;
use crate::error::ArmError;
use crate::state::{Store, VmPhase, render};
use crate::wire::path_str;

/// [`CloudHooks`] for the fake ARM.
#[derive(Debug)]
pub(crate) struct ArmHooks {
    /// The cloud state the inventory and reset act on.
    pub(crate) store: Arc<Store>,
}

/// The real ARM error for a neutral fault kind.
pub(crate) fn fault_error(kind: FaultKind, operation: &str) -> ArmError {
    match kind {
        FaultKind::Throttle => ArmError::throttled(),
        FaultKind::Capacity => ArmError::quota_exceeded(),
        // Compute's answer for a size (or feature) not offered in the location or zone.
        FaultKind::Placement => ArmError::sku_not_available(crate::LOCATION),
        FaultKind::Unavailable => ArmError::unavailable(),
        FaultKind::Internal => ArmError::internal(),
        FaultKind::Auth => ArmError::invalid_token("The access token is missing or invalid (injected fault)."),
        FaultKind::Permission => ArmError::authorization_failed(
            crate::CLIENT_ID,
            action_of(operation),
            &format!("/subscriptions/{}", crate::SUBSCRIPTION_ID),
        ),
        FaultKind::Invalid => ArmError::invalid_parameter(
            format!("The value of a parameter of {operation} is invalid (injected fault)."),
            "properties",
        ),
    }
}

/// Operation names and their classes.
pub(crate) const OPERATIONS: &[(&str, OpClass)] = &[
    ("virtualMachines.createOrUpdate", OpClass::Create),
    ("virtualMachines.update", OpClass::Write),
    ("virtualMachines.get", OpClass::Read),
    ("virtualMachines.list", OpClass::Read),
    ("virtualMachines.delete", OpClass::Delete),
    ("networkInterfaces.createOrUpdate", OpClass::Write),
    ("networkInterfaces.get", OpClass::Read),
    ("networkInterfaces.list", OpClass::Read),
    ("networkInterfaces.delete", OpClass::Delete),
    ("disks.createOrUpdate", OpClass::Write),
    ("disks.update", OpClass::Write),
    ("disks.get", OpClass::Read),
    ("disks.listByResourceGroup", OpClass::Read),
    ("disks.delete", OpClass::Delete),
    ("resources.listByResourceGroup", OpClass::Read),
    ("resourceGroups.get", OpClass::Read),
    ("resourceGroups.checkExistence", OpClass::Read),
    ("subnets.get", OpClass::Read),
    ("tags.getAtScope", OpClass::Read),
    ("tags.createOrUpdateAtScope", OpClass::Write),
    ("tags.updateAtScope", OpClass::Write),
    ("operations.get", OpClass::Read),
    ("galleries.get", OpClass::Read),
    ("galleryImages.get", OpClass::Read),
    ("galleryImageVersions.get", OpClass::Read),
    ("gallerySharingProfile.update", OpClass::Write),
    ("sharedGalleryImageVersions.get", OpClass::Read),
    ("virtualMachineImages.get", OpClass::Read),
    ("communityGalleryImageVersions.get", OpClass::Read),
    ("marketplaceAgreements.get", OpClass::Read),
    ("marketplaceAgreements.create", OpClass::Write),
    ("resourceGraph.resources", OpClass::Read),
];

impl CloudHooks for ArmHooks {
    fn operation_class(&self, operation: &str) -> Option<OpClass> {
        OPERATIONS.iter().find(|(name, _)| *name == operation).map(|(_, class)| *class)
    }

    fn fault_response(&self, kind: FaultKind, operation: &str) -> Response {
        fault_error(kind, operation).into_response()
    }

    fn inventory(&self) -> Inventory {
        let now = Instant::now();
        let state = self.store.lock_at(now);
        let mut instances: Vec<_> = state
            .vms
            .values()
            .map(|vm| render::vm_inventory(vm, &vm.phase.word().to_ascii_lowercase(), true))
            .collect();
        instances.extend(state.deleted_vms.iter().map(|(_, entry)| entry.clone()));
        let images = state
            .galleries
            .values()
            .flat_map(|gallery| {
                gallery.images.values().flat_map(move |image| {
                    image.versions.iter().map(move |version| {
                        json!({
                            "id": format!("{}/images/{}/versions/{version}", gallery.id(), image.name),
                            "gallery": gallery.name,
                            "uniqueName": gallery.unique_name,
                            "image": image.name,
                            "version": version,
                            "owner": gallery.sub,
                            "permissions": gallery.permissions,
                            "sharedWith": gallery.groups.iter().map(|(kind, ids)| json!({"type": kind, "ids": ids})).collect::<Vec<_>>(),
                            "community": gallery.community,
                        })
                    })
                })
            })
            .collect();
        Inventory { instances, images, dependents: render::dependents(&state, now) }
    }

    fn reset(&self) {
        self.store.reset();
    }

    /// As a spot eviction with `evictionPolicy: Delete`: the VM (matched by its
    /// ARM id, case-insensitively) is gone at once through the same transition
    /// that ends a `virtualMachines.delete`, so its NICs and disks go as that
    /// delete leaves them (`deleteOption: Delete` ones are deleted, `Detach`
    /// ones stay, detached, the NICs reserved) and the inventory lists it as
    /// `deleted`. VMs already being deleted are not live.
    fn terminate(&self, id: &str) -> bool {
        let now = Instant::now();
        let mut state = self.store.lock_at(now);
        let Some(vm) = state
            .vms
            .values_mut()
            .find(|vm| vm.id.eq_ignore_ascii_case(id) && !matches!(vm.phase, VmPhase::Deleting { .. }))
        else {
            return false;
        };
        vm.phase = VmPhase::Deleting { until: now };
        state.advance(now);
        true
    }

    /// A Spot eviction as Azure makes it (learn.microsoft.com/azure/virtual-machines/spot-vms,
    /// "Eviction policy"; Compute REST `VirtualMachineEvictionPolicyTypes`): the VM (ARM id,
    /// case-insensitive) must be a Spot VM as its PUT recorded it (`properties.priority`
    /// `Spot` or `Low`; otherwise `NotSpot`) and running or on its way (not being deleted,
    /// not `Failed`, not deallocated already; otherwise `NotFound`). With `evictionPolicy`
    /// `Deallocate` (the default) it is deallocated: provisioning state `Succeeded` (a
    /// create still running ends now), instance view `PowerState/deallocated`, and its
    /// NICs (attached, keeping their private IPs) and disks stay. With `Delete` it is
    /// deleted at once, as [`Self::terminate`] does: its NICs and disks go or stay by their
    /// `deleteOption`. Counts no call.
    fn reclaim(&self, id: &str) -> Reclaim {
        let now = Instant::now();
        let mut state = self.store.lock_at(now);
        let Some(vm) = state.vms.values_mut().find(|vm| {
            vm.id.eq_ignore_ascii_case(id)
                && !vm.deallocated
                && matches!(vm.phase, VmPhase::Provisioning { .. } | VmPhase::Succeeded)
        }) else {
            return Reclaim::NotFound;
        };
        let priority = path_str(&vm.model, &["properties", "priority"]).unwrap_or("Regular");
        if !(priority.eq_ignore_ascii_case("Spot") || priority.eq_ignore_ascii_case("Low")) {
            return Reclaim::NotSpot;
        }
        let delete =
            path_str(&vm.model, &["properties", "evictionPolicy"]).is_some_and(|p| p.eq_ignore_ascii_case("Delete"));
        if delete {
            vm.phase = VmPhase::Deleting { until: now };
            state.advance(now);
            return Reclaim::Reclaimed(
                "deleted (evictionPolicy Delete): the VM is gone, its NICs and disks with deleteOption Delete too"
                    .to_owned(),
            );
        }
        let op = match &vm.phase {
            VmPhase::Provisioning { op, .. } => Some(op.clone()),
            _ => None,
        };
        vm.phase = VmPhase::Succeeded;
        vm.deallocated = true;
        if let Some(op) = op.and_then(|op| state.operations.get_mut(&op)) {
            op.done_at = now;
            op.failure = None;
        }
        Reclaim::Reclaimed("PowerState/deallocated (evictionPolicy Deallocate), provisioningState Succeeded".to_owned())
    }

    /// A VM created out of band (`crate::plant`).
    fn plant(&self, request: &PlantRequest) -> Result<Planted, PlantError> {
        crate::plant::plant(&self.store, request)
    }
}
