//! Machine classes as Gardener writes them and the Go providers read them.

use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::context::Ctx;
use crate::outcome::{StepResult, Stop};
use crate::scenarios::bad_input::{spec_json, to_text};
use crate::status_details::describe;

/// The unknown top-level key added to the spec (as a newer Gardener extension would).
const UNKNOWN_FIELD: &str = "conformanceUnknownField";

/// A spec with a key this driver does not know and a known string key in another case is
/// accepted, as Go's `encoding/json` accepts it (unknown keys skipped, keys matched
/// case-insensitively): the machine is created, becomes visible and is deleted. Refusing
/// such a class would turn a version skew between extension and driver into an outage.
pub(crate) fn go_json_leniency(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut spec = spec_json(&ctx)?;
        let recased = recase_one_string_key(&mut spec);
        if let Some(object) = spec.as_object_mut() {
            object.insert(UNKNOWN_FIELD.to_string(), json!({"fromANewerExtension": true, "unset": null}));
        }
        let mut m = ctx.new_machine();
        let class = ctx.class_with_spec(to_text(&spec)?);
        let created = ctx.create_with(&m, class, ctx.secret()).await.map_err(|s| {
            Stop::Fail(format!(
                "CreateMachine of the class plus an unknown key {UNKNOWN_FIELD:?} and the key {recased:?} \
                 re-cased (both accepted by the Go providers): {}",
                describe(&s)
            ))
        })?;
        m.provider_id = created.provider_id;
        ctx.wait_visible(&m).await?;
        ctx.must_delete(&m).await?;
        ctx.wait_gone(&m).await
    })
}

/// Upper-cases the first letter of the first top-level key holding a string; returns the
/// new key (none when the spec has no such key).
fn recase_one_string_key(spec: &mut Value) -> Option<String> {
    let object = spec.as_object_mut()?;
    let key = object
        .iter()
        .find(|(k, v)| v.is_string() && k.starts_with(|c: char| c.is_ascii_lowercase()))
        .map(|(k, _)| k.clone())?;
    let value = object.remove(&key)?;
    let mut chars = key.chars();
    let recased: String = chars.next().map(|c| c.to_ascii_uppercase()).into_iter().chain(chars).collect();
    object.insert(recased.clone(), value);
    Some(recased)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_string_key_is_recased() {
        let mut spec = json!({"count": 1, "region": "eu-west-1"});
        assert_eq!(recase_one_string_key(&mut spec).as_deref(), Some("Region"));
        assert_eq!(spec, json!({"count": 1, "Region": "eu-west-1"}));
    }
}
