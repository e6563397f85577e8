//! The Compute Engine REST routes (`/compute/v1/...`) and what their handlers share.

mod images;
mod instances;
mod operations;
mod updates;

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use fake_cloud_support::{Admin, CallGuard};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::GceError;
use crate::state::Store;

/// What every handler needs: the shared admin machinery and the cloud state.
#[derive(Clone)]
pub(crate) struct Ctx {
    /// Counters, faults, latency, rate limit, consistency, timing.
    pub(crate) admin: Admin,
    /// The cloud state.
    pub(crate) store: Arc<Store>,
}

/// Query parameters (`requestId`, `filter`, `pageToken`, `maxResults`, `$alt`, ...).
pub(crate) type Params = HashMap<String, String>;

/// The cloud API routes.
pub(crate) fn routes(ctx: Ctx) -> Router {
    const ZONE: &str = "/compute/v1/projects/{project}/zones/{zone}";
    const IMAGES: &str = "/compute/v1/projects/{project}/global/images/{image}";
    Router::new()
        .route(&format!("{ZONE}/instances"), get(instances::list).post(instances::insert))
        .route(&format!("{ZONE}/instances/{{name}}"), get(instances::get).delete(instances::delete))
        .route(&format!("{ZONE}/instances/{{name}}/start"), post(instances::start))
        .route(&format!("{ZONE}/instances/{{name}}/setLabels"), post(updates::set_instance_labels))
        .route(&format!("{ZONE}/instances/{{name}}/setTags"), post(updates::set_instance_tags))
        .route(&format!("{ZONE}/disks/{{name}}"), get(updates::get_disk).patch(updates::update_disk))
        .route(&format!("{ZONE}/disks/{{name}}/setLabels"), post(updates::set_disk_labels))
        .route(&format!("{ZONE}/disks/{{name}}/resize"), post(updates::resize_disk))
        .route(&format!("{ZONE}/operations"), get(operations::list))
        .route(&format!("{ZONE}/operations/{{operation}}"), get(operations::get))
        .route(&format!("{ZONE}/operations/{{operation}}/wait"), post(operations::wait))
        .route(IMAGES, get(images::get))
        .route(&format!("{IMAGES}/getIamPolicy"), get(images::get_iam_policy))
        .route(&format!("{IMAGES}/setIamPolicy"), post(images::set_iam_policy))
        .with_state(ctx)
}

/// Passes a request through the admin gate (counting, rate limit, latency, `before` faults).
pub(crate) async fn begin(ctx: &Ctx, operation: &str) -> Result<CallGuard, Response> {
    ctx.admin.begin_call(operation).await.map_err(IntoResponse::into_response)
}

/// A JSON answer or GCE's error answer.
pub(crate) fn respond<T: Serialize>(result: Result<T, GceError>) -> Response {
    match result {
        Ok(body) => Json(body).into_response(),
        Err(error) => error.into_response(),
    }
}

/// Parses a JSON request body, answering GCE's 400 `parseError` on failure
/// (the message names the position, never the content).
pub(crate) fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, GceError> {
    serde_json::from_slice(body).map_err(|e| {
        GceError::parse_error(&format!("Invalid request body at line {} column {}.", e.line(), e.column()))
    })
}

/// The `requestId` parameter, which GCE requires to be a non-zero UUID.
pub(crate) fn request_id(params: &Params) -> Result<Option<String>, GceError> {
    let Some(id) = params.get("requestId").filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let bytes = id.as_bytes();
    let shaped = bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    let zero = bytes.iter().all(|b| *b == b'0' || *b == b'-');
    if !shaped || zero {
        return Err(GceError::invalid_field(
            "requestId",
            id,
            "Must be a valid UUID with the exception that zero UUID is not supported.",
        ));
    }
    Ok(Some(id.to_ascii_lowercase()))
}
