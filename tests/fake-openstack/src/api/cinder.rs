//! Cinder v3 volumes: create (creating → available), get, list with filters and paging,
//! delete (refused while in use; deleting → gone).

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime};

use axum::Json;
use axum::http::{Method, StatusCode};
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::paging::{PageError, next_query, page};
use super::{Call, Ctx};
use crate::error::{ApiError, ApiResult, Service};
use crate::state::volumes::{Volume, VolumePhase};
use crate::{AVAILABILITY_ZONES, VOLUME_TYPES, clock};

const CINDER: Service = Service::Cinder;

/// The operation of a volume path.
pub(crate) fn operation(method: &Method, path: &[&str]) -> Option<&'static str> {
    match (method.as_str(), path) {
        ("GET", ["volumes"] | ["volumes", "detail"]) => Some("volumes.list"),
        ("POST", ["volumes"]) => Some("volumes.create"),
        ("GET", ["volumes", _]) => Some("volumes.get"),
        ("DELETE", ["volumes", _]) => Some("volumes.delete"),
        _ => None,
    }
}

/// Dispatches a volume operation.
pub(crate) fn handle(ctx: &Ctx, call: &Call, operation: &str) -> ApiResult {
    match operation {
        "volumes.create" => create(ctx, call),
        "volumes.list" => list(ctx, call),
        "volumes.get" => {
            let state = ctx.store.lock_at(Instant::now());
            let id = call.seg(1);
            let volume =
                state.volumes.get(id).filter(|v| v.project_id == call.project_id).ok_or_else(|| not_found(id))?;
            Ok(Json(json!({"volume": volume_json(call, volume)})).into_response())
        }
        _ => delete(ctx, call),
    }
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(CINDER, message)
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(CINDER, format!("Volume {id} could not be found."))
}

fn links(call: &Call, id: &str) -> Value {
    json!([
        {"rel": "self", "href": format!("{}/volume/v3/{}/volumes/{id}", call.base, call.project_id)},
        {"rel": "bookmark", "href": format!("{}/volume/{}/volumes/{id}", call.base, call.project_id)},
    ])
}

fn volume_json(call: &Call, volume: &Volume) -> Value {
    let attachments: Vec<Value> = volume
        .attachment
        .iter()
        .map(|a| {
            json!({
                "server_id": a.server_id,
                "attachment_id": a.attachment_id,
                "device": a.device,
                "volume_id": volume.id,
                "id": volume.id,
                "host_name": null,
                "attached_at": clock::cinder(volume.updated),
            })
        })
        .collect();
    let mut body = json!({
        "id": volume.id,
        "name": volume.name,
        "description": volume.description,
        "status": volume.status(),
        "size": volume.size,
        "volume_type": volume.volume_type,
        "availability_zone": volume.availability_zone,
        "bootable": volume.bootable(),
        "encrypted": false,
        "multiattach": false,
        "metadata": volume.metadata,
        "attachments": attachments,
        "links": links(call, &volume.id),
        "snapshot_id": null,
        "source_volid": null,
        "consistencygroup_id": null,
        "replication_status": null,
        "user_id": call.user_id,
        "created_at": clock::cinder(volume.created),
        "updated_at": clock::cinder(volume.updated),
        "os-vol-tenant-attr:tenant_id": volume.project_id,
    });
    if let Some(image) = &volume.image_id {
        body["volume_image_metadata"] = json!({"image_id": image});
    }
    body
}

fn create(ctx: &Ctx, call: &Call) -> ApiResult {
    let body = call.json(CINDER)?;
    let volume = body
        .get("volume")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("Missing required element 'volume' in request body."))?;
    let size = match volume.get("size") {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    }
    .filter(|s| *s > 0)
    .ok_or_else(|| bad("Invalid input for field/attribute size. Value: must be an integer greater than 0."))?;
    let text = |key: &str| volume.get(key).and_then(Value::as_str);
    let volume_type =
        match text("volume_type") {
            None => VOLUME_TYPES[0],
            Some(kind) => VOLUME_TYPES.iter().copied().find(|t| *t == kind).ok_or_else(|| {
                ApiError::not_found(CINDER, format!("Volume type with name {kind} could not be found."))
            })?,
        };
    let zone = match text("availability_zone") {
        None => AVAILABILITY_ZONES[0],
        Some(zone) => AVAILABILITY_ZONES
            .iter()
            .copied()
            .find(|z| *z == zone)
            .ok_or_else(|| bad("Availability zone is invalid."))?,
    };
    let metadata: BTreeMap<String, String> = match volume.get("metadata") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| {
                v.as_str()
                    .map(|s| (k.clone(), s.to_owned()))
                    .ok_or_else(|| bad("Invalid metadata: values must be strings."))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => bad_metadata()?,
    };
    let image_ref = text("imageRef").or_else(|| text("image_id"));
    let now = Instant::now();
    let boot = ctx.admin.timing().boot();
    let mut state = ctx.store.lock_at(now);
    if let Some(image) = image_ref
        && !state.images.get(image).is_some_and(|i| i.visible_to(&call.project_id))
    {
        return Err(bad(format!(
            "Invalid image identifier or unable to access requested image. Image {image} could not be found."
        )));
    }
    let created = SystemTime::now();
    let seq = state.seq();
    let volume = Volume {
        seq,
        id: uuid::Uuid::new_v4().to_string(),
        project_id: call.project_id.clone(),
        name: text("name").unwrap_or("").to_owned(),
        description: text("description").map(str::to_owned),
        size,
        volume_type: volume_type.to_owned(),
        availability_zone: zone.to_owned(),
        image_id: image_ref.map(str::to_owned),
        metadata,
        phase: VolumePhase::Creating(now + boot),
        attachment: None,
        delete_on_termination: false,
        created,
        updated: created,
    };
    let answer = volume_json(call, &volume);
    state.volumes.insert(volume.id.clone(), volume);
    Ok((StatusCode::ACCEPTED, Json(json!({"volume": answer}))).into_response())
}

fn bad_metadata() -> Result<BTreeMap<String, String>, ApiError> {
    Err(bad("Invalid metadata: must be an object."))
}

/// The `metadata` filter: `{"k": "v"}` (JSON, or Python's repr with single quotes).
fn metadata_filter(text: &str) -> Result<BTreeMap<String, String>, ApiError> {
    let parsed: Value = serde_json::from_str(text)
        .or_else(|_| serde_json::from_str(&text.replace('\'', "\"")))
        .map_err(|_| bad(format!("Invalid metadata filter: {text}")))?;
    let map = parsed.as_object().ok_or_else(|| bad(format!("Invalid metadata filter: {text}")))?;
    Ok(map.iter().map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_owned))).collect())
}

fn list(ctx: &Ctx, call: &Call) -> ApiResult {
    let detail = call.seg(1) == "detail";
    let metadata = call.param("metadata").map(metadata_filter).transpose()?;
    let state = ctx.store.lock_at(Instant::now());
    let mut volumes: Vec<&Volume> = state
        .volumes
        .values()
        .filter(|v| v.project_id == call.project_id)
        .filter(|v| call.param("name").is_none_or(|n| n == v.name))
        .filter(|v| call.param("status").is_none_or(|s| s == v.status()))
        .filter(|v| metadata.as_ref().is_none_or(|m| m.iter().all(|(k, val)| v.metadata.get(k) == Some(val))))
        .collect();
    volumes.sort_by(|a, b| b.created.cmp(&a.created).then(b.seq.cmp(&a.seq)));
    let page = page(volumes, call, state.page_size, |v| v.id.as_str()).map_err(|error| match error {
        PageError::BadLimit(limit) => bad(format!("Invalid input received: limit {limit} must be an integer.")),
        PageError::UnknownMarker(marker) => ApiError::not_found(CINDER, format!("Marker {marker} could not be found.")),
    })?;
    let items: Vec<Value> = page
        .items
        .iter()
        .map(|v| {
            if detail { volume_json(call, v) } else { json!({"id": v.id, "name": v.name, "links": links(call, &v.id)}) }
        })
        .collect();
    let mut body = json!({"volumes": items});
    if let Some(marker) = page.next_marker {
        let path = if detail { "volumes/detail" } else { "volumes" };
        let href =
            format!("{}/volume/v3/{}/{path}?{}", call.base, call.project_id, next_query(call, page.limit, &marker));
        body["volumes_links"] = json!([{"rel": "next", "href": href}]);
    }
    Ok(Json(body).into_response())
}

fn delete(ctx: &Ctx, call: &Call) -> ApiResult {
    let id = call.seg(1);
    let now = Instant::now();
    let stop = ctx.admin.timing().stop();
    let mut state = ctx.store.lock_at(now);
    let volume = state.volumes.get_mut(id).filter(|v| v.project_id == call.project_id).ok_or_else(|| not_found(id))?;
    if volume.attachment.is_some() || matches!(volume.phase, VolumePhase::Creating(_)) {
        return Err(bad(
            "Invalid volume: Volume status must be available or error or error_restoring or error_extending or \
             error_managing and must not be migrating, attached, belong to a group, have snapshots or be \
             disassociated from snapshots after volume transfer.",
        ));
    }
    if !matches!(volume.phase, VolumePhase::Deleting(_)) {
        volume.phase = VolumePhase::Deleting(now + stop);
        volume.updated = SystemTime::now();
    }
    Ok(StatusCode::ACCEPTED.into_response())
}
