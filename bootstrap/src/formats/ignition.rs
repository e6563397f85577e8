//! Ignition 3.x: `storage.files` entries with `data:` URLs.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use crate::error::BootstrapError;
use crate::render::RenderedFile;

const FORMAT: &str = "Ignition config";

pub(crate) fn merge(data: &[u8], files: &[RenderedFile]) -> Result<Vec<u8>, BootstrapError> {
    let mut config: Value = serde_json::from_slice(data)
        .map_err(|e| BootstrapError::malformed(FORMAT, format!("line {} column {}", e.line(), e.column())))?;
    if config.pointer("/ignition/config/replace/source").is_some_and(|s| !s.is_null()) {
        return Err(BootstrapError::unsupported(
            "Ignition config with ignition.config.replace: the replacing config would drop the added files",
        ));
    }
    let root = config.as_object_mut().ok_or_else(|| BootstrapError::malformed(FORMAT, "not a JSON object"))?;
    let storage = object_entry(root, "storage")?;
    let existing = storage.entry("files").or_insert_with(|| Value::Array(Vec::new()));
    let existing =
        existing.as_array_mut().ok_or_else(|| BootstrapError::malformed(FORMAT, "storage.files is not a list"))?;
    for f in files {
        if existing.iter().any(|e| e.get("path").and_then(Value::as_str) == Some(f.path.as_str())) {
            return Err(BootstrapError::unsupported(format!("Ignition config already has a file at {}", f.path)));
        }
        existing.push(json!({
            "path": f.path,
            "mode": f.mode,
            "overwrite": true,
            "contents": { "source": format!("data:;base64,{}", STANDARD.encode(&f.content)) },
        }));
    }
    serde_json::to_vec(&config).map_err(|_| BootstrapError::malformed(FORMAT, "cannot be re-encoded"))
}

fn object_entry<'a>(
    parent: &'a mut Map<String, Value>,
    key: &str,
) -> Result<&'a mut Map<String, Value>, BootstrapError> {
    parent
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| BootstrapError::malformed(FORMAT, format!("{key} is not an object")))
}
