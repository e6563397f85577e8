//! The GCE side of the shared admin API: operation classes, the real GCE error
//! per fault kind, the inventory and reset.

use std::sync::Arc;
use std::time::Instant;

use axum::response::{IntoResponse, Response};
use fake_cloud_support::{CloudHooks, FaultKind, Inventory, OpClass, PlantError, PlantRequest, Planted, Reclaim};
use serde_json::json;

use crate::error::GceError;
use crate::state::lifecycle::Lifecycle;
use crate::state::{Store, inventory_entry};

/// [`CloudHooks`] for the fake Compute Engine.
#[derive(Debug)]
pub(crate) struct GceHooks {
    /// The cloud state the inventory and reset act on.
    pub(crate) store: Arc<Store>,
    /// Issued access tokens and the STS settings (reset with the store).
    pub(crate) tokens: Arc<crate::sts::Tokens>,
}

/// The real GCE error for a neutral fault kind.
///
/// `placement` (the machine cannot be placed in the zone) is GCE's answer to a
/// machine type the zone does not offer: 400 `invalid` "Machine type with name
/// '...' does not exist in zone '...'" (`instances.insert` names the request's
/// machine type, `api::instances::insert`); in phase `after` an insert's
/// operation fails with `ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS`
/// (`state::operations::not_placeable`).
pub(crate) fn fault_error(kind: FaultKind, operation: &str) -> GceError {
    match kind {
        FaultKind::Throttle => GceError::rate_limited(),
        FaultKind::Capacity => GceError::quota_exceeded(),
        FaultKind::Placement => GceError::invalid(format!(
            "Invalid value for field 'resource.machineType'. The machine type of this {operation} does not exist in zone."
        )),
        FaultKind::Unavailable => GceError::backend_error(),
        FaultKind::Internal => GceError::internal(),
        FaultKind::Auth => GceError::unauthenticated(),
        FaultKind::Permission => GceError::forbidden(operation),
        FaultKind::Invalid => {
            GceError::invalid(format!("Invalid value in the request to {operation} (injected fault)."))
        }
    }
}

impl CloudHooks for GceHooks {
    fn operation_class(&self, operation: &str) -> Option<OpClass> {
        match operation {
            "instances.insert" => Some(OpClass::Create),
            "instances.delete" => Some(OpClass::Delete),
            // Starting a stopped instance changes an existing resource.
            "images.setIamPolicy" | "instances.start" => Some(OpClass::Write),
            // In-place changes of an instance or a disk (UpdateMachine).
            "instances.setLabels" | "instances.setTags" | "disks.setLabels" | "disks.resize" | "disks.update" => {
                Some(OpClass::Write)
            }
            "instances.get"
            | "disks.get"
            | "instances.list"
            | "images.get"
            | "images.getIamPolicy"
            | "zoneOperations.get"
            | "zoneOperations.wait"
            | "zoneOperations.list" => Some(OpClass::Read),
            _ => None,
        }
    }

    fn fault_response(&self, kind: FaultKind, operation: &str) -> Response {
        fault_error(kind, operation).into_response()
    }

    fn inventory(&self) -> Inventory {
        let now = Instant::now();
        let state = self.store.lock_at(now);
        let mut instances: Vec<_> = state
            .instances
            .values()
            .filter_map(|record| record.render(now))
            .map(|instance| inventory_entry(&instance, &instance.status, &state.disks, true))
            .collect();
        instances.extend(state.deleted.iter().cloned());
        let images = state
            .images
            .iter()
            .map(|((project, name), record)| {
                json!({
                    "project": project,
                    "name": name,
                    "family": record.image.family,
                    "selfLink": record.image.self_link,
                    "etag": record.etag(),
                    "bindings": record.policy.bindings,
                })
            })
            .collect();
        Inventory { instances, images, dependents: Vec::new() }
    }

    fn reset(&self) {
        self.store.reset();
        self.tokens.reset();
    }

    /// As a spot VM with `instanceTerminationAction=DELETE` is reclaimed: the
    /// instance is gone at once (`instances.get` answers 404, its name is free)
    /// and the inventory lists it as `DELETED`, through the same sweep that ends
    /// an `instances.delete`. Instances already being deleted are not live.
    fn terminate(&self, id: &str) -> bool {
        let now = Instant::now();
        let mut state = self.store.lock_at(now);
        let Some(record) = state
            .instances
            .values_mut()
            .find(|record| record.resource.id == id && !matches!(record.lifecycle, Lifecycle::Deleting { .. }))
        else {
            return false;
        };
        record.lifecycle = Lifecycle::Deleting { until: now };
        state.sweep(now);
        true
    }

    /// GCE preempts the Spot VM `id` (`crate::reclaim`): STOP leaves it
    /// `TERMINATED`, DELETE deletes it; a `compute.instances.preempted` zone
    /// operation either way.
    fn reclaim(&self, id: &str) -> Reclaim {
        crate::reclaim::reclaim(&self.store, id)
    }

    /// A running instance inserted out of band (`crate::plant`).
    fn plant(&self, request: &PlantRequest) -> Result<Planted, PlantError> {
        crate::plant::plant(&self.store, request)
    }
}
