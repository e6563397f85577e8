//! [`GcpDriver`]: the machine driver RPCs on Compute Engine.

use std::time::Duration;

use google_cloud_compute_v1::model::{Instance, Operation, operation};
use machine_driver_api::{
    CallContext, Capabilities, CloudOptions, CreateMachine, CreatedMachine, DeletedMachine, Driver, DriverError,
    DriverInfo, ErrorKind, ListMachines, MachineRef, MachineStatus, Provider, RecentCreates, ShareImage, SharedImage,
};

use crate::clients::{Api, ClientPool, ComputeEndpoint};
use crate::config::GcpConfig;
use crate::credentials::{SERVICE_ACCOUNT_KEYS, ServiceAccountKey};
use crate::errors::{GceFailure, RETRY_SOON};
use crate::instance::{InstanceTarget, addresses, build_instance, status_word};
use crate::lookup::InstanceLookups;
use crate::naming::{
    InstanceRef, MACHINE_UID_LABEL, MEMBERSHIP_LABEL_VALUE, insert_request_id, is_gce_name, uid_label_value,
};
use crate::spec::GcpProviderSpec;
use crate::timestamps;

/// Largest user data GCE metadata takes (one value, 256 KiB).
pub const MAX_USER_DATA_BYTES: usize = 262_144;

/// Longest CreateMachine waits for the insert operation before answering.
const CREATE_WAIT: Duration = Duration::from_secs(5);

/// Time kept free before the RPC deadline when waiting for an operation.
const DEADLINE_MARGIN: Duration = Duration::from_secs(1);

/// A failed insert operation at least this old is a replay of an earlier
/// attempt (GCE answers a repeated `requestId` with the original operation):
/// the next attempt then uses the next `requestId` generation.
const REPLAY_AGE: Duration = Duration::from_secs(60);

/// Most `requestId` generations one CreateMachine walks through.
const MAX_INSERT_GENERATIONS: usize = 6;

/// Page size of instances.list.
const LIST_PAGE_SIZE: u32 = 500;

/// The GCP machine driver.
#[derive(Debug)]
pub struct GcpDriver {
    pool: ClientPool,
    /// Inserts of the last moments, for status polls Compute cannot answer yet.
    recent: RecentCreates<InstanceRef>,
    /// Deletes of the last moments: a young machine's instance that is gone
    /// after this process deleted it is NOT_FOUND, not "not visible yet".
    deleted: RecentCreates<InstanceRef>,
    lookups: InstanceLookups,
}

impl GcpDriver {
    /// A driver with `config`; builds no client until the first call.
    pub fn new(config: GcpConfig) -> Self {
        match &config.endpoint {
            ComputeEndpoint::Insecure(url) => tracing::warn!(
                %url,
                "plain-HTTP Compute endpoint: requests carry the service account email instead of a token (fakes only)"
            ),
            ComputeEndpoint::Secure(url) => tracing::info!(%url, "Compute endpoint override"),
            ComputeEndpoint::Google => {}
        }
        Self {
            pool: ClientPool::new(config.endpoint, config.rate_limit, config.burst),
            recent: RecentCreates::default(),
            deleted: RecentCreates::default(),
            lookups: InstanceLookups::default(),
        }
    }

    /// The instance a machine RPC addresses: from the providerID when set, else
    /// the machine name in the spec's zone and the secret's project.
    fn locate(&self, req: &MachineRef, key: &ServiceAccountKey) -> Result<InstanceRef, DriverError> {
        if let Some(pid) = req.machine.provider_id.as_deref().filter(|p| !p.trim().is_empty()) {
            return InstanceRef::parse_provider_id(pid.trim());
        }
        if req.machine.name.is_empty() {
            return Err(DriverError::invalid_argument(
                "machine.name",
                "is required when machine.providerID is not set",
            ));
        }
        let spec = GcpProviderSpec::parse(&req.class.provider_spec)?;
        Ok(InstanceRef { project: key.project_id.clone(), zone: spec.zone, name: req.machine.name.clone() })
    }

    /// Handles "already exists": adopts the instance when it carries this machine's uid label.
    async fn adopt(&self, api: &Api<'_>, target: &InstanceRef, uid: &str) -> Result<CreatedMachine, DriverError> {
        let got = api
            .call("instances.get", || {
                api.clients
                    .instances
                    .get()
                    .set_project(&target.project)
                    .set_zone(&target.zone)
                    .set_instance(&target.name)
                    .send()
            })
            .await;
        let instance = match got {
            Ok(i) => i,
            Err(f) if f.cloud().is_some_and(GceFailure::is_not_found) => {
                return Err(DriverError::unavailable(
                    "NOT_VISIBLE_YET",
                    format!("instance {} was reported as existing but is not visible yet", target.provider_id()),
                    RETRY_SOON,
                ));
            }
            Err(f) => return Err(f.into_driver_error()),
        };
        if instance.labels.get(MACHINE_UID_LABEL).map(String::as_str) != Some(uid_label_value(uid).as_str()) {
            return Err(DriverError::new(
                ErrorKind::AlreadyExists,
                "INSTANCE_NAME_TAKEN",
                format!("instance {} exists but was not created for this machine", target.provider_id()),
            ));
        }
        tracing::info!(provider_id = %target.provider_id(), "instance already exists for this machine: adopted");
        Ok(created(target, &instance))
    }

    /// Waits briefly for a running insert operation; still running is success.
    async fn wait_briefly(
        &self,
        api: &Api<'_>,
        target: &InstanceRef,
        op: &Operation,
        uid: &str,
    ) -> Result<CreatedMachine, DriverError> {
        let bound = api.remaining().saturating_sub(DEADLINE_MARGIN).min(CREATE_WAIT);
        let Some(op_name) = op.name.as_deref().filter(|_| !bound.is_zero()) else {
            return Ok(created(target, &Instance::new()));
        };
        let wait = api.call("zoneOperations.wait", || {
            api.clients
                .operations
                .wait()
                .set_project(&target.project)
                .set_zone(&target.zone)
                .set_operation(op_name)
                .send()
        });
        match tokio::time::timeout(bound, wait).await {
            Ok(Ok(done)) if is_done(&done) => match GceFailure::from_operation(&done) {
                None => Ok(created(target, &Instance::new())),
                Some(f) if f.is_already_exists() => self.adopt(api, target, uid).await,
                Some(f) => {
                    self.recent.forget(target);
                    Err(f.driver_error("instances.insert"))
                }
            },
            Ok(Ok(_)) | Err(_) => {
                tracing::debug!(provider_id = %target.provider_id(), "insert operation still running; answering now");
                Ok(created(target, &Instance::new()))
            }
            Ok(Err(f)) => {
                // The insert was accepted; GetMachineStatus will tell how it ends.
                tracing::debug!(provider_id = %target.provider_id(), error = %f.into_driver_error(), "waiting for the insert operation failed");
                Ok(created(target, &Instance::new()))
            }
        }
    }
}

fn is_done(op: &Operation) -> bool {
    matches!(op.status, Some(operation::Status::Done))
}

fn created(target: &InstanceRef, instance: &Instance) -> CreatedMachine {
    CreatedMachine {
        provider_id: target.provider_id(),
        node_name: target.name.clone(),
        last_known_state: String::new(),
        addresses: addresses(instance),
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
            },
            max_user_data_bytes: MAX_USER_DATA_BYTES,
            required_secret_keys: vec![SERVICE_ACCOUNT_KEYS.to_vec()],
        }
    }

    async fn create_machine(&self, ctx: &CallContext, req: CreateMachine) -> Result<CreatedMachine, DriverError> {
        let spec = GcpProviderSpec::parse(&req.class.provider_spec)?;
        let key = ServiceAccountKey::from_secret(&req.secret, "secret")?;
        let name = req.machine.name.as_str();
        if !is_gce_name(name) {
            return Err(DriverError::invalid_argument(
                "machine.name",
                format!("{name:?} is not a valid GCE instance name (lowercase letters, digits and '-', at most 63)"),
            ));
        }
        let uid = req.machine.uid.as_str();
        let target = InstanceRef { project: key.project_id.clone(), zone: spec.zone.clone(), name: name.to_string() };
        let body = build_instance(&spec, InstanceTarget { project: &target.project, name, uid }, &req.user_data.0)?;
        let api = self.pool.api(&key, ctx).await?;

        let mut after: Option<String> = None;
        for generation in 0..MAX_INSERT_GENERATIONS {
            let request_id = insert_request_id(uid, after.as_deref());
            let inserted = api
                .call("instances.insert", || {
                    api.clients
                        .instances
                        .insert()
                        .set_project(&target.project)
                        .set_zone(&target.zone)
                        .set_request_id(request_id.clone())
                        .set_body(body.clone())
                        .send()
                })
                .await;
            let op = match inserted {
                Ok(op) => op,
                Err(f) if f.cloud().is_some_and(GceFailure::is_already_exists) => {
                    return self.adopt(&api, &target, uid).await;
                }
                Err(f) => return Err(f.into_driver_error()),
            };
            self.recent.record(target.clone(), ());
            self.deleted.forget(&target);
            if !is_done(&op) {
                return self.wait_briefly(&api, &target, &op, uid).await;
            }
            let Some(failure) = GceFailure::from_operation(&op) else {
                return Ok(created(&target, &Instance::new()));
            };
            if failure.is_already_exists() {
                return self.adopt(&api, &target, uid).await;
            }
            self.recent.forget(&target);
            let replayed = op.insert_time.as_deref().and_then(timestamps::age).is_some_and(|age| age >= REPLAY_AGE);
            if !replayed || generation + 1 == MAX_INSERT_GENERATIONS {
                return Err(failure.driver_error("instances.insert"));
            }
            tracing::info!(
                provider_id = %target.provider_id(),
                generation = generation + 1,
                "the requestId answered with an earlier failed insert; retrying with the next requestId"
            );
            after = Some(op.name.clone().unwrap_or_else(|| format!("generation-{generation}")));
        }
        Err(DriverError::internal("instances.insert: no requestId generation left"))
    }

    async fn get_machine_status(&self, ctx: &CallContext, req: MachineRef) -> Result<MachineStatus, DriverError> {
        let key = ServiceAccountKey::from_secret(&req.secret, "secret")?;
        let target = self.locate(&req, &key)?;
        let api = self.pool.api(&key, ctx).await?;
        match self.lookups.get(&api, &key, &target).await? {
            Some(instance) => {
                self.recent.forget(&target);
                Ok(MachineStatus {
                    provider_id: target.provider_id(),
                    node_name: target.name.clone(),
                    addresses: addresses(&instance),
                    pending_steps: Vec::new(),
                    vm_state: status_word(&instance),
                })
            }
            None if self.recent.contains(&target) => {
                Ok(MachineStatus::not_visible_yet(target.provider_id(), target.name.clone()))
            }
            None => Some(&req.machine)
                .filter(|_| !self.deleted.contains(&target))
                .and_then(|m| m.young_not_visible_yet(&target.name))
                .ok_or_else(|| DriverError::not_found(format!("instance {}", target.provider_id()))),
        }
    }

    async fn delete_machine(&self, ctx: &CallContext, req: MachineRef) -> Result<DeletedMachine, DriverError> {
        let key = ServiceAccountKey::from_secret(&req.secret, "secret")?;
        let target = self.locate(&req, &key)?;
        let api = self.pool.api(&key, ctx).await?;
        let deleted = api
            .call("instances.delete", || {
                api.clients
                    .instances
                    .delete()
                    .set_project(&target.project)
                    .set_zone(&target.zone)
                    .set_instance(&target.name)
                    .send()
            })
            .await;
        self.recent.forget(&target);
        self.deleted.record(target.clone(), ());
        match deleted {
            Ok(_) => {
                tracing::info!(provider_id = %target.provider_id(), "instance deletion started");
                Ok(DeletedMachine { last_known_state: String::new(), already_gone: false })
            }
            Err(f) if f.cloud().is_some_and(GceFailure::is_not_found) => {
                Ok(DeletedMachine { last_known_state: String::new(), already_gone: true })
            }
            Err(f) => Err(f.into_driver_error()),
        }
    }

    async fn list_machines(&self, ctx: &CallContext, req: ListMachines) -> Result<Vec<(String, String)>, DriverError> {
        let spec = GcpProviderSpec::parse(&req.class.provider_spec)?;
        let membership = spec.membership()?;
        let key = ServiceAccountKey::from_secret(&req.secret, "secret")?;
        let api = self.pool.api(&key, ctx).await?;
        let filter = format!(
            "labels.{}=\"{MEMBERSHIP_LABEL_VALUE}\" AND labels.{}=\"{MEMBERSHIP_LABEL_VALUE}\"",
            membership.cluster_tag, membership.role_tag
        );
        let mut out = Vec::new();
        let mut page_token = String::new();
        loop {
            let page = api
                .call("instances.list", || {
                    api.clients
                        .instances
                        .list()
                        .set_project(&key.project_id)
                        .set_zone(&spec.zone)
                        .set_filter(filter.clone())
                        .set_max_results(LIST_PAGE_SIZE)
                        .set_page_token(page_token.clone())
                        .send()
                })
                .await?;
            for instance in &page.items {
                if let Some(name) = instance.name.as_deref() {
                    let r = InstanceRef {
                        project: key.project_id.clone(),
                        zone: spec.zone.clone(),
                        name: name.to_string(),
                    };
                    out.push((r.provider_id(), name.to_string()));
                }
            }
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(t) if t != page_token => page_token = t,
                Some(_) => return Err(DriverError::internal("instances.list returned the same page token twice")),
                None => break,
            }
        }
        Ok(out)
    }

    fn get_volume_ids(&self, pv_specs: &[serde_json::Value]) -> Result<Vec<String>, DriverError> {
        Ok(crate::volumes::volume_ids(pv_specs))
    }

    async fn share_image(&self, ctx: &CallContext, req: ShareImage) -> Result<SharedImage, DriverError> {
        crate::share_image::share_image(&self.pool, ctx, req).await
    }
}
