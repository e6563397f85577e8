//! `operations.get`: the `Azure-AsyncOperation` status and the `Location` monitor of
//! every long-running operation.

use std::time::{Instant, SystemTime};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use fake_cloud_support::wire::encode_component;
use serde_json::json;

use super::{Ctx, Req, respond};
use crate::error::ArmError;
use crate::state::{Failure, State};
use crate::wire::timestamp;

/// Compute's `Retry-After` for operation `id` while it runs at `now`: the whole seconds
/// left (at least 1), so that a client following it (azcore's poller waits 30 s without
/// one) polls when the fake's operation is due. `None` once it is done: a finished
/// operation asks for no delay.
pub(crate) fn retry_after(st: &State, id: &str, now: Instant) -> Option<(&'static str, String)> {
    let done_at = st.operations.get(id)?.done_at;
    let left = done_at.checked_duration_since(now).filter(|left| !left.is_zero())?;
    Some(("Retry-After", left.as_millis().div_ceil(1000).max(1).to_string()))
}

/// The headers of a `Microsoft.Compute` response whose work runs as operation `op`:
/// [`Req::op_headers`] (with `monitor`, the `Location` URL too) and, while `op` runs at
/// `now`, its [`retry_after`].
pub(crate) fn compute_headers(
    st: &State,
    req: &Req,
    sub: &str,
    location: &str,
    op: &str,
    now: Instant,
    monitor: bool,
) -> Vec<(&'static str, String)> {
    let mut headers = req.op_headers(sub, "Microsoft.Compute", location, op, monitor);
    headers.extend(retry_after(st, op, now));
    headers
}

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
    // Compute answers its operation polls with `Retry-After` while they run (Network's
    // operations here finish at once).
    let compute = req.path.to_ascii_lowercase().contains("/providers/microsoft.compute/");
    let retry: Vec<(&str, String)> = if compute { retry_after(&st, id, now).into_iter().collect() } else { Vec::new() };
    if monitor {
        return Ok(match (status, &op.failure, &op.output) {
            ("InProgress", _, _) => {
                let mut headers = vec![("Location", format!("{}{}?{}", req.base, req.path, raw_query(req)))];
                headers.extend(retry);
                respond(StatusCode::ACCEPTED, None, &headers)
            }
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
    Ok(respond(StatusCode::OK, Some(body), &retry))
}

fn raw_query(req: &Req) -> String {
    let mut pairs: Vec<String> =
        req.query.iter().map(|(k, v)| format!("{}={}", encode_component(k), encode_component(v))).collect();
    pairs.sort();
    pairs.join("&")
}
