//! The fake clouds' admin API (`docs/fake-admin-api.md`), through the one typed
//! client every tool shares (`fake-cloud-support`), under the names the scenarios use.

pub use fake_cloud_support::{
    AdminClient as FakeAdmin, AttachedKind, CallCounts as Calls, Fault, FaultKind, FaultSpec, Inventory,
    InventoryInstance as Instance, OpClass, Phase, PlantAttached, PlantRequest, Planted, PlantedAttached,
    ReclaimAnswer,
};
