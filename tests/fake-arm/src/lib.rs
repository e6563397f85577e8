//! A stateful fake of Azure Resource Manager (ARM) plus the AAD token endpoint, for tests:
//! virtual machines, network interfaces, managed disks, generic resource lists by tag,
//! async operations (`Azure-AsyncOperation` / `Location`), Compute Gallery sharing and the
//! consumer's shared-gallery view — with ARM's real wire shapes, status codes and error
//! bodies — plus the shared admin API of `docs/fake-admin-api.md` under `/_admin` and the
//! Azure-only admin routes under `/_admin/azure/*` (see the crate README).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let fake = fake_arm::start("127.0.0.1:0".parse().expect("addr")).await?;
//! // token: POST {fake.url()}/{TENANT_ID}/oauth2/v2.0/token; ARM base URL: fake.url()
//! # Ok(()) }
//! ```

mod aad;
mod api;
mod arm_admin;
mod error;
mod hooks;
mod paging;
mod plant;
mod state;
mod wire;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
pub use fake_cloud_support::FakeHandle;
use fake_cloud_support::{Admin, admin_router};

/// The AAD tenant of every seeded identity.
pub const TENANT_ID: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";

/// The cluster's subscription: the resource group, network and VMs live here.
pub const SUBSCRIPTION_ID: &str = "00000000-0000-4000-8000-000000000001";
/// The cluster identity's client id (may access [`SUBSCRIPTION_ID`] only).
pub const CLIENT_ID: &str = "11111111-0000-4000-8000-000000000001";
/// The cluster identity's client secret.
pub const CLIENT_SECRET: &str = "fake-cluster-client-secret";

/// The image owner's subscription: resource group `images` with the galleries.
pub const OWNER_SUBSCRIPTION_ID: &str = "00000000-0000-4000-8000-000000000002";
/// The image owner identity's client id (may access [`OWNER_SUBSCRIPTION_ID`] only).
pub const OWNER_CLIENT_ID: &str = "11111111-0000-4000-8000-000000000002";
/// The image owner identity's client secret.
pub const OWNER_CLIENT_SECRET: &str = "fake-owner-client-secret";

/// The workload-identity federated token, accepted as `client_assertion` for either client id.
pub const FEDERATED_TOKEN: &str = "fake-federated-service-account-token";

/// The seeded resource group in [`SUBSCRIPTION_ID`].
pub const RESOURCE_GROUP: &str = "shoot--dev--conf";
/// The region of every seeded resource.
pub const LOCATION: &str = "westeurope";
/// The seeded virtual network (in [`RESOURCE_GROUP`]).
pub const VNET: &str = "shoot--dev--conf";
/// The seeded subnet of [`VNET`] (`10.250.0.0/16`; NIC IPs from `10.250.0.4` on).
pub const SUBNET: &str = "shoot--dev--conf-nodes";

/// A gallery image version of the owner that may be shared (gallery `gardenlinux`, not yet shared).
pub const ALLOWED_IMAGE: &str = "/subscriptions/00000000-0000-4000-8000-000000000002/resourceGroups/images/providers/Microsoft.Compute/galleries/gardenlinux/images/gardenlinux/versions/1.0.0";
/// A gallery image version of the owner that tests must not share.
pub const NOT_ALLOWED_IMAGE: &str = "/subscriptions/00000000-0000-4000-8000-000000000002/resourceGroups/images/providers/Microsoft.Compute/galleries/gardenlinux/images/not-allowed/versions/1.0.0";
/// A gallery image version already shared with [`SUBSCRIPTION_ID`] (gallery `shared`).
pub const VISIBLE_IMAGE: &str = "/subscriptions/00000000-0000-4000-8000-000000000002/resourceGroups/images/providers/Microsoft.Compute/galleries/shared/images/gardenlinux/versions/1.0.0";

/// The public name of the seeded community gallery (Garden Linux's form: `<prefix>-<guid>`).
pub const COMMUNITY_GALLERY: &str = "gardenlinux-13e998fe-534d-4b0a-8a27-f16a73aef620";
/// A community gallery image version replicated to [`LOCATION`] (and `northeurope`).
pub const COMMUNITY_IMAGE: &str =
    "/CommunityGalleries/gardenlinux-13e998fe-534d-4b0a-8a27-f16a73aef620/Images/gardenlinux/Versions/1592.1.0";
/// A community gallery image version replicated to `eastus` only: not available in [`LOCATION`].
pub const COMMUNITY_IMAGE_ELSEWHERE: &str =
    "/CommunityGalleries/gardenlinux-13e998fe-534d-4b0a-8a27-f16a73aef620/Images/gardenlinux/Versions/1443.10.0";
/// The marketplace image with a purchase plan (`plan{name: greatest, product: gardenlinux, publisher: sap}`),
/// whose terms no subscription has accepted at start.
pub const PLAN_IMAGE_URN: &str = "sap:gardenlinux:greatest:1443.3.0";

/// The complete router: AAD token endpoint, ARM, the shared admin API and the Azure-only admin routes.
pub fn router() -> Router {
    let store = Arc::new(state::Store::new());
    let admin = Admin::new(Arc::new(hooks::ArmHooks { store: Arc::clone(&store) }));
    aad::routes(Arc::clone(&store))
        .merge(admin_router(admin.clone()))
        .merge(arm_admin::routes(Arc::clone(&store)))
        .fallback(api::fallback(api::Ctx { admin, store }))
        .layer(axum::middleware::from_fn(api::request_ids))
}

/// Serves the fake on `addr` (port 0 picks a free port) until the handle is dropped.
pub async fn start(addr: SocketAddr) -> io::Result<FakeHandle> {
    FakeHandle::serve(addr, router()).await
}
