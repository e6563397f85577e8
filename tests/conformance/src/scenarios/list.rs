//! ListMachines completeness around create and delete.

use std::time::Instant;

use futures::future::BoxFuture;

use crate::context::Ctx;
use crate::fail;
use crate::outcome::{StepResult, Stop};
use crate::status_details::describe;

/// A created machine appears in ListMachines (under its name) and disappears after delete.
pub(crate) fn shows_until_deleted(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut m = ctx.new_machine();
        let created = ctx.must_create(&mut m).await?;
        wait_listed(&ctx, &created.provider_id, Some(&m.name)).await?;
        ctx.must_delete(&m).await?;
        wait_listed(&ctx, &created.provider_id, None).await
    })
}

/// Polls ListMachines until `provider_id` maps to `name` (`Some`) or is absent (`None`).
async fn wait_listed(ctx: &Ctx, provider_id: &str, name: Option<&str>) -> StepResult {
    let started = Instant::now();
    loop {
        let listed = ctx.list().await.map_err(|s| Stop::Fail(format!("ListMachines: {}", describe(&s))))?;
        let got = listed.get(provider_id).map(String::as_str);
        if got == name {
            return Ok(());
        }
        if started.elapsed() >= ctx.settings.wait {
            match name {
                Some(n) => {
                    fail!("ListMachines maps {provider_id} to {got:?} after {:?}, expected {n:?}", ctx.settings.wait)
                }
                None => fail!("ListMachines still lists {provider_id} {:?} after its delete", ctx.settings.wait),
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
