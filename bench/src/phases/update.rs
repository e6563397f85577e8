//! The UpdateMachine phase (issue 32): the cloud calls one hot update costs.
//! One machine is created with the example class (plus the conformance file's
//! `update.removable` tag, so that the edit has a tag to remove, as `update/*`
//! does), left to boot and initialized; then, with the fake's counters reset
//! before each call:
//!
//! 1. UpdateMachine to the class with `update.tagsPatch` merged
//!    (`providers/<cloud>/examples/conformance.json`), `previous_machine_class`
//!    the class it was created with: the tags applied;
//! 2. the same call again: every field UNCHANGED, no cloud write;
//! 3. `validate_only` back to the class it was created with (previous: the
//!    edited one), so that there is a pending change to validate: reads only.

use std::time::{Duration, Instant};

use machine_driver_conformance::merge_patch::merge_patch;
use machine_driver_conformance::settings::read_provider_conformance;
use machine_driver_conformance::status_details::{code_name, describe};
use machine_driver_proto::v1::{FieldChangeOutcome, Machine, MachineClass};
use serde::Serialize;

use crate::admin::{Admin, CallCounts, OpClass};
use crate::workload::{Sidecar, examples_dir, is_retryable, new_machine};

/// How long a call is retried on a retryable answer (the VM still booting,
/// a fingerprint that changed), as the machine-controller would.
const RETRY_WITHIN: Duration = Duration::from_secs(60);

/// One field of an UpdateMachine answer.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Change {
    /// The class field (`providerSpec.tags`).
    pub(crate) field: String,
    /// `APPLIED`, `UNCHANGED` or `NEEDS_REPLACEMENT`.
    pub(crate) outcome: String,
    /// The driver's words.
    pub(crate) detail: String,
}

/// One measured UpdateMachine call.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct UpdateCall {
    /// Which call of the three.
    pub(crate) step: String,
    /// Whether it was `validate_only`.
    pub(crate) validate_only: bool,
    /// `OK` or the final gRPC code.
    pub(crate) outcome: String,
    /// RPC attempts (more than 1 only after a retryable answer; the calls are all attempts').
    pub(crate) attempts: u32,
    /// Cloud requests by operation.
    pub(crate) calls: CallCounts,
    /// `read`-class requests among them.
    pub(crate) reads: u64,
    /// `write`-class requests among them.
    pub(crate) writes: u64,
    /// The answer's fields.
    pub(crate) changes: Vec<Change>,
}

/// What the phase measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Update {
    /// Whether the driver advertises CAPABILITY_UPDATE_MACHINE (nothing is measured otherwise).
    pub(crate) advertised: bool,
    /// Why nothing was measured although advertised (no `update` in the conformance file).
    pub(crate) note: Option<String>,
    /// The merge patch of the edit (`update.tagsPatch`).
    pub(crate) tags_patch: serde_json::Value,
    /// The tag added to the example class before the create (`update.removable`), if any.
    pub(crate) removable: Option<String>,
    /// The three calls, in order.
    pub(crate) calls: Vec<UpdateCall>,
    /// Answers that contradict what the call should have done (the figures are then doubtful).
    pub(crate) findings: Vec<String>,
}

impl Update {
    /// Nothing measured: not advertised, or (`note`) no inputs.
    pub(crate) fn skipped(advertised: bool, note: Option<String>) -> Self {
        Self {
            advertised,
            note,
            tags_patch: serde_json::Value::Null,
            removable: None,
            calls: Vec::new(),
            findings: Vec::new(),
        }
    }
}

/// `class` with its provider spec merged with `patch` (RFC 7386).
fn patched(class: &MachineClass, patch: &serde_json::Value) -> Result<MachineClass, String> {
    let mut spec: serde_json::Value =
        serde_json::from_str(&class.provider_spec).map_err(|e| format!("machine class: {e}"))?;
    merge_patch(&mut spec, patch);
    let provider_spec = serde_json::to_string(&spec).map_err(|e| format!("machine class: {e}"))?;
    Ok(MachineClass { provider_spec, ..class.clone() })
}

fn outcome_word(outcome: i32) -> String {
    match FieldChangeOutcome::try_from(outcome) {
        Ok(FieldChangeOutcome::Applied) => "APPLIED".into(),
        Ok(FieldChangeOutcome::Unchanged) => "UNCHANGED".into(),
        Ok(FieldChangeOutcome::NeedsReplacement) => "NEEDS_REPLACEMENT".into(),
        _ => format!("outcome {outcome}"),
    }
}

/// One UpdateMachine, counters reset before, retried on retryable answers.
async fn measure(
    sidecar: &Sidecar,
    admin: &Admin,
    step: &str,
    m: &Machine,
    class: &MachineClass,
    previous: &MachineClass,
    validate_only: bool,
) -> Result<UpdateCall, String> {
    admin.reset_calls().await?;
    let started = Instant::now();
    let mut attempts = 0;
    let answer = loop {
        attempts += 1;
        match sidecar.update(m, class.clone(), previous.clone(), validate_only).await {
            Err(s) if is_retryable(s.code()) && started.elapsed() < RETRY_WITHIN => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            other => break other,
        }
    };
    let calls = admin.calls().await?;
    let (outcome, changes) = match answer {
        Ok(r) => (
            "OK".to_string(),
            r.changes
                .into_iter()
                .map(|c| Change { field: c.field, outcome: outcome_word(c.outcome), detail: c.detail })
                .collect(),
        ),
        Err(s) => (format!("{} ({})", code_name(s.code()), describe(&s)), Vec::new()),
    };
    Ok(UpdateCall {
        step: step.to_string(),
        validate_only,
        outcome,
        attempts,
        reads: calls.of_class(OpClass::Read),
        writes: calls.of_class(OpClass::Write),
        calls,
        changes,
    })
}

/// What contradicts the call's purpose: not OK, no field applied (call 1),
/// a field not UNCHANGED or a write (call 2), a write (call 3).
fn findings(calls: &[UpdateCall]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        if c.outcome != "OK" {
            out.push(format!("{}: answered {}", c.step, c.outcome));
            continue;
        }
        match i {
            0 if !c.changes.iter().any(|f| f.outcome == "APPLIED") => {
                out.push(format!("{}: no field APPLIED", c.step));
            }
            1 if c.changes.iter().any(|f| f.outcome != "UNCHANGED") || c.writes > 0 => {
                out.push(format!("{}: not every field UNCHANGED, or {} write(s)", c.step, c.writes));
            }
            2 if c.writes > 0 => out.push(format!("{}: {} write(s) with validate_only", c.step, c.writes)),
            _ => {}
        }
    }
    out
}

/// Runs the phase with one new machine; `advertised`: CAPABILITY_UPDATE_MACHINE.
pub(crate) async fn run(
    sidecar: &Sidecar,
    admin: &Admin,
    provider: &str,
    advertised: bool,
    initialize_advertised: bool,
) -> Result<Update, String> {
    if !advertised {
        return Ok(Update::skipped(false, None));
    }
    let path = examples_dir(provider).join("conformance.json");
    let conf = read_provider_conformance(&path)?;
    let Some(inputs) = conf.update else {
        return Ok(Update::skipped(true, Some(format!("{} has no \"update\" inputs", path.display()))));
    };
    let mut m = new_machine("update", 0);
    let example = sidecar.class_for(&m);
    let original = match inputs.removable_patch()? {
        Some(p) => patched(&example, &p)?,
        None => example,
    };
    let edited = patched(&original, &inputs.tags_patch)?;

    let started = Instant::now();
    loop {
        match sidecar.create_with(&mut m, original.clone()).await {
            Ok(()) => break,
            Err(s) if is_retryable(s.code()) && started.elapsed() < RETRY_WITHIN => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(s) => return Err(format!("CreateMachine: {}", describe(&s))),
        }
    }
    sidecar.wait_running(&m, RETRY_WITHIN).await?;
    if initialize_advertised {
        let started = Instant::now();
        loop {
            match sidecar.initialize_with(&m, original.clone()).await {
                Ok(()) => break,
                Err(s) if is_retryable(s.code()) && started.elapsed() < RETRY_WITHIN => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(s) => return Err(format!("InitializeMachine: {}", describe(&s))),
            }
        }
    }

    let mut calls = Vec::new();
    calls.push(measure(sidecar, admin, "tagsPatch applied", &m, &edited, &original, false).await?);
    calls.push(measure(sidecar, admin, "the same again", &m, &edited, &original, false).await?);
    calls.push(measure(sidecar, admin, "validate_only, back to the original", &m, &original, &edited, true).await?);
    // Cleanup only (not measured): the fake lives in the driver process anyway.
    let _ = sidecar.delete_with(&m, edited).await;
    Ok(Update {
        advertised: true,
        note: None,
        tags_patch: inputs.tags_patch,
        removable: inputs.removable,
        findings: findings(&calls),
        calls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(step: &str, outcome: &str, writes: u64, fields: &[&str]) -> UpdateCall {
        UpdateCall {
            step: step.into(),
            validate_only: false,
            outcome: outcome.into(),
            attempts: 1,
            calls: CallCounts::default(),
            reads: 1,
            writes,
            changes: fields
                .iter()
                .map(|o| Change { field: "providerSpec.tags".into(), outcome: (*o).into(), detail: String::new() })
                .collect(),
        }
    }

    #[test]
    fn findings_name_what_contradicts_each_call() {
        let good =
            [call("a", "OK", 2, &["APPLIED"]), call("b", "OK", 0, &["UNCHANGED"]), call("c", "OK", 0, &["APPLIED"])];
        assert!(findings(&good).is_empty());
        let bad =
            [call("a", "OK", 0, &["UNCHANGED"]), call("b", "OK", 1, &["UNCHANGED"]), call("c", "OK", 1, &["APPLIED"])];
        assert_eq!(findings(&bad).len(), 3, "{:?}", findings(&bad));
        assert_eq!(findings(&[call("a", "UNAVAILABLE", 0, &[])]), vec!["a: answered UNAVAILABLE".to_string()]);
    }

    #[test]
    fn the_patch_is_merged_into_the_class() {
        let class = MachineClass { provider_spec: r#"{"tags":{"a":"1","b":"2"}}"#.into(), ..Default::default() };
        let p = patched(&class, &serde_json::json!({"tags": {"a": null, "c": "3"}})).unwrap();
        let spec: serde_json::Value = serde_json::from_str(&p.provider_spec).unwrap();
        assert_eq!(spec, serde_json::json!({"tags": {"b": "2", "c": "3"}}));
    }
}
