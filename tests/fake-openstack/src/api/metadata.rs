//! Nova server metadata (the compute API reference, "Server metadata
//! (servers, metadata)"; Nova's `nova/api/openstack/compute/server_metadata.py`
//! and the `metadata` schema of `nova/api/validation/parameter_types.py`):
//!
//! - `GET /servers/{id}/metadata` → 200 `{"metadata": {…}}`;
//! - `PUT /servers/{id}/metadata` `{"metadata": {…}}` replaces every item → 200 with the new set;
//! - `POST /servers/{id}/metadata` `{"metadata": {…}}` sets the given keys, keeps the
//!   others → 200 with the whole set after the change;
//! - `GET /servers/{id}/metadata/{key}` → 200 `{"meta": {key: value}}`, 404 when absent;
//! - `PUT /servers/{id}/metadata/{key}` `{"meta": {key: value}}` (exactly one item, its
//!   key the URL's, else 400) → 200 `{"meta": …}`;
//! - `DELETE /servers/{id}/metadata/{key}` → 204, 404 when absent.
//!
//! Keys match `^[a-zA-Z0-9-_:. ]{1,255}$`, values are strings of at most 255
//! characters (else 400). The server's metadata after a write may hold at
//! most 128 items (quota `metadata_items`, default 128) → 403 "Quota exceeded
//! for metadata_items". A write needs the server ACTIVE with no task (Nova's
//! `check_instance_state(vm_state=[ACTIVE, PAUSED, SUSPENDED, STOPPED],
//! task_state=None)`): building, in ERROR or being deleted → 409
//! "Cannot 'update metadata' instance … while it is in vm_state …". Reads
//! and writes of a server the project does not see are 404.

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime};

use axum::Json;
use axum::http::{Method, StatusCode};
use axum::response::IntoResponse;
use serde_json::{Map, Value, json};

use super::{Call, Ctx};
use crate::error::{ApiError, ApiResult, Service};
use crate::state::compute::Server;

const NOVA: Service = Service::Nova;
/// Nova's default quota of metadata items per server (`metadata_items`).
pub(crate) const MAX_METADATA_ITEMS: usize = 128;

/// The operation of a metadata path, when it is one.
pub(crate) fn operation(method: &Method, path: &[&str]) -> Option<&'static str> {
    match (method.as_str(), path) {
        ("GET", ["servers", _, "metadata"]) => Some("servers.metadata.list"),
        ("PUT", ["servers", _, "metadata"]) => Some("servers.metadata.replace"),
        ("POST", ["servers", _, "metadata"]) => Some("servers.metadata.update"),
        ("GET", ["servers", _, "metadata", _]) => Some("servers.metadata.get"),
        ("PUT", ["servers", _, "metadata", _]) => Some("servers.metadata.set"),
        ("DELETE", ["servers", _, "metadata", _]) => Some("servers.metadata.delete"),
        _ => None,
    }
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(NOVA, message)
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(NOVA, format!("Instance {id} could not be found."))
}

fn item_not_found() -> ApiError {
    ApiError::not_found(NOVA, "Metadata item was not found")
}

/// True for a key of Nova's metadata schema: 1-255 of `[a-zA-Z0-9-_:. ]`.
fn key_ok(key: &str) -> bool {
    let n = key.chars().count();
    (1..=255).contains(&n) && key.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_:. ".contains(&b))
}

/// The items of a `{"metadata": {…}}` or `{"meta": {…}}` body, checked as Nova's schema does.
fn items(body: &Value, field: &str) -> Result<BTreeMap<String, String>, ApiError> {
    let map: &Map<String, Value> = body
        .get(field)
        .and_then(Value::as_object)
        .ok_or_else(|| bad(format!("Invalid input for field/attribute {field}. '{field}' is a required property")))?;
    map.iter()
        .map(|(key, value)| {
            if !key_ok(key) {
                return Err(bad(format!(
                    "Invalid input for field/attribute {field}. Value: {key}. Additional properties are not allowed"
                )));
            }
            let text = value.as_str().ok_or_else(|| {
                bad(format!("Invalid input for field/attribute {key}. Value: {value}. {value} is not of type 'string'"))
            })?;
            if text.chars().count() > 255 {
                return Err(bad(format!("Invalid input for field/attribute {key}. Value: {text}. is too long")));
            }
            Ok((key.clone(), text.to_owned()))
        })
        .collect()
}

/// Nova refuses metadata writes unless the server is ACTIVE with no task.
fn writable(server: &Server, now: Instant, action: &str) -> Result<(), ApiError> {
    if server.status() == "ACTIVE" && server.task_state(now).is_none() {
        return Ok(());
    }
    let (attr, state) = match server.task_state(now) {
        Some(task) if server.status() == "ACTIVE" => ("task_state", task),
        _ => ("vm_state", server.vm_state()),
    };
    Err(ApiError::conflict(NOVA, format!("Cannot '{action}' instance {} while it is in {attr} {state}", server.id)))
}

fn over_quota(requested: usize) -> ApiError {
    ApiError::forbidden(
        NOVA,
        format!(
            "Quota exceeded for metadata_items: Requested {requested}, but already used 0 of {MAX_METADATA_ITEMS} \
             metadata_items"
        ),
    )
}

/// Dispatches a metadata operation.
pub(crate) fn handle(ctx: &Ctx, call: &Call, operation: &str) -> ApiResult {
    let id = call.seg(1).to_owned();
    let key = call.seg(3).to_owned();
    let body = match operation {
        "servers.metadata.replace" | "servers.metadata.update" | "servers.metadata.set" => Some(call.json(NOVA)?),
        _ => None,
    };
    let now = Instant::now();
    let mut state = ctx.store.lock_at(now);
    let server = state
        .servers
        .get_mut(&id)
        .filter(|s| s.project_id == call.project_id && s.visible_at <= now)
        .ok_or_else(|| not_found(&id))?;
    let body = body.unwrap_or(Value::Null);
    let answer = match operation {
        "servers.metadata.list" => json!({"metadata": server.metadata}),
        "servers.metadata.get" => {
            let value = server.metadata.get(&key).ok_or_else(item_not_found)?;
            json!({"meta": {key: value}})
        }
        "servers.metadata.replace" | "servers.metadata.update" => {
            let given = items(&body, "metadata")?;
            writable(server, now, "update metadata")?;
            let mut after =
                if operation == "servers.metadata.replace" { BTreeMap::new() } else { server.metadata.clone() };
            after.extend(given);
            if after.len() > MAX_METADATA_ITEMS {
                return Err(over_quota(after.len()));
            }
            server.metadata = after;
            server.updated = SystemTime::now();
            json!({"metadata": server.metadata})
        }
        "servers.metadata.set" => {
            let given = items(&body, "meta")?;
            if given.len() > 1 {
                return Err(bad("Request body contains too many items"));
            }
            let Some((k, v)) = given.into_iter().next() else {
                return Err(bad("Malformed request body"));
            };
            if k != key {
                return Err(bad("Request body and URI mismatch"));
            }
            writable(server, now, "update metadata")?;
            if !server.metadata.contains_key(&k) && server.metadata.len() >= MAX_METADATA_ITEMS {
                return Err(over_quota(server.metadata.len() + 1));
            }
            server.metadata.insert(k.clone(), v.clone());
            server.updated = SystemTime::now();
            json!({"meta": {k: v}})
        }
        "servers.metadata.delete" => {
            if !server.metadata.contains_key(&key) {
                return Err(item_not_found());
            }
            writable(server, now, "delete metadata")?;
            server.metadata.remove(&key);
            server.updated = SystemTime::now();
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        _ => return Err(ApiError::no_route(NOVA)),
    };
    Ok(Json(answer).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_paths_and_keys() {
        assert_eq!(operation(&Method::POST, &["servers", "s", "metadata"]), Some("servers.metadata.update"));
        assert_eq!(operation(&Method::DELETE, &["servers", "s", "metadata", "k"]), Some("servers.metadata.delete"));
        assert_eq!(operation(&Method::DELETE, &["servers", "s", "metadata"]), None);
        assert!(key_ok("kubernetes.io-cluster-shoot--a") && key_ok("a b:c_d.e"));
        assert!(!key_ok("") && !key_ok("a/b") && !key_ok(&"k".repeat(256)));
        let parsed = items(&json!({"metadata": {"a": "1"}}), "metadata").unwrap();
        assert_eq!(parsed.get("a").map(String::as_str), Some("1"));
        assert_eq!(items(&json!({"metadata": {"a": 1}}), "metadata").unwrap_err().status, StatusCode::BAD_REQUEST);
        assert_eq!(items(&json!({"metadata": {"a/b": "1"}}), "metadata").unwrap_err().status, StatusCode::BAD_REQUEST);
    }
}
