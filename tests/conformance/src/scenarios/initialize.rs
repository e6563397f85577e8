//! InitializeMachine: convergence, and UNIMPLEMENTED when not advertised.

use futures::future::BoxFuture;
use machine_driver_proto::v1::Capability;
use tonic::Code;

use crate::context::Ctx;
use crate::fake_admin::Fault;
use crate::outcome::{StepResult, Stop};
use crate::status_details::describe;
use crate::{ensure, fail, skip};

/// A fault that refuses every cloud write: a call that writes fails with PERMISSION_DENIED.
pub(crate) const REFUSE_WRITES: Fault<'static> =
    Fault { operation: "write", kind: "permission", times: None, phase: "before" };

/// Once initialized, repeating InitializeMachine N times applies nothing, makes no cloud
/// write (with fake admin: every `write`-class operation is refused and must not be tried),
/// and leaves the machine initialized.
pub(crate) fn convergent(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut m = ctx.new_machine();
        ctx.must_create(&mut m).await?;
        let status = ctx.wait_initialized(&mut m).await?;
        m.provider_id = status.provider_id.clone();
        m.node_name = status.node_name.clone();
        if let Some(fake) = &ctx.fake {
            fake.add_fault(REFUSE_WRITES).await.map_err(Stop::Fail)?;
            fake.reset_calls().await.map_err(Stop::Fail)?;
        }
        for i in 1..=ctx.settings.repeat {
            match ctx.initialize(&m).await {
                Ok(r) => ensure!(
                    r.applied_steps.is_empty(),
                    "repeated InitializeMachine (call {i}) applied steps {:?} to an initialized machine",
                    r.applied_steps
                ),
                Err(s) => {
                    let calls = match &ctx.fake {
                        Some(f) => f.calls().await.map(|c| format!("{:?}", c.calls)).unwrap_or_default(),
                        None => String::new(),
                    };
                    fail!(
                        "repeated InitializeMachine (call {i}) on an initialized machine: {} (a refused cloud write shows as PERMISSION_DENIED; cloud calls: {calls})",
                        describe(&s)
                    )
                }
            }
        }
        let after = ctx.wait_visible(&m).await?;
        ensure!(
            after.initialization.as_ref().is_some_and(|i| i.initialized),
            "machine reported uninitialized after repeated InitializeMachine"
        );
        Ok(())
    })
}

/// A driver that does not advertise INITIALIZE_MACHINE answers InitializeMachine with UNIMPLEMENTED.
pub(crate) fn unimplemented(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        if ctx.has(Capability::InitializeMachine) {
            skip!("driver advertises CAPABILITY_INITIALIZE_MACHINE");
        }
        let mut m = ctx.new_machine();
        ctx.must_create(&mut m).await?;
        match ctx.initialize(&m).await {
            Err(s) if s.code() == Code::Unimplemented => Ok(()),
            Err(s) => fail!("expected UNIMPLEMENTED, got {}", describe(&s)),
            Ok(_) => fail!("expected UNIMPLEMENTED, got OK"),
        }
    })
}
