//! [`AlicloudDriver`]: the driver's state, its `Provider` and `Driver` impls;
//! each RPC lives in its own module (`create`, `status`, `delete`, `list`,
//! `share_image`, `volumes`, `update`); which instances they may act on, in `ownership`.

use machine_driver_api::{
    CallContext, Capabilities, CloudOptions, CreateMachine, CreatedMachine, DeletedMachine, Driver, DriverError,
    DriverInfo, ImageShares, ListMachines, MachineRef, MachineStatus, Provider, RecentCreates, RevokedImageShare,
    SecretKeys, ShareImage, SharedImage, UpdateMachine, UpdatedMachine,
};

use crate::clients::ClientPool;
use crate::config::AlicloudConfig;
use crate::credentials::{ACCESS_KEY_ID_KEYS, ACCESS_KEY_SECRET_KEYS};
use crate::lookup::InstanceLookups;
use crate::ownership::RecentRecords;

/// Largest user data ECS takes (32 KiB before base64).
pub const MAX_USER_DATA_BYTES: usize = 32 * 1024;

/// The Alibaba Cloud ECS machine driver.
#[derive(Debug)]
pub struct AlicloudDriver {
    pub(crate) pool: ClientPool,
    /// Instances created in the last moments (by id), for status polls ECS cannot answer yet.
    pub(crate) recent: RecentCreates<String>,
    /// Instances deleted in the last moments: gone is NOT_FOUND, not "not visible yet".
    pub(crate) deleted: RecentCreates<String>,
    pub(crate) lookups: InstanceLookups,
    /// Instance records read lately: at hand for a delete by providerID's ownership check.
    pub(crate) records: RecentRecords,
}

impl AlicloudDriver {
    /// A driver with `config`; builds no client until the first call.
    pub fn new(config: AlicloudConfig) -> Self {
        if let crate::ecs::client::Endpoints::Override(url) = &config.endpoints {
            tracing::info!(%url, "ECS and STS endpoint override");
        }
        Self {
            pool: ClientPool::new(config.endpoints, config.rate_limit, config.burst),
            recent: RecentCreates::default(),
            deleted: RecentCreates::default(),
            lookups: InstanceLookups::default(),
            records: RecentRecords::default(),
        }
    }
}

impl Provider for AlicloudDriver {
    const BINARY: &'static str = "machine-driver-alicloud";
    const ABOUT: &'static str = "Machine driver sidecar for Alibaba Cloud ECS (gRPC over a Unix socket).";

    async fn connect(options: CloudOptions) -> Result<Self, DriverError> {
        Ok(Self::new(AlicloudConfig::from_options(&options)))
    }
}

impl Driver for AlicloudDriver {
    fn info(&self) -> DriverInfo {
        DriverInfo {
            name: "alicloud.machine-driver.gardener.cloud".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            provider: "alicloud",
            capabilities: Capabilities {
                initialize_machine: false,
                list_machines: true,
                get_volume_ids: true,
                share_image: true,
                revoke_image_share: true,
                update_machine: true,
            },
            max_user_data_bytes: MAX_USER_DATA_BYTES,
            secret_keys: SecretKeys::all_of(&[ACCESS_KEY_ID_KEYS, ACCESS_KEY_SECRET_KEYS]),
        }
    }

    async fn create_machine(&self, ctx: &CallContext, req: CreateMachine) -> Result<CreatedMachine, DriverError> {
        self.create(ctx, req).await
    }

    async fn get_machine_status(&self, ctx: &CallContext, req: MachineRef) -> Result<MachineStatus, DriverError> {
        self.status(ctx, req).await
    }

    async fn delete_machine(&self, ctx: &CallContext, req: MachineRef) -> Result<DeletedMachine, DriverError> {
        self.delete(ctx, req).await
    }

    async fn update_machine(&self, ctx: &CallContext, req: UpdateMachine) -> Result<UpdatedMachine, DriverError> {
        self.update(ctx, req).await
    }

    async fn list_machines(&self, ctx: &CallContext, req: ListMachines) -> Result<Vec<(String, String)>, DriverError> {
        self.list(ctx, req).await
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
