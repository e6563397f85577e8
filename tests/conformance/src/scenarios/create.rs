//! CreateMachine idempotency on machine.uid: repeated, concurrent, and across driver restarts.

use futures::future::{BoxFuture, join_all};

use crate::context::{Ctx, is_retryable};
use crate::fake_admin::Fault;
use crate::outcome::{StepResult, Stop};
use crate::restart::NO_RESTART;
use crate::spawn::StopMode;
use crate::status_details::describe;
use crate::{ensure, fail, skip};

/// N sequential CreateMachine calls for one machine return one provider id; one VM exists.
pub(crate) fn repeated(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut m = ctx.new_machine();
        let first = ctx.must_create(&mut m).await?;
        // The controller retries with the machine as it knows it: without a provider id yet.
        m.provider_id.clear();
        for i in 2..=ctx.settings.repeat.max(2) {
            let again = ctx.must_create(&mut m).await?;
            m.provider_id.clear();
            ensure!(
                again.provider_id == first.provider_id,
                "CreateMachine call {i} returned {:?}, the first returned {:?}",
                again.provider_id,
                first.provider_id
            );
        }
        ctx.expect_one_live(&m).await
    })
}

/// N concurrent CreateMachine calls for one machine: every OK answer carries the same
/// provider id (retryable errors are allowed while another call is in flight); one VM exists.
pub(crate) fn concurrent(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let m = ctx.new_machine();
        let calls = (0..ctx.settings.repeat.max(2)).map(|_| ctx.create(&m));
        let results = join_all(calls).await;
        let mut ids = Vec::new();
        for r in results {
            match r {
                Ok(resp) => ids.push(resp.provider_id),
                Err(s) if is_retryable(s.code()) => {}
                Err(s) => fail!("concurrent CreateMachine: {}", describe(&s)),
            }
        }
        let mut m = m;
        let settled = ctx.create_until_ok(&mut m).await?;
        for id in &ids {
            ensure!(
                id == &settled.provider_id,
                "concurrent CreateMachine calls returned different provider ids: {id:?} and {:?}",
                settled.provider_id
            );
        }
        ctx.expect_one_live(&m).await
    })
}

/// CreateMachine stays idempotent when the driver loses its memory between retries:
///
/// 1. a machine is created, the driver is killed (SIGKILL) and restarted, and the
///    controller's retry (no provider id, empty last_known_state) returns the same VM; the
///    driver is stopped with SIGTERM and restarted, and a retry carrying the first answer's
///    last_known_state returns the same VM again; exactly one VM exists;
/// 2. a second machine's first create takes effect but its answer is lost (fault, phase
///    after), the driver is killed and restarted, and the retry returns a provider id with
///    exactly one VM in the fake's inventory.
pub(crate) fn across_restart(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut ctx = ctx;
        if ctx.restarter.is_none() {
            skip!("{NO_RESTART}");
        }
        let fake = ctx.fake()?.clone();

        let mut m = ctx.new_machine();
        let first = ctx.must_create(&mut m).await?;
        ctx.restart_driver(StopMode::Crash).await?;
        let mut retry = m.clone();
        retry.provider_id.clear();
        retry.last_known_state.clear();
        let again = ctx.create_until_ok(&mut retry).await?;
        ensure!(
            again.provider_id == first.provider_id,
            "after a SIGKILL and restart, CreateMachine (no provider id, no last_known_state) returned {:?}, \
             before the restart {:?}",
            again.provider_id,
            first.provider_id
        );
        ctx.restart_driver(StopMode::Graceful).await?;
        let mut retry = m.clone();
        retry.provider_id.clear();
        retry.last_known_state = first.last_known_state.clone();
        let again = ctx.create_until_ok(&mut retry).await?;
        ensure!(
            again.provider_id == first.provider_id,
            "after a SIGTERM and restart, CreateMachine with the first answer's last_known_state returned {:?}, \
             before the restarts {:?}",
            again.provider_id,
            first.provider_id
        );
        ctx.expect_one_live(&m).await?;

        fake.add_fault(Fault { operation: "create", kind: "unavailable", times: Some(1), phase: "after" })
            .await
            .map_err(Stop::Fail)?;
        let mut n = ctx.new_machine();
        let answered = match ctx.create(&n).await {
            Ok(r) => Some(r.provider_id),
            Err(s) if is_retryable(s.code()) => None,
            Err(s) => fail!("create whose cloud answer was lost: expected UNAVAILABLE or OK, got {}", describe(&s)),
        };
        ctx.restart_driver(StopMode::Crash).await?;
        let settled = ctx.create_until_ok(&mut n).await?;
        if let Some(id) = answered {
            ensure!(
                id == settled.provider_id,
                "the create before the SIGKILL returned {id:?}, the retry after the restart {:?}",
                settled.provider_id
            );
        }
        ctx.expect_one_live(&n).await
    })
}
