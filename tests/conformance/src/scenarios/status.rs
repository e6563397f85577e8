//! GetMachineStatus under concurrency: polls that a driver may batch into
//! shared cloud reads must still each get their own machine's answer.

use futures::future::{BoxFuture, join_all};
use machine_driver_proto::v1::{AddressType, GetMachineStatusResponse};
use tonic::Code;

use crate::context::Ctx;
use crate::outcome::StepResult;
use crate::status_details::describe;
use crate::{ensure, fail};

/// Machines created for the scenario (besides the absent ones).
const MACHINES: usize = 4;
/// Machines polled that never had a VM.
const ABSENT: usize = 2;

/// Every machine (created and absent alike) is polled `repeat` times, all polls
/// at once: each created machine's answers carry its own provider_id and the
/// internal IPs its lone poll reported (a provider may derive provider_id from
/// the request; the addresses come from the VM it read), each absent one
/// answers NOT_FOUND, whatever the driver coalesces behind the scenes.
pub(crate) fn concurrent_polls(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut created = Vec::new();
        let mut internal_ips = Vec::new();
        for _ in 0..MACHINES {
            let mut m = ctx.new_machine();
            ctx.must_create(&mut m).await?;
            ctx.wait_visible(&m).await?;
            internal_ips.push(internal_ips_of(&ctx.status(&m).await.map_err(|s| {
                crate::outcome::Stop::Fail(format!("lone GetMachineStatus of {}: {}", m.name, describe(&s)))
            })?));
            created.push(m);
        }
        let ips_of = |name: &str| created.iter().position(|m| m.name == name).map(|i| internal_ips[i].clone());
        let absent: Vec<_> = (0..ABSENT).map(|_| ctx.new_machine()).collect();
        let repeat = ctx.settings.repeat.max(1);
        let polls = created.iter().map(|m| (m, true)).chain(absent.iter().map(|m| (m, false)));
        let polls: Vec<_> = polls.flat_map(|p| std::iter::repeat_n(p, repeat)).collect();
        let answers = join_all(polls.iter().map(|(m, _)| ctx.status(m))).await;
        for ((m, exists), answer) in polls.iter().zip(answers) {
            match (exists, answer) {
                (true, Ok(r)) => {
                    ensure!(
                        r.provider_id == m.provider_id,
                        "concurrent GetMachineStatus of {} answered provider_id {:?}, expected {:?}",
                        m.name,
                        r.provider_id,
                        m.provider_id
                    );
                    let lone = ips_of(&m.name).unwrap_or_default();
                    ensure!(
                        lone.is_empty() || internal_ips_of(&r) == lone,
                        "concurrent GetMachineStatus of {} answered internal IPs {:?}, its lone poll {:?}",
                        m.name,
                        internal_ips_of(&r),
                        lone
                    );
                }
                // A driver may shed load; the controller retries these.
                (_, Err(s)) if matches!(s.code(), Code::Unavailable | Code::ResourceExhausted) => {}
                (true, Err(s)) => fail!("concurrent GetMachineStatus of created {}: {}", m.name, describe(&s)),
                (false, Err(s)) if s.code() == Code::NotFound => {}
                (false, Err(s)) => {
                    fail!("concurrent GetMachineStatus of absent {}: expected NOT_FOUND, got {}", m.name, describe(&s))
                }
                (false, Ok(r)) => {
                    fail!(
                        "concurrent GetMachineStatus of absent {} answered OK with provider_id {:?}",
                        m.name,
                        r.provider_id
                    )
                }
            }
        }
        for m in &created {
            ctx.must_delete(m).await?;
        }
        for m in &created {
            ctx.wait_gone(m).await?;
        }
        Ok(())
    })
}

/// The InternalIP addresses of an answer, sorted.
fn internal_ips_of(r: &GetMachineStatusResponse) -> Vec<String> {
    let mut ips: Vec<String> =
        r.addresses.iter().filter(|a| a.r#type == AddressType::InternalIp as i32).map(|a| a.address.clone()).collect();
    ips.sort();
    ips
}
