//! In-place changes of an existing instance or disk, as UpdateMachine makes
//! them (Compute Engine REST reference v1,
//! <https://cloud.google.com/compute/docs/reference/rest/v1/instances> and
//! <https://cloud.google.com/compute/docs/reference/rest/v1/disks>):
//! `instances.setLabels` (`labels` + `labelFingerprint`), `instances.setTags`
//! (`items` + `fingerprint`), `disks.get`, `disks.setLabels` (`labels` +
//! `labelFingerprint`), `disks.resize` (`sizeGb`, only larger) and
//! `disks.update` (`paths=provisionedIops` / `provisionedThroughput` of a
//! Hyperdisk).
//!
//! Each write replaces the whole set (labels, tags) and needs the resource's
//! current fingerprint: a missing or stale one is 412 `conditionNotMet`
//! ([`GceError::fingerprint_mismatch`]) and changes nothing; an accepted write
//! gets a new fingerprint. The change is visible at once; its Operation
//! (`setLabels`, `setTags`, `resize`, `update`) is `RUNNING` for
//! [`IN_PLACE_OPERATION`] (clients wait for it as for an insert), then `DONE`.
//! A `requestId` seen before answers with the first Operation and changes nothing.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;

use super::instances::{record_operation, replay};
use super::{Ctx, Params, begin, parse_body, request_id, respond};
use crate::build::check_labels;
use crate::caller::Caller;
use crate::error::GceError;
use crate::model::disk::Disk;
use crate::model::operation::Operation;
use crate::state::lifecycle::Lifecycle;
use crate::state::operations::{NewOperation, OpType, OperationRecord};
use crate::state::{State as CloudState, new_fingerprint, same_fingerprint};
use crate::urls;

/// How long the Operation of an in-place change runs (GCE's finish within a
/// second or two).
pub(crate) const IN_PLACE_OPERATION: Duration = Duration::from_millis(100);

/// Most network tags an instance may carry.
const MAX_TAGS: usize = 64;

/// The body of `instances.setLabels` and `disks.setLabels`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetLabelsRequest {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    label_fingerprint: Option<String>,
}

impl SetLabelsRequest {
    /// Replaces a resource's `labels` with the request's, under GCE's
    /// optimistic lock: the request's fingerprint must be the resource's
    /// current `fingerprint`, which then changes.
    fn apply(self, labels: &mut BTreeMap<String, String>, fingerprint: &mut String) -> Result<(), GceError> {
        if !same_fingerprint(self.label_fingerprint.as_deref(), fingerprint) {
            return Err(GceError::fingerprint_mismatch(
                "Labels fingerprint either invalid or resource labels have changed",
            ));
        }
        *labels = self.labels;
        *fingerprint = new_fingerprint();
        Ok(())
    }
}

/// The body of `instances.setTags` (a `Tags` object).
#[derive(Debug, Default, Deserialize)]
struct SetTagsRequest {
    #[serde(default)]
    items: Vec<String>,
    fingerprint: Option<String>,
}

/// The body of `disks.resize`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResizeRequest {
    #[serde(default, deserialize_with = "int64")]
    size_gb: Option<i64>,
}

/// The fields of a `disks.update` body the fake changes.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DiskUpdateRequest {
    #[serde(default, deserialize_with = "int64")]
    provisioned_iops: Option<i64>,
    #[serde(default, deserialize_with = "int64")]
    provisioned_throughput: Option<i64>,
}

/// An int64 sent as a JSON string (the REST convention) or a number.
fn int64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => s.parse().map(Some).map_err(serde::de::Error::custom),
        Some(serde_json::Value::Number(n)) => n.as_i64().map(Some).ok_or_else(|| serde::de::Error::custom("not int64")),
        Some(other) => Err(serde::de::Error::custom(format!("invalid int64 value {other}"))),
    }
}

/// What every write here shares: the zone checked, the `requestId`, the caller.
struct Write<'a> {
    project: &'a str,
    zone: &'a str,
    request_id: Option<String>,
    user: String,
    now: Instant,
}

impl Write<'_> {
    /// The Operation of a change to the resource `target_link`/`target_id`, stored.
    fn operation(&self, state: &mut CloudState, op_type: OpType, target_link: &str, target_id: &str) -> Operation {
        let record = OperationRecord::new(NewOperation {
            project: self.project,
            zone: self.zone,
            op_type,
            target_link,
            target_id,
            user: &self.user,
            now: self.now,
            done_at: self.now + IN_PLACE_OPERATION,
            failure: None,
            request_id: self.request_id.as_deref(),
        });
        record_operation(state, record, self.now)
    }
}

/// Runs `change` on the locked state unless the `requestId` replays an earlier call.
fn write(
    ctx: &Ctx,
    project: &str,
    zone: &str,
    params: &Params,
    headers: &HeaderMap,
    change: impl FnOnce(&mut CloudState, &Write<'_>) -> Result<Operation, GceError>,
) -> Result<Operation, GceError> {
    urls::check_zone(zone)?;
    let request_id = request_id(params)?;
    let now = Instant::now();
    let mut state = ctx.store.lock_at(now);
    if let Some(op) = replay(&state, project, zone, request_id.as_ref(), now) {
        return Ok(op);
    }
    let user = Caller::from_headers(headers, state.default_caller.as_deref()).user().to_string();
    let w = Write { project, zone, request_id, user, now };
    change(&mut state, &w)
}

fn instance_path(project: &str, zone: &str, name: &str) -> String {
    format!("projects/{project}/zones/{zone}/instances/{name}")
}

fn disk_path(project: &str, zone: &str, name: &str) -> String {
    format!("projects/{project}/zones/{zone}/disks/{name}")
}

/// `POST .../zones/Z/instances/NAME/setLabels`: replaces the instance's labels.
pub(crate) async fn set_instance_labels(
    State(ctx): State<Ctx>,
    Path((project, zone, name)): Path<(String, String, String)>,
    Query(params): Query<Params>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let guard = match begin(&ctx, "instances.setLabels").await {
        Ok(guard) => guard,
        Err(rejection) => return rejection,
    };
    let result = parse_body::<SetLabelsRequest>(&body).and_then(|req| {
        write(&ctx, &project, &zone, &params, &headers, |state, w| {
            check_labels(&req.labels)?;
            let path = instance_path(&project, &zone, &name);
            let record = state
                .instances
                .get_mut(&(project.clone(), zone.clone(), name.clone()))
                .ok_or_else(|| GceError::not_found(&path))?;
            if matches!(record.lifecycle, Lifecycle::Deleting { .. } | Lifecycle::Stockout { .. }) {
                return Err(GceError::not_ready(&path));
            }
            let i = &mut record.resource;
            req.apply(&mut i.labels, &mut i.label_fingerprint)?;
            let (link, id) = (i.self_link.clone(), i.id.clone());
            Ok(w.operation(state, OpType::SetLabels, &link, &id))
        })
    });
    guard.finish(respond(result))
}

/// `POST .../zones/Z/instances/NAME/setTags`: replaces the instance's network tags.
pub(crate) async fn set_instance_tags(
    State(ctx): State<Ctx>,
    Path((project, zone, name)): Path<(String, String, String)>,
    Query(params): Query<Params>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let guard = match begin(&ctx, "instances.setTags").await {
        Ok(guard) => guard,
        Err(rejection) => return rejection,
    };
    let result = parse_body::<SetTagsRequest>(&body).and_then(|req| {
        write(&ctx, &project, &zone, &params, &headers, |state, w| {
            if let Some((n, bad)) = req.items.iter().enumerate().find(|(_, t)| !urls::valid_name(t)) {
                return Err(GceError::invalid_field(
                    &format!("resource.tags.items[{n}]"),
                    bad,
                    "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'",
                ));
            }
            if req.items.len() > MAX_TAGS {
                return Err(GceError::invalid_field(
                    "resource.tags.items",
                    "",
                    "Too many tags. At most 64 are allowed.",
                ));
            }
            let path = instance_path(&project, &zone, &name);
            let record = state
                .instances
                .get_mut(&(project.clone(), zone.clone(), name.clone()))
                .ok_or_else(|| GceError::not_found(&path))?;
            if matches!(record.lifecycle, Lifecycle::Deleting { .. } | Lifecycle::Stockout { .. }) {
                return Err(GceError::not_ready(&path));
            }
            let i = &mut record.resource;
            if !same_fingerprint(req.fingerprint.as_deref(), &i.tags.fingerprint) {
                return Err(GceError::fingerprint_mismatch("Supplied fingerprint does not match current fingerprint."));
            }
            let mut items = req.items;
            items.dedup();
            i.tags.items = items;
            i.tags.fingerprint = new_fingerprint();
            let (link, id) = (i.self_link.clone(), i.id.clone());
            Ok(w.operation(state, OpType::SetTags, &link, &id))
        })
    });
    guard.finish(respond(result))
}

/// `GET .../zones/Z/disks/NAME`.
pub(crate) async fn get_disk(
    State(ctx): State<Ctx>,
    Path((project, zone, name)): Path<(String, String, String)>,
) -> Response {
    let guard = match begin(&ctx, "disks.get").await {
        Ok(guard) => guard,
        Err(rejection) => return rejection,
    };
    let result = urls::check_zone(&zone).and_then(|()| {
        let state = ctx.store.lock_at(Instant::now());
        state
            .disks
            .get(&(project.clone(), zone.clone(), name.clone()))
            .cloned()
            .ok_or_else(|| GceError::not_found(&disk_path(&project, &zone, &name)))
    });
    guard.finish(respond(result))
}

/// The stored disk `name`, for a change.
fn disk_mut<'s>(state: &'s mut CloudState, project: &str, zone: &str, name: &str) -> Result<&'s mut Disk, GceError> {
    state
        .disks
        .get_mut(&(project.to_string(), zone.to_string(), name.to_string()))
        .ok_or_else(|| GceError::not_found(&disk_path(project, zone, name)))
}

/// `POST .../zones/Z/disks/NAME/setLabels`: replaces the disk's labels.
pub(crate) async fn set_disk_labels(
    State(ctx): State<Ctx>,
    Path((project, zone, name)): Path<(String, String, String)>,
    Query(params): Query<Params>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let guard = match begin(&ctx, "disks.setLabels").await {
        Ok(guard) => guard,
        Err(rejection) => return rejection,
    };
    let result = parse_body::<SetLabelsRequest>(&body).and_then(|req| {
        write(&ctx, &project, &zone, &params, &headers, |state, w| {
            check_labels(&req.labels)?;
            let disk = disk_mut(state, &project, &zone, &name)?;
            req.apply(&mut disk.labels, &mut disk.label_fingerprint)?;
            let (link, id) = (disk.self_link.clone(), disk.id.clone());
            Ok(w.operation(state, OpType::SetLabels, &link, &id))
        })
    });
    guard.finish(respond(result))
}

/// `POST .../zones/Z/disks/NAME/resize`: grows the disk (and the `diskSizeGb`
/// its instances show for it); the same or a smaller size is 400 `invalid`.
pub(crate) async fn resize_disk(
    State(ctx): State<Ctx>,
    Path((project, zone, name)): Path<(String, String, String)>,
    Query(params): Query<Params>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let guard = match begin(&ctx, "disks.resize").await {
        Ok(guard) => guard,
        Err(rejection) => return rejection,
    };
    let result = parse_body::<ResizeRequest>(&body).and_then(|req| {
        write(&ctx, &project, &zone, &params, &headers, |state, w| {
            let size = req.size_gb.ok_or_else(|| GceError::required("sizeGb"))?;
            let disk = disk_mut(state, &project, &zone, &name)?;
            let current: i64 = disk.size_gb.parse().unwrap_or(0);
            if size <= current {
                return Err(GceError::invalid_field(
                    "sizeGb",
                    &size.to_string(),
                    &format!("New disk size '{size}' GiB must be larger than existing size '{current}' GiB."),
                ));
            }
            disk.size_gb = size.to_string();
            let (link, id, users) = (disk.self_link.clone(), disk.id.clone(), disk.users.clone());
            for record in state.instances.values_mut().filter(|r| users.contains(&r.resource.self_link)) {
                for attached in record.resource.disks.iter_mut().filter(|a| a.source == link) {
                    attached.disk_size_gb = Some(size.to_string());
                }
            }
            Ok(w.operation(state, OpType::Resize, &link, &id))
        })
    });
    guard.finish(respond(result))
}

/// `PATCH .../zones/Z/disks/NAME?paths=provisionedIops&paths=provisionedThroughput`
/// (or `updateMask=provisionedIops,provisionedThroughput`): changes a
/// Hyperdisk's provisioned performance. No path, a path other than those, or
/// a disk that is no Hyperdisk is 400 `invalid`.
pub(crate) async fn update_disk(
    State(ctx): State<Ctx>,
    Path((project, zone, name)): Path<(String, String, String)>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let guard = match begin(&ctx, "disks.update").await {
        Ok(guard) => guard,
        Err(rejection) => return rejection,
    };
    let mut paths: Vec<String> = Vec::new();
    for (k, v) in &query {
        match k.as_str() {
            "paths" => paths.push(v.clone()),
            "updateMask" => paths.extend(v.split(',').map(|p| p.trim().to_string()).filter(|p| !p.is_empty())),
            _ => {}
        }
    }
    let params: Params = query.into_iter().collect();
    let result = parse_body::<DiskUpdateRequest>(&body).and_then(|req| {
        write(&ctx, &project, &zone, &params, &headers, |state, w| {
            if paths.is_empty() {
                return Err(GceError::required("paths"));
            }
            if let Some(bad) = paths.iter().find(|p| !matches!(p.as_str(), "provisionedIops" | "provisionedThroughput"))
            {
                return Err(GceError::invalid_field("paths", bad, "This field cannot be updated."));
            }
            let disk = disk_mut(state, &project, &zone, &name)?;
            if !disk.is_hyperdisk() {
                return Err(GceError::invalid(format!(
                    "Invalid resource usage: 'Disk type {} does not support updating provisioned performance.'.",
                    disk.type_name()
                )));
            }
            for path in &paths {
                let (value, slot) = match path.as_str() {
                    "provisionedIops" => (req.provisioned_iops, &mut disk.provisioned_iops),
                    _ => (req.provisioned_throughput, &mut disk.provisioned_throughput),
                };
                let value = value.filter(|v| *v > 0).ok_or_else(|| {
                    GceError::invalid_field(&format!("resource.{path}"), "", "Must be a positive number.")
                })?;
                *slot = Some(value.to_string());
            }
            let (link, id) = (disk.self_link.clone(), disk.id.clone());
            Ok(w.operation(state, OpType::Update, &link, &id))
        })
    });
    guard.finish(respond(result))
}
