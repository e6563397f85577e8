//! Azure-only admin routes, next to the shared ones:
//!
//! - `GET /_admin/azure/tokens` → `{"issued": n}`: AAD tokens issued since start or reset.
//! - `POST /_admin/azure/token-lifetime {"seconds": n}`: lifetime of tokens issued from now on.
//! - `POST /_admin/azure/vm-failures {"code": "AllocationFailed", "times": 1}`: the next
//!   `times` accepted VM PUTs end `Failed` with `code`; `DELETE` clears the queue.
//! - `POST /_admin/azure/page-size {"size": n}`: page size of list calls (default 10).
//! - `POST /_admin/azure/nic-reservation {"ms": n}`: NIC reservation window (default 180 000);
//!   applies to reservations already in force too.
//! - `POST /_admin/azure/graph-lag {"millis": n}`: how far Resource Graph lags ARM
//!   (default 2000): a NIC shows in the graph `n` ms after it is made and stays
//!   `n` ms after it is gone.
//! - `POST /_admin/azure/graph-quota {"queries": n, "windowMillis": w}`: Resource
//!   Graph's per-user quota (default 15 queries per 5000 ms); windows restart.
//! - `POST /_admin/azure/marketplace {"mayAcceptTerms": false, "cancelAgreements": true}`:
//!   whether the identities may accept marketplace terms (default true; false: the
//!   agreement PUT is 403 `AuthorizationFailed` for
//!   `Microsoft.MarketplaceOrdering/offertypes/publishers/offers/plans/agreements/write`),
//!   and `cancelAgreements` forgets every accepted agreement (as a cancel would); both optional.
//! - `POST /_admin/azure/features {"encryptionAtHost": false, "subscription": "<id>"}`: whether
//!   the subscription (default: the seeded one) has `Microsoft.Compute/EncryptionAtHost`
//!   registered (seeded: on); off, a VM PUT with `securityProfile.encryptionAtHost` is refused.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::state::Store;

#[derive(Debug, Deserialize)]
struct Lifetime {
    seconds: u64,
}

#[derive(Debug, Deserialize)]
struct VmFailures {
    code: String,
    #[serde(default = "one")]
    times: u32,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Deserialize)]
struct PageSize {
    size: usize,
}

#[derive(Debug, Deserialize)]
struct GraphLag {
    millis: u64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GraphQuota {
    queries: u32,
    window_millis: u64,
}

#[derive(Debug, Deserialize)]
struct Reservation {
    ms: u64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MarketplaceSwitch {
    #[serde(default)]
    may_accept_terms: Option<bool>,
    #[serde(default)]
    cancel_agreements: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Features {
    #[serde(default)]
    subscription: Option<String>,
    encryption_at_host: bool,
}

/// The Azure-only admin routes.
pub(crate) fn routes(store: Arc<Store>) -> Router {
    Router::new()
        .route("/_admin/azure/tokens", get(tokens))
        .route("/_admin/azure/token-lifetime", post(token_lifetime))
        .route("/_admin/azure/vm-failures", post(add_vm_failures).delete(clear_vm_failures))
        .route("/_admin/azure/page-size", post(page_size))
        .route("/_admin/azure/nic-reservation", post(nic_reservation))
        .route("/_admin/azure/graph-lag", post(graph_lag))
        .route("/_admin/azure/graph-quota", post(graph_quota))
        .route("/_admin/azure/marketplace", post(marketplace))
        .route("/_admin/azure/features", post(features))
        .with_state(store)
}

async fn tokens(State(store): State<Arc<Store>>) -> Json<serde_json::Value> {
    Json(json!({"issued": store.lock_at(Instant::now()).tokens_issued}))
}

async fn token_lifetime(State(store): State<Arc<Store>>, Json(spec): Json<Lifetime>) -> Json<serde_json::Value> {
    store.lock_at(Instant::now()).token_lifetime = Duration::from_secs(spec.seconds);
    Json(json!({}))
}

async fn add_vm_failures(State(store): State<Arc<Store>>, Json(spec): Json<VmFailures>) -> Response {
    if spec.code.trim().is_empty() {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "code must not be empty"}))).into_response();
    }
    let mut state = store.lock_at(Instant::now());
    for _ in 0..spec.times {
        state.vm_failures.push_back(spec.code.clone());
    }
    Json(json!({"queued": state.vm_failures.len()})).into_response()
}

async fn clear_vm_failures(State(store): State<Arc<Store>>) -> Json<serde_json::Value> {
    store.lock_at(Instant::now()).vm_failures.clear();
    Json(json!({}))
}

async fn page_size(State(store): State<Arc<Store>>, Json(spec): Json<PageSize>) -> Response {
    if spec.size == 0 {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "size must be at least 1"}))).into_response();
    }
    store.lock_at(Instant::now()).page_size = spec.size;
    Json(json!({})).into_response()
}

async fn nic_reservation(State(store): State<Arc<Store>>, Json(spec): Json<Reservation>) -> Json<serde_json::Value> {
    store.lock_at(Instant::now()).nic_reservation = Duration::from_millis(spec.ms);
    Json(json!({}))
}

async fn graph_lag(State(store): State<Arc<Store>>, Json(spec): Json<GraphLag>) -> Json<serde_json::Value> {
    store.lock_at(Instant::now()).graph_lag = Duration::from_millis(spec.millis);
    Json(json!({}))
}

async fn graph_quota(State(store): State<Arc<Store>>, Json(spec): Json<GraphQuota>) -> Response {
    if spec.window_millis == 0 {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "windowMillis must be at least 1"}))).into_response();
    }
    let mut state = store.lock_at(Instant::now());
    state.graph_quota = spec.queries;
    state.graph_window = Duration::from_millis(spec.window_millis);
    state.graph_usage.clear();
    Json(json!({})).into_response()
}

async fn marketplace(State(store): State<Arc<Store>>, Json(spec): Json<MarketplaceSwitch>) -> Json<serde_json::Value> {
    let mut state = store.lock_at(Instant::now());
    if let Some(may) = spec.may_accept_terms {
        state.may_accept_terms = may;
    }
    if spec.cancel_agreements {
        state.agreements.clear();
    }
    Json(
        json!({"mayAcceptTerms": state.may_accept_terms, "accepted": state.agreements.values().filter(|a| a.accepted).count()}),
    )
}

async fn features(State(store): State<Arc<Store>>, Json(spec): Json<Features>) -> Json<serde_json::Value> {
    let sub = spec.subscription.unwrap_or_else(|| crate::SUBSCRIPTION_ID.to_owned()).to_ascii_lowercase();
    let mut state = store.lock_at(Instant::now());
    if spec.encryption_at_host {
        state.encryption_at_host.insert(sub.clone());
    } else {
        state.encryption_at_host.remove(&sub);
    }
    Json(json!({"subscription": sub, "encryptionAtHost": state.encryption_at_host.contains(&sub)}))
}
