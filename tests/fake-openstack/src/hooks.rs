//! The OpenStack side of the shared admin API: operation classes, the real error per
//! fault kind and service (or, for `placement` on `servers.create`, the scheduler's
//! outcome, [`scheduling_outcome`]), the inventory, reset and out-of-band termination.

use std::sync::Arc;
use std::time::Instant;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use fake_cloud_support::{CloudHooks, FaultKind, Inventory, OpClass, PlantError, PlantRequest, Planted};
use serde_json::json;

use crate::error::{ApiError, Service};
use crate::state::Store;
use crate::state::compute::Scheduling;

/// [`CloudHooks`] for the fake OpenStack.
#[derive(Debug)]
pub(crate) struct OpenStackHooks {
    /// The cloud state the inventory and reset act on.
    pub(crate) store: Arc<Store>,
}

/// Every counted operation and its class (`tokens.create` is in no class).
pub(crate) const OPERATIONS: &[(&str, OpClass)] = &[
    ("servers.create", OpClass::Create),
    ("servers.get", OpClass::Read),
    ("servers.list", OpClass::Read),
    ("servers.delete", OpClass::Delete),
    // Server metadata (the compute API reference, "Server metadata"; `crate::api::metadata`):
    // removing an item changes the server, it deletes no instance.
    ("servers.metadata.list", OpClass::Read),
    ("servers.metadata.get", OpClass::Read),
    ("servers.metadata.replace", OpClass::Write),
    ("servers.metadata.update", OpClass::Write),
    ("servers.metadata.set", OpClass::Write),
    ("servers.metadata.delete", OpClass::Write),
    ("flavors.list", OpClass::Read),
    ("flavors.get", OpClass::Read),
    ("ports.list", OpClass::Read),
    ("ports.get", OpClass::Read),
    ("ports.create", OpClass::Write),
    ("ports.update", OpClass::Write),
    ("ports.tags", OpClass::Write),
    ("ports.delete", OpClass::Delete),
    ("networks.list", OpClass::Read),
    ("networks.get", OpClass::Read),
    ("subnets.list", OpClass::Read),
    ("subnets.get", OpClass::Read),
    ("security_groups.list", OpClass::Read),
    ("security_groups.get", OpClass::Read),
    ("images.list", OpClass::Read),
    ("images.get", OpClass::Read),
    ("images.update", OpClass::Write),
    ("members.list", OpClass::Read),
    ("members.get", OpClass::Read),
    ("members.create", OpClass::Write),
    ("members.update", OpClass::Write),
    ("members.delete", OpClass::Delete),
    ("volumes.list", OpClass::Read),
    ("volumes.get", OpClass::Read),
    ("volumes.create", OpClass::Write),
    ("volumes.delete", OpClass::Delete),
];

/// The service an operation belongs to.
pub(crate) fn service_of(operation: &str) -> Service {
    match operation.split('.').next().unwrap_or("") {
        "servers" | "flavors" => Service::Nova,
        "ports" | "networks" | "subnets" | "security_groups" => Service::Neutron,
        "images" | "members" => Service::Glance,
        "volumes" => Service::Cinder,
        _ => Service::Keystone,
    }
}

/// What Nova's scheduler decides for the server of an injected fault of `kind` on
/// `operation`, when that fault is not an error answer: `placement` on
/// `servers.create` (either phase) is Nova's `NoValidHost`, which the API never answers.
/// Nova accepts the server (202 with its id: the compute API reference, "Create Server",
/// answers 202 before scheduling) and the scheduler then fails it: BUILD (`scheduling`),
/// then ERROR with `fault {"code": 500, "message": "No valid host was found. …",
/// "created"}` (the compute API reference, "Show Server Details": `fault`, shown for a
/// server in ERROR). `None`: the fault is answered ([`fault_error`]).
pub(crate) fn scheduling_outcome(kind: FaultKind, operation: &str) -> Option<Scheduling> {
    (kind == FaultKind::Placement && schedules(operation)).then_some(Scheduling::NoValidHost)
}

/// Whether an injected fault on `operation` may be a scheduling outcome ([`scheduling_outcome`]).
pub(crate) fn schedules(operation: &str) -> bool {
    operation == "servers.create"
}

/// The real error of the operation's service for a neutral fault kind (`placement` on
/// `servers.create` is no error answer but a scheduling outcome, [`scheduling_outcome`];
/// on the other operations it is answered as `capacity`: Cinder's scheduler fails a
/// volume it cannot place after accepting it too, and Neutron has no placement).
pub(crate) fn fault_error(kind: FaultKind, operation: &str, identity_uri: &str) -> ApiError {
    let service = service_of(operation);
    let neutron = service == Service::Neutron;
    let typed = |status: StatusCode, kind: &'static str, message: String| {
        if neutron { ApiError::neutron(status, kind, message) } else { ApiError::new(service, status, message) }
    };
    match kind {
        FaultKind::Throttle => {
            let message = if neutron { "Too many requests" } else { "Rate limit exceeded" };
            typed(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", message.to_owned())
        }
        FaultKind::Capacity | FaultKind::Placement => match operation {
            "servers.create" => ApiError::forbidden(
                service,
                "Quota exceeded for instances: Requested 1, but already used 100 of 100 instances",
            ),
            "volumes.create" => ApiError::new(
                service,
                StatusCode::PAYLOAD_TOO_LARGE,
                "VolumeSizeExceedsAvailableQuota: Requested volume or snapshot exceeds allowed gigabytes quota. \
                 Requested 1G, quota is 1000G and 1000G has been consumed.",
            ),
            _ => typed(StatusCode::CONFLICT, "Conflict", format!("Quota exceeded for resources of {operation}.")),
        },
        FaultKind::Unavailable => typed(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "The server is currently unavailable. Please try again at a later time.".to_owned(),
        ),
        FaultKind::Internal => typed(
            StatusCode::INTERNAL_SERVER_ERROR,
            "HTTPInternalServerError",
            "Unexpected API Error. Please report this at http://bugs.launchpad.net/nova/ and attach the Nova API log \
             if possible."
                .to_owned(),
        ),
        FaultKind::Auth => ApiError::unauthorized(service, identity_uri),
        FaultKind::Permission => {
            let rule = operation.replace('.', ":");
            typed(
                StatusCode::FORBIDDEN,
                "PolicyNotAuthorized",
                format!("Policy doesn't allow os_api:{rule} to be performed."),
            )
        }
        FaultKind::Invalid => typed(
            StatusCode::BAD_REQUEST,
            "InvalidInput",
            format!("Invalid input for operation: the request of {operation} is not valid (injected fault)."),
        ),
    }
}

impl CloudHooks for OpenStackHooks {
    fn operation_class(&self, operation: &str) -> Option<OpClass> {
        OPERATIONS.iter().find(|(name, _)| *name == operation).map(|(_, class)| *class)
    }

    fn fault_response(&self, kind: FaultKind, operation: &str) -> Response {
        fault_error(kind, operation, "/identity").into_response()
    }

    fn inventory(&self) -> Inventory {
        let now = Instant::now();
        let state = self.store.lock_at(now);
        let mut instances: Vec<_> =
            state.servers.values().map(|s| state.server_inventory(s, s.status(), true, now)).collect();
        instances.extend(state.gone_servers.iter().map(|(_, entry)| entry.clone()));
        let mut dependents: Vec<_> = state.ports.values().map(|p| state.port_inventory(p, p.status, true)).collect();
        dependents.extend(state.volumes.values().map(|v| state.volume_inventory(v, v.status(), true)));
        dependents.extend(state.gone_dependents.iter().map(|(_, entry)| entry.clone()));
        let images = state
            .images
            .values()
            .map(|image| {
                json!({
                    "id": image.id,
                    "name": image.name,
                    "owner": image.owner,
                    "visibility": image.visibility,
                    "members": image.members.iter().map(|m| json!({"member": m.project_id, "status": m.status})).collect::<Vec<_>>(),
                })
            })
            .collect();
        Inventory { instances, images, dependents }
    }

    fn reset(&self) {
        self.store.reset();
    }

    /// Deletes the server at once, as an operator does: 404 `itemNotFound` from then on,
    /// `DELETED` (not live) in the inventory. As for a server DELETE, ports Nova made for
    /// it go, pre-created ports stay unbound (`device_id`/`device_owner` cleared, `DOWN`),
    /// and volumes go with `delete_on_termination` or stay detached.
    fn terminate(&self, id: &str) -> bool {
        let now = Instant::now();
        self.store.lock_at(now).remove_server(id, now)
    }

    /// A server booted out of band (`crate::plant`).
    fn plant(&self, request: &PlantRequest) -> Result<Planted, PlantError> {
        crate::plant::plant(&self.store, request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_services() {
        let hooks = OpenStackHooks { store: Arc::new(Store::new()) };
        assert_eq!(hooks.operation_class("servers.create"), Some(OpClass::Create));
        assert_eq!(hooks.operation_class("ports.create"), Some(OpClass::Write));
        assert_eq!(hooks.operation_class("tokens.create"), None);
        assert_eq!(service_of("members.update"), Service::Glance);
        assert_eq!(service_of("security_groups.get"), Service::Neutron);
        let error = fault_error(FaultKind::Capacity, "servers.create", "x");
        assert_eq!(error.status, StatusCode::FORBIDDEN);
        assert_eq!(scheduling_outcome(FaultKind::Placement, "servers.create"), Some(Scheduling::NoValidHost));
        assert_eq!(scheduling_outcome(FaultKind::Capacity, "servers.create"), None);
        assert_eq!(scheduling_outcome(FaultKind::Placement, "ports.create"), None);
        assert_eq!(fault_error(FaultKind::Placement, "volumes.create", "x").status, StatusCode::PAYLOAD_TOO_LARGE);
    }
}
