//! A stateful fake of the EC2 Query API (plus STS `GetCallerIdentity` and
//! `AssumeRoleWithWebIdentity`, for workload identity) for tests.
//!
//! It speaks the real wire protocol (form-encoded `Action=...`, XML answers in the
//! `2016-11-15` namespace, real error codes and statuses), so `aws-sdk-ec2` talks to it
//! unmodified, and serves the shared admin API of `docs/fake-admin-api.md` on `/_admin`.

mod actions;
mod caller;
mod clock;
mod errors;
mod filters;
mod ids;
mod model;
mod pagination;
mod plant;
mod query;
mod render;
mod server;
mod store;
mod sts;
mod xml;

use std::net::SocketAddr;

pub use caller::{AMAZON_ACCOUNT, CLUSTER_ACCOUNT, OWNER_ACCOUNT};
pub use fake_cloud_support::FakeHandle;
pub use store::{PRIVATE_IMAGE, PRIVATE_SNAPSHOT, PUBLIC_IMAGE};

/// The router of the fake (cloud API on `/`, admin API on `/_admin`), for embedding.
pub fn router() -> axum::Router {
    server::router()
}

/// Starts the fake on `addr` (port 0 picks a free port).
pub async fn start(addr: SocketAddr) -> std::io::Result<FakeHandle> {
    FakeHandle::serve(addr, router()).await
}
