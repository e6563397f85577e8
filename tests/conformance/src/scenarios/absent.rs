//! Machines without a VM: status, delete, and delete by provider id alone.

use futures::future::BoxFuture;
use machine_driver_proto::v1::Machine;
use tonic::Code;

use crate::context::Ctx;
use crate::fail;
use crate::outcome::{StepResult, Stop};
use crate::status_details::describe;

/// GetMachineStatus of a machine that never had a VM answers NOT_FOUND, every time.
pub(crate) fn status_not_found(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let m = ctx.new_machine();
        for _ in 0..ctx.settings.repeat {
            match ctx.status(&m).await {
                Err(s) if s.code() == Code::NotFound => {}
                Err(s) => fail!("expected NOT_FOUND, got {}", describe(&s)),
                Ok(r) => fail!("expected NOT_FOUND, got OK with provider_id {:?}", r.provider_id),
            }
        }
        Ok(())
    })
}

/// DeleteMachine of a machine that never had a VM answers OK, every time.
pub(crate) fn delete_ok(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let m = ctx.new_machine();
        for _ in 0..ctx.settings.repeat {
            if let Err(s) = ctx.delete(&m).await {
                fail!("DeleteMachine of an absent machine: expected OK, got {}", describe(&s));
            }
        }
        Ok(())
    })
}

/// The orphan collector's delete: a Machine with only provider_id (and namespace). The VM goes;
/// repeating the delete still answers OK.
pub(crate) fn delete_by_provider_id(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut m = ctx.new_machine();
        let created = ctx.must_create(&mut m).await?;
        let orphan =
            Machine { provider_id: created.provider_id.clone(), namespace: m.namespace.clone(), ..Default::default() };
        // Each call may answer a retryable code first (a VM the cloud will not delete
        // while it starts); MCM retries those, and so does the suite.
        for i in 0..ctx.settings.repeat.clamp(1, 3) {
            if let Err(Stop::Fail(why) | Stop::Skip(why)) = ctx.must_delete(&orphan).await {
                fail!("DeleteMachine by provider_id alone (call {}): {why}", i + 1);
            }
        }
        ctx.wait_gone(&m).await?;
        ctx.expect_none_live(&m).await?;
        Ok(())
    })
}
