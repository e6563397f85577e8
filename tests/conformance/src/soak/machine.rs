//! One machine's lifecycle, driven the way MCM's machine controller drives it
//! (`docs/mcm-adapter.md`): each creation pass starts with GetMachineStatus; NOT_FOUND
//! without providerID → CreateMachine, and InitializeMachine at once after a successful
//! create; OK but not initialized → InitializeMachine with the answer's providerID and node
//! name; initialized → done. Then DeleteMachine until OK or NOT_FOUND, and GetMachineStatus
//! until NOT_FOUND (the soak's own check that the VM is gone). After an error the next call
//! waits for the answer's RetryInfo, else MCM's period ([`crate::soak::retry`]); after
//! progress it waits MCM's short period; all scaled.

use std::sync::Arc;
use std::time::Instant;

use machine_driver_proto::v1::{GetMachineStatusResponse, Machine};

use crate::fake_admin::FakeAdmin;
use crate::soak::client::{Failure, SoakClient};
use crate::soak::config::SoakConfig;
use crate::soak::restarts::Progress;
use crate::soak::retry::{Period, delay_after};
use crate::soak::rpc::Rpc;
use crate::status_details::describe;

/// How far one machine got.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MachineOutcome {
    /// The machine's name.
    pub name: String,
    /// Its VM exists: a create answered OK, or a status answered OK (adopted).
    pub created: bool,
    /// GetMachineStatus answered initialized.
    pub initialized: bool,
    /// DeleteMachine answered OK or NOT_FOUND.
    pub deleted: bool,
    /// GetMachineStatus answered NOT_FOUND after the delete.
    pub gone: bool,
    /// Why the machine did not get through, if it did not.
    pub problem: Option<String>,
    /// The machine as last sent (providerID, node name, last known state).
    pub machine: Machine,
}

/// The pending step of the "not visible yet" answer (driver.proto, GetMachineStatus).
pub const AWAIT_VISIBILITY: &str = "await-visibility";

/// Whether `status` is the "not visible yet" answer: OK, not initialized, pending
/// `await-visibility`.
pub fn is_not_visible_yet(status: &GetMachineStatusResponse) -> bool {
    status
        .initialization
        .as_ref()
        .is_some_and(|i| !i.initialized && i.pending_steps.iter().any(|s| s == AWAIT_VISIBILITY))
}

/// What every machine of a run shares.
#[derive(Debug, Clone)]
pub struct Lane {
    /// The driver calls.
    pub client: SoakClient,
    /// The fake's admin API: whether a deleted machine's instance is still live.
    pub fake: FakeAdmin,
    /// The run's settings.
    pub config: Arc<SoakConfig>,
    /// The run's progress (restart points, abort).
    pub progress: Arc<Progress>,
    /// Whether the driver advertises INITIALIZE_MACHINE.
    pub initialize: bool,
    /// When machines give up.
    pub deadline: Instant,
}

impl Lane {
    fn stopped(&self) -> Option<&'static str> {
        if self.progress.is_aborted() {
            Some("the run was aborted (the driver did not come back after a restart)")
        } else if Instant::now() >= self.deadline {
            Some("the soak timeout passed")
        } else {
            None
        }
    }

    /// Waits before calling `rpc` again after `failure`.
    async fn retry_after(&self, rpc: Rpc, failure: &Failure) {
        self.client.tally().retried(rpc);
        let delay = delay_after(rpc, &failure.status, failure.origin);
        tokio::time::sleep(self.config.scaled(delay).min(self.deadline.saturating_duration_since(Instant::now())))
            .await;
    }

    /// Waits MCM's short period (the requeue after progress, or between polls).
    async fn requeue(&self) {
        tokio::time::sleep(self.config.scaled(Period::Short.duration())).await;
    }

    fn milestone(&self, flag: &mut bool) {
        if !*flag {
            *flag = true;
            self.progress.milestone();
        }
    }

    /// Takes `m` through create, initialization, delete and gone; never panics, reports
    /// how far it got.
    pub async fn lifecycle(&self, mut m: Machine) -> MachineOutcome {
        let mut out = MachineOutcome { name: m.name.clone(), ..Default::default() };
        if let Err(why) = self.create_and_initialize(&mut m, &mut out).await {
            out.problem = Some(format!("not initialized: {why}"));
        } else if let Err(why) = self.delete_until_gone(&mut m, &mut out).await {
            out.problem = Some(format!("not deleted: {why}"));
        }
        out.machine = m;
        out
    }

    async fn create_and_initialize(&self, m: &mut Machine, out: &mut MachineOutcome) -> Result<(), String> {
        let tally = self.client.tally();
        let mut last = String::from("no answer yet");
        loop {
            if let Some(why) = self.stopped() {
                return Err(format!("{why}; last answer: {last}"));
            }
            let status = match self.client.status(m).await {
                Ok(s) => s,
                Err(f) if f.is_driver_not_found() && m.provider_id.is_empty() => {
                    last = "GetMachineStatus NOT_FOUND, creating".into();
                    self.create_pass(m, out, &mut last).await;
                    continue;
                }
                Err(f) if f.is_driver_not_found() => {
                    tally.breach(format!(
                        "GetMachineStatus answered NOT_FOUND for {} whose VM {} was created (MCM would neither \
                         create nor initialize it): {}",
                        m.name,
                        m.provider_id,
                        f.status.message()
                    ));
                    last = describe(&f.status);
                    self.requeue().await;
                    continue;
                }
                Err(f) => {
                    last = format!("GetMachineStatus {}", describe(&f.status));
                    self.retry_after(Rpc::Status, &f).await;
                    continue;
                }
            };
            if !m.provider_id.is_empty() && status.provider_id != m.provider_id {
                tally.breach(format!(
                    "GetMachineStatus of {} answered providerID {:?}, the machine has {:?}",
                    m.name, status.provider_id, m.provider_id
                ));
            }
            self.milestone(&mut out.created);
            m.provider_id = status.provider_id.clone();
            if !status.node_name.is_empty() {
                m.node_name = status.node_name.clone();
            }
            let init = status.initialization.as_ref();
            if init.is_none_or(|i| i.initialized) {
                self.milestone(&mut out.initialized);
                return Ok(());
            }
            last = format!("initialization pending: {:?}", init.map(|i| i.pending_steps.clone()).unwrap_or_default());
            if self.initialize
                && let Err(f) = self.client.initialize(m).await
            {
                last = format!("InitializeMachine {}", describe(&f.status));
                self.retry_after(Rpc::Initialize, &f).await;
                continue;
            }
            self.requeue().await;
        }
    }

    /// CreateMachine, then InitializeMachine at once when it succeeded (as MCM does in the
    /// same pass), then the wait before the next pass.
    async fn create_pass(&self, m: &mut Machine, out: &mut MachineOutcome, last: &mut String) {
        match self.client.create(m).await {
            Ok(created) => {
                if created.provider_id.is_empty() {
                    self.client.tally().breach(format!("CreateMachine of {} answered OK without providerID", m.name));
                }
                self.milestone(&mut out.created);
                m.provider_id = created.provider_id;
                m.node_name = created.node_name;
                if self.initialize
                    && let Err(f) = self.client.initialize(m).await
                {
                    *last = format!("InitializeMachine {}", describe(&f.status));
                    self.retry_after(Rpc::Initialize, &f).await;
                    return;
                }
                self.requeue().await;
            }
            Err(f) => {
                *last = format!("CreateMachine {}", describe(&f.status));
                self.retry_after(Rpc::Create, &f).await;
            }
        }
    }

    async fn delete_until_gone(&self, m: &mut Machine, out: &mut MachineOutcome) -> Result<(), String> {
        let mut last = String::from("no answer yet");
        // The restart epoch when the accepted delete was sent.
        let accepted_at = loop {
            if let Some(why) = self.stopped() {
                return Err(format!("{why}; last answer: DeleteMachine {last}"));
            }
            let sent_at = self.client.epoch().now();
            match self.client.delete(m).await {
                Ok(r) => {
                    m.last_known_state = r.last_known_state;
                    break sent_at;
                }
                Err(f) if f.is_driver_not_found() => break sent_at,
                Err(f) => {
                    last = describe(&f.status);
                    self.retry_after(Rpc::Delete, &f).await;
                }
            }
        };
        self.milestone(&mut out.deleted);
        loop {
            if let Some(why) = self.stopped() {
                return Err(format!("{why}; last answer: GetMachineStatus {last}"));
            }
            match self.client.status(m).await {
                Err(f) if f.is_driver_not_found() => {
                    self.milestone(&mut out.gone);
                    return Ok(());
                }
                Err(f) => {
                    last = describe(&f.status);
                    self.retry_after(Rpc::Status, &f).await;
                }
                Ok(s) if is_not_visible_yet(&s) && self.no_live_instance(&m.name).await => {
                    if self.client.epoch().overlapped(accepted_at) {
                        self.client.tally().unseen_after_restart();
                    } else {
                        self.client.tally().breach(format!(
                            "GetMachineStatus of {} answered \"not visible yet\" after the same driver process \
                             accepted its delete, and the cloud shows no live instance (expected NOT_FOUND)",
                            m.name
                        ));
                    }
                    self.milestone(&mut out.gone);
                    return Ok(());
                }
                Ok(s) => {
                    last = format!("OK, vm_state {:?}", s.vm_state);
                    self.requeue().await;
                }
            }
        }
    }

    /// Whether the fake's inventory shows no live instance named `name` (false when it
    /// cannot be read).
    async fn no_live_instance(&self, name: &str) -> bool {
        self.fake.live_named(name).await.is_ok_and(|live| live.is_empty())
    }
}
