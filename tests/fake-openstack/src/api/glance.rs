//! Glance v2 images: visibility rules, the image list filters and paging, JSON-patch
//! updates (owner only) and the member flow (owner adds, member accepts or rejects,
//! owner removes). Errors are webob's plain text.

use std::time::{Instant, SystemTime};

use axum::Json;
use axum::http::header::CONTENT_TYPE;
use axum::http::{Method, StatusCode};
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::paging::{PageError, page};
use super::{Call, Ctx};
use crate::clock;
use crate::error::{ApiError, ApiResult, Service};
use crate::state::images::{Image, Member};
use fake_cloud_support::wire::encode_component;

const GLANCE: Service = Service::Glance;
/// `image_member_quota`.
const MEMBER_QUOTA: usize = 128;
/// Default page size of the image list.
const DEFAULT_LIMIT: usize = 25;
/// The JSON-patch media type image updates need.
const PATCH_TYPE: &str = "application/openstack-images-v2.1-json-patch";
/// Visibilities an image may have.
const VISIBILITIES: [&str; 4] = ["public", "community", "shared", "private"];

/// The operation of an image path.
pub(crate) fn operation(method: &Method, path: &[&str]) -> Option<&'static str> {
    match (method.as_str(), path) {
        ("GET", ["images"]) => Some("images.list"),
        ("GET", ["images", _]) => Some("images.get"),
        ("PATCH", ["images", _]) => Some("images.update"),
        ("GET", ["images", _, "members"]) => Some("members.list"),
        ("POST", ["images", _, "members"]) => Some("members.create"),
        ("GET", ["images", _, "members", _]) => Some("members.get"),
        ("PUT", ["images", _, "members", _]) => Some("members.update"),
        ("DELETE", ["images", _, "members", _]) => Some("members.delete"),
        _ => None,
    }
}

/// Dispatches an image or member operation.
pub(crate) fn handle(ctx: &Ctx, call: &Call, operation: &str) -> ApiResult {
    match operation {
        "images.list" => list(ctx, call),
        "images.get" => {
            let state = ctx.store.lock_at(Instant::now());
            let image = visible(&state.images, call)?;
            Ok(Json(image_json(image)).into_response())
        }
        "images.update" => update(ctx, call),
        _ => members(ctx, call, operation),
    }
}

fn no_image(id: &str) -> ApiError {
    ApiError::not_found(GLANCE, format!("No image found with ID {id}"))
}

fn visible<'a>(images: &'a std::collections::BTreeMap<String, Image>, call: &Call) -> Result<&'a Image, ApiError> {
    let id = call.seg(1);
    images.get(id).filter(|i| i.visible_to(&call.project_id)).ok_or_else(|| no_image(id))
}

/// The image JSON Glance answers.
fn image_json(image: &Image) -> Value {
    let mut body = json!({
        "id": image.id,
        "name": image.name,
        "status": "active",
        "visibility": image.visibility,
        "owner": image.owner,
        "protected": image.protected,
        "os_hidden": image.os_hidden,
        "min_disk": image.min_disk,
        "min_ram": image.min_ram,
        "size": image.size,
        "virtual_size": null,
        "checksum": image.checksum,
        "os_hash_algo": "sha512",
        "os_hash_value": format!("{}{}{}{}", image.checksum, image.checksum, image.checksum, image.checksum),
        "container_format": "bare",
        "disk_format": "qcow2",
        "tags": image.tags,
        "created_at": clock::seconds(image.created),
        "updated_at": clock::seconds(image.updated),
        "self": format!("/v2/images/{}", image.id),
        "file": format!("/v2/images/{}/file", image.id),
        "schema": "/v2/schemas/image",
    });
    for (key, value) in &image.properties {
        body[key] = value.clone();
    }
    body
}

fn member_json(image: &Image, member: &Member) -> Value {
    json!({
        "member_id": member.project_id,
        "image_id": image.id,
        "status": member.status,
        "created_at": clock::seconds(member.created),
        "updated_at": clock::seconds(member.updated),
        "schema": "/v2/schemas/member",
    })
}

fn list(ctx: &Ctx, call: &Call) -> ApiResult {
    let project = call.project_id.as_str();
    let visibility = call.param("visibility");
    if let Some(v) = visibility
        && !VISIBILITIES.contains(&v)
        && v != "all"
    {
        return Err(ApiError::bad_request(GLANCE, format!("Invalid visibility value: {v}")));
    }
    let member_status = call.param("member_status").unwrap_or("accepted");
    if !["pending", "accepted", "rejected", "all"].contains(&member_status) {
        return Err(ApiError::bad_request(GLANCE, format!("Invalid status value: {member_status}")));
    }
    let member_ok =
        |image: &Image| image.member(project).is_some_and(|m| member_status == "all" || m.status == member_status);
    let state = ctx.store.lock_at(Instant::now());
    let max = state.page_size.min(1000);
    let mut images: Vec<&Image> = state
        .images
        .values()
        .filter(|image| match visibility {
            None => image.listed_by_default(project),
            Some("all") => {
                image.visible_to(project)
                    && (image.owner == project || image.visibility != "shared" || member_ok(image))
            }
            Some("private") => image.visibility == "private" && image.owner == project,
            Some("shared") => image.visibility == "shared" && image.owner != project && member_ok(image),
            Some(other) => image.visibility == other,
        })
        .filter(|image| call.param("name").is_none_or(|n| n == image.name))
        .filter(|image| call.param("owner").is_none_or(|o| o == image.owner))
        .filter(|image| call.param("id").is_none_or(|i| i == image.id))
        .filter(|_| call.param("status").is_none_or(|s| s == "active"))
        .filter(|image| call.params("tag").iter().all(|t| image.tags.iter().any(|have| have == t)))
        .collect();
    images.sort_by(|a, b| b.created.cmp(&a.created).then(b.id.cmp(&a.id)));
    let default_limit = DEFAULT_LIMIT.min(max);
    let limit_given = call.param("limit").is_some();
    let page =
        page(images, call, if limit_given { max } else { default_limit }, |i| i.id.as_str()).map_err(|error| {
            match error {
                PageError::BadLimit(limit) => {
                    ApiError::bad_request(GLANCE, format!("limit param must be an integer: {limit}"))
                }
                PageError::UnknownMarker(marker) => {
                    ApiError::bad_request(GLANCE, format!("Invalid marker. Image {marker} could not be found."))
                }
            }
        })?;
    let mut body = json!({
        "images": page.items.iter().map(|i| image_json(i)).collect::<Vec<_>>(),
        "first": "/v2/images",
        "schema": "/v2/schemas/images",
    });
    if let Some(marker) = page.next_marker {
        let mut query: Vec<String> = call
            .query
            .iter()
            .filter(|(k, _)| k != "limit" && k != "marker")
            .map(|(k, v)| format!("{}={}", encode_component(k), encode_component(v)))
            .collect();
        query.insert(0, format!("marker={}", encode_component(&marker)));
        query.push(format!("limit={}", page.limit));
        body["next"] = json!(format!("/v2/images?{}", query.join("&")));
    }
    Ok(Json(body).into_response())
}

fn forbidden(message: impl Into<String>) -> ApiError {
    ApiError::forbidden(GLANCE, message)
}

fn update(ctx: &Ctx, call: &Call) -> ApiResult {
    let content_type = call.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if content_type.split(';').next().map(str::trim) != Some(PATCH_TYPE) {
        return Err(ApiError::new(GLANCE, StatusCode::UNSUPPORTED_MEDIA_TYPE, "Unsupported Content-Type"));
    }
    let body = call.json(GLANCE)?;
    let ops = body
        .as_array()
        .ok_or_else(|| ApiError::bad_request(GLANCE, "Request body must be a JSON array of operation objects."))?;
    let mut state = ctx.store.lock_at(Instant::now());
    let image = visible(&state.images, call)?.clone();
    let mut updated = image.clone();
    for op in ops {
        let kind = op.get("op").and_then(Value::as_str).unwrap_or("");
        let path = op.get("path").and_then(Value::as_str).unwrap_or("");
        let field = path.trim_start_matches('/');
        if !matches!(kind, "add" | "replace" | "remove") || field.is_empty() || field.contains('/') {
            return Err(ApiError::bad_request(
                GLANCE,
                format!("Unable to change the image with operation {kind} on {path}."),
            ));
        }
        if image.owner != call.project_id {
            return Err(forbidden(format!("You are not permitted to modify '{field}' on this image.")));
        }
        if matches!(
            field,
            "id" | "owner"
                | "status"
                | "size"
                | "checksum"
                | "created_at"
                | "updated_at"
                | "self"
                | "file"
                | "schema"
                | "virtual_size"
                | "os_hash_algo"
                | "os_hash_value"
        ) {
            return Err(forbidden(format!("Attribute '{field}' is read-only.")));
        }
        let value = op.get("value").cloned().unwrap_or(Value::Null);
        let invalid = || ApiError::bad_request(GLANCE, format!("Invalid value for {field}: {value}"));
        if kind == "remove" {
            if updated.properties.remove(field).is_none() {
                return Err(ApiError::conflict(GLANCE, format!("Property {field} does not exist.")));
            }
            continue;
        }
        match field {
            "name" => updated.name = value.as_str().ok_or_else(invalid)?.to_owned(),
            "visibility" => {
                let v = value.as_str().filter(|v| VISIBILITIES.contains(v)).ok_or_else(invalid)?;
                updated.visibility = v.to_owned();
            }
            "tags" => {
                updated.tags = value
                    .as_array()
                    .ok_or_else(invalid)?
                    .iter()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect();
            }
            "min_disk" => updated.min_disk = value.as_u64().ok_or_else(invalid)?,
            "min_ram" => updated.min_ram = value.as_u64().ok_or_else(invalid)?,
            "protected" => updated.protected = value.as_bool().ok_or_else(invalid)?,
            "os_hidden" => updated.os_hidden = value.as_bool().ok_or_else(invalid)?,
            other => {
                if !value.is_string() {
                    return Err(invalid());
                }
                updated.properties.insert(other.to_owned(), value.clone());
            }
        }
    }
    updated.updated = SystemTime::now();
    let answer = image_json(&updated);
    state.images.insert(updated.id.clone(), updated);
    Ok(Json(answer).into_response())
}

fn members(ctx: &Ctx, call: &Call, operation: &str) -> ApiResult {
    let project = call.project_id.clone();
    let image_id = call.seg(1).to_owned();
    let member_id = call.seg(3).to_owned();
    let not_member = || ApiError::not_found(GLANCE, format!("{member_id} is not a member of image {image_id}"));
    let body = if matches!(operation, "members.create" | "members.update") { Some(call.json(GLANCE)?) } else { None };
    let mut state = ctx.store.lock_at(Instant::now());
    let image = visible(&state.images, call)?.clone();
    let is_owner = image.owner == project;
    let only_shared = || forbidden("Only shared images have members.");
    match operation {
        "members.list" => {
            if image.visibility != "shared" {
                return Err(only_shared());
            }
            let entries: Vec<Value> = image
                .members
                .iter()
                .filter(|m| is_owner || m.project_id == project)
                .map(|m| member_json(&image, m))
                .collect();
            Ok(Json(json!({"members": entries, "schema": "/v2/schemas/members"})).into_response())
        }
        "members.get" => {
            if !is_owner && member_id != project {
                return Err(not_member());
            }
            let member = image.member(&member_id).ok_or_else(not_member)?;
            Ok(Json(member_json(&image, member)).into_response())
        }
        "members.create" => {
            if !is_owner {
                return Err(forbidden("You are not permitted to create image members for the image."));
            }
            if image.visibility != "shared" {
                return Err(only_shared());
            }
            let member = body
                .as_ref()
                .and_then(|b| b.get("member"))
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .ok_or_else(|| ApiError::bad_request(GLANCE, "Member to be added not specified"))?
                .to_owned();
            if image.member(&member).is_some() {
                return Err(ApiError::conflict(
                    GLANCE,
                    format!("Member {member} already associated with image {image_id}."),
                ));
            }
            if image.members.len() >= MEMBER_QUOTA {
                return Err(ApiError::new(
                    GLANCE,
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "The request returned a 413 Request Entity Too Large. This generally means that rate limiting or a quota threshold was breached.\n\nThe response body:\nAttempted: {}, Maximum: {MEMBER_QUOTA}",
                        image.members.len() + 1
                    ),
                ));
            }
            let now = SystemTime::now();
            let entry = Member { project_id: member, status: "pending".to_owned(), created: now, updated: now };
            let answer = member_json(&image, &entry);
            if let Some(stored) = state.images.get_mut(&image_id) {
                stored.members.push(entry);
            }
            Ok(Json(answer).into_response())
        }
        "members.update" => {
            if image.member(&member_id).is_none() {
                return Err(not_member());
            }
            if member_id != project {
                if is_owner {
                    return Err(forbidden("You are not permitted to modify 'status' on this image member."));
                }
                return Err(not_member());
            }
            let status = body.as_ref().and_then(|b| b.get("status")).and_then(Value::as_str).unwrap_or("");
            if !["pending", "accepted", "rejected"].contains(&status) {
                return Err(ApiError::bad_request(
                    GLANCE,
                    format!("Invalid status: {status}. Status must be one of pending, accepted, rejected."),
                ));
            }
            let stored = state.images.get_mut(&image_id).ok_or_else(|| no_image(&image_id))?;
            let snapshot = stored.clone();
            let member = stored.members.iter_mut().find(|m| m.project_id == member_id).ok_or_else(not_member)?;
            member.status = status.to_owned();
            member.updated = SystemTime::now();
            Ok(Json(member_json(&snapshot, member)).into_response())
        }
        _ => {
            if !is_owner {
                return Err(forbidden("You are not permitted to delete image members for the image."));
            }
            let stored = state.images.get_mut(&image_id).ok_or_else(|| no_image(&image_id))?;
            let before = stored.members.len();
            stored.members.retain(|m| m.project_id != member_id);
            if stored.members.len() == before {
                return Err(not_member());
            }
            Ok(StatusCode::NO_CONTENT.into_response())
        }
    }
}
