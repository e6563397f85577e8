//! The ECS side of the shared admin API: operation classes, the real ECS error per
//! fault kind, the inventory, reset, out-of-band termination and spot reclaim.

use std::sync::Arc;
use std::time::Instant;

use axum::response::{IntoResponse, Response};
use fake_cloud_support::{CloudHooks, FaultKind, Inventory, OpClass, PlantError, PlantRequest, Planted, Reclaim};
use serde_json::json;

use crate::error::{EcsError, STS_HOST};
use crate::state::Store;

/// [`CloudHooks`] for the fake ECS.
#[derive(Debug)]
pub(crate) struct EcsHooks {
    /// The cloud state the inventory and reset act on.
    pub(crate) store: Arc<Store>,
}

/// ECS actions (version 2014-05-26) and their classes.
pub(crate) const ECS_ACTIONS: &[(&str, OpClass)] = &[
    ("RunInstances", OpClass::Create),
    ("DescribeInstances", OpClass::Read),
    ("DescribeImages", OpClass::Read),
    ("DescribeImageSharePermission", OpClass::Read),
    ("ModifyImageSharePermission", OpClass::Write),
    ("DeleteInstance", OpClass::Delete),
    ("TagResources", OpClass::Write),
    ("UntagResources", OpClass::Write),
    ("DescribeDisks", OpClass::Read),
    ("DescribeNetworkInterfaces", OpClass::Read),
    ("ResizeDisk", OpClass::Write),
    ("ModifyInstanceAttribute", OpClass::Write),
];

/// STS actions (version 2015-04-01) and their classes.
pub(crate) const STS_ACTIONS: &[(&str, OpClass)] = &[("GetCallerIdentity", OpClass::Read)];

/// The real ECS (or STS) error for a neutral fault kind.
pub(crate) fn fault_error(kind: FaultKind, operation: &str) -> EcsError {
    let error = match kind {
        FaultKind::Throttle => EcsError::throttled(),
        FaultKind::Capacity => EcsError::no_stock(),
        FaultKind::Placement => EcsError::zone_not_on_sale(),
        FaultKind::Unavailable => EcsError::unavailable(),
        FaultKind::Internal => EcsError::internal(),
        FaultKind::Auth => EcsError::access_key_not_found(),
        FaultKind::Permission => EcsError::forbidden_ram(),
        FaultKind::Invalid => EcsError::bad_request(
            "InvalidParameter",
            format!("The specified parameter of {operation} is not valid (injected fault)."),
        ),
    };
    if STS_ACTIONS.iter().any(|(name, _)| *name == operation) { error.with_host(STS_HOST) } else { error }
}

impl CloudHooks for EcsHooks {
    fn operation_class(&self, operation: &str) -> Option<OpClass> {
        ECS_ACTIONS.iter().chain(STS_ACTIONS).find(|(name, _)| *name == operation).map(|(_, class)| *class)
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
            .map(|i| {
                let mut entry = i.inventory(i.status(now), true);
                if let Some(terms) = state.spot_terms.get(&i.id) {
                    terms.annotate(&mut entry);
                }
                entry
            })
            .collect();
        instances.extend(state.deleted.iter().map(|(_, entry)| entry.clone()));
        let mut dependents: Vec<_> = state.instances.values().flat_map(|i| i.dependents(true)).collect();
        dependents.extend(state.detached_disks.values().map(|d| d.disk.inventory("data", None, "Available", true)));
        dependents.extend(state.deleted_dependents.iter().map(|(_, entry)| entry.clone()));
        let images = state
            .images
            .values()
            .map(|image| {
                json!({
                    "id": image.id,
                    "name": image.name,
                    "owner": image.owner.as_deref().unwrap_or("system"),
                    "shared_with": image.shared_with,
                    "is_public": image.is_public,
                })
            })
            .collect();
        Inventory { instances, images, dependents }
    }

    fn reset(&self) {
        self.store.reset();
    }

    /// Releases the instance at once, as ECS releases a reclaimed spot instance: gone
    /// from DescribeInstances, `Deleted` (not live) in the inventory. A RunInstances
    /// replay with its ClientToken still answers its id and creates nothing.
    fn terminate(&self, id: &str) -> bool {
        let now = Instant::now();
        self.store.lock_at(now).release(id, now)
    }

    /// ECS takes the spot instance back: `Stopped`, `OperationLocks` `LockReason:
    /// Recycling`, released some minutes later (`State::reclaim`). `NotSpot` for an
    /// instance launched with `SpotStrategy` `NoSpot` (the default), `NotFound` for no
    /// instance or one already on its way out (`Stopping`).
    fn reclaim(&self, id: &str) -> Reclaim {
        let now = Instant::now();
        self.store.lock_at(now).reclaim(id, now)
    }

    /// A running instance launched out of band (`crate::plant`).
    fn plant(&self, request: &PlantRequest) -> Result<Planted, PlantError> {
        crate::plant::plant(&self.store, request)
    }
}
