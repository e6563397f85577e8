//! A stateful fake of Alibaba Cloud ECS (RPC API `2014-05-26`) plus STS `GetCallerIdentity`
//! (`2015-04-01`) on one listener, for tests: `RunInstances`, `DescribeInstances`,
//! `DeleteInstance`, `TagResources`, `UntagResources`, `DescribeDisks`, `ResizeDisk`,
//! `DescribeNetworkInterfaces`, `ModifyInstanceAttribute`, `DescribeImages`, `ModifyImageSharePermission`,
//! `DescribeImageSharePermission` and `GetCallerIdentity` — with ECS's real wire protocol
//! (parameters in the query string and/or a form body, V3 `ACS3-HMAC-SHA256` header
//! signatures and V1 `HMAC-SHA1` query signatures, nonce replay protection, ECS's JSON
//! answers and error bodies) — plus the shared admin API of `docs/fake-admin-api.md` under
//! `/_admin` and the ECS-only admin routes under `/_admin/ecs/*` (see the crate README).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let fake = fake_ecs::start("127.0.0.1:0".parse().expect("addr")).await?;
//! // ECS and STS endpoint: fake.url(); sign with ACCESS_KEY_ID / ACCESS_KEY_SECRET
//! # Ok(()) }
//! ```

mod api;
mod ecs_admin;
mod error;
mod hooks;
mod params;
mod plant;
mod signing;
mod state;
mod wire;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
pub use fake_cloud_support::FakeHandle;
use fake_cloud_support::{Admin, admin_router};

/// The cluster account (owns the seeded network and the machines).
pub const ACCOUNT_ID: &str = "5123456789012345";
/// The cluster account's AccessKey id.
pub const ACCESS_KEY_ID: &str = "LTAI5tFakeClusterKey0001";
/// The cluster account's AccessKey secret.
pub const ACCESS_KEY_SECRET: &str = "fake-cluster-access-key-secret";

/// The image owner account (owns [`ALLOWED_IMAGE`] and [`NOT_ALLOWED_IMAGE`]).
pub const OWNER_ACCOUNT_ID: &str = "5987654321098765";
/// The image owner's AccessKey id.
pub const OWNER_ACCESS_KEY_ID: &str = "LTAI5tFakeOwnerKey000001";
/// The image owner's AccessKey secret.
pub const OWNER_ACCESS_KEY_SECRET: &str = "fake-owner-access-key-secret";

/// The only region.
pub const REGION: &str = "eu-central-1";
/// The first zone (the seeded vSwitch's).
pub const ZONE_A: &str = "eu-central-1a";
/// The second zone (no vSwitch of its own).
pub const ZONE_B: &str = "eu-central-1b";

/// The seeded VPC of the cluster account.
pub const VPC: &str = "vpc-gw8fake0000000000001";
/// The seeded security group of the cluster account (in [`VPC`]).
pub const SECURITY_GROUP: &str = "sg-gw8fake0000000000001";
/// A second security group of the cluster account in [`VPC`] (for ModifyInstanceAttribute `SecurityGroupIds.N`).
pub const SECURITY_GROUP_B: &str = "sg-gw8fake0000000000002";
/// The seeded vSwitch of the cluster account: [`ZONE_A`], `10.250.0.0/16`, IPs from `10.250.0.10` on.
pub const VSWITCH: &str = "vsw-gw8fake000000000001";

/// The instance types RunInstances accepts.
pub const INSTANCE_TYPES: &[&str] = &["ecs.g7.large", "ecs.g7.xlarge", "ecs.c7.large", "ecs.t6-c1m2.large"];

/// A system image visible to every account (`ImageOwnerAlias` `system`).
pub const PUBLIC_IMAGE: &str = "ubuntu_24_04_x64_20G_alibase_20250101.vhd";
/// A private image of [`OWNER_ACCOUNT_ID`] that may be shared (not shared initially).
pub const ALLOWED_IMAGE: &str = "m-gw8fakeallowed000001";
/// A private image of [`OWNER_ACCOUNT_ID`] that tests must not share.
pub const NOT_ALLOWED_IMAGE: &str = "m-gw8fakenotallowed001";

/// The ECS API version (`x-acs-version` / `Version`).
pub const ECS_VERSION: &str = "2014-05-26";
/// The STS API version of `GetCallerIdentity`.
pub const STS_VERSION: &str = "2015-04-01";

/// The complete router: ECS/STS (any path, POST or GET), the shared admin API and the ECS-only admin routes.
pub fn router() -> Router {
    let store = Arc::new(state::Store::new());
    let admin = Admin::new(Arc::new(hooks::EcsHooks { store: Arc::clone(&store) }));
    admin_router(admin.clone())
        .merge(ecs_admin::routes(Arc::clone(&store)))
        .fallback(api::fallback(api::Ctx { admin, store }))
}

/// Serves the fake on `addr` (port 0 picks a free port) until the handle is dropped.
pub async fn start(addr: SocketAddr) -> io::Result<FakeHandle> {
    FakeHandle::serve(addr, router()).await
}
