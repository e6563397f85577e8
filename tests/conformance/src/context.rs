//! What a scenario works with: the connection, inputs, fake admin, its tracker,
//! and the driver calls and polling steps every scenario shares.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use machine_driver_proto::v1::{
    Capability, CreateMachineRequest, CreateMachineResponse, DeleteMachineRequest, DeleteMachineResponse,
    GetMachineStatusRequest, GetMachineStatusResponse, InitializeMachineRequest, InitializeMachineResponse,
    ListMachinesRequest, Machine, MachineClass, SecretData,
};
use tonic::{Code, Request, Status};

use crate::connection::{Capabilities, Connection};
use crate::fake_admin::FakeAdmin;
use crate::outcome::{StepResult, Stop};
use crate::restart::{NO_RESTART, Restarter};
use crate::settings::Settings;
use crate::spawn::StopMode;
use crate::status_details::describe;
use crate::tracker::Tracker;
use crate::{ensure, fail};

/// Prefix of every machine name the suite creates; the leak check looks for it.
pub const MACHINE_PREFIX: &str = "conf-";

/// Namespace of the suite's machines.
pub const NAMESPACE: &str = "conformance";

/// How often a poll asks again.
const POLL: Duration = Duration::from_millis(200);

/// Everything one scenario run works with. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Clients of the driver.
    pub conn: Connection,
    /// Suite inputs.
    pub settings: Arc<Settings>,
    /// Advertised capabilities.
    pub caps: Capabilities,
    /// The fake cloud's admin API, when known.
    pub fake: Option<FakeAdmin>,
    /// The scenario's resource tracker.
    pub tracker: Tracker,
    /// The driver's provider string (`GetPluginInfo.provider`), sent as the class's provider.
    pub provider: String,
    /// Short scenario name used in machine names.
    pub short: &'static str,
    /// Restarts the driver, when the suite owns it and its cloud outlives it.
    pub restarter: Option<Restarter>,
}

/// Codes after which the caller retries with the same machine (see sidecar conventions).
pub fn is_retryable(code: Code) -> bool {
    matches!(code, Code::Unavailable | Code::DeadlineExceeded | Code::Aborted | Code::Cancelled)
}

fn rpc_fail(rpc: &str, status: &Status) -> Stop {
    Stop::Fail(format!("{rpc}: {}", describe(status)))
}

impl Ctx {
    /// A new machine `conf-<short>-<random>` with a random UUID v4, created now (as
    /// MCM's `metadata.creationTimestamp`), recorded in the tracker.
    pub fn new_machine(&self) -> Machine {
        let uid = uuid::Uuid::new_v4();
        let suffix: String = uid.simple().to_string().chars().take(8).collect();
        let m = Machine {
            name: format!("{MACHINE_PREFIX}{}-{suffix}", self.short),
            namespace: NAMESPACE.to_string(),
            uid: uid.to_string(),
            creation_time: Some(prost_types::Timestamp::from(std::time::SystemTime::now())),
            ..Default::default()
        };
        self.tracker.record(&m);
        m
    }

    /// The machine class from `--machine-class`.
    pub fn class(&self) -> MachineClass {
        self.class_with_spec(self.settings.provider_spec.clone())
    }

    /// A machine class with another provider spec.
    pub fn class_with_spec(&self, spec: String) -> MachineClass {
        MachineClass {
            name: "conformance".to_string(),
            provider: self.provider.clone(),
            provider_spec: spec,
            ..Default::default()
        }
    }

    /// The secret from `--secret`.
    pub fn secret(&self) -> SecretData {
        secret_data(&self.settings.secret)
    }

    /// The fake admin API, or a skip when there is none.
    pub fn fake(&self) -> StepResult<&FakeAdmin> {
        match &self.fake {
            Some(f) => Ok(f),
            None => Err(Stop::Skip("no fake admin API (--fake-admin)".into())),
        }
    }

    /// Stops the driver (`how`), starts it again and reconnects this context to it; a skip
    /// when the suite cannot restart the driver.
    pub async fn restart_driver(&mut self, how: StopMode) -> StepResult {
        let Some(restarter) = &self.restarter else { return Err(Stop::Skip(NO_RESTART.into())) };
        self.conn = restarter.restart(how).await.map_err(Stop::Fail)?;
        Ok(())
    }

    /// Whether the driver advertises `cap`.
    pub fn has(&self, cap: Capability) -> bool {
        self.caps.has(cap)
    }

    /// Wraps a message with the suite's per-RPC deadline.
    pub fn req<T>(&self, msg: T) -> Request<T> {
        let mut r = Request::new(msg);
        r.set_timeout(self.settings.rpc_timeout);
        r
    }

    /// CreateMachine with the suite's class and secret; remembers the provider id.
    pub async fn create(&self, m: &Machine) -> Result<CreateMachineResponse, Status> {
        self.create_with(m, self.class(), self.secret()).await
    }

    /// CreateMachine with the given class and secret; the machine is tracked first.
    pub async fn create_with(
        &self,
        m: &Machine,
        class: MachineClass,
        secret: SecretData,
    ) -> Result<CreateMachineResponse, Status> {
        self.tracker.record(m);
        let req = CreateMachineRequest { machine: Some(m.clone()), machine_class: Some(class), secret: Some(secret) };
        let resp = self.conn.driver.clone().create_machine(self.req(req)).await?.into_inner();
        self.tracker.set_provider_id(&m.name, &m.uid, &resp.provider_id);
        Ok(resp)
    }

    /// GetMachineStatus.
    pub async fn status(&self, m: &Machine) -> Result<GetMachineStatusResponse, Status> {
        let req = GetMachineStatusRequest {
            machine: Some(m.clone()),
            machine_class: Some(self.class()),
            secret: Some(self.secret()),
        };
        Ok(self.conn.driver.clone().get_machine_status(self.req(req)).await?.into_inner())
    }

    /// InitializeMachine.
    pub async fn initialize(&self, m: &Machine) -> Result<InitializeMachineResponse, Status> {
        let req = InitializeMachineRequest {
            machine: Some(m.clone()),
            machine_class: Some(self.class()),
            secret: Some(self.secret()),
        };
        Ok(self.conn.driver.clone().initialize_machine(self.req(req)).await?.into_inner())
    }

    /// DeleteMachine.
    pub async fn delete(&self, m: &Machine) -> Result<DeleteMachineResponse, Status> {
        let req = DeleteMachineRequest {
            machine: Some(m.clone()),
            machine_class: Some(self.class()),
            secret: Some(self.secret()),
        };
        Ok(self.conn.driver.clone().delete_machine(self.req(req)).await?.into_inner())
    }

    /// ListMachines: provider id → machine name.
    pub async fn list(&self) -> Result<BTreeMap<String, String>, Status> {
        let req = ListMachinesRequest { machine_class: Some(self.class()), secret: Some(self.secret()) };
        let resp = self.conn.driver.clone().list_machines(self.req(req)).await?.into_inner();
        Ok(resp.machines.into_iter().collect())
    }

    /// Creates `m`, which must succeed with a provider id; sets `m.provider_id`.
    pub async fn must_create(&self, m: &mut Machine) -> StepResult<CreateMachineResponse> {
        let resp = self.create(m).await.map_err(|s| rpc_fail("CreateMachine", &s))?;
        ensure!(!resp.provider_id.is_empty(), "CreateMachine returned an empty provider_id");
        m.provider_id = resp.provider_id.clone();
        Ok(resp)
    }

    /// Creates `m`, retrying retryable errors within the wait bound; sets `m.provider_id`.
    pub async fn create_until_ok(&self, m: &mut Machine) -> StepResult<CreateMachineResponse> {
        let started = Instant::now();
        loop {
            match self.create(m).await {
                Ok(resp) => {
                    ensure!(!resp.provider_id.is_empty(), "CreateMachine returned an empty provider_id");
                    m.provider_id = resp.provider_id.clone();
                    return Ok(resp);
                }
                Err(s) if is_retryable(s.code()) && started.elapsed() < self.settings.wait => {
                    tokio::time::sleep(POLL).await;
                }
                Err(s) => return Err(rpc_fail("CreateMachine (retried)", &s)),
            }
        }
    }

    /// Polls GetMachineStatus until it answers OK. NOT_FOUND for a created machine fails at once.
    pub async fn wait_visible(&self, m: &Machine) -> StepResult<GetMachineStatusResponse> {
        let started = Instant::now();
        loop {
            match self.status(m).await {
                Ok(s) => return Ok(s),
                Err(s) if s.code() == Code::NotFound => {
                    fail!("GetMachineStatus of a created machine answered NOT_FOUND: {}", describe(&s))
                }
                Err(s) if is_retryable(s.code()) && started.elapsed() < self.settings.wait => {
                    tokio::time::sleep(POLL).await;
                }
                Err(s) => return Err(rpc_fail("GetMachineStatus", &s)),
            }
        }
    }

    /// Drives `m` to "initialized": polls status and, when the driver advertises
    /// INITIALIZE_MACHINE and steps are pending, calls InitializeMachine with the
    /// provider id and node name of that answer. Returns the final status.
    pub async fn wait_initialized(&self, m: &mut Machine) -> StepResult<GetMachineStatusResponse> {
        let started = Instant::now();
        loop {
            let status = self.wait_visible(m).await?;
            let Some(init) = status.initialization.clone() else {
                fail!("GetMachineStatus answered without an initialization state")
            };
            if init.initialized {
                return Ok(status);
            }
            if started.elapsed() >= self.settings.wait {
                fail!(
                    "machine not initialized within {:?}; pending steps {:?}",
                    self.settings.wait,
                    init.pending_steps
                );
            }
            if self.has(Capability::InitializeMachine) {
                m.provider_id = status.provider_id.clone();
                m.node_name = status.node_name.clone();
                match self.initialize(m).await {
                    Ok(_) => continue,
                    Err(s) if is_retryable(s.code()) => {}
                    Err(s) => return Err(rpc_fail("InitializeMachine", &s)),
                }
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Deletes `m`, retrying retryable errors within the wait bound.
    pub async fn must_delete(&self, m: &Machine) -> StepResult<DeleteMachineResponse> {
        let started = Instant::now();
        loop {
            match self.delete(m).await {
                Ok(r) => return Ok(r),
                Err(s) if is_retryable(s.code()) && started.elapsed() < self.settings.wait => {
                    tokio::time::sleep(POLL).await;
                }
                Err(s) => return Err(rpc_fail("DeleteMachine", &s)),
            }
        }
    }

    /// Polls GetMachineStatus until NOT_FOUND (a deleting VM may show for a while).
    pub async fn wait_gone(&self, m: &Machine) -> StepResult {
        let started = Instant::now();
        loop {
            let last = match self.status(m).await {
                Err(s) if s.code() == Code::NotFound => return Ok(()),
                Err(s) if !is_retryable(s.code()) => return Err(rpc_fail("GetMachineStatus after delete", &s)),
                Err(s) => describe(&s),
                Ok(s) => format!("OK, vm_state {:?}", s.vm_state),
            };
            if started.elapsed() >= self.settings.wait {
                fail!("GetMachineStatus still answers {last} {:?} after the delete", self.settings.wait);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// With fake admin: exactly one live instance carries the machine's name.
    pub async fn expect_one_live(&self, m: &Machine) -> StepResult {
        let Some(fake) = &self.fake else { return Ok(()) };
        let live = fake.live_named(&m.name).await.map_err(Stop::Fail)?;
        ensure!(
            live.len() == 1,
            "fake inventory holds {} live instances named {} (ids {:?}), expected exactly 1",
            live.len(),
            m.name,
            live.iter().map(|i| i.id.as_str()).collect::<Vec<_>>()
        );
        Ok(())
    }

    /// With fake admin: no live instance carries the machine's name.
    pub async fn expect_none_live(&self, m: &Machine) -> StepResult {
        let Some(fake) = &self.fake else { return Ok(()) };
        let live = fake.live_named(&m.name).await.map_err(Stop::Fail)?;
        ensure!(
            live.is_empty(),
            "fake inventory holds live instance(s) {:?} named {}, expected none",
            live.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
            m.name
        );
        Ok(())
    }
}

/// Secret data from string pairs.
pub fn secret_data(map: &BTreeMap<String, String>) -> SecretData {
    SecretData { data: map.iter().map(|(k, v)| (k.clone(), v.as_bytes().to_vec())).collect() }
}
