//! OpenStack-only admin routes, next to the shared ones:
//!
//! - `GET /_admin/openstack/tokens` → `{"issued": n}`: Keystone tokens issued (token
//!   requests are not counted in `/_admin/calls`).
//! - `POST /_admin/openstack/token-lifetime {"seconds": n}`: lifetime of tokens issued from now on (default 3600).
//! - `POST /_admin/openstack/revoke-tokens`: every issued token becomes invalid.
//! - `GET /_admin/openstack/refused` → `{"unauthorized": n}`: service requests refused
//!   with 401 before the call gate.
//! - `POST /_admin/openstack/server-failures {"times": n, "message"?, "code"?}`: the next
//!   n accepted servers end in ERROR with that fault; `DELETE` clears.
//! - `POST /_admin/openstack/page-size {"size": n}`: page size of list calls (default 1000).
//! - `POST /_admin/openstack/quota {"instances": n}`: instance quota per project (default 100).
//!
//! [`token_faults`] lets `POST /_admin/faults` with the exact operation `tokens.create`
//! fault Keystone's token endpoint, which is no counted call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use fake_cloud_support::FaultSpec;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::state::{DEFAULT_FAILURE_MESSAGE, Failures, Store};

/// The exact operation name of Keystone's token endpoint.
pub(crate) const TOKENS_CREATE: &str = "tokens.create";

#[derive(Debug, Deserialize)]
struct Lifetime {
    seconds: u64,
}

#[derive(Debug, Deserialize)]
struct FailureSpec {
    times: u32,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    code: Option<u16>,
}

#[derive(Debug, Deserialize)]
struct PageSize {
    size: usize,
}

#[derive(Debug, Deserialize)]
struct Quota {
    instances: usize,
}

/// The OpenStack-only admin routes.
pub(crate) fn routes(store: Arc<Store>) -> Router {
    Router::new()
        .route("/_admin/openstack/tokens", get(tokens))
        .route("/_admin/openstack/token-lifetime", post(token_lifetime))
        .route("/_admin/openstack/revoke-tokens", post(revoke_tokens))
        .route("/_admin/openstack/refused", get(refused))
        .route("/_admin/openstack/server-failures", post(add_failures).delete(clear_failures))
        .route("/_admin/openstack/page-size", post(page_size))
        .route("/_admin/openstack/quota", post(quota))
        .with_state(store)
}

fn bad(message: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": message}))).into_response()
}

async fn tokens(State(store): State<Arc<Store>>) -> Json<Value> {
    Json(json!({"issued": store.auth().issued}))
}

async fn token_lifetime(State(store): State<Arc<Store>>, Json(spec): Json<Lifetime>) -> Json<Value> {
    store.auth().lifetime = Duration::from_secs(spec.seconds);
    Json(json!({}))
}

async fn revoke_tokens(State(store): State<Arc<Store>>) -> Json<Value> {
    store.auth().tokens.clear();
    Json(json!({}))
}

async fn refused(State(store): State<Arc<Store>>) -> Json<Value> {
    Json(json!({"unauthorized": store.auth().unauthorized}))
}

async fn add_failures(State(store): State<Arc<Store>>, Json(spec): Json<FailureSpec>) -> Response {
    let code = spec.code.unwrap_or(500);
    if !(100..=599).contains(&code) {
        return bad("code must be an HTTP status code");
    }
    let message = spec.message.unwrap_or_else(|| DEFAULT_FAILURE_MESSAGE.to_owned());
    store.lock_at(Instant::now()).failures = (spec.times > 0).then_some(Failures { times: spec.times, message, code });
    Json(json!({})).into_response()
}

async fn clear_failures(State(store): State<Arc<Store>>) -> Json<Value> {
    store.lock_at(Instant::now()).failures = None;
    Json(json!({}))
}

async fn page_size(State(store): State<Arc<Store>>, Json(spec): Json<PageSize>) -> Response {
    if spec.size == 0 {
        return bad("size must be at least 1");
    }
    store.lock_at(Instant::now()).page_size = spec.size;
    Json(json!({})).into_response()
}

async fn quota(State(store): State<Arc<Store>>, Json(spec): Json<Quota>) -> Json<Value> {
    store.lock_at(Instant::now()).instance_quota = spec.instances;
    Json(json!({}))
}

/// Middleware: `POST /_admin/faults` for the exact operation `tokens.create` goes to the
/// token endpoint's own fault table; `DELETE /_admin/faults` also clears that table.
pub(crate) async fn token_faults(State(store): State<Arc<Store>>, request: Request, next: Next) -> Response {
    if request.uri().path().trim_end_matches('/') != "/_admin/faults" {
        return next.run(request).await;
    }
    if request.method() == Method::DELETE {
        store.auth().faults.clear();
        return next.run(request).await;
    }
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return bad("the body could not be read");
    };
    let is_token_fault = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .is_some_and(|v| v.get("operation").and_then(Value::as_str) == Some(TOKENS_CREATE));
    if is_token_fault {
        return match serde_json::from_slice::<FaultSpec>(&bytes) {
            Ok(spec) => {
                let id = store.auth().faults.add(&spec);
                Json(json!({"id": format!("tokens-{id}")})).into_response()
            }
            Err(error) => (StatusCode::UNPROCESSABLE_ENTITY, error.to_string()).into_response(),
        };
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}
