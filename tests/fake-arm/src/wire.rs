//! Small wire helpers: JSON normalisation, percent-encoding, timestamps, base URLs.

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

/// Percent-encodes a query value (RFC 3986 unreserved characters stay).
pub(crate) fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Decodes `%XX` escapes of one path segment (invalid escapes stay as they are).
pub(crate) fn decode_segment(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(byte) =
                std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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
        assert_eq!(encode("tagName eq 'a b'"), "tagName%20eq%20%27a%20b%27");
        assert_eq!(decode_segment("a%2Fb%zz"), "a/b%zz");
    }
}
