//! GCE-only admin endpoint, next to the shared ones:
//! `POST /_admin/gce/caller` with `{"principal": "serviceAccount:a@b"}` (or `null`)
//! sets the principal assumed for requests that carry no `sa:`/`user:` bearer
//! token, e.g. from clients using anonymous credentials.

use std::sync::Arc;
use std::time::Instant;

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

/// The GCE-only admin routes.
pub(crate) fn routes(store: Arc<Store>) -> Router {
    Router::new().route("/_admin/gce/caller", post(set_caller)).with_state(store)
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
