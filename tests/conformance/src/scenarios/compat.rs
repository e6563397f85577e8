//! Machine classes as Gardener writes them and the Go providers read them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use machine_driver_proto::v1::Capability;
use serde_json::{Value, json};

use crate::context::Ctx;
use crate::merge_patch::merge_patch;
use crate::outcome::{StepResult, Stop};
use crate::scenarios::bad_input::{spec_json, to_text};
use crate::settings::{GardenerClass, Settings};
use crate::status_details::describe;
use crate::{ensure, fail, skip};

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

/// Each `gardenerClasses` shape of the provider's conformance file goes through the
/// lifecycle as MCM drives a new machine: CreateMachine, InitializeMachine right after it
/// (must succeed on the first call, when advertised), GetMachineStatus reports the machine
/// initialized, DeleteMachine, GetMachineStatus NOT_FOUND. Every shape runs; the failure
/// names each shape that failed, and a line per shape is printed.
pub(crate) fn gardener_classes(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let shapes = ctx.settings.provider.gardener_classes.clone();
        if shapes.is_empty() {
            skip!("no gardenerClasses in the provider's conformance.json");
        }
        let base = spec_json(&ctx)?;
        let mut failures = Vec::new();
        for shape in &shapes {
            let started = Instant::now();
            let result = match shape_spec(&base, shape) {
                Ok(spec) => one_shape(&ctx, to_text(&spec)?).await,
                Err(why) => Err(Stop::Fail(format!("the shape itself: {why}"))),
            };
            let took = started.elapsed().as_millis();
            match result {
                Ok(()) => println!("  PASS compat/gardener-classes[{}] ({took} ms) {}", shape.name, shape.source),
                Err(Stop::Fail(why) | Stop::Skip(why)) => {
                    println!("  FAIL compat/gardener-classes[{}] ({took} ms) {}: {why}", shape.name, shape.source);
                    failures.push(format!("shape {:?} ({}): {why}", shape.name, shape.source));
                }
            }
        }
        ensure!(failures.is_empty(), "{} of {} shapes failed: {}", failures.len(), shapes.len(), failures.join("; "));
        Ok(())
    })
}

/// The providerSpec of a shape: its full `spec`, else the class patched with `patch`; then `set`.
pub(crate) fn shape_spec(base: &Value, shape: &GardenerClass) -> Result<Value, String> {
    let mut spec = match (&shape.spec, &shape.patch) {
        (Some(_), Some(_)) => return Err("both `spec` and `patch` given".into()),
        (Some(spec), None) => spec.clone(),
        (None, patch) => {
            let mut spec = base.clone();
            if let Some(patch) = patch {
                merge_patch(&mut spec, patch);
            }
            spec
        }
    };
    for member in &shape.set {
        set_at(&mut spec, &member.path, member.value.clone())?;
    }
    if !spec.is_object() {
        return Err("the providerSpec is not a JSON object".into());
    }
    Ok(spec)
}

/// Writes `value` at `path` (`a.b[0].c`); intermediate objects must exist, the last key is inserted.
fn set_at(target: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let mut steps: Vec<Result<&str, usize>> = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
        if !key.is_empty() {
            steps.push(Ok(key));
        }
        while !rest.is_empty() {
            let (index, after) = rest.split_once(']').ok_or_else(|| format!("set path {path:?}: unclosed ["))?;
            steps.push(Err(index.parse().map_err(|_| format!("set path {path:?}: bad index {index:?}"))?));
            rest = after.strip_prefix('[').unwrap_or(after);
        }
    }
    let Some((last, walk)) = steps.split_last() else { return Err("set path is empty".into()) };
    let mut at = target;
    for step in walk {
        at = match step {
            Ok(key) => at.get_mut(*key),
            Err(i) => at.get_mut(*i),
        }
        .ok_or_else(|| format!("set path {path:?}: nothing at {step:?}"))?;
    }
    match (last, at) {
        (Ok(key), Value::Object(members)) => {
            members.insert((*key).to_string(), value);
        }
        (Err(i), Value::Array(items)) if *i < items.len() => items[*i] = value,
        _ => return Err(format!("set path {path:?}: the parent is not an object/array with that member")),
    }
    Ok(())
}

/// One shape: create → initialize (first call) → status initialized → delete → gone.
async fn one_shape(ctx: &Ctx, spec: String) -> StepResult {
    // The same context with the shape as its class, so that every call (and the
    // tracker's cleanup) sends the class the machine was created with.
    let mut ctx = ctx.clone();
    ctx.settings = Arc::new(Settings { provider_spec: spec, ..(*ctx.settings).clone() });
    let mut m = ctx.new_machine();
    let created = ctx.create(&m).await.map_err(|s| Stop::Fail(format!("CreateMachine: {}", describe(&s))))?;
    ensure!(!created.provider_id.is_empty(), "CreateMachine returned an empty provider_id");
    m.provider_id = created.provider_id.clone();
    m.node_name = created.node_name.clone();
    m.last_known_state = created.last_known_state.clone();
    if ctx.has(Capability::InitializeMachine) {
        ctx.initialize(&m).await.map_err(|s| {
            Stop::Fail(format!("the first InitializeMachine right after CreateMachine: {}", describe(&s)))
        })?;
    }
    // Initialization was applied by that one call: status reports it without another
    // InitializeMachine (polled only for a cloud that shows the VM late).
    let started = Instant::now();
    loop {
        let status = ctx.wait_visible(&m).await?;
        ensure!(
            status.provider_id == m.provider_id,
            "GetMachineStatus answered providerID {:?}, the create {:?}",
            status.provider_id,
            m.provider_id
        );
        let Some(init) = status.initialization else {
            fail!("GetMachineStatus answered without an initialization state")
        };
        if init.initialized {
            break;
        }
        if started.elapsed() >= ctx.settings.wait {
            fail!(
                "GetMachineStatus does not report the machine initialized after one successful InitializeMachine \
                 (within {:?}); pending steps {:?}",
                ctx.settings.wait,
                init.pending_steps
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ctx.must_delete(&m).await?;
    ctx.wait_gone(&m).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(v: Value) -> GardenerClass {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn shape_specs_patch_replace_and_set_nulls() {
        let base = json!({"a": 1, "cpu": {"x": 1}, "nics": [{"id": "n"}]});
        let patched = shape_spec(&base, &shape(json!({"name": "p", "patch": {"a": null, "b": {}}}))).unwrap();
        assert_eq!(patched, json!({"cpu": {"x": 1}, "nics": [{"id": "n"}], "b": {}}));
        let full = shape_spec(&base, &shape(json!({"name": "f", "spec": {"z": null}}))).unwrap();
        assert_eq!(full, json!({"z": null}));
        let set = shape_spec(
            &base,
            &shape(json!({"name": "s", "set": [
                {"path": "cpu.coreCount", "value": null},
                {"path": "nics[0].ipv6", "value": null},
                {"path": "top", "value": {}}
            ]})),
        )
        .unwrap();
        assert_eq!(
            set,
            json!({"a": 1, "cpu": {"x": 1, "coreCount": null}, "nics": [{"id": "n", "ipv6": null}], "top": {}})
        );
        assert!(shape_spec(&base, &shape(json!({"name": "bad", "set": [{"path": "nope.x", "value": 1}]}))).is_err());
        assert!(shape_spec(&base, &shape(json!({"name": "both", "spec": {}, "patch": {}}))).is_err());
    }

    #[test]
    fn one_string_key_is_recased() {
        let mut spec = json!({"count": 1, "region": "eu-west-1"});
        assert_eq!(recase_one_string_key(&mut spec).as_deref(), Some("Region"));
        assert_eq!(spec, json!({"count": 1, "Region": "eu-west-1"}));
    }

    #[test]
    fn every_providers_shapes_build() {
        let providers = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../providers");
        let mut seen = 0;
        for entry in std::fs::read_dir(providers).unwrap() {
            let examples = entry.unwrap().path().join("examples");
            let Ok(conf) = std::fs::read(examples.join("conformance.json")) else { continue };
            let conf: crate::settings::ProviderConformance = serde_json::from_slice(&conf).unwrap();
            let class = std::fs::read(examples.join("machine-class.json")).unwrap();
            let base: Value = serde_json::from_slice(&class).unwrap();
            for shape in &conf.gardener_classes {
                assert!(!shape.source.is_empty(), "{}: shape {} names no source", examples.display(), shape.name);
                shape_spec(&base, shape)
                    .unwrap_or_else(|e| panic!("{}: shape {}: {e}", examples.display(), shape.name));
                seen += 1;
            }
        }
        assert!(seen > 0, "no gardenerClasses in any provider's conformance.json");
    }
}
