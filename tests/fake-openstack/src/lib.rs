//! A stateful fake OpenStack cloud for tests: Keystone v3 (password and application
//! credential tokens with a service catalog), Nova (servers, flavors, microversions),
//! Neutron (networks, subnets, security groups, ports with allowed address pairs and
//! tags), Glance (images, visibility, members) and Cinder (volumes) on one listener, with
//! version discovery documents at every service root — plus the shared admin API of
//! `docs/fake-admin-api.md` under `/_admin` and the OpenStack-only admin routes under
//! `/_admin/openstack/*` (see the crate README and `/work/openstack-contract.md`).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let fake = fake_openstack::start("127.0.0.1:0".parse().expect("addr")).await?;
//! let auth_url = format!("{}/identity/v3", fake.url());
//! # let _ = auth_url; Ok(()) }
//! ```

mod api;
mod clock;
mod error;
mod hooks;
mod openstack_admin;
mod plant;
mod state;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
pub use fake_cloud_support::FakeHandle;
use fake_cloud_support::{Admin, admin_router};

/// The only region.
pub const REGION: &str = "RegionOne";
/// The only domain's id.
pub const DOMAIN_ID: &str = "default";
/// The only domain's name.
pub const DOMAIN_NAME: &str = "Default";

/// The cluster project (owns the network, security group, key, server group and machines).
pub const PROJECT_ID: &str = "5d9a3e2f6b8c4d1e9f0a7b3c2d1e0f98";
/// The cluster project's name.
pub const PROJECT_NAME: &str = "shoot--dev--conf";
/// The cluster user (member of [`PROJECT_ID`]).
pub const USER_ID: &str = "0c6d5e4f3a2b41c09d8e7f6a5b4c3d21";
/// The cluster user's name.
pub const USERNAME: &str = "machine-driver";
/// The cluster user's password.
pub const PASSWORD: &str = "fake-cluster-password";
/// The cluster user's application credential (bound to [`PROJECT_ID`]).
pub const APP_CREDENTIAL_ID: &str = "3f1e2d4c5b6a47988a9b0c1d2e3f4a5b";
/// The application credential's name.
pub const APP_CREDENTIAL_NAME: &str = "machine-driver";
/// The application credential's secret.
pub const APP_CREDENTIAL_SECRET: &str = "fake-cluster-app-credential-secret";

/// The image owner project (owns the seeded images).
pub const OWNER_PROJECT_ID: &str = "8e7d6c5b4a3f42e1b0c9d8e7f6a5b4c3";
/// The image owner project's name.
pub const OWNER_PROJECT_NAME: &str = "image-owner";
/// The image owner user (member of [`OWNER_PROJECT_ID`]).
pub const OWNER_USER_ID: &str = "1a2b3c4d5e6f47a8b9c0d1e2f3a4b5c6";
/// The image owner user's name.
pub const OWNER_USERNAME: &str = "image-publisher";
/// The image owner user's password.
pub const OWNER_PASSWORD: &str = "fake-owner-password";

/// The cluster network.
pub const NETWORK_ID: &str = "b1a2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d";
/// The cluster network's name (also the key of server `addresses`).
pub const NETWORK_NAME: &str = "shoot--dev--conf";
/// The IPv4 subnet `10.250.0.0/16`; fixed IPs are handed out from `10.250.0.10` on.
pub const SUBNET_ID: &str = "c2b3d4e5-f6a7-4b8c-9d0e-1f2a3b4c5d6e";
/// The IPv6 subnet `fd00:10:250::/64` on the same network.
pub const SUBNET_V6_ID: &str = "d3c4e5f6-a7b8-4c9d-8e1f-2a3b4c5d6e7f";
/// The cluster security group.
pub const SECURITY_GROUP_ID: &str = "e4d5f6a7-b8c9-4d0e-9f2a-3b4c5d6e7f80";
/// The cluster security group's name.
pub const SECURITY_GROUP_NAME: &str = "shoot--dev--conf";
/// The cluster project's `default` security group (used by Nova-made ports without a request).
pub const DEFAULT_SECURITY_GROUP_ID: &str = "f6a7b8c9-d0e1-4f2a-9b3c-5d6e7f8091a2";
/// The availability zones.
pub const AVAILABILITY_ZONES: [&str; 2] = ["nova", "az-2"];
/// The cluster project's key pair.
pub const KEY_NAME: &str = "shoot--dev--conf-ssh-publickey";
/// The cluster project's server group.
pub const SERVER_GROUP_ID: &str = "f5e6a7b8-c9d0-4e1f-8a3b-4c5d6e7f8091";
/// The flavors: `(id, name, vcpus, ram MB, disk GB)`.
pub const FLAVORS: [(&str, &str, u32, u32, u32); 4] = state::compute::FLAVORS;
/// The volume types (the first is the default).
pub const VOLUME_TYPES: [&str; 2] = ["standard", "ssd"];

/// A public image of [`OWNER_PROJECT_ID`] (`ubuntu-24.04`).
pub const PUBLIC_IMAGE: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
/// A private image of [`OWNER_PROJECT_ID`] that may be shared (`gardenlinux-1877.3`).
pub const ALLOWED_IMAGE: &str = "1b2c3d4e-5f6a-4b7c-9d8e-0f1a2b3c4d5e";
/// A private image of [`OWNER_PROJECT_ID`] that tests must not share (`owner-internal`).
pub const NOT_ALLOWED_IMAGE: &str = "2c3d4e5f-6a7b-4c8d-ae9f-1a2b3c4d5e6f";

/// The highest Nova microversion served.
pub const NOVA_MAX_MICROVERSION: &str = "2.96";

/// The complete router: the five services, the shared admin API and the OpenStack-only admin routes.
pub fn router() -> Router {
    let store = Arc::new(state::Store::new());
    let admin = Admin::new(Arc::new(hooks::OpenStackHooks { store: Arc::clone(&store) }));
    admin_router(admin.clone())
        .merge(openstack_admin::routes(Arc::clone(&store)))
        .fallback(api::fallback(api::Ctx { admin, store: Arc::clone(&store) }))
        .layer(axum::middleware::from_fn_with_state(store, openstack_admin::token_faults))
}

/// Serves the fake on `addr` (port 0 picks a free port) until the handle is dropped.
pub async fn start(addr: SocketAddr) -> io::Result<FakeHandle> {
    FakeHandle::serve(addr, router()).await
}
