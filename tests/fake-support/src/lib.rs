//! Cloud-neutral machinery of the fake clouds' admin API (`docs/fake-admin-api.md`).
//!
//! A cloud fake implements [`CloudHooks`] (operation classes, its real error answer per
//! [`FaultKind`], inventory, reset, out-of-band termination and planting), creates an [`Admin`], passes every cloud API request
//! through [`Admin::begin_call`], merges [`admin_router`] into its own router and serves the
//! result with [`FakeHandle::serve`]. [`AdminClient`] is the one client of that API.
//! [`wire`] is the one percent-encoding and form parsing of the fakes' cloud wire protocols.

mod admin;
mod client;
mod clock;
mod counters;
mod faults;
mod handle;
mod hooks;
mod idempotency;
mod jwt;
mod main_fn;
mod operations;
mod plant;
mod rate_limit;
mod router;
mod settings;
pub mod wire;

pub use admin::{Admin, CallGuard, Rejection, RejectionCause};
pub use client::{AdminClient, Fault, ReclaimAnswer};
pub use clock::utc_timestamp;
pub use counters::CallCounts;
pub use faults::{FaultKind, FaultSpec, FaultTable, Phase};
pub use handle::FakeHandle;
pub use hooks::{CloudHooks, Inventory, InventoryInstance, Reclaim};
pub use idempotency::{IdempotencyTokens, Replay};
pub use jwt::{JwtRefusal, unexpired_claims};
pub use main_fn::run_fake;
pub use operations::{OpClass, OpSelector};
pub use plant::{AttachedKind, PlantAttached, PlantError, PlantRequest, Planted, PlantedAttached};
pub use rate_limit::TokenBucket;
pub use router::{ADMIN_PREFIX, admin_router};
pub use settings::{Consistency, LatencyRules, LatencySpec, RateLimitSpec, Timing};
