//! `instances.insert`, `instances.get`, `instances.list`, `instances.start`, `instances.delete`.

use std::time::Instant;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use fake_cloud_support::{FaultKind, Replay};
use serde_json::{Value, json};

use super::{Ctx, Params, begin, parse_body, request_id, respond};
use crate::build::{self, Target};
use crate::caller::Caller;
use crate::error::GceError;
use crate::filter::{Filter, Subject};
use crate::model::instance::InstanceRequest;
use crate::model::operation::Operation;
use crate::paging;
use crate::state::lifecycle::Lifecycle;
use crate::state::operations::{self, NewOperation, OpType, OperationRecord};
use crate::state::{InstanceRecord, State as CloudState};
use crate::urls;

/// The existing operation a `requestId` was already used for, if any.
pub(super) fn replay(
    state: &CloudState,
    project: &str,
    zone: &str,
    request_id: Option<&String>,
    now: Instant,
) -> Option<Operation> {
    let key = (project.to_string(), zone.to_string(), request_id?.clone());
    let Replay::Same(name) = state.request_ids.check(&key, "", now) else {
        return None;
    };
    let op = state.operations.get(&(project.to_string(), zone.to_string(), name.clone()))?;
    Some(op.render(now))
}

/// Stores an operation (and its `requestId`) and returns it rendered.
pub(super) fn record_operation(state: &mut CloudState, record: OperationRecord, now: Instant) -> Operation {
    let rendered = record.render(now);
    let key = (record.project.clone(), record.zone.clone(), record.name.clone());
    if let Some(id) = &record.request_id {
        let key = (record.project.clone(), record.zone.clone(), id.clone());
        state.request_ids.record(key, String::new(), record.name.clone(), now);
    }
    state.operations.insert(key, record);
    rendered
}

/// `POST .../zones/Z/instances?requestId=UUID`: creates an instance, returns its insert Operation.
///
/// The operation is DONE when the instance reaches `STAGING` (half of `boot_ms`,
/// or `operation_ms` when set), as real GCE marks inserts done before the guest
/// is `RUNNING`.
pub(crate) async fn insert(
    State(ctx): State<Ctx>,
    Path((project, zone)): Path<(String, String)>,
    Query(params): Query<Params>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let guard = match ctx.admin.begin_call("instances.insert").await {
        Ok(guard) => guard,
        // Refused at once, as GCE refuses a machine type the zone does not offer.
        Err(rejection) if rejection.kind == FaultKind::Placement => {
            let machine_type = parse_body::<InstanceRequest>(&body).ok().and_then(|r| r.machine_type);
            return GceError::not_offered_in_zone(machine_type.as_deref().unwrap_or_default(), &zone).into_response();
        }
        Err(rejection) => return rejection.into_response(),
    };
    let prepared = urls::check_zone(&zone)
        .and_then(|()| request_id(&params))
        .and_then(|id| parse_body::<InstanceRequest>(&body).map(|request| (id, request)));
    let (request_id, request) = match prepared {
        Ok(prepared) => prepared,
        Err(error) => return error.into_response(),
    };
    let now = Instant::now();
    let timing = ctx.admin.timing();
    let invisible = ctx.admin.consistency().invisible();
    let mut state = ctx.store.lock_at(now);
    if let Some(op) = replay(&state, &project, &zone, request_id.as_ref(), now) {
        return Json(op).into_response();
    }
    let caller = Caller::from_headers(&headers, state.default_caller.as_deref());
    let target = Target { project: &project, zone: &zone, caller: &caller };
    let mut instance = match build::instance(request, &target, &mut state) {
        Ok(instance) => instance,
        Err(error) => return error.into_response(),
    };
    let key = (project.clone(), zone.clone(), instance.name.clone());
    if state.instances.contains_key(&key) {
        return GceError::already_exists(&format!("projects/{project}/zones/{zone}/instances/{}", instance.name))
            .into_response();
    }
    let after = guard.after_fault();
    // Capacity and placement faults after the insert took effect are reported
    // by the operation, as GCE reports stockouts (`operations::stockout`,
    // `operations::not_placeable`); other kinds replace the answer.
    let failure = match after.as_ref().map(|r| r.kind) {
        Some(FaultKind::Capacity) => Some(operations::stockout(&project, &zone)),
        Some(FaultKind::Placement) => Some(operations::not_placeable(&zone, &instance)),
        _ => None,
    };
    let (staged, lifecycle) = match timing.operation() {
        Some(op) => (op, Lifecycle::Inserting { created: now, staged: op, running: op + timing.boot() / 2 }),
        None => (timing.boot() / 2, Lifecycle::Booting { created: now, boot: timing.boot() }),
    };
    let staged_at = now + staged;
    let lifecycle = if failure.is_some() { Lifecycle::Stockout { until: staged_at } } else { lifecycle };
    let record = OperationRecord::new(NewOperation {
        project: &project,
        zone: &zone,
        op_type: OpType::Insert,
        target_link: &instance.self_link,
        target_id: &instance.id,
        user: caller.user(),
        now,
        done_at: staged_at,
        failure: failure.clone(),
        request_id: request_id.as_deref(),
    });
    state.store_disks_of(&mut instance);
    state.instances.insert(key, InstanceRecord { resource: instance, lifecycle, visible_at: now + invisible });
    let op = record_operation(&mut state, record, now);
    drop(state);
    match after {
        Some(rejection) if failure.is_none() => rejection.into_response(),
        _ => Json(op).into_response(),
    }
}

/// `GET .../zones/Z/instances/NAME`; 404 while the instance is still invisible.
pub(crate) async fn get(
    State(ctx): State<Ctx>,
    Path((project, zone, name)): Path<(String, String, String)>,
) -> Response {
    let guard = match begin(&ctx, "instances.get").await {
        Ok(guard) => guard,
        Err(rejection) => return rejection,
    };
    let result = urls::check_zone(&zone).and_then(|()| {
        let now = Instant::now();
        let state = ctx.store.lock_at(now);
        state
            .instances
            .get(&(project.clone(), zone.clone(), name.clone()))
            .filter(|record| now >= record.visible_at)
            .and_then(|record| record.render(now))
            .ok_or_else(|| GceError::not_found(&format!("projects/{project}/zones/{zone}/instances/{name}")))
    });
    guard.finish(respond(result))
}

/// `GET .../zones/Z/instances?filter=&maxResults=&pageToken=`: an `InstanceList`, in name order.
pub(crate) async fn list(
    State(ctx): State<Ctx>,
    Path((project, zone)): Path<(String, String)>,
    Query(params): Query<Params>,
) -> Response {
    let guard = match begin(&ctx, "instances.list").await {
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
    let mut items: Vec<Value> = Vec::new();
    let mut next_page_token = None;
    // The filter is tested on the record before the instance is rendered (a
    // clone): a batch of 200 names over a fleet of 10,000 renders 200, not 10,000.
    let matching = state
        .instances
        .iter()
        .filter(|((p, z, name), _)| p == project && z == zone && after.as_ref().is_none_or(|a| name > a))
        .filter(|(_, record)| now >= record.visible_at)
        .filter(|(_, record)| {
            let instance = &record.resource;
            record.lifecycle.status(now).is_some_and(|status| {
                filter.matches(&Subject { name: &instance.name, status, id: &instance.id, labels: &instance.labels })
            })
        })
        .filter_map(|(_, record)| record.render(now));
    for instance in matching {
        if items.len() == max {
            next_page_token =
                items.last().and_then(|last| last.get("name")).and_then(Value::as_str).map(paging::token_after);
            break;
        }
        items.push(serde_json::to_value(&instance).map_err(|_| GceError::internal())?);
    }
    let path = format!("projects/{project}/zones/{zone}/instances");
    let mut body = json!({"kind": "compute#instanceList", "id": path, "selfLink": urls::full(&path)});
    if !items.is_empty() {
        body["items"] = Value::Array(items);
    }
    if let Some(token) = next_page_token {
        body["nextPageToken"] = Value::String(token);
    }
    Ok(body)
}

/// `POST .../zones/Z/instances/NAME/start?requestId=`: boots a `TERMINATED`
/// instance again (Compute Engine, "Stop and start a VM": the VM goes
/// `PROVISIONING`, `STAGING`, `RUNNING` as after an insert, keeps its disks and
/// internal IP and gets a new ephemeral external IP), returning a `start`
/// Operation that is DONE when it reaches `STAGING`. Starting an instance that
/// runs (or still boots) changes nothing: its Operation is DONE at once. One
/// being deleted or whose insert is failing is 400 `resourceNotReady`.
///
/// A Spot VM may not find capacity again: a `capacity` fault in phase
/// `after` lets the start be accepted and its Operation finish with
/// `ZONE_RESOURCE_POOL_EXHAUSTED` (a `placement` fault with
/// `ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS`), the instance staying
/// `TERMINATED`, as GCE reports a start it cannot place.
pub(crate) async fn start(
    State(ctx): State<Ctx>,
    Path((project, zone, name)): Path<(String, String, String)>,
    Query(params): Query<Params>,
    headers: HeaderMap,
) -> Response {
    let guard = match begin(&ctx, "instances.start").await {
        Ok(guard) => guard,
        Err(rejection) => return rejection,
    };
    let prepared = urls::check_zone(&zone).and_then(|()| request_id(&params));
    let request_id = match prepared {
        Ok(id) => id,
        Err(error) => return error.into_response(),
    };
    let now = Instant::now();
    let timing = ctx.admin.timing();
    let mut state = ctx.store.lock_at(now);
    if let Some(op) = replay(&state, &project, &zone, request_id.as_ref(), now) {
        return Json(op).into_response();
    }
    let caller = Caller::from_headers(&headers, state.default_caller.as_deref());
    let key = (project.clone(), zone.clone(), name.clone());
    let resource = format!("projects/{project}/zones/{zone}/instances/{name}");
    let Some(record) = state.instances.get(&key) else {
        return GceError::not_found(&resource).into_response();
    };
    let lifecycle = record.lifecycle;
    if matches!(lifecycle, Lifecycle::Deleting { .. } | Lifecycle::Stockout { .. }) {
        return GceError::not_ready(&resource).into_response();
    }
    let after = guard.after_fault();
    let (staged, booting) = match timing.operation() {
        Some(op) => (op, Lifecycle::Inserting { created: now, staged: op, running: op + timing.boot() / 2 }),
        None => (timing.boot() / 2, Lifecycle::Booting { created: now, boot: timing.boot() }),
    };
    let stopped = lifecycle == Lifecycle::Terminated;
    let failure = match after.as_ref().map(|r| r.kind) {
        Some(FaultKind::Capacity) if stopped => Some(operations::stockout(&project, &zone)),
        Some(FaultKind::Placement) if stopped => Some(operations::not_placeable(&zone, &record.resource)),
        _ => None,
    };
    let done_at = if stopped { now + staged } else { now };
    let external = (stopped && failure.is_none()).then(|| state.allocate_addresses().1);
    let Some(record) = state.instances.get_mut(&key) else {
        return GceError::not_found(&resource).into_response();
    };
    if let Some(external) = external {
        record.lifecycle = booting;
        record
            .resource
            .other
            .insert("lastStartTimestamp".into(), crate::clock::rfc3339(std::time::SystemTime::now()).into());
        for config in record.resource.network_interfaces.iter_mut().flat_map(|nic| nic.access_configs.iter_mut()) {
            if config.ephemeral && config.nat_ip.is_none() {
                config.nat_ip = Some(external.clone());
            }
        }
    }
    let op = OperationRecord::new(NewOperation {
        project: &project,
        zone: &zone,
        op_type: OpType::Start,
        target_link: &record.resource.self_link,
        target_id: &record.resource.id,
        user: caller.user(),
        now,
        done_at,
        failure: failure.clone(),
        request_id: request_id.as_deref(),
    });
    let op = record_operation(&mut state, op, now);
    drop(state);
    match after {
        Some(rejection) if failure.is_none() => rejection.into_response(),
        _ => Json(op).into_response(),
    }
}

/// `DELETE .../zones/Z/instances/NAME?requestId=`: STOPPING for `stop_ms` (or
/// `operation_ms` when set), then gone; the delete Operation is DONE when the
/// instance is gone.
pub(crate) async fn delete(
    State(ctx): State<Ctx>,
    Path((project, zone, name)): Path<(String, String, String)>,
    Query(params): Query<Params>,
    headers: HeaderMap,
) -> Response {
    let guard = match begin(&ctx, "instances.delete").await {
        Ok(guard) => guard,
        Err(rejection) => return rejection,
    };
    let result = urls::check_zone(&zone).and_then(|()| request_id(&params)).and_then(|request_id| {
        let now = Instant::now();
        let timing = ctx.admin.timing();
        let stop = timing.operation().unwrap_or_else(|| timing.stop());
        let mut state = ctx.store.lock_at(now);
        if let Some(op) = replay(&state, &project, &zone, request_id.as_ref(), now) {
            return Ok(op);
        }
        let caller = Caller::from_headers(&headers, state.default_caller.as_deref());
        let key = (project.clone(), zone.clone(), name.clone());
        let record = state
            .instances
            .get_mut(&key)
            .ok_or_else(|| GceError::not_found(&format!("projects/{project}/zones/{zone}/instances/{name}")))?;
        if record.resource.deletion_protection {
            return Err(GceError::deletion_protected());
        }
        let until = match record.lifecycle {
            Lifecycle::Deleting { until } => until,
            _ => now + stop,
        };
        record.lifecycle = Lifecycle::Deleting { until };
        let op = OperationRecord::new(NewOperation {
            project: &project,
            zone: &zone,
            op_type: OpType::Delete,
            target_link: &record.resource.self_link,
            target_id: &record.resource.id,
            user: caller.user(),
            now,
            done_at: until,
            failure: None,
            request_id: request_id.as_deref(),
        });
        Ok(record_operation(&mut state, op, now))
    });
    guard.finish(respond(result))
}
