//! [`AzureDriver`]: the driver's state, its `Provider` and `Driver` impls; each
//! RPC lives in its own module (`create`, `status`, `delete`, `list`,
//! `share_image`, `volumes`, `update`).

use std::sync::Arc;

use machine_driver_api::{
    CallContext, Capabilities, CloudOptions, ClusterMarkers, CreateMachine, CreatedMachine, DeletedMachine, Driver,
    DriverError, DriverInfo, ImageShares, KeyedCache, ListMachines, MachineRef, MachineStatus, Provider, RecentCreates,
    RevokedImageShare, SecretKeys, ShareImage, SharedImage, UpdateMachine, UpdatedMachine,
};

use crate::clients::ClientPool;
use crate::config::AzureConfig;
use crate::credentials::{
    AzureCredentials, CLIENT_ID_KEYS, CLIENT_SECRET_KEYS, SUBSCRIPTION_ID_KEYS, TENANT_ID_KEYS, TOKEN_FILE_KEYS,
};
use crate::lookup::{NicLookups, VmLookups};
use crate::naming::{VmRef, check_vm_name, parse_provider_id};
use crate::spec::AzureProviderSpec;
use crate::vm::MAX_USER_DATA_BYTES;

/// The Azure machine driver.
#[derive(Debug)]
pub struct AzureDriver {
    pub(crate) pool: ClientPool,
    /// VM creates of the last moments, for status polls ARM cannot answer yet.
    pub(crate) recent: RecentCreates<VmRef>,
    /// Deletes of the last moments: a young machine's VM that is gone after
    /// this process deleted it is NOT_FOUND, not "not visible yet".
    pub(crate) deleted: RecentCreates<VmRef>,
    pub(crate) lookups: VmLookups,
    /// Coalesced NIC reads for addresses ([`crate::lookup::NicLookups`]).
    pub(crate) nic_lookups: NicLookups,
    /// The private IP of each VM's primary NIC ([`crate::addresses`]).
    pub(crate) addresses: Arc<crate::addresses::RememberedAddresses>,
    /// Marketplace images' plans and accepted agreements ([`crate::marketplace`]).
    pub(crate) marketplace: crate::marketplace::Marketplace,
    /// The NICs and disks of this process's creates still to be tagged ([`crate::tagging`]).
    pub(crate) tags_to_apply: crate::tagging::TagsToApply,
}

impl AzureDriver {
    /// A driver with `config`; builds no client until the first call.
    pub fn new(config: AzureConfig) -> Self {
        if let Some(url) = &config.endpoint {
            tracing::info!(url = %url, "ARM and token endpoint override");
        }
        Self {
            pool: ClientPool::new(config.endpoint, config.rate_limit, config.burst),
            recent: RecentCreates::default(),
            deleted: RecentCreates::default(),
            lookups: VmLookups::default(),
            nic_lookups: NicLookups::default(),
            addresses: Arc::new(KeyedCache::new(crate::addresses::MAX_REMEMBERED)),
            marketplace: crate::marketplace::Marketplace::default(),
            tags_to_apply: crate::tagging::TagsToApply::default(),
        }
    }

    /// The VM a machine RPC addresses (location and name from the providerID
    /// when set, else the spec's location and the machine name, each checked
    /// against Azure's syntax; resource group from the spec, subscription from
    /// the secret), the spec and its markers ([`crate::ownership`]).
    pub(crate) fn locate(
        &self,
        req: &MachineRef,
        creds: &AzureCredentials,
    ) -> Result<(VmRef, AzureProviderSpec, ClusterMarkers), DriverError> {
        let (spec, markers) = AzureProviderSpec::parse_with_markers(&req.class.provider_spec)?;
        let (location, name) = match req.machine.provider_id.as_deref().map(str::trim).filter(|p| !p.is_empty()) {
            Some(pid) => parse_provider_id(pid)?,
            None if req.machine.name.is_empty() => {
                return Err(DriverError::invalid_argument(
                    "machine.name",
                    "is required when machine.providerID is not set",
                ));
            }
            None => {
                check_vm_name("machine.name", &req.machine.name)?;
                (spec.location.clone(), req.machine.name.clone())
            }
        };
        let target = VmRef {
            subscription: creds.subscription_id.clone(),
            resource_group: spec.resource_group.clone(),
            location,
            name,
        };
        Ok((target, spec, markers))
    }
}

impl Provider for AzureDriver {
    const BINARY: &'static str = "machine-driver-azure";
    const ABOUT: &'static str = "Machine driver sidecar for Azure (gRPC over a Unix socket).";
    /// `azure_core`'s transport logs every request at debug with its
    /// `Authorization` header in clear and its body (the VM's `customData`).
    const SECRET_LOGGING_TARGETS: &'static [&'static str] = &["azure_core"];

    async fn connect(options: CloudOptions) -> Result<Self, DriverError> {
        Ok(Self::new(AzureConfig::from_options(&options)?))
    }
}

impl Driver for AzureDriver {
    fn info(&self) -> DriverInfo {
        DriverInfo {
            name: "azure.machine-driver.gardener.cloud".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            provider: "azure",
            capabilities: Capabilities {
                initialize_machine: false,
                list_machines: true,
                get_volume_ids: true,
                share_image: true,
                revoke_image_share: true,
                update_machine: true,
            },
            max_user_data_bytes: MAX_USER_DATA_BYTES,
            secret_keys: SecretKeys::none()
                .or_form("a client secret", &[CLIENT_ID_KEYS, CLIENT_SECRET_KEYS, TENANT_ID_KEYS, SUBSCRIPTION_ID_KEYS])
                .or_form("workload identity", &[CLIENT_ID_KEYS, TOKEN_FILE_KEYS, TENANT_ID_KEYS, SUBSCRIPTION_ID_KEYS]),
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

    async fn update_machine(&self, ctx: &CallContext, req: UpdateMachine) -> Result<UpdatedMachine, DriverError> {
        self.update(ctx, req).await
    }
}
