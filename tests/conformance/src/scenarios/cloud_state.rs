//! Cloud-side outcomes a provider's conformance file describes: a VM the
//! cloud accepts and then fails is answered with the cloud's failure, and an
//! initialized machine's dependents (ports, NICs) carry what initialization
//! promises.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tonic::{Code, Status};

use crate::context::{Ctx, is_retryable};
use crate::outcome::{StepResult, Stop};
use crate::status_details::describe;
use crate::{ensure, fail, skip};

/// Poll interval of the failed-VM wait.
const POLL: Duration = Duration::from_millis(200);

/// The fake fails the next VM after accepting it (Nova ERROR with "No valid
/// host", Azure allocation failure): CreateMachine answers the failure, or,
/// when it answered as soon as the cloud accepted the VM, GetMachineStatus
/// does (never OK and never NOT_FOUND: the controller must replace the
/// machine, not wait for it). The machine's delete then removes what is left.
pub(crate) fn failed_vm_reported(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let Some(failed) = ctx.settings.provider.failed_vm.clone() else {
            skip!("no failedVm in the provider's conformance.json");
        };
        let Some(want) = code_named(&failed.code) else {
            fail!("failedVm.code {:?} is not a gRPC code name", failed.code);
        };
        ctx.fake()?.post(&failed.setup.path, failed.setup.body.clone()).await.map_err(Stop::Fail)?;
        let check = |s: &Status, rpc: &str| -> StepResult {
            ensure!(
                s.code() == want && s.message().contains(&failed.message_contains),
                "{rpc} of a VM the cloud failed: expected {} with {:?} in the message, got {}",
                failed.code,
                failed.message_contains,
                describe(s)
            );
            Ok(())
        };
        let mut m = ctx.new_machine();
        match ctx.create(&m).await {
            Err(s) => check(&s, "CreateMachine")?,
            Ok(created) => {
                m.provider_id = created.provider_id;
                let deadline = tokio::time::Instant::now() + ctx.settings.wait;
                loop {
                    match ctx.status(&m).await {
                        Err(s) if s.code() == want => {
                            check(&s, "GetMachineStatus")?;
                            break;
                        }
                        Err(s) if s.code() == Code::NotFound => {
                            fail!("GetMachineStatus of a VM the cloud failed answered NOT_FOUND: {}", describe(&s))
                        }
                        Err(s) if !is_retryable(s.code()) => fail!("GetMachineStatus: {}", describe(&s)),
                        _ if tokio::time::Instant::now() >= deadline => {
                            fail!("GetMachineStatus never answered {} within {:?}", failed.code, ctx.settings.wait)
                        }
                        _ => tokio::time::sleep(POLL).await,
                    }
                }
            }
        }
        ctx.must_delete(&m).await?;
        ctx.wait_gone(&m).await
    })
}

/// After initialization, every pattern of `initializedDependents` is matched
/// by a live dependent named after the machine (e.g. its port carries every
/// pod CIDR as an allowed address pair, dual stack included).
pub(crate) fn post_creation_state(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let patterns = ctx.settings.provider.initialized_dependents.clone();
        if patterns.is_empty() {
            skip!("no initializedDependents in the provider's conformance.json");
        }
        let fake = ctx.fake()?.clone();
        let mut m = ctx.new_machine();
        ctx.must_create(&mut m).await?;
        ctx.wait_initialized(&mut m).await?;
        let inventory = fake.inventory().await.map_err(Stop::Fail)?;
        let mine: Vec<Value> = inventory
            .dependents
            .iter()
            .filter(|d| d.live && d.name == m.name)
            .map(|d| serde_json::to_value(d).unwrap_or(Value::Null))
            .collect();
        for pattern in &patterns {
            ensure!(
                mine.iter().any(|d| contains(d, pattern)),
                "no live dependent of {} matches {pattern} after initialization; its dependents: {}",
                m.name,
                Value::Array(mine.clone())
            );
        }
        ctx.must_delete(&m).await?;
        ctx.wait_gone(&m).await
    })
}

/// True when `value` holds `pattern`: objects key by key, arrays element by
/// element (each pattern element in some value element), scalars equal.
fn contains(value: &Value, pattern: &Value) -> bool {
    match (value, pattern) {
        (Value::Object(v), Value::Object(p)) => p.iter().all(|(k, pv)| v.get(k).is_some_and(|vv| contains(vv, pv))),
        (Value::Array(v), Value::Array(p)) => p.iter().all(|pe| v.iter().any(|ve| contains(ve, pe))),
        _ => value == pattern,
    }
}

/// The gRPC code of an upper-snake name (`RESOURCE_EXHAUSTED`).
fn code_named(name: &str) -> Option<Code> {
    (0..=16).map(Code::from_i32).find(|c| upper_snake(&format!("{c:?}")) == name)
}

fn upper_snake(camel: &str) -> String {
    let mut out = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn subsets() {
        let port = json!({"kind": "port", "allowed_address_pairs": [{"ip_address": "10.0.0.0/8", "mac_address": "m"}, {"ip_address": "fd00::/48"}]});
        assert!(contains(
            &port,
            &json!({"kind": "port", "allowed_address_pairs": [{"ip_address": "fd00::/48"}, {"ip_address": "10.0.0.0/8"}]})
        ));
        assert!(!contains(&port, &json!({"allowed_address_pairs": [{"ip_address": "192.168.0.0/16"}]})));
        assert!(!contains(&port, &json!({"kind": "volume"})));
    }

    #[test]
    fn code_names() {
        assert_eq!(code_named("RESOURCE_EXHAUSTED"), Some(Code::ResourceExhausted));
        assert_eq!(code_named("OK"), Some(Code::Ok));
        assert_eq!(code_named("resource_exhausted"), None);
    }
}
