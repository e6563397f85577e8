//! A stateful fake of the Compute Engine REST API (`/compute/v1/...`) for tests:
//! instances (insert/get/list/start/delete/setLabels/setTags, Spot VM
//! preemption through the admin reclaim), the disks the inserts make
//! (get/setLabels/resize/update), zone operations (get/wait/list) and images
//! (get/getIamPolicy/setIamPolicy), with GCE's real JSON shapes and error
//! bodies, Google's STS token exchange and IAM Credentials `generateAccessToken`
//! for workload identity (tokens that expire; Compute refuses unknown or
//! expired ones with 401), plus the shared admin API of `docs/fake-admin-api.md` under `/_admin`.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let fake = fake_gce::start("127.0.0.1:0".parse().expect("addr")).await?;
//! // point google-cloud-compute-v1 at fake.url(), drive faults via fake.admin_url()
//! # Ok(()) }
//! ```

mod access;
mod api;
mod build;
mod caller;
mod clock;
mod error;
mod filter;
mod gce_admin;
mod hooks;
mod model;
mod paging;
mod plant;
mod reclaim;
mod state;
mod sts;
mod urls;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::response::IntoResponse;
pub use fake_cloud_support::FakeHandle;
use fake_cloud_support::{Admin, admin_router};

pub use state::seed::IMAGE_OWNER;
pub use sts::{TOKEN_EXCHANGE_GRANT, subject_token};

/// The seeded public image, readable and usable by everyone.
pub const PUBLIC_IMAGE: &str = "projects/debian-cloud/global/images/debian-12";

/// The seeded private image; only [`IMAGE_OWNER`] (and principals it grants a role) may use it.
pub const PRIVATE_IMAGE: &str = "projects/image-owner/global/images/custom-gardenlinux";

/// The complete router: the Compute API (behind bearer token checks), STS
/// and IAM Credentials token endpoints, the shared admin API and the GCE-only admin routes.
pub fn router() -> Router {
    let store = Arc::new(state::Store::new());
    let tokens = Arc::new(sts::Tokens::default());
    let admin = Admin::new(Arc::new(hooks::GceHooks { store: Arc::clone(&store), tokens: Arc::clone(&tokens) }));
    api::routes(api::Ctx { admin: admin.clone(), store: Arc::clone(&store) })
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&tokens), sts::authenticate))
        .merge(sts::routes(tokens))
        .merge(admin_router(admin))
        .merge(gce_admin::routes(store))
        .fallback(|uri: axum::http::Uri| async move {
            error::GceError::not_found(uri.path().trim_start_matches('/')).into_response()
        })
}

/// Serves the fake on `addr` (port 0 picks a free port) until the handle is dropped.
pub async fn start(addr: SocketAddr) -> io::Result<FakeHandle> {
    FakeHandle::serve(addr, router()).await
}
