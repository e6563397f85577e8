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
