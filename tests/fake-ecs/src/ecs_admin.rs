//! ECS-only admin routes, next to the shared ones:
//!
//! - `POST /_admin/ecs/share-quota {"accounts": n}`: how many accounts one image may be
//!   shared with (default 50); `ModifyImageSharePermission` beyond it → 403
//!   `QuotaExceed.ShareImageUser`.
//! - `GET /_admin/ecs/refused` → `{"refused": {"<code>": n}, "total": n, "nonces": n}`:
//!   requests refused before the call gate (signature, AccessKey, nonce, timestamp,
//!   action, version), which `/_admin/calls` does not count, plus remembered nonces.
//! - `POST /_admin/ecs/reclaim-release {"ms": n}`: how long a spot instance reclaimed
//!   through `POST /_admin/instances/{id}/reclaim` stays `Stopped` with the `Recycling`
//!   lock before ECS releases it (default 300 000, five minutes); applies to later reclaims.

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
struct ShareQuota {
    accounts: usize,
}

#[derive(Debug, Deserialize)]
struct ReclaimRelease {
    ms: u64,
}

/// The ECS-only admin routes.
pub(crate) fn routes(store: Arc<Store>) -> Router {
    Router::new()
        .route("/_admin/ecs/share-quota", post(share_quota))
        .route("/_admin/ecs/refused", get(refused))
        .route("/_admin/ecs/reclaim-release", post(reclaim_release))
        .with_state(store)
}

async fn share_quota(State(store): State<Arc<Store>>, Json(spec): Json<ShareQuota>) -> Response {
    if spec.accounts == 0 {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "accounts must be at least 1"}))).into_response();
    }
    store.lock_at(Instant::now()).share_quota = spec.accounts;
    Json(json!({})).into_response()
}

async fn reclaim_release(State(store): State<Arc<Store>>, Json(spec): Json<ReclaimRelease>) -> Json<serde_json::Value> {
    store.lock_at(Instant::now()).reclaim_release = Duration::from_millis(spec.ms);
    Json(json!({}))
}

async fn refused(State(store): State<Arc<Store>>) -> Json<serde_json::Value> {
    let refused = store.refused();
    let total: u64 = refused.values().sum();
    let nonces = store.nonces().len();
    Json(json!({"refused": refused, "total": total, "nonces": nonces}))
}
