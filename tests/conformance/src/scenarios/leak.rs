//! The final leak check against the fake's inventory.

use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use crate::context::{Ctx, MACHINE_PREFIX};
use crate::fail;
use crate::fake_admin::FakeAdmin;
use crate::outcome::{StepResult, Stop};

/// After every scenario cleaned up, no live instance named `conf-...` remains, nor
/// a live dependent (an Azure NIC or disk, named after its machine) (polled
/// within the wait bound: deleting instances may stay live for a moment).
pub(crate) fn leak_check(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let fake = ctx.fake()?.clone();
        expect_no_leftovers(&fake, MACHINE_PREFIX, ctx.settings.wait).await
    })
}

/// Polls the fake's inventory until no live instance nor live dependent whose name starts
/// with `prefix` is left; fails with the leftovers (`name (id, state)`) after `wait`.
pub(crate) async fn expect_no_leftovers(fake: &FakeAdmin, prefix: &str, wait: Duration) -> StepResult {
    let started = Instant::now();
    loop {
        let inventory = fake.inventory().await.map_err(Stop::Fail)?;
        let leaked: Vec<String> = inventory
            .instances
            .into_iter()
            .chain(inventory.dependents)
            .filter(|i| i.live && i.name.starts_with(prefix))
            .map(|i| format!("{} ({}, {})", i.name, i.id, i.state))
            .collect();
        if leaked.is_empty() {
            return Ok(());
        }
        if started.elapsed() >= wait {
            fail!("{} live instance(s) left behind: {}", leaked.len(), leaked.join(", "));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
