//! Small wire helpers: JSON normalisation, timestamps, base URLs. Percent-encoding is
//! `fake_cloud_support::wire`'s, the one the fakes share.

use std::time::SystemTime;

use axum::http::HeaderMap;
use axum::http::header::HOST;
use serde_json::{Map, Value};

/// Removes every `null` (the Rust SDK sends read-only fields as `null`) recursively.
pub(crate) fn strip_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            Value::Object(map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, strip_nulls(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(strip_nulls).collect()),
        other => other,
    }
}

/// A case-insensitive lookup of `name` in a JSON object.
pub(crate) fn field<'a>(value: &'a Value, name: &str) -> Option<&'a Value> {
    let map = value.as_object()?;
    map.get(name).or_else(|| map.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v))
}

/// `field(...)` along a path of names.
pub(crate) fn path<'a>(value: &'a Value, names: &[&str]) -> Option<&'a Value> {
    names.iter().try_fold(value, |current, name| field(current, name))
}

/// The string at a path, if it is one.
pub(crate) fn path_str<'a>(value: &'a Value, names: &[&str]) -> Option<&'a str> {
    path(value, names).and_then(Value::as_str)
}

/// A mutable object at `name` inside `map`, created when absent or not an object.
pub(crate) fn object_mut<'a>(map: &'a mut Map<String, Value>, name: &str) -> &'a mut Map<String, Value> {
    let entry = map.entry(name.to_owned()).or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(inner) => inner,
        _ => unreachable!("just made an object"),
    }
}

/// ARM's timestamp shape (`2024-05-01T12:00:00.123+00:00`).
pub(crate) fn timestamp(at: SystemTime) -> String {
    fake_cloud_support::utc_timestamp(at, "+00:00")
}

/// `http://HOST` from the request's `Host` header (the fake serves plain HTTP).
pub(crate) fn base_url(headers: &HeaderMap) -> String {
    let host = headers.get(HOST).and_then(|v| v.to_str().ok()).unwrap_or("localhost");
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .filter(|p| *p == "https" || *p == "http")
        .unwrap_or("http");
    format!("{scheme}://{host}")
}

/// Tags of a JSON `tags` object as strings (non-string values are skipped).
pub(crate) fn tag_map(tags: Option<&Value>) -> std::collections::BTreeMap<String, String> {
    tags.and_then(Value::as_object)
        .map(|map| map.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned()))).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nulls_go_and_lookup_ignores_case() {
        let v = strip_nulls(json!({"a": null, "b": {"timeCreated": null, "X": [1, {"y": null}]}}));
        assert_eq!(v, json!({"b": {"X": [1, {}]}}));
        assert_eq!(path(&v, &["B", "x"]), Some(&json!([1, {}])));
    }
}
