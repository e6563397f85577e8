//! `zoneOperations.get` and `zoneOperations.wait`.

use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::response::Response;

use super::{Ctx, begin, respond};
use crate::error::GceError;
use crate::model::operation::Operation;
use crate::urls;

/// How long `wait` blocks at most before answering a still-running operation
/// (the real API waits up to 2 minutes; the fake keeps tests fast).
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
    let deadline = Instant::now() + WAIT_LIMIT;
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
