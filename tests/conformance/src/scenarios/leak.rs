//! The final leak check against the fake's inventory.

use std::time::Instant;

use futures::future::BoxFuture;

use crate::context::{Ctx, MACHINE_PREFIX};
use crate::fail;
use crate::outcome::{StepResult, Stop};

/// After every scenario cleaned up, no live instance named `conf-...` remains, nor
/// a live dependent (an Azure NIC or disk, named after its machine) (polled
/// within the wait bound: deleting instances may stay live for a moment).
pub(crate) fn leak_check(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let fake = ctx.fake()?.clone();
        let started = Instant::now();
        loop {
            let inventory = fake.inventory().await.map_err(Stop::Fail)?;
            let leaked: Vec<String> = inventory
                .instances
                .into_iter()
                .chain(inventory.dependents)
                .filter(|i| i.live && i.name.starts_with(MACHINE_PREFIX))
                .map(|i| format!("{} ({}, {})", i.name, i.id, i.state))
                .collect();
            if leaked.is_empty() {
                return Ok(());
            }
            if started.elapsed() >= ctx.settings.wait {
                fail!("{} live instance(s) left behind: {}", leaked.len(), leaked.join(", "));
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    })
}
