//! [`GcpDriver`]: the driver's state, its `Provider` and `Driver` impls; each
//! RPC lives in its own module (`create`, `status`, `delete`, `list`,
//! `update`, `share_image`, `volumes`); which instances they may act on, in `ownership`.

use machine_driver_api::{
    CallContext, Capabilities, CloudOptions, ClusterMarkers, CreateMachine, CreatedMachine, DeletedMachine, Driver,
    DriverError, DriverInfo, ImageShares, ListMachines, MachineRef, MachineStatus, Provider, RecentCreates,
    RevokedImageShare, SecretKeys, ShareImage, SharedImage, UpdateMachine, UpdatedMachine,
};

use crate::clients::{ClientPool, ComputeEndpoint};
use crate::config::GcpConfig;
use crate::credentials::{CREDENTIALS_CONFIG_KEYS, GcpCredentials, PROJECT_ID_KEYS, SERVICE_ACCOUNT_KEYS};
use crate::errors::GceFailure;
use crate::lookup::InstanceLookups;
use crate::naming::{InstanceRef, is_gce_name};
use crate::operations::OperationWaiters;
use crate::spec::GcpProviderSpec;

/// Largest user data GCE metadata takes (one value, 256 KiB).
pub const MAX_USER_DATA_BYTES: usize = 262_144;

/// The GCP machine driver.
#[derive(Debug)]
pub struct GcpDriver {
    pub(crate) pool: ClientPool,
    /// Inserts of the last moments, for status polls Compute cannot answer yet,
    /// each with who inserted it ([`Inserter`]): only a request of the same
    /// class markers and credentials is answered from it.
    pub(crate) recent: RecentCreates<InstanceRef, Inserter>,
    /// Deletes of the last moments: a young machine's instance that is gone
    /// after this process deleted it is NOT_FOUND, not "not visible yet".
    pub(crate) deleted: RecentCreates<InstanceRef>,
    /// Insert operations still running when CreateMachine answered, by instance.
    pub(crate) pending_inserts: RecentCreates<InstanceRef, String>,
    /// Insert operations that failed after CreateMachine answered, by instance.
    pub(crate) failed_inserts: RecentCreates<InstanceRef, GceFailure>,
    pub(crate) lookups: InstanceLookups,
    /// Insert operation waits, shared by concurrent creates per zone.
    pub(crate) op_waiters: OperationWaiters,
}

/// Who inserted an instance this process remembers: the class's markers the
/// insert put on it and the fingerprint of the credentials it was made with.
/// The record is keyed by project, zone and name only, which another class
/// (another cluster of the same project) or other credentials may name too;
/// so it speaks for an unseen instance only to a request whose markers and
/// credentials are the inserter's ([`GcpDriver::inserted_by`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inserter {
    markers: ClusterMarkers,
    fingerprint: [u8; 32],
}

impl Inserter {
    /// The inserter of a request with `markers` and `key`.
    pub(crate) fn new(markers: &ClusterMarkers, key: &GcpCredentials) -> Self {
        Self { markers: markers.clone(), fingerprint: key.fingerprint }
    }
}

impl GcpDriver {
    /// True when this process inserted `target` within the last minutes with
    /// the class markers and credentials of `by` (the current request's).
    pub(crate) fn inserted_by(&self, target: &InstanceRef, by: &Inserter) -> bool {
        self.recent.get(target).is_some_and(|inserter| inserter == *by)
    }

    /// A driver with `config`; builds no client until the first call.
    pub fn new(config: GcpConfig) -> Self {
        match &config.endpoint {
            ComputeEndpoint::Insecure(url) => tracing::warn!(
                %url,
                "plain-HTTP Compute endpoint (fakes only): service account keys send their email instead of a token; \
                 workload identity exchanges its token with this endpoint's STS"
            ),
            ComputeEndpoint::Secure(url) => tracing::info!(%url, "Compute endpoint override"),
            ComputeEndpoint::Google => {}
        }
        Self {
            pool: ClientPool::new(config.endpoint, config.rate_limit, config.burst),
            recent: RecentCreates::default(),
            deleted: RecentCreates::default(),
            pending_inserts: RecentCreates::default(),
            failed_inserts: RecentCreates::default(),
            lookups: InstanceLookups::default(),
            op_waiters: OperationWaiters::default(),
        }
    }

    /// The instance a machine RPC addresses: from the providerID when set
    /// (each part checked against GCE's syntax, INVALID_ARGUMENT naming
    /// `machine.providerID`), else the machine name in the spec's zone and the
    /// secret's project. `None` for a machine name no GCE instance can have
    /// (not `[a-z]([-a-z0-9]*[a-z0-9])?`, at most 63): nothing is read then,
    /// and nothing of the name reaches a URL.
    pub(crate) fn locate(
        req: &MachineRef,
        key: &GcpCredentials,
        spec: &GcpProviderSpec,
    ) -> Result<Option<InstanceRef>, DriverError> {
        if let Some(pid) = req.machine.provider_id.as_deref() {
            return InstanceRef::parse_provider_id(pid).map(Some);
        }
        let name = req.machine.name.as_str();
        if name.is_empty() {
            return Err(DriverError::invalid_argument(
                "machine.name",
                "is required when machine.providerID is not set",
            ));
        }
        if !is_gce_name(name) {
            return Ok(None);
        }
        Ok(Some(InstanceRef { project: key.project_id.clone(), zone: spec.zone.clone(), name: name.to_string() }))
    }
}

impl Provider for GcpDriver {
    const BINARY: &'static str = "machine-driver-gcp";
    const ABOUT: &'static str = "Machine driver sidecar for GCP Compute Engine (gRPC over a Unix socket).";

    async fn connect(options: CloudOptions) -> Result<Self, DriverError> {
        Ok(Self::new(GcpConfig::from_options(&options)))
    }
}

impl Driver for GcpDriver {
    fn info(&self) -> DriverInfo {
        DriverInfo {
            name: "gcp.machine-driver.gardener.cloud".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            provider: "gcp",
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
                .or_form("a service account key", &[SERVICE_ACCOUNT_KEYS])
                .or_form("workload identity", &[CREDENTIALS_CONFIG_KEYS, PROJECT_ID_KEYS]),
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
