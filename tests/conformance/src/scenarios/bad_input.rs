//! Bad input: INVALID_ARGUMENT naming the field, and nothing created.

use futures::future::BoxFuture;
use machine_driver_proto::v1::{Machine, MachineClass, SecretData};
use serde_json::Value;
use tonic::Code;

use crate::context::{Ctx, secret_data};
use crate::fake_admin::Fault;
use crate::merge_patch::merge_patch;
use crate::outcome::{StepResult, Stop};
use crate::status_details::{describe, error_field};
use crate::{ensure, fail, skip};

/// Refuses every create-class cloud call, so that a driver that reaches the cloud before
/// validating shows up as PERMISSION_DENIED instead of INVALID_ARGUMENT.
const REFUSE_CREATES: Fault<'static> = Fault { operation: "create", kind: "permission", times: None, phase: "before" };

/// What the named field must look like.
enum FieldRule<'a> {
    Exactly(&'a str),
    StartsWith(&'a str),
    /// The provider spec, named by its MCM name or by its request path.
    ProviderSpec,
}

/// The names of the provider spec field: MCM's `providerSpec` (used inside the spec, e.g.
/// `providerSpec.machineType`) and the request path `machine_class.provider_spec` (used by
/// the server's own check that the spec is a JSON object).
const SPEC_FIELD_NAMES: [&str; 2] = ["providerSpec", "machine_class.provider_spec"];

impl FieldRule<'_> {
    fn accepts(&self, field: &str) -> bool {
        match self {
            FieldRule::Exactly(f) => field == *f,
            FieldRule::StartsWith(p) => field.starts_with(p),
            FieldRule::ProviderSpec => SPEC_FIELD_NAMES.iter().any(|p| field.starts_with(p)),
        }
    }

    fn describe(&self) -> String {
        match self {
            FieldRule::Exactly(f) => format!("{f:?}"),
            FieldRule::StartsWith(p) => format!("a field starting with {p:?}"),
            FieldRule::ProviderSpec => format!("a field starting with one of {SPEC_FIELD_NAMES:?}"),
        }
    }
}

/// CreateMachine with bad input must answer INVALID_ARGUMENT naming a field the rule
/// accepts; with fake admin, no instance of the machine's name may exist afterwards.
/// Returns the field named.
async fn expect_refused(
    ctx: &Ctx,
    m: &Machine,
    class: MachineClass,
    secret: SecretData,
    rule: FieldRule<'_>,
) -> StepResult<String> {
    if let Some(fake) = &ctx.fake {
        fake.add_fault(REFUSE_CREATES).await.map_err(Stop::Fail)?;
    }
    let field = match ctx.create_with(m, class, secret).await {
        Ok(r) => fail!("CreateMachine accepted bad input (provider_id {:?}); expected INVALID_ARGUMENT", r.provider_id),
        Err(s) if s.code() == Code::InvalidArgument => match error_field(&s) {
            Some(f) => f,
            None => {
                fail!("INVALID_ARGUMENT names no field (ErrorInfo metadata \"field\" or BadRequest): {}", describe(&s))
            }
        },
        Err(s) if s.code() == Code::PermissionDenied && ctx.fake.is_some() => {
            fail!(
                "CreateMachine tried to create a VM from bad input (the suite's create fault struck): {}",
                describe(&s)
            )
        }
        Err(s) => fail!("expected INVALID_ARGUMENT, got {}", describe(&s)),
    };
    ensure!(rule.accepts(&field), "INVALID_ARGUMENT names field {field:?}, expected {}", rule.describe());
    ctx.expect_none_live(m).await?;
    Ok(field)
}

pub(crate) fn spec_json(ctx: &Ctx) -> StepResult<Value> {
    serde_json::from_str(&ctx.settings.provider_spec)
        .map_err(|e| Stop::Fail(format!("--machine-class is not JSON: {e}")))
}

pub(crate) fn to_text(v: &Value) -> StepResult<String> {
    serde_json::to_string(v).map_err(|e| Stop::Fail(format!("serializing a patched spec: {e}")))
}

/// Each `invalidSpecs` entry of the provider's conformance file is refused naming its field.
pub(crate) fn invalid_values(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let cases = ctx.settings.provider.invalid_specs.clone();
        if cases.is_empty() {
            skip!("no invalidSpecs in the provider's conformance.json");
        }
        // Every case runs; the failure lists each case that failed.
        let mut failures = Vec::new();
        for case in cases {
            let mut spec = spec_json(&ctx)?;
            merge_patch(&mut spec, &case.patch);
            let m = ctx.new_machine();
            let rule = FieldRule::Exactly(&case.field);
            if let Err(Stop::Fail(why)) =
                expect_refused(&ctx, &m, ctx.class_with_spec(to_text(&spec)?), ctx.secret(), rule).await
            {
                failures.push(format!("patch {}: {why}", case.patch));
            }
        }
        ensure!(failures.is_empty(), "{}", failures.join("; "));
        Ok(())
    })
}

/// The first half of a JSON text (cut at a character boundary): never valid JSON for an object.
pub(crate) fn truncated_json(spec: &str) -> String {
    let mut cut = spec.trim_end().len() / 2;
    while !spec.is_char_boundary(cut) {
        cut -= 1;
    }
    spec[..cut].to_string()
}

/// A spec that is not valid JSON (the valid one cut in half) is refused naming providerSpec.
pub(crate) fn malformed_json(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let truncated = truncated_json(&ctx.settings.provider_spec);
        let m = ctx.new_machine();
        expect_refused(&ctx, &m, ctx.class_with_spec(truncated), ctx.secret(), FieldRule::ProviderSpec).await?;
        Ok(())
    })
}

/// A secret with every key but `userData` removed is refused naming a `secret.` field.
pub(crate) fn missing_secret_keys(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let kept: std::collections::BTreeMap<String, String> = ctx
            .settings
            .secret
            .iter()
            .filter(|(k, _)| k.as_str() == "userData")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if kept.len() == ctx.settings.secret.len() {
            skip!("--secret holds no key besides userData");
        }
        let m = ctx.new_machine();
        expect_refused(&ctx, &m, ctx.class(), secret_data(&kept), FieldRule::StartsWith("secret.")).await?;
        Ok(())
    })
}

/// A machine without uid (the idempotency key) is refused naming `machine.uid`.
pub(crate) fn missing_uid(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut m = ctx.new_machine();
        m.uid.clear();
        expect_refused(&ctx, &m, ctx.class(), ctx.secret(), FieldRule::Exactly("machine.uid")).await?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_rules() {
        assert!(FieldRule::ProviderSpec.accepts("providerSpec"));
        assert!(FieldRule::ProviderSpec.accepts("providerSpec.disks[0].sizeGb"));
        assert!(FieldRule::ProviderSpec.accepts("machine_class.provider_spec"));
        assert!(!FieldRule::ProviderSpec.accepts("secret.userData"));
        assert!(FieldRule::StartsWith("secret.").accepts("secret.accessKeyID"));
        assert!(!FieldRule::Exactly("machine.uid").accepts("machine.name"));
    }

    #[test]
    fn truncated_spec_is_not_json() {
        for spec in [r#"{"a":"b"}"#, r#"{"ämi":"ü","x":[1,2,3]}"#, "{}"] {
            let cut = truncated_json(spec);
            assert!(serde_json::from_str::<Value>(&cut).is_err(), "{cut:?}");
        }
    }
}
