//! CreateMachine idempotency on machine.uid: repeated and concurrent.

use futures::future::{BoxFuture, join_all};

use crate::context::{Ctx, is_retryable};
use crate::outcome::StepResult;
use crate::status_details::describe;
use crate::{ensure, fail};

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
