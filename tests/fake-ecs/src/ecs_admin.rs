//! ECS-only admin routes, next to the shared ones:
//!
//! - `POST /_admin/ecs/share-quota {"accounts": n}`: how many accounts one image may be
//!   shared with (default 50); `ModifyImageSharePermission` beyond it → 403
//!   `QuotaExceed.ShareImageUser`.
//! - `GET /_admin/ecs/refused` → `{"refused": {"<code>": n}, "total": n, "nonces": n}`:
//!   requests refused before the call gate (signature, AccessKey, nonce, timestamp,
//!   action, version), which `/_admin/calls` does not count, plus remembered nonces.

use std::sync::Arc;
use std::time::Instant;

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

/// The ECS-only admin routes.
pub(crate) fn routes(store: Arc<Store>) -> Router {
    Router::new()
        .route("/_admin/ecs/share-quota", post(share_quota))
        .route("/_admin/ecs/refused", get(refused))
        .with_state(store)
}

async fn share_quota(State(store): State<Arc<Store>>, Json(spec): Json<ShareQuota>) -> Response {
    if spec.accounts == 0 {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "accounts must be at least 1"}))).into_response();
    }
    store.lock_at(Instant::now()).share_quota = spec.accounts;
    Json(json!({})).into_response()
}

async fn refused(State(store): State<Arc<Store>>) -> Json<serde_json::Value> {
    let refused = store.refused();
    let total: u64 = refused.values().sum();
    let nonces = store.nonces().len();
    Json(json!({"refused": refused, "total": total, "nonces": nonces}))
}
