//! The full lifecycle, as the machine-controller drives it.

use futures::future::BoxFuture;
use machine_driver_proto::v1::Capability;
use tonic::Code;

use crate::context::Ctx;
use crate::fake_admin::{Calls, FakeAdmin};
use crate::outcome::{StepResult, Stop};
use crate::status_details::describe;
use crate::{ensure, fail, skip};

/// status NOT_FOUND → create → status → initialize (if pending) → status initialized →
/// list contains it → delete → status NOT_FOUND (within the wait bound).
pub(crate) fn full(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut m = ctx.new_machine();
        match ctx.status(&m).await {
            Err(s) if s.code() == Code::NotFound => {}
            Err(s) => fail!("GetMachineStatus before create: expected NOT_FOUND, got {}", describe(&s)),
            Ok(r) => fail!("GetMachineStatus before create: expected NOT_FOUND, got OK ({})", r.provider_id),
        }
        let created = ctx.must_create(&mut m).await?;
        ensure!(!created.node_name.is_empty(), "CreateMachine returned an empty node_name");
        ctx.expect_one_live(&m).await?;

        let first = ctx.wait_visible(&m).await?;
        ensure!(
            first.provider_id == created.provider_id,
            "GetMachineStatus provider_id {:?} differs from CreateMachine's {:?}",
            first.provider_id,
            created.provider_id
        );
        ensure!(first.initialization.is_some(), "GetMachineStatus answered without an initialization state");

        let done = ctx.wait_initialized(&mut m).await?;
        ensure!(done.provider_id == created.provider_id, "provider_id changed during initialization");
        ensure!(!done.node_name.is_empty(), "GetMachineStatus of an initialized machine has an empty node_name");

        if ctx.has(Capability::ListMachines) {
            let listed = ctx.list().await.map_err(|s| Stop::Fail(format!("ListMachines: {}", describe(&s))))?;
            match listed.get(&created.provider_id) {
                Some(name) => ensure!(
                    name == &m.name,
                    "ListMachines maps {} to {name:?}, expected {:?}",
                    created.provider_id,
                    m.name
                ),
                None => fail!("ListMachines does not list {}", created.provider_id),
            }
        }

        ctx.must_delete(&m).await?;
        ctx.wait_gone(&m).await?;
        Ok(())
    })
}

/// The lifecycle again, with the fake's counters reset before each step and each
/// step's cloud calls checked against the provider's `callBudget` (conformance.json).
pub(crate) fn call_budget(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let fake = ctx.fake()?.clone();
        let Some(budget) = ctx.settings.provider.call_budget.clone() else {
            skip!("no callBudget in the provider's conformance.json");
        };
        let mut m = ctx.new_machine();
        let mut report = Vec::new();

        reset(&fake).await?;
        match ctx.status(&m).await {
            Err(s) if s.code() == Code::NotFound => {}
            other => fail!("GetMachineStatus before create: expected NOT_FOUND, got {other:?}"),
        }
        check(&fake, "status (absent)", budget.status_absent, &budget.status_forbidden, &mut report).await?;

        reset(&fake).await?;
        ctx.must_create(&mut m).await?;
        check(&fake, "create", budget.create, &[], &mut report).await?;

        ctx.wait_visible(&m).await?;
        reset(&fake).await?;
        let status = match ctx.status(&m).await {
            Ok(s) => s,
            Err(s) => fail!("GetMachineStatus after create: {}", describe(&s)),
        };
        check(&fake, "status", budget.status, &budget.status_forbidden, &mut report).await?;

        let pending = !status.initialization.as_ref().is_some_and(|i| i.initialized);
        if pending && ctx.has(Capability::InitializeMachine) {
            // The VM may still be booting: retry until one initialization succeeds,
            // and count that successful attempt alone.
            let deadline = tokio::time::Instant::now() + ctx.settings.wait;
            loop {
                reset(&fake).await?;
                match ctx.initialize(&m).await {
                    Ok(_) => break,
                    Err(s) if crate::context::is_retryable(s.code()) && tokio::time::Instant::now() < deadline => {
                        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    }
                    Err(s) => fail!("InitializeMachine: {}", describe(&s)),
                }
            }
            check(&fake, "initialize", budget.initialize, &[], &mut report).await?;
        }

        // A VM may refuse deletion while it still starts (retryable): count the
        // successful attempt alone, as for initialization.
        let deadline = tokio::time::Instant::now() + ctx.settings.wait;
        loop {
            reset(&fake).await?;
            match ctx.delete(&m).await {
                Ok(_) => break,
                Err(s) if crate::context::is_retryable(s.code()) && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                Err(s) => fail!("DeleteMachine: {}", describe(&s)),
            }
        }
        check(&fake, "delete", budget.delete, &[], &mut report).await?;

        reset(&fake).await?;
        match ctx.status(&m).await {
            Err(s) if s.code() == Code::NotFound => {}
            // A VM still shutting down may be reported; the calls are what is checked here.
            Ok(_) => {}
            Err(s) => fail!("GetMachineStatus after delete: {}", describe(&s)),
        }
        check(&fake, "status (deleted)", budget.status_gone, &budget.status_forbidden, &mut report).await?;
        ctx.wait_gone(&m).await?;
        println!("    cloud calls per step: {}", report.join(", "));
        Ok(())
    })
}

async fn reset(fake: &FakeAdmin) -> StepResult {
    fake.reset_calls().await.map_err(Stop::Fail)
}

async fn check(fake: &FakeAdmin, step: &str, most: u64, forbidden: &[String], report: &mut Vec<String>) -> StepResult {
    let Calls { calls, total, .. } = fake.calls().await.map_err(Stop::Fail)?;
    report.push(format!("{step} {total}"));
    ensure!(total <= most, "{step}: {total} cloud calls, the budget is {most}: {calls:?}");
    for op in forbidden {
        ensure!(!calls.contains_key(op), "{step}: used {op}, which it must never use: {calls:?}");
    }
    Ok(())
}
