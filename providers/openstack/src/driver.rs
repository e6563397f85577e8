//! [`OpenStackDriver`]: the driver's state, its `Provider` and `Driver`
//! impls; each RPC lives in its own module (`create`, `status`,
//! `initialize`, `delete`, `list`, `update`, `share_image`, `volumes`).

use machine_driver_api::{
    CallContext, Capabilities, CloudOptions, CreateMachine, CreatedMachine, DeletedMachine, Driver, DriverError,
    DriverInfo, ImageShares, InitializedMachine, KeyedCache, ListMachines, MachineRef, MachineStatus, Provider,
    RecentCreates, RevokedImageShare, SecretKeys, ShareImage, SharedImage, UpdateMachine, UpdatedMachine,
};

use crate::clients::{ClientPool, Scoped};
use crate::config::OpenStackConfig;
use crate::credentials::AUTH_URL_KEYS;
use crate::lookup::{CreateLookups, ServerLookups};
use crate::os::model::Server;
use crate::resolve::Resolver;

/// Largest user data Nova takes: 65535 bytes of base64.
pub const MAX_USER_DATA_BYTES: usize = 65535 / 4 * 3;

/// Most servers remembered as initialized.
const MAX_PAIRS_COMPLETE: usize = 16_384;
/// Most per-machine create locks kept.
const MAX_CREATE_LOCKS: usize = 4096;

/// What this process knows of a server it created a moment ago.
#[derive(Debug, Clone)]
pub(crate) struct Created {
    /// The machine name (the server's name).
    pub(crate) name: String,
}

/// The OpenStack machine driver.
#[derive(Debug)]
pub struct OpenStackDriver {
    pub(crate) pool: ClientPool,
    /// Servers created or adopted in the last moments (by credentials, region
    /// and server id), for status polls Nova cannot answer yet and the
    /// InitializeMachine that follows a create.
    pub(crate) recent: RecentCreates<Scoped, Created>,
    /// The record of the server each machine uid got from this process's
    /// `POST /servers` in the last moments (by credentials, region and uid),
    /// with the markers of the class that made it: a repeated create answers
    /// it without a call only when it is judged the machine's under the
    /// repeat's own class ([`crate::ownership`]).
    pub(crate) created_by_uid: RecentCreates<Scoped, Server>,
    /// Servers deleted in the last moments: gone is NOT_FOUND, not "not visible yet".
    pub(crate) deleted: RecentCreates<String>,
    /// The record of each server this process created (its `POST /servers`)
    /// or adopted from Nova's record in the last 10 minutes (by credentials,
    /// region and server id): name, the creator's markers, uid. A delete or
    /// initialization by providerID right after judges it under its own
    /// class ([`crate::ownership`]) without reading it again. A server
    /// adopted on its port's markers while Nova did not show it has no record
    /// here: what the driver would make up is not Nova's word.
    pub(crate) made: RecentCreates<Scoped, Server>,
    pub(crate) lookups: ServerLookups,
    /// The creates' lookups of servers and ports by machine name, coalesced.
    pub(crate) create_lookups: CreateLookups,
    /// The creates' port creates, shared in bulk.
    pub(crate) port_creates: crate::ports::PortCreates,
    pub(crate) resolver: Resolver,
    /// Servers whose pod-network ports are known to carry every pod CIDR (made
    /// so by this process's create, or found or made so by initialization):
    /// InitializeMachine makes no call for them, and status polls of servers
    /// the Go provider made read no ports again.
    pub(crate) pairs_complete: KeyedCache<String, ()>,
    /// One create at a time per machine uid (Nova has no client token: two
    /// concurrent creates of one machine would both find nothing and make two servers).
    pub(crate) create_locks: KeyedCache<String, tokio::sync::Mutex<()>>,
}

impl OpenStackDriver {
    /// A driver with `config`; authenticates on the first call.
    pub fn new(config: OpenStackConfig) -> Self {
        if let Some(url) = &config.auth_override {
            tracing::info!(%url, "Keystone endpoint override");
        }
        Self {
            pool: ClientPool::new(config.auth_override, config.rate_limit, config.burst),
            recent: RecentCreates::default(),
            created_by_uid: RecentCreates::default(),
            deleted: RecentCreates::default(),
            made: RecentCreates::default(),
            lookups: ServerLookups::default(),
            create_lookups: CreateLookups::default(),
            port_creates: crate::ports::PortCreates::default(),
            resolver: Resolver::default(),
            pairs_complete: KeyedCache::new(MAX_PAIRS_COMPLETE),
            create_locks: KeyedCache::new(MAX_CREATE_LOCKS),
        }
    }
}

impl Provider for OpenStackDriver {
    const BINARY: &'static str = "machine-driver-openstack";
    const ABOUT: &'static str =
        "Machine driver sidecar for OpenStack (Nova, Neutron, Glance, Cinder; gRPC over a Unix socket).";

    async fn connect(options: CloudOptions) -> Result<Self, DriverError> {
        Ok(Self::new(OpenStackConfig::from_options(&options)))
    }
}

impl Driver for OpenStackDriver {
    fn info(&self) -> DriverInfo {
        DriverInfo {
            name: "openstack.machine-driver.gardener.cloud".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            provider: "openstack",
            capabilities: Capabilities {
                initialize_machine: true,
                list_machines: true,
                get_volume_ids: true,
                share_image: true,
                revoke_image_share: true,
                update_machine: true,
            },
            max_user_data_bytes: MAX_USER_DATA_BYTES,
            secret_keys: SecretKeys::all_of(&[AUTH_URL_KEYS]),
        }
    }

    async fn create_machine(&self, ctx: &CallContext, req: CreateMachine) -> Result<CreatedMachine, DriverError> {
        self.create(ctx, req).await
    }

    async fn get_machine_status(&self, ctx: &CallContext, req: MachineRef) -> Result<MachineStatus, DriverError> {
        self.status(ctx, req).await
    }

    async fn initialize_machine(&self, ctx: &CallContext, req: MachineRef) -> Result<InitializedMachine, DriverError> {
        self.initialize(ctx, req).await
    }

    async fn delete_machine(&self, ctx: &CallContext, req: MachineRef) -> Result<DeletedMachine, DriverError> {
        self.delete(ctx, req).await
    }

    async fn list_machines(&self, ctx: &CallContext, req: ListMachines) -> Result<Vec<(String, String)>, DriverError> {
        self.list(ctx, req).await
    }

    async fn update_machine(&self, ctx: &CallContext, req: UpdateMachine) -> Result<UpdatedMachine, DriverError> {
        self.update(ctx, req).await
    }

    fn get_volume_ids(&self, pv_specs: &[serde_json::Value]) -> Result<Vec<String>, DriverError> {
        Ok(crate::volumes::volume_ids(pv_specs))
    }

    async fn share_image(&self, ctx: &CallContext, req: ShareImage) -> Result<SharedImage, DriverError> {
        crate::share_image::share_image(&self.pool, ctx, req).await
    }

    async fn revoke_image_share(
        &self,
        ctx: &CallContext,
        req: machine_driver_api::RevokeImageShare,
    ) -> Result<RevokedImageShare, DriverError> {
        crate::share_image::revoke_image_share(&self.pool, ctx, req).await
    }

    async fn list_image_shares(
        &self,
        ctx: &CallContext,
        req: machine_driver_api::ListImageShares,
    ) -> Result<ImageShares, DriverError> {
        crate::share_image::list_image_shares(&self.pool, ctx, req).await
    }
}
