//! Fake-cloud fault injection: error mapping, eventual consistency, lost responses.

use futures::future::BoxFuture;
use tonic::Code;

use crate::context::{Ctx, is_retryable};
use crate::fake_admin::Fault;
use crate::outcome::{StepResult, Stop};
use crate::restart::NO_RESTART;
use crate::spawn::StopMode;
use crate::status_details::describe;
use crate::{ensure, fail, skip};

async fn inject(ctx: &Ctx, fault: Fault<'_>) -> StepResult {
    ctx.fake()?.add_fault(fault).await.map_err(Stop::Fail)
}

async fn clear_faults(ctx: &Ctx) -> StepResult {
    ctx.fake()?.clear_faults().await.map_err(Stop::Fail)
}

/// Every create refused as throttled (phase before): CreateMachine answers UNAVAILABLE and
/// nothing exists; once the throttling stops, a retry creates exactly one VM.
pub(crate) fn throttle(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        inject(&ctx, Fault { operation: "create", kind: "throttle", times: None, phase: "before" }).await?;
        let mut m = ctx.new_machine();
        match ctx.create(&m).await {
            Err(s) if s.code() == Code::Unavailable => {}
            Err(s) => fail!("throttled create: expected UNAVAILABLE, got {}", describe(&s)),
            Ok(r) => fail!("throttled create: expected UNAVAILABLE, got OK ({})", r.provider_id),
        }
        ctx.expect_none_live(&m).await?;
        clear_faults(&ctx).await?;
        ctx.create_until_ok(&mut m).await?;
        ctx.expect_one_live(&m).await
    })
}

/// Every create refused for lack of capacity: CreateMachine answers RESOURCE_EXHAUSTED; nothing exists.
pub(crate) fn capacity(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        inject(&ctx, Fault { operation: "create", kind: "capacity", times: None, phase: "before" }).await?;
        let m = ctx.new_machine();
        match ctx.create(&m).await {
            Err(s) if s.code() == Code::ResourceExhausted => {}
            Err(s) => fail!("create without capacity: expected RESOURCE_EXHAUSTED, got {}", describe(&s)),
            Ok(r) => fail!("create without capacity: expected RESOURCE_EXHAUSTED, got OK ({})", r.provider_id),
        }
        ctx.expect_none_live(&m).await
    })
}

/// Every create refused because the cloud cannot place the machine there (its
/// size or a feature is not offered in the region or zone; capability-gated by
/// the conformance file's `placement`): CreateMachine answers
/// RESOURCE_EXHAUSTED, the one code after which MCM backs off (10 min) and the
/// cluster autoscaler moves to another node group; nothing exists.
pub(crate) fn placement(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        if !ctx.settings.provider.placement {
            skip!("the provider's conformance file does not set \"placement\": true");
        }
        inject(&ctx, Fault { operation: "create", kind: "placement", times: None, phase: "before" }).await?;
        let m = ctx.new_machine();
        match ctx.create(&m).await {
            Err(s) if s.code() == Code::ResourceExhausted => {}
            Err(s) => fail!("create the cloud cannot place: expected RESOURCE_EXHAUSTED, got {}", describe(&s)),
            Ok(r) => fail!("create the cloud cannot place: expected RESOURCE_EXHAUSTED, got OK ({})", r.provider_id),
        }
        // A cloud may accept the VM and fail it afterwards (Nova: ERROR "No valid host was
        // found"); the driver then deletes it, which takes the cloud a moment.
        let fake = ctx.fake()?;
        let started = std::time::Instant::now();
        loop {
            let live = fake.live_named(&m.name).await.map_err(Stop::Fail)?;
            if live.is_empty() {
                return Ok(());
            }
            if started.elapsed() >= ctx.settings.wait {
                let ids: Vec<&str> = live.iter().map(|i| i.id.as_str()).collect();
                fail!("after the refused create the fake still holds live instance(s) {ids:?} named {}", m.name);
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    })
}

/// New instances invisible to reads for 2 s: status right after create answers OK, not
/// initialized, with a pending step (the one answer every provider gives for a VM it just
/// created and the cloud does not show yet: never NOT_FOUND, which makes the controller create
/// again, nor an error, which it records as a failed create); repeated creates return the same
/// VM, and the machine converges to initialized with exactly one VM.
pub(crate) fn eventual_consistency(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        ctx.fake()?.set_invisible_ms(2000).await.map_err(Stop::Fail)?;
        let mut m = ctx.new_machine();
        let created = ctx.must_create(&mut m).await?;
        match ctx.status(&m).await {
            Err(s) => fail!(
                "GetMachineStatus of a VM just created, not visible yet: expected OK, not initialized; got {}",
                describe(&s)
            ),
            Ok(r) => {
                let init = r.initialization.as_ref();
                ensure!(
                    init.is_some_and(|i| !i.initialized && !i.pending_steps.is_empty()),
                    "GetMachineStatus of a VM the cloud does not show yet: expected not initialized with a pending step, got {init:?}"
                );
                ensure!(
                    r.provider_id == created.provider_id,
                    "GetMachineStatus of a VM not visible yet answered providerID {:?}, create answered {:?}",
                    r.provider_id,
                    created.provider_id
                );
            }
        }
        let mut fresh = m.clone();
        fresh.provider_id.clear();
        for i in 2..=ctx.settings.repeat.clamp(2, 4) {
            let again = ctx.create_until_ok(&mut fresh).await?;
            fresh.provider_id.clear();
            ensure!(
                again.provider_id == created.provider_id,
                "CreateMachine call {i} while the VM is invisible returned {:?}, the first {:?} (duplicate VM)",
                again.provider_id,
                created.provider_id
            );
        }
        ctx.wait_initialized(&mut m).await?;
        ctx.expect_one_live(&m).await
    })
}

/// The driver restarts (SIGKILL) between create and the VM becoming visible, and MCM polls
/// the status of the machine as it stores it (providerID, creation time, no lastKnownState,
/// which MCM keeps only after a failed create): the answer is OK, not initialized, never
/// NOT_FOUND (MCM would neither create nor initialize the machine then).
pub(crate) fn not_visible_after_restart(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut ctx = ctx;
        if ctx.restarter.is_none() {
            skip!("{NO_RESTART}");
        }
        ctx.fake()?.set_invisible_ms(5000).await.map_err(Stop::Fail)?;
        let mut m = ctx.new_machine();
        let created = ctx.must_create(&mut m).await?;
        m.last_known_state.clear();
        ctx.restart_driver(StopMode::Crash).await?;
        match ctx.status(&m).await {
            Err(s) => fail!(
                "GetMachineStatus of a machine created a moment ago, after a driver restart, while the cloud \
                 does not show its VM yet: expected OK, not initialized; got {}",
                describe(&s)
            ),
            Ok(r) => ensure!(
                r.initialization.as_ref().is_some_and(|i| !i.initialized) && r.provider_id == created.provider_id,
                "expected not initialized with the create's providerID {:?}, got {:?} {:?}",
                created.provider_id,
                r.provider_id,
                r.initialization
            ),
        }
        ctx.wait_initialized(&mut m).await?;
        ctx.expect_one_live(&m).await
    })
}

/// The first create takes effect but its answer is lost (phase after): retrying lands on the
/// same single VM.
pub(crate) fn lost_response(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        inject(&ctx, Fault { operation: "create", kind: "unavailable", times: Some(1), phase: "after" }).await?;
        let mut m = ctx.new_machine();
        match ctx.create(&m).await {
            Ok(_) => {}
            Err(s) if is_retryable(s.code()) => {}
            Err(s) => fail!("create whose answer was lost: expected UNAVAILABLE or OK, got {}", describe(&s)),
        }
        let settled = ctx.create_until_ok(&mut m).await?;
        let mut again = m.clone();
        again.provider_id.clear();
        let repeat = ctx.create_until_ok(&mut again).await?;
        ensure!(repeat.provider_id == settled.provider_id, "retries returned two provider ids");
        ctx.expect_one_live(&m).await
    })
}

/// Every create takes effect and loses its answer, three calls in a row; after the fault is
/// gone, one more create returns the single VM they made.
pub(crate) fn lost_every_response(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        inject(&ctx, Fault { operation: "create", kind: "internal", times: None, phase: "after" }).await?;
        let mut m = ctx.new_machine();
        for i in 1..=3 {
            match ctx.create(&m).await {
                Ok(_) => {}
                Err(s) if is_retryable(s.code()) => {}
                Err(s) => {
                    fail!("create call {i} whose cloud answer was a 5xx: expected UNAVAILABLE, got {}", describe(&s))
                }
            }
        }
        clear_faults(&ctx).await?;
        ctx.create_until_ok(&mut m).await?;
        ctx.expect_one_live(&m).await
    })
}
