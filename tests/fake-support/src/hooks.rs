//! What a cloud fake plugs into the shared machinery.

use std::collections::BTreeMap;

use axum::response::Response;
use serde::{Deserialize, Serialize};

use crate::faults::FaultKind;
use crate::operations::OpClass;
use crate::plant::{PlantError, PlantRequest, Planted};

/// The cloud-specific side of the admin API, implemented by each fake.
///
/// Methods are synchronous: keep the fake's state behind a `std::sync::Mutex`
/// and never hold it across an `.await`.
pub trait CloudHooks: Send + Sync + 'static {
    /// The class of an exact cloud operation name, `None` for operations outside the table.
    fn operation_class(&self, operation: &str) -> Option<OpClass>;

    /// The cloud's real error answer for an injected fault (or rate-limit refusal) of `kind`.
    fn fault_response(&self, kind: FaultKind, operation: &str) -> Response;

    /// The current inventory for `GET /_admin/inventory`.
    fn inventory(&self) -> Inventory;

    /// Returns the cloud state to its initial state (no instances, seeded images).
    fn reset(&self);

    /// Ends the live instance `id` out of band, as the cloud does on its own
    /// (a spot reclaim, a launch the cloud aborts after accepting it, an
    /// operator in the console): at once, without counting a call, leaving
    /// what the cloud's own delete leaves (EC2 keeps the instance listed as
    /// `terminated`; the others forget the VM, and its dependents go or stay
    /// as their delete options say). `false` when no live instance has `id`
    /// (`POST /_admin/instances/{id}/terminate`).
    fn terminate(&self, id: &str) -> bool;

    /// Plants a running VM out of band (`POST /_admin/instances`), as another
    /// cluster, an operator or an older driver would have made it: exactly the
    /// request's tags (and network tags, where the cloud has them) in the
    /// cloud's own representation, in the request's scope (defaults from the
    /// seeded state), visible to reads at once, counting no call. The fake
    /// knows no driver's conventions: it adds nothing the cloud itself would
    /// not add. Fakes that cannot plant answer [`PlantError::Unsupported`].
    fn plant(&self, request: &PlantRequest) -> Result<Planted, PlantError> {
        let _ = request;
        Err(PlantError::Unsupported)
    }

    /// Reclaims the live Spot (preemptible, low-priority) instance `id` out of
    /// band, exactly as the cloud does when it takes the capacity back, and
    /// leaves it in the state the cloud leaves it in, readable through the
    /// cloud's own API (`POST /_admin/instances/{id}/reclaim`): EC2 terminates
    /// it with the state reason `Server.SpotInstanceTermination`; GCE stops a
    /// Spot VM whose termination action is STOP (`TERMINATED`) and deletes one
    /// whose action is DELETE; ARM deallocates a Spot VM whose eviction policy
    /// is Deallocate and deletes one whose policy is Delete; ECS stops a
    /// spot instance and locks it for release (`OperationLocks` reason
    /// `Recycling`). Counts no call. Clouds without Spot VMs (and fakes that do
    /// not model them) answer [`Reclaim::Unsupported`].
    fn reclaim(&self, id: &str) -> Reclaim {
        let _ = id;
        Reclaim::Unsupported
    }
}

/// What [`CloudHooks::reclaim`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reclaim {
    /// The instance was reclaimed; the text says how the cloud now shows it.
    Reclaimed(String),
    /// No live instance has the id (HTTP 404).
    NotFound,
    /// The instance is not a Spot VM, so the cloud would never reclaim it (HTTP 409).
    NotSpot,
    /// The cloud (or this fake) has no Spot VMs (HTTP 501).
    Unsupported,
}

/// Body of `GET /_admin/inventory`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    /// Every instance the fake knows, including terminated ones (`live: false`).
    pub instances: Vec<InventoryInstance>,
    /// Images with their cloud-specific details (owner, permissions).
    #[serde(default)]
    pub images: Vec<serde_json::Value>,
    /// Resources that belong to a machine but are not its VM: Azure NICs and disks;
    /// empty for other clouds. Same shape as `instances` (`live` is true while the
    /// resource exists; cloud details such as `kind` are flattened in).
    #[serde(default)]
    pub dependents: Vec<InventoryInstance>,
}

/// One instance in the inventory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InventoryInstance {
    /// The cloud's instance id.
    pub id: String,
    /// The machine name (EC2 `Name` tag, GCE instance name); empty when unnamed.
    #[serde(default)]
    pub name: String,
    /// The cloud's state word (`running`, `terminated`, `RUNNING`, ...).
    #[serde(default)]
    pub state: String,
    /// False once terminated/deleted.
    pub live: bool,
    /// Tags or labels.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Cloud-specific extra fields (user data, interfaces, ...), flattened into the object.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}
