//! `zoneOperations.get`, `zoneOperations.wait` and `zoneOperations.list`.

use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde_json::{Value, json};

use super::{Ctx, Params, begin, respond};
use crate::error::GceError;
use crate::filter::{Filter, Subject};
use crate::model::operation::Operation;
use crate::{paging, urls};

/// How long `wait` blocks at most before answering a still-running operation,
/// unless `POST /_admin/gce/wait` set another limit. The real API waits "no
/// more than the default deadline (2 minutes)" and, being best-effort, "might
/// return before the default deadline is reached, or might return after zero
/// seconds" (zoneOperations.wait reference): clients must be prepared to call
/// it again. The fake's 2 s is such an early answer and keeps tests fast.
const WAIT_LIMIT: Duration = Duration::from_secs(2);

fn not_found(project: &str, zone: &str, operation: &str) -> GceError {
    GceError::not_found(&format!("projects/{project}/zones/{zone}/operations/{operation}"))
}

/// The operation at `now` and, if still running, when it will be DONE.
fn lookup(
    ctx: &Ctx,
    project: &str,
    zone: &str,
    operation: &str,
    now: Instant,
) -> Result<(Operation, Option<Instant>), GceError> {
    let state = ctx.store.lock_at(now);
    let record = state
        .operations
        .get(&(project.to_string(), zone.to_string(), operation.to_string()))
        .ok_or_else(|| not_found(project, zone, operation))?;
    let pending = (!record.is_done(now)).then_some(record.done_at);
    Ok((record.render(now), pending))
}

/// `GET .../zones/Z/operations/OP`.
pub(crate) async fn get(
    State(ctx): State<Ctx>,
    Path((project, zone, operation)): Path<(String, String, String)>,
) -> Response {
    let guard = match begin(&ctx, "zoneOperations.get").await {
        Ok(guard) => guard,
        Err(rejection) => return rejection,
    };
    let result = urls::check_zone(&zone)
        .and_then(|()| lookup(&ctx, &project, &zone, &operation, Instant::now()).map(|(op, _)| op));
    guard.finish(respond(result))
}

/// `POST .../zones/Z/operations/OP/wait`: answers when the operation is DONE or after about 2 s.
pub(crate) async fn wait(
    State(ctx): State<Ctx>,
    Path((project, zone, operation)): Path<(String, String, String)>,
) -> Response {
    let guard = match begin(&ctx, "zoneOperations.wait").await {
        Ok(guard) => guard,
        Err(rejection) => return rejection,
    };
    if let Err(error) = urls::check_zone(&zone) {
        return guard.finish(respond::<Operation>(Err(error)));
    }
    let limit = ctx.store.lock_at(Instant::now()).wait_limit.unwrap_or(WAIT_LIMIT);
    let deadline = Instant::now() + limit;
    let result = loop {
        let now = Instant::now();
        match lookup(&ctx, &project, &zone, &operation, now) {
            Ok((_, Some(done_at))) if now < deadline => {
                tokio::time::sleep(done_at.min(deadline).saturating_duration_since(now) + Duration::from_millis(1))
                    .await;
            }
            Ok((op, _)) => break Ok(op),
            Err(error) => break Err(error),
        }
    };
    guard.finish(respond(result))
}

/// `GET .../zones/Z/operations`: the zone's operations in name order, with the
/// same `filter` (fields `name`, `status`, `id`), `maxResults` and
/// `pageToken`/`nextPageToken` as `instances.list`.
pub(crate) async fn list(
    State(ctx): State<Ctx>,
    Path((project, zone)): Path<(String, String)>,
    Query(params): Query<Params>,
) -> Response {
    let guard = match begin(&ctx, "zoneOperations.list").await {
        Ok(guard) => guard,
        Err(rejection) => return rejection,
    };
    guard.finish(respond(list_page(&ctx, &project, &zone, &params)))
}

fn list_page(ctx: &Ctx, project: &str, zone: &str, params: &Params) -> Result<Value, GceError> {
    urls::check_zone(zone)?;
    let filter = Filter::parse(params.get("filter").map_or("", String::as_str))?;
    let max = paging::max_results(params.get("maxResults").map(String::as_str))?;
    let after = paging::decode(params.get("pageToken").map(String::as_str))?;
    let now = Instant::now();
    let state = ctx.store.lock_at(now);
    let no_labels = BTreeMap::new();
    let mut records: Vec<_> = state
        .operations
        .iter()
        .filter(|((p, z, name), _)| p == project && z == zone && after.as_ref().is_none_or(|a| name > a))
        .map(|(_, record)| record)
        .collect();
    records.sort_by(|a, b| a.name.cmp(&b.name));
    let mut items: Vec<Value> = Vec::new();
    let mut next_page_token = None;
    for op in records.into_iter().map(|record| record.render(now)) {
        let subject = Subject { name: &op.name, status: op.status, id: &op.id, labels: &no_labels };
        if !filter.matches(&subject) {
            continue;
        }
        if items.len() == max {
            next_page_token =
                items.last().and_then(|last| last.get("name")).and_then(Value::as_str).map(paging::token_after);
            break;
        }
        items.push(serde_json::to_value(&op).map_err(|_| GceError::internal())?);
    }
    let path = format!("projects/{project}/zones/{zone}/operations");
    let mut body = json!({"kind": "compute#operationList", "id": path, "selfLink": urls::full(&path)});
    if !items.is_empty() {
        body["items"] = Value::Array(items);
    }
    if let Some(token) = next_page_token {
        body["nextPageToken"] = Value::String(token);
    }
    Ok(body)
}
