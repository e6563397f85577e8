//! A stateful fake of the Compute Engine REST API (`/compute/v1/...`) for tests:
//! instances (insert/get/list/delete), zone operations (get/wait) and images
//! (get/getIamPolicy/setIamPolicy), with GCE's real JSON shapes and error
//! bodies, plus the shared admin API of `docs/fake-admin-api.md` under `/_admin`.
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
mod state;
mod urls;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::response::IntoResponse;
pub use fake_cloud_support::FakeHandle;
use fake_cloud_support::{Admin, admin_router};

pub use state::seed::IMAGE_OWNER;

/// The seeded public image, readable and usable by everyone.
pub const PUBLIC_IMAGE: &str = "projects/debian-cloud/global/images/debian-12";

/// The seeded private image; only [`IMAGE_OWNER`] (and principals it grants a role) may use it.
pub const PRIVATE_IMAGE: &str = "projects/image-owner/global/images/custom-gardenlinux";

/// The complete router: the Compute API, the shared admin API and the GCE-only admin routes.
pub fn router() -> Router {
    let store = Arc::new(state::Store::new());
    let admin = Admin::new(Arc::new(hooks::GceHooks { store: Arc::clone(&store) }));
    api::routes(api::Ctx { admin: admin.clone(), store: Arc::clone(&store) })
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
