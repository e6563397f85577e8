//! The full lifecycle, as the machine-controller drives it.

use futures::future::BoxFuture;
use machine_driver_proto::v1::Capability;
use tonic::Code;

use crate::context::Ctx;
use crate::outcome::{StepResult, Stop};
use crate::status_details::describe;
use crate::{ensure, fail};

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
