//! [`AwsDriver`]: the `Driver` implementation, delegating each RPC to its module.

use std::sync::Arc;

use machine_driver_api::{
    CallContext, Capabilities, CloudOptions, CreateMachine, CreatedMachine, DeletedMachine, Driver, DriverError,
    DriverInfo, ImageShares, InitializedMachine, KeyedCache, ListMachines, Machine, MachineRef, MachineStatus,
    Provider, RecentCreates, Result, RevokedImageShare, SecretData, SecretKeys, ShareImage, SharedImage, UpdateMachine,
    UpdatedMachine,
};

use crate::clients::{AwsClients, ClientCache};
use crate::config::AwsConfig;
use crate::credentials::{ACCESS_KEY_ID_KEYS, ROLE_ARN_KEYS, SECRET_ACCESS_KEY_KEYS, TOKEN_FILE_KEYS};
use crate::initialize::{Launched, LaunchedKey};
use crate::recent::RecentLaunches;
use crate::spec::AwsProviderSpec;
use crate::{provider_id, volumes};

/// Most cached AMI root device names: the key is request data (a class's
/// region and AMI), so the cache is bounded (least recently used evicted).
pub(crate) const MAX_ROOT_DEVICES: usize = 1024;

/// The machine driver for AWS EC2.
pub struct AwsDriver {
    pub(crate) clients: ClientCache,
    /// Launches of the last minutes, by (credentials, machine uid).
    pub(crate) recent: RecentLaunches,
    /// What RunInstances answered for instances launched a moment ago, by
    /// (credentials, region, instance id): the InitializeMachine that follows
    /// with the same credentials needs no read.
    pub(crate) launched: RecentCreates<LaunchedKey, Launched>,
    /// AMI root device names by (region, AMI id); images never change them.
    /// Bounded: [`MAX_ROOT_DEVICES`].
    pub(crate) root_devices: KeyedCache<(String, String), String>,
}

impl std::fmt::Debug for AwsDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsDriver").field("clients", &self.clients).finish_non_exhaustive()
    }
}

impl AwsDriver {
    /// A driver with `config`. Fails, naming the setting, on an unusable configuration.
    pub fn new(config: AwsConfig) -> Result<Self> {
        if !config.rate_limit.is_finite() || config.rate_limit < 0.0 {
            return Err(DriverError::invalid_argument(
                "--cloud-rate-limit",
                format!("must be a non-negative number, got {}", config.rate_limit),
            ));
        }
        for url in [&config.ec2_endpoint, &config.sts_endpoint].into_iter().flatten() {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(DriverError::invalid_argument(
                    "AWS endpoint",
                    format!("{url:?} must start with http:// or https://"),
                ));
            }
        }
        Ok(Self {
            clients: ClientCache::new(config),
            recent: RecentLaunches::default(),
            launched: RecentCreates::default(),
            root_devices: KeyedCache::new(MAX_ROOT_DEVICES),
        })
    }

    /// Region and instance id of a machine: from its providerID when set, else the spec's region.
    pub(crate) fn locate(spec: &AwsProviderSpec, machine: &Machine) -> Result<(String, Option<String>)> {
        match machine.provider_id.as_deref() {
            Some(p) => provider_id::decode(p).map(|(r, id)| (r, Some(id))),
            None => Ok((spec.region.clone(), None)),
        }
    }

    /// The cached clients of `secret` in `region`.
    pub(crate) async fn clients(
        &self,
        ctx: &CallContext,
        secret: &SecretData,
        region: &str,
    ) -> Result<Arc<AwsClients>> {
        self.clients.get(ctx, secret, region).await
    }
}

impl Provider for AwsDriver {
    const BINARY: &'static str = "machine-driver-aws";
    const ABOUT: &'static str = "Machine driver sidecar for AWS EC2 (gRPC over a Unix socket).";

    /// `--cloud-endpoint` (EC2 and STS alike), else the standard
    /// `AWS_ENDPOINT_URL_EC2` / `AWS_ENDPOINT_URL_STS` / `AWS_ENDPOINT_URL`.
    async fn connect(options: CloudOptions) -> Result<Self> {
        let config = AwsConfig { rate_limit: options.rate_limit, burst: options.burst, ..AwsConfig::default() }
            .with_endpoints(options.endpoint, |k| std::env::var(k).ok());
        Self::new(config)
    }
}

impl Driver for AwsDriver {
    fn info(&self) -> DriverInfo {
        DriverInfo {
            name: "aws.machine-driver.gardener.cloud".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            provider: "aws",
            capabilities: Capabilities {
                initialize_machine: true,
                list_machines: true,
                get_volume_ids: true,
                share_image: true,
                revoke_image_share: true,
                update_machine: true,
            },
            max_user_data_bytes: 16 * 1024,
            secret_keys: SecretKeys::none()
                .or_form("static keys", &[ACCESS_KEY_ID_KEYS, SECRET_ACCESS_KEY_KEYS])
                .or_form("workload identity", &[TOKEN_FILE_KEYS, ROLE_ARN_KEYS]),
        }
    }

    async fn create_machine(&self, ctx: &CallContext, req: CreateMachine) -> Result<CreatedMachine> {
        self.create(ctx, req).await
    }

    async fn get_machine_status(&self, ctx: &CallContext, req: MachineRef) -> Result<MachineStatus> {
        self.status(ctx, req).await
    }

    async fn initialize_machine(&self, ctx: &CallContext, req: MachineRef) -> Result<InitializedMachine> {
        self.initialize(ctx, req).await
    }

    async fn delete_machine(&self, ctx: &CallContext, req: MachineRef) -> Result<DeletedMachine> {
        self.delete(ctx, req).await
    }

    async fn list_machines(&self, ctx: &CallContext, req: ListMachines) -> Result<Vec<(String, String)>> {
        self.list(ctx, req).await
    }

    fn get_volume_ids(&self, pv_specs: &[serde_json::Value]) -> Result<Vec<String>> {
        Ok(volumes::volume_ids(pv_specs))
    }

    async fn share_image(&self, ctx: &CallContext, req: ShareImage) -> Result<SharedImage> {
        self.share(ctx, req).await
    }

    async fn revoke_image_share(
        &self,
        ctx: &CallContext,
        req: machine_driver_api::RevokeImageShare,
    ) -> Result<RevokedImageShare> {
        self.revoke(ctx, req).await
    }

    async fn update_machine(&self, ctx: &CallContext, req: UpdateMachine) -> Result<UpdatedMachine> {
        self.update(ctx, req).await
    }

    async fn list_image_shares(
        &self,
        ctx: &CallContext,
        req: machine_driver_api::ListImageShares,
    ) -> Result<ImageShares> {
        self.list_shares(ctx, req).await
    }
}
