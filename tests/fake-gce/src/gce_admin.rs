//! GCE-only admin endpoints, next to the shared ones:
//! `POST /_admin/gce/caller` with `{"principal": "serviceAccount:a@b"}` (or `null`)
//! sets the principal assumed for requests that carry no `sa:`/`user:` bearer
//! token, e.g. from clients using anonymous credentials;
//! `POST /_admin/gce/wait` with `{"limit_ms": N}` (or `null`: the default 2 s)
//! sets how long `zoneOperations.wait` blocks at most before answering a
//! still-running operation (0: at once, as GCE's best-effort wait may).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::state::Store;

/// Body of `POST /_admin/gce/caller`.
#[derive(Debug, Deserialize)]
struct CallerSpec {
    principal: Option<String>,
}

/// Body of `POST /_admin/gce/wait`.
#[derive(Debug, Deserialize)]
struct WaitSpec {
    limit_ms: Option<u64>,
}

/// The GCE-only admin routes.
pub(crate) fn routes(store: Arc<Store>) -> Router {
    Router::new()
        .route("/_admin/gce/caller", post(set_caller))
        .route("/_admin/gce/wait", post(set_wait))
        .with_state(store)
}

async fn set_wait(State(store): State<Arc<Store>>, Json(spec): Json<WaitSpec>) -> Response {
    store.lock_at(Instant::now()).wait_limit = spec.limit_ms.map(Duration::from_millis);
    Json(json!({})).into_response()
}

async fn set_caller(State(store): State<Arc<Store>>, Json(spec): Json<CallerSpec>) -> Response {
    if let Some(principal) = &spec.principal
        && !(principal.starts_with("serviceAccount:") || principal.starts_with("user:"))
    {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "principal must start with serviceAccount: or user:"})))
            .into_response();
    }
    store.lock_at(Instant::now()).default_caller = spec.principal;
    Json(json!({})).into_response()
}
