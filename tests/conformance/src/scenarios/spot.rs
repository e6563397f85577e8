//! Spot VMs (`spot/*`, issue 28): a Spot VM the cloud reclaims is reported as
//! such, GetMachineStatus NOT_FOUND with ErrorInfo reason `SPOT_RECLAIMED`, so
//! that MCM replaces the machine at once instead of waiting for its health
//! timeout; an on-demand VM is never reclaimed. Gated by the conformance
//! file's `spot` (absent on clouds without Spot VMs: OpenStack).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use machine_driver_proto::v1::{Capability, Machine};
use serde_json::Value;
use tonic::{Code, Status};

use crate::context::{Ctx, is_retryable};
use crate::fake_admin::{FakeAdmin, ReclaimAnswer};
use crate::merge_patch::merge_patch;
use crate::outcome::{StepResult, Stop};
use crate::scenarios::bad_input::{spec_json, to_text};
use crate::settings::{Settings, SpotInputs};
use crate::status_details::{describe, error_reason};
use crate::{ensure, fail, skip};

/// The ErrorInfo reason of the answer for a reclaimed Spot VM (the kit's
/// `machine_driver_api::SPOT_RECLAIMED`).
const SPOT_RECLAIMED: &str = "SPOT_RECLAIMED";

/// How often a poll asks again.
const POLL: Duration = Duration::from_millis(200);

/// The `spot` inputs, or a skip naming why there are none.
fn inputs(ctx: &Ctx) -> StepResult<SpotInputs> {
    match &ctx.settings.provider.spot {
        Some(spot) => Ok(spot.clone()),
        None => skip!(
            "the provider's conformance file has no \"spot\" inputs (a cloud without Spot VMs, such as OpenStack, \
             has none)"
        ),
    }
}

/// The example class made Spot: `patch` merged (RFC 7386) into `base`.
fn spot_spec(base: &Value, patch: &Value) -> Result<Value, String> {
    if !patch.is_object() {
        return Err(format!("spot.patch must be a JSON object (a merge patch on the class), got {patch}"));
    }
    let mut spec = base.clone();
    merge_patch(&mut spec, patch);
    if spec == *base {
        return Err(format!("spot.patch {patch} changes nothing in the class: it cannot make its VM a Spot VM"));
    }
    Ok(spec)
}

/// Whether a refusal is the answer for a reclaimed Spot VM: NOT_FOUND with
/// ErrorInfo reason `SPOT_RECLAIMED` and a message containing `shown` (how
/// the cloud shows the reclaim). The error says what is wrong with it.
fn judge_reclaimed(status: &Status, shown: &str) -> Result<(), String> {
    let reason = error_reason(status);
    if status.code() != Code::NotFound || reason.as_deref() != Some(SPOT_RECLAIMED) {
        return Err(format!(
            "expected NOT_FOUND with ErrorInfo reason {SPOT_RECLAIMED}, got {} (reason {reason:?})",
            describe(status)
        ));
    }
    if !status.message().contains(shown) {
        return Err(format!(
            "the {SPOT_RECLAIMED} answer {:?} does not show how the cloud shows the reclaim ({shown:?})",
            status.message()
        ));
    }
    Ok(())
}

/// The one live instance of `m` in the fake's inventory: its id.
async fn live_id(fake: &FakeAdmin, m: &Machine) -> StepResult<String> {
    let live = fake.live_named(&m.name).await.map_err(Stop::Fail)?;
    match &live[..] {
        [one] => Ok(one.id.clone()),
        _ => fail!(
            "after CreateMachine the fake holds {} live instances named {} (ids {:?}), expected 1",
            live.len(),
            m.name,
            live.iter().map(|i| i.id.as_str()).collect::<Vec<_>>()
        ),
    }
}

/// Polls GetMachineStatus until it answers the reclaim (see [`judge_reclaimed`]).
/// OK (the driver may read the cloud a moment late) and retryable answers are
/// asked again within the wait bound; any other answer fails at once.
async fn wait_reported(ctx: &Ctx, m: &Machine, shown: &str, fake_shows: &str) -> StepResult {
    let started = Instant::now();
    loop {
        let last = match ctx.status(m).await {
            Err(s) if !is_retryable(s.code()) => {
                return judge_reclaimed(&s, shown).map_err(|why| {
                    Stop::Fail(format!(
                        "GetMachineStatus of the machine whose Spot VM the cloud reclaimed (the fake shows it as \
                         {fake_shows:?}): {why}"
                    ))
                });
            }
            Err(s) => describe(&s),
            Ok(r) => format!("OK, vm_state {:?}", r.vm_state),
        };
        if started.elapsed() >= ctx.settings.wait {
            fail!(
                "GetMachineStatus still answers {last} {:?} after the cloud reclaimed the Spot VM (the fake shows it \
                 as {fake_shows:?}); expected NOT_FOUND with ErrorInfo reason {SPOT_RECLAIMED}",
                ctx.settings.wait
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// InitializeMachine of the reclaimed machine answers as its status does
/// (retryable answers retried within the wait bound; OK fails: nothing can be
/// initialized on a VM the cloud took back).
async fn expect_initialize_reported(ctx: &Ctx, m: &Machine, shown: &str) -> StepResult {
    let started = Instant::now();
    loop {
        match ctx.initialize(m).await {
            Ok(_) => fail!("InitializeMachine of the machine whose Spot VM the cloud reclaimed answered OK"),
            Err(s) if is_retryable(s.code()) && started.elapsed() < ctx.settings.wait => {
                tokio::time::sleep(POLL).await;
            }
            Err(s) => {
                return judge_reclaimed(&s, shown).map_err(|why| {
                    Stop::Fail(format!("InitializeMachine of the machine whose Spot VM the cloud reclaimed: {why}"))
                });
            }
        }
    }
}

/// `spot/reclaimed-is-reported`: a machine of the class made Spot by
/// `spot.patch` is created and reported OK; the fake reclaims its VM as the
/// cloud does (`POST /_admin/instances/{id}/reclaim`); GetMachineStatus then
/// answers NOT_FOUND with reason `SPOT_RECLAIMED` and a message showing
/// `spot.shown`, InitializeMachine (when advertised) the same; DeleteMachine
/// succeeds and leaves nothing of the machine (VM, NICs, disks) in the fake's
/// inventory; GetMachineStatus afterwards answers NOT_FOUND.
pub(crate) fn reclaimed_is_reported(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let spot = inputs(&ctx)?;
        let fake = ctx.fake()?.clone();
        let spec = spot_spec(&spec_json(&ctx)?, &spot.patch)
            .map_err(|why| Stop::Fail(format!("the conformance file's spot.patch ({}): {why}", spot.source)))?;
        // The same context with the Spot class, so that every call sends the
        // class the machine was created with (as compat/gardener-classes does).
        let mut ctx = ctx;
        ctx.settings = Arc::new(Settings { provider_spec: to_text(&spec)?, ..(*ctx.settings).clone() });

        let mut m = ctx.new_machine();
        let created = ctx.create(&m).await.map_err(|s| {
            Stop::Fail(format!(
                "CreateMachine of the class made Spot by spot.patch ({}): {}",
                spot.source,
                describe(&s)
            ))
        })?;
        ensure!(!created.provider_id.is_empty(), "CreateMachine returned an empty provider_id");
        m.provider_id = created.provider_id.clone();
        m.node_name = created.node_name.clone();
        let status = ctx.wait_visible(&m).await?;
        ensure!(
            status.provider_id == m.provider_id,
            "GetMachineStatus of the Spot machine answered providerID {:?}, the create {:?}",
            status.provider_id,
            m.provider_id
        );
        if !status.node_name.is_empty() {
            m.node_name = status.node_name.clone();
        }

        let id = live_id(&fake, &m).await?;
        let fake_shows = match fake.reclaim_answer(&id).await.map_err(Stop::Fail)? {
            ReclaimAnswer::Reclaimed(shown) => shown,
            ReclaimAnswer::NotSpot(why) => fail!(
                "the fake will not reclaim the VM {id} of the class made Spot by spot.patch: {why} (the patch or \
                 the driver's request does not make a Spot VM)"
            ),
            ReclaimAnswer::NotFound(why) => fail!("the fake has no live VM {id} to reclaim: {why}"),
            ReclaimAnswer::Unsupported(why) => fail!(
                "the conformance file has \"spot\" inputs but the fake reclaims no VM (HTTP 501: {why}); its \
                 CloudHooks::reclaim is missing"
            ),
        };

        wait_reported(&ctx, &m, &spot.shown, &fake_shows).await?;
        if ctx.has(Capability::InitializeMachine) {
            expect_initialize_reported(&ctx, &m, &spot.shown).await?;
        }
        ctx.must_delete(&m).await?;
        super::expect_no_leftovers(&fake, &m.name, ctx.settings.wait).await.map_err(|stop| match stop {
            Stop::Fail(why) => Stop::Fail(format!("after DeleteMachine of the reclaimed Spot machine: {why}")),
            skip @ Stop::Skip(_) => skip,
        })?;
        ctx.wait_gone(&m).await
    })
}

/// `spot/on-demand-not-reclaimed`: an on-demand machine (the example class)
/// is never reclaimed: the fake's reclaim answers 409 (the cloud never
/// reclaims it), GetMachineStatus stays OK with the same providerID (asked
/// right away and a second later) and the VM stays live; once the fake ends
/// it out of band for another reason (`terminate`), the status is never
/// `SPOT_RECLAIMED` (OK for a VM the driver just made, or NOT_FOUND); then
/// delete.
pub(crate) fn on_demand_not_reclaimed(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        inputs(&ctx)?;
        let fake = ctx.fake()?.clone();
        let mut m = ctx.new_machine();
        ctx.must_create(&mut m).await?;
        ctx.wait_visible(&m).await?;
        let id = live_id(&fake, &m).await?;
        match fake.reclaim_answer(&id).await.map_err(Stop::Fail)? {
            ReclaimAnswer::NotSpot(_) => {}
            ReclaimAnswer::Reclaimed(shown) => fail!(
                "the fake reclaimed the on-demand VM {id} of the example class (it shows it as {shown:?}): the \
                 cloud never reclaims an on-demand VM, or the example class is not on-demand"
            ),
            other => fail!("reclaim of the on-demand VM {id}: expected HTTP 409 (not a Spot VM), got {other:?}"),
        }
        for when in ["right after the refused reclaim", "a second after the refused reclaim"] {
            match ctx.status(&m).await {
                Ok(r) => ensure!(
                    r.provider_id == m.provider_id,
                    "GetMachineStatus of the on-demand machine {when} answered providerID {:?}, the create {:?}",
                    r.provider_id,
                    m.provider_id
                ),
                Err(s) => fail!("GetMachineStatus of the on-demand machine {when}: expected OK, got {}", describe(&s)),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        ensure!(
            fake.live_named(&m.name).await.map_err(Stop::Fail)?.iter().any(|i| i.id == id),
            "the on-demand VM {id} is not live any more after the refused reclaim"
        );

        // Ended for another reason: never reported as reclaimed. A driver may
        // still answer OK for a VM it created a moment ago and the cloud does
        // not show (fake/eventual-consistency); NOT_FOUND is the other answer.
        fake.terminate(&id).await.map_err(Stop::Fail)?;
        let started = Instant::now();
        loop {
            match ctx.status(&m).await {
                Ok(_) => break,
                Err(s) if s.code() == Code::NotFound => {
                    ensure!(
                        error_reason(&s).as_deref() != Some(SPOT_RECLAIMED),
                        "GetMachineStatus of the on-demand machine whose VM ended for another reason answered \
                         {SPOT_RECLAIMED}: {}",
                        describe(&s)
                    );
                    break;
                }
                Err(s) if is_retryable(s.code()) && started.elapsed() < ctx.settings.wait => {
                    tokio::time::sleep(POLL).await;
                }
                Err(s) => fail!(
                    "GetMachineStatus of the on-demand machine whose VM ended out of band: expected OK or NOT_FOUND, \
                     got {}",
                    describe(&s)
                ),
            }
        }
        ctx.must_delete(&m).await?;
        ctx.wait_gone(&m).await
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;
    use tonic_types::{ErrorDetails, StatusExt};

    use super::*;

    fn with_reason(code: Code, reason: &str, message: &str) -> Status {
        let mut d = ErrorDetails::new();
        d.set_error_info(reason, "machinedriver", HashMap::new());
        Status::with_error_details(code, message, d)
    }

    #[test]
    fn only_not_found_spot_reclaimed_showing_the_cloud_passes() {
        let shown = "Server.SpotInstanceTermination";
        let good = with_reason(
            Code::NotFound,
            SPOT_RECLAIMED,
            "the cloud reclaimed Spot VM i-1: Server.SpotInstanceTermination: Spot instance termination",
        );
        assert_eq!(judge_reclaimed(&good, shown), Ok(()));
        // A plain NOT_FOUND (the machine merely gone) is not the answer.
        let plain = judge_reclaimed(&Status::not_found("no VM i-1"), shown).unwrap_err();
        assert!(plain.contains("reason None"), "{plain}");
        let other = with_reason(Code::NotFound, "VM_NOT_FOUND", "Server.SpotInstanceTermination");
        assert!(judge_reclaimed(&other, shown).unwrap_err().contains("VM_NOT_FOUND"));
        let code = with_reason(Code::FailedPrecondition, SPOT_RECLAIMED, shown);
        assert!(judge_reclaimed(&code, shown).unwrap_err().contains("FAILED_PRECONDITION"));
        let silent = with_reason(Code::NotFound, SPOT_RECLAIMED, "the cloud reclaimed Spot VM i-1");
        assert!(judge_reclaimed(&silent, shown).unwrap_err().contains("does not show"));
    }

    #[test]
    fn the_spot_patch_must_change_the_class() {
        let base = json!({"machineType": "m5.large", "scheduling": {"preemptible": false}});
        let spot =
            spot_spec(&base, &json!({"scheduling": {"provisioningModel": "SPOT", "preemptible": null}})).unwrap();
        assert_eq!(spot, json!({"machineType": "m5.large", "scheduling": {"provisioningModel": "SPOT"}}));
        assert!(spot_spec(&base, &json!({"machineType": "m5.large"})).unwrap_err().contains("changes nothing"));
        assert!(spot_spec(&base, &json!("SPOT")).unwrap_err().contains("JSON object"));
    }

    #[test]
    fn every_providers_spot_inputs_make_a_spot_class() {
        let providers = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../providers");
        for entry in std::fs::read_dir(providers).unwrap() {
            let examples = entry.unwrap().path().join("examples");
            let Ok(conf) = std::fs::read(examples.join("conformance.json")) else { continue };
            let conf: crate::settings::ProviderConformance = serde_json::from_slice(&conf).unwrap();
            let Some(spot) = conf.spot else { continue };
            let class = std::fs::read(examples.join("machine-class.json")).unwrap();
            let base: Value = serde_json::from_slice(&class).unwrap();
            assert!(!spot.source.is_empty(), "{}: spot names no source", examples.display());
            assert!(!spot.shown.trim().is_empty(), "{}: spot.shown is empty", examples.display());
            spot_spec(&base, &spot.patch).unwrap_or_else(|e| panic!("{}: spot.patch: {e}", examples.display()));
        }
    }
}
