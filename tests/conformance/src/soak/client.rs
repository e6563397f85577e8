//! The soak's driver calls: always through the connection to the driver's latest run,
//! each answer counted and judged ([`crate::soak::answer`]).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use machine_driver_proto::v1::machine_driver_service_client::MachineDriverServiceClient;
use machine_driver_proto::v1::{
    CreateMachineRequest, CreateMachineResponse, DeleteMachineRequest, DeleteMachineResponse, GetMachineStatusRequest,
    GetMachineStatusResponse, InitializeMachineRequest, InitializeMachineResponse, Machine,
};
use tonic::transport::Channel;
use tonic::{Response, Status};

use crate::context::Ctx;
use crate::restart::Restarter;
use crate::soak::answer::{Origin, forbidden, label, origin};
use crate::soak::rpc::Rpc;
use crate::soak::tally::Tally;

/// Counts driver restarts: odd while one is under way (from just before the kill until the
/// new process answers Probe), even otherwise.
#[derive(Debug, Default)]
pub struct Epoch(AtomicU64);

impl Epoch {
    /// The current value.
    pub fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    /// Marks the start or the end of a restart.
    pub fn bump(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    /// Whether a call that started at epoch `started` overlapped a restart.
    pub fn overlapped(&self, started: u64) -> bool {
        started % 2 == 1 || self.now() != started
    }
}

/// An error answer and who gave it.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The status.
    pub status: Status,
    /// The driver or the transport.
    pub origin: Origin,
}

impl Failure {
    /// Whether the driver answered NOT_FOUND.
    pub fn is_driver_not_found(&self) -> bool {
        self.origin == Origin::Driver && self.status.code() == tonic::Code::NotFound
    }
}

/// Driver calls of a soak run. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SoakClient {
    ctx: Ctx,
    restarter: Restarter,
    epoch: Arc<Epoch>,
    tally: Arc<Tally>,
}

impl SoakClient {
    /// A client sending `ctx`'s class, secret and deadline to the driver `restarter` restarts.
    pub fn new(ctx: Ctx, restarter: Restarter, epoch: Arc<Epoch>, tally: Arc<Tally>) -> Self {
        Self { ctx, restarter, epoch, tally }
    }

    async fn call<T, F, Fut>(&self, rpc: Rpc, machine: &str, send: F) -> Result<T, Failure>
    where
        F: FnOnce(MachineDriverServiceClient<Channel>) -> Fut,
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        let started = self.epoch.now();
        let driver = self.restarter.connection().await.driver;
        match send(driver).await {
            Ok(resp) => {
                self.tally.answer(rpc, "OK");
                Ok(resp.into_inner())
            }
            Err(status) => {
                let origin = origin(&status);
                self.tally.answer(rpc, &label(status.code(), origin));
                if let Some(why) = forbidden(rpc, status.code(), origin, self.epoch.overlapped(started)) {
                    self.tally.forbidden(format!("{why} for {machine}: {}", status.message()));
                }
                Err(Failure { status, origin })
            }
        }
    }

    /// CreateMachine.
    pub async fn create(&self, m: &Machine) -> Result<CreateMachineResponse, Failure> {
        let req = CreateMachineRequest {
            machine: Some(m.clone()),
            machine_class: Some(self.ctx.class()),
            secret: Some(self.ctx.secret()),
        };
        let req = self.ctx.req(req);
        self.call(Rpc::Create, &m.name, |mut d| async move { d.create_machine(req).await }).await
    }

    /// InitializeMachine.
    pub async fn initialize(&self, m: &Machine) -> Result<InitializeMachineResponse, Failure> {
        let req = InitializeMachineRequest {
            machine: Some(m.clone()),
            machine_class: Some(self.ctx.class()),
            secret: Some(self.ctx.secret()),
        };
        let req = self.ctx.req(req);
        self.call(Rpc::Initialize, &m.name, |mut d| async move { d.initialize_machine(req).await }).await
    }

    /// GetMachineStatus.
    pub async fn status(&self, m: &Machine) -> Result<GetMachineStatusResponse, Failure> {
        let req = GetMachineStatusRequest {
            machine: Some(m.clone()),
            machine_class: Some(self.ctx.class()),
            secret: Some(self.ctx.secret()),
        };
        let req = self.ctx.req(req);
        self.call(Rpc::Status, &m.name, |mut d| async move { d.get_machine_status(req).await }).await
    }

    /// DeleteMachine.
    pub async fn delete(&self, m: &Machine) -> Result<DeleteMachineResponse, Failure> {
        let req = DeleteMachineRequest {
            machine: Some(m.clone()),
            machine_class: Some(self.ctx.class()),
            secret: Some(self.ctx.secret()),
        };
        let req = self.ctx.req(req);
        self.call(Rpc::Delete, &m.name, |mut d| async move { d.delete_machine(req).await }).await
    }

    /// The run's tally.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// The run's restart counter.
    pub fn epoch(&self) -> &Epoch {
        &self.epoch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_tells_calls_that_overlapped_a_restart() {
        let e = Epoch::default();
        let before = e.now();
        assert!(!e.overlapped(before));
        e.bump();
        assert!(e.overlapped(before), "a restart began during the call");
        let during = e.now();
        assert!(e.overlapped(during), "the call began during a restart");
        e.bump();
        assert!(!e.overlapped(e.now()));
    }
}
