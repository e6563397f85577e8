//! Phase 2: cloud requests per lifecycle step (status → create → status →
//! initialize → status → delete), read from the fake's counters, reset
//! before each step.

use std::future::Future;
use std::time::{Duration, Instant};

use machine_driver_conformance::status_details::code_name;
use serde::Serialize;
use tonic::Status;

use crate::admin::{Admin, CallCounts};
use crate::workload::{Sidecar, is_retryable, new_machine};

/// How long InitializeMachine is retried while the VM is still booting.
const INITIALIZE_WITHIN: Duration = Duration::from_secs(30);

/// One RPC step of the lifecycle.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Step {
    /// The RPC (`GetMachineStatus`, ...), with a hint where it is in the sequence.
    pub(crate) step: String,
    /// `OK` or the final gRPC code.
    pub(crate) outcome: String,
    /// RPC attempts (more than 1 only when InitializeMachine was retried as the machine-controller would).
    pub(crate) attempts: u32,
    /// Cloud requests by operation.
    pub(crate) calls: CallCounts,
    /// `read`-class requests among them.
    pub(crate) reads: u64,
}

/// What phase 2 measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Lifecycle {
    /// The steps in order.
    pub(crate) steps: Vec<Step>,
    /// Cloud requests of the whole sequence.
    pub(crate) total_calls: u64,
    /// Most `read`-class requests made by one RPC attempt.
    pub(crate) max_reads_per_rpc: u64,
    /// Whether the driver advertises INITIALIZE_MACHINE (the step is skipped otherwise).
    pub(crate) initialize_advertised: bool,
}

async fn step<F, Fut>(admin: &Admin, name: &str, retry: bool, mut rpc: F) -> Result<Step, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<String, Status>>,
{
    admin.reset_calls().await?;
    let started = Instant::now();
    let mut attempts = 0;
    let outcome = loop {
        attempts += 1;
        match rpc().await {
            Ok(ok) => break ok,
            Err(s) if retry && is_retryable(s.code()) && started.elapsed() < INITIALIZE_WITHIN => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(s) => break code_name(s.code()).to_string(),
        }
    };
    let calls = admin.calls().await?;
    Ok(Step { step: name.to_string(), outcome, attempts, reads: crate::admin::reads(&calls), calls })
}

/// Runs phase 2 with one new machine.
pub(crate) async fn run(sidecar: &Sidecar, admin: &Admin, initialize_advertised: bool) -> Result<Lifecycle, String> {
    let mut m = new_machine("lifecycle", 0);
    let mut steps = Vec::new();
    let probe = m.clone();
    steps.push(
        step(admin, "GetMachineStatus (no VM yet)", false, || async {
            sidecar.status(&probe).await.map(|_| "OK".into())
        })
        .await?,
    );

    admin.reset_calls().await?;
    let create_started = Instant::now();
    let created = sidecar.create(&mut m).await;
    let calls = admin.calls().await?;
    let outcome = match &created {
        Ok(()) => "OK".to_string(),
        Err(s) => code_name(s.code()).to_string(),
    };
    steps.push(Step { step: "CreateMachine".into(), outcome, attempts: 1, reads: crate::admin::reads(&calls), calls });
    if let Err(s) = created {
        return Err(format!("CreateMachine failed after {:?}: {}", create_started.elapsed(), s.message()));
    }

    let status = |hint: &'static str| {
        let m = m.clone();
        async move {
            step(admin, &format!("GetMachineStatus ({hint})"), false, || async {
                sidecar.status(&m).await.map(|r| format!("OK, vm_state {:?}", r.vm_state))
            })
            .await
        }
    };
    steps.push(status("after create").await?);
    if initialize_advertised {
        let m = m.clone();
        steps.push(
            step(admin, "InitializeMachine", true, || async { sidecar.initialize(&m).await.map(|()| "OK".into()) })
                .await?,
        );
    }
    steps.push(status(if initialize_advertised { "after initialize" } else { "again" }).await?);
    let m2 = m.clone();
    steps
        .push(step(admin, "DeleteMachine", false, || async { sidecar.delete(&m2).await.map(|()| "OK".into()) }).await?);

    // A retried step (InitializeMachine while booting) is judged per attempt: its reads / attempts, rounded up.
    let max_reads_per_rpc = steps.iter().map(|s| s.reads.div_ceil(u64::from(s.attempts.max(1)))).max().unwrap_or(0);
    Ok(Lifecycle {
        total_calls: steps.iter().map(|s| s.calls.total).sum(),
        max_reads_per_rpc,
        steps,
        initialize_advertised,
    })
}
