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

/// A machine whose VM the cloud ended right after launch (a spot reclaim, a
/// launch aborted for a bad KMS key) gets a new VM from the controller's next
/// CreateMachine, as the Go providers relaunch; that create repeated (its
/// answer lost) returns the same new VM, and exactly one live VM carries the
/// machine's name.
///
/// The VM is ended out of band through the fake (`POST
/// /_admin/instances/{id}/terminate`): no driver call sees it go. The next
/// create carries the machine as the controller sends it after
/// GetMachineStatus answered NOT_FOUND: with the ended VM's provider id.
/// Retryable answers (the cloud still releasing the old VM's name) are
/// retried within the wait bound.
pub(crate) fn relaunch_after_terminated_launch(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let fake = ctx.fake()?.clone();
        let mut m = ctx.new_machine();
        let first = ctx.must_create(&mut m).await?;
        let live = fake.live_named(&m.name).await.map_err(Stop::Fail)?;
        let [killed] = &live[..] else {
            fail!("after CreateMachine the fake holds {} live instances named {}, expected 1", live.len(), m.name)
        };
        fake.terminate(&killed.id).await.map_err(Stop::Fail)?;
        ctx.expect_none_live(&m).await?;

        // As the controller sends it after GetMachineStatus answered NOT_FOUND:
        // with the ended VM's provider id.
        let after_end = m.clone();
        let relaunched = ctx.create_until_ok(&mut m).await?;
        let live = fake.live_named(&m.name).await.map_err(Stop::Fail)?;
        ensure!(
            live.len() == 1,
            "after the create that followed the VM's end ({}), the fake holds {} live instances named {}, \
                 expected 1 (the create answered {:?})",
            killed.id,
            live.len(),
            m.name,
            relaunched.provider_id
        );
        // The ended VM is not live any more, so the live one is new (its id may
        // be the old one where ids are names: Azure's resource ids).
        if first.provider_id != relaunched.provider_id {
            ensure!(
                !relaunched.provider_id.contains(&killed.id),
                "the create after the VM's end answered the ended VM's provider id {:?}",
                relaunched.provider_id
            );
        }

        // The relaunch's answer lost: the controller repeats the same request.
        let mut retry = after_end.clone();
        let again = ctx.create_until_ok(&mut retry).await?;
        ensure!(
            again.provider_id == relaunched.provider_id,
            "the relaunch repeated (its answer lost) returned {:?}, the relaunch {:?}",
            again.provider_id,
            relaunched.provider_id
        );
        ctx.expect_one_live(&m).await?;
        ctx.wait_visible(&m).await?;
        ctx.must_delete(&m).await?;
        ctx.wait_gone(&m).await
    })
}
