//! `operations.get`: the `Azure-AsyncOperation` status and the `Location` monitor of
//! every long-running operation.

use std::time::{Instant, SystemTime};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{Ctx, Req, respond};
use crate::error::ArmError;
use crate::state::Failure;
use crate::wire::timestamp;

/// The HTTP status a failed operation answers its `Location` poll with.
fn failure_status(failure: &Failure) -> StatusCode {
    match failure.code.as_str() {
        "AllocationFailed"
        | "ZonalAllocationFailed"
        | "OverconstrainedAllocationRequest"
        | "SkuNotAvailable"
        | "OperationNotAllowed" => StatusCode::CONFLICT,
        "InternalExecutionError" | "InternalServerError" => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    }
}

/// `GET .../locations/L/operations/ID` (status body) or with `monitor=true` /
/// `.../operationResults/ID` (`Location` semantics: 202 while running, then 200/204 or the error).
pub(crate) fn get(ctx: &Ctx, req: &Req, sub: &str, id: &str, results: bool) -> Result<Response, ArmError> {
    let now = Instant::now();
    let st = ctx.store.lock_at(now);
    let op = st.operations.get(id).filter(|op| op.sub.eq_ignore_ascii_case(sub)).ok_or_else(|| {
        ArmError::new(StatusCode::NOT_FOUND, "NotFound", format!("The operation '{id}' could not be found."))
    })?;
    let status = op.status(now);
    let end_wall = op.started_wall + op.done_at.saturating_duration_since(op.started);
    let monitor = results || req.param("monitor").is_some_and(|m| m.eq_ignore_ascii_case("true"));
    if monitor {
        return Ok(match (status, &op.failure, &op.output) {
            ("InProgress", _, _) => respond(
                StatusCode::ACCEPTED,
                None,
                &[("Location", format!("{}{}?{}", req.base, req.path, raw_query(req)))],
            ),
            (_, Some(failure), _) => {
                ArmError::new(failure_status(failure), &failure.code, failure.message.clone()).into_response()
            }
            (_, None, Some(output)) => respond(StatusCode::OK, Some(output.clone()), &[]),
            (_, None, None) => respond(StatusCode::NO_CONTENT, None, &[]),
        });
    }
    let mut body = json!({
        "name": op.id,
        "status": status,
        "startTime": timestamp(op.started_wall),
    });
    if status != "InProgress" {
        body["endTime"] = json!(timestamp(end_wall.min(SystemTime::now())));
    }
    if status == "Failed"
        && let Some(failure) = &op.failure
    {
        body["error"] = json!({"code": failure.code, "message": failure.message, "details": []});
    }
    if status == "Succeeded"
        && let Some(output) = &op.output
    {
        body["properties"] = json!({"output": output});
    }
    Ok(respond(StatusCode::OK, Some(body), &[]))
}

fn raw_query(req: &Req) -> String {
    let mut pairs: Vec<String> =
        req.query.iter().map(|(k, v)| format!("{}={}", crate::wire::encode(k), crate::wire::encode(v))).collect();
    pairs.sort();
    pairs.join("&")
}
