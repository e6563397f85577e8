//! `galleries.get`, `galleryImages.get`, `galleryImageVersions.get`,
//! `gallerySharingProfile.update` (direct shared gallery) and the consumer's
//! `sharedGalleryImageVersions.get`.

use std::time::Instant;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::{Ctx, Req, respond};
use crate::error::ArmError;
use crate::state::{GalleryRecord, State, key, render};
use crate::wire::field;

fn gallery_not_found(name: &str, rg: &str) -> ArmError {
    ArmError::resource_not_found(&format!("Microsoft.Compute/galleries/{name}"), rg)
}

fn find<'a>(st: &'a State, sub: &str, rg: &str, gallery: &str) -> Result<&'a GalleryRecord, ArmError> {
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    st.galleries.get(&key(sub, rg, gallery)).ok_or_else(|| gallery_not_found(gallery, rg))
}

/// `GET .../galleries/G`.
pub(crate) fn get(ctx: &Ctx, sub: &str, rg: &str, gallery: &str) -> Result<Response, ArmError> {
    let st = ctx.store.lock_at(Instant::now());
    let record = find(&st, sub, rg, gallery)?;
    Ok(respond(StatusCode::OK, Some(render::gallery(record)), &[]))
}

/// `GET .../galleries/G/images/I`.
pub(crate) fn image(ctx: &Ctx, sub: &str, rg: &str, gallery: &str, image: &str) -> Result<Response, ArmError> {
    let st = ctx.store.lock_at(Instant::now());
    let record = find(&st, sub, rg, gallery)?;
    let def = record.images.get(&image.to_ascii_lowercase()).ok_or_else(|| {
        ArmError::resource_not_found(&format!("Microsoft.Compute/galleries/{gallery}/images/{image}"), rg)
    })?;
    Ok(respond(StatusCode::OK, Some(render::gallery_image(record, &def.name)), &[]))
}

/// `GET .../galleries/G/images/I/versions/V`.
pub(crate) fn version(
    ctx: &Ctx,
    sub: &str,
    rg: &str,
    gallery: &str,
    image: &str,
    version: &str,
) -> Result<Response, ArmError> {
    let st = ctx.store.lock_at(Instant::now());
    let record = find(&st, sub, rg, gallery)?;
    let (image, version) = record.version(image, version).ok_or_else(|| {
        ArmError::resource_not_found(
            &format!("Microsoft.Compute/galleries/{gallery}/images/{image}/versions/{version}"),
            rg,
        )
    })?;
    Ok(respond(StatusCode::OK, Some(render::gallery_version(record, image, version)), &[]))
}

/// `POST .../galleries/G/share`: `Add`/`Remove`/`Reset`/`EnableCommunity` → 202 LRO.
pub(crate) fn share(ctx: &Ctx, req: &Req, sub: &str, rg: &str, gallery: &str) -> Result<Response, ArmError> {
    let body = req.json_body()?;
    let now = Instant::now();
    let mut st = ctx.store.lock_at(now);
    find(&st, sub, rg, gallery)?;
    let operation =
        field(&body, "operationType").and_then(Value::as_str).ok_or_else(|| ArmError::required("operationType"))?;
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for group in field(&body, "groups").and_then(Value::as_array).into_iter().flatten() {
        let kind = field(group, "type").and_then(Value::as_str).unwrap_or("");
        let kind = if kind.eq_ignore_ascii_case("Subscriptions") {
            "Subscriptions"
        } else if kind.eq_ignore_ascii_case("AADTenants") {
            "AADTenants"
        } else {
            return Err(ArmError::invalid_parameter(
                format!(
                    "The value '{kind}' of parameter 'groups.type' is invalid; allowed: Subscriptions, AADTenants."
                ),
                "groups.type",
            ));
        };
        let ids: Vec<String> = field(group, "ids")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        groups.push((kind.to_owned(), ids));
    }
    let record = st.galleries.get_mut(&key(sub, rg, gallery)).ok_or_else(|| gallery_not_found(gallery, rg))?;
    let needs_groups = |record: &GalleryRecord| {
        if record.permissions.eq_ignore_ascii_case("Groups") {
            Ok(())
        } else {
            Err(ArmError::operation_not_allowed(format!(
                "Gallery '{}' sharing profile permissions is '{}'. Sharing with subscriptions or tenants requires the permission 'Groups'.",
                record.name, record.permissions
            )))
        }
    };
    match operation.to_ascii_lowercase().as_str() {
        "add" => {
            needs_groups(record)?;
            if groups.iter().all(|(_, ids)| ids.is_empty()) {
                return Err(ArmError::required("groups"));
            }
            for (kind, ids) in groups {
                let entry = match record.groups.iter_mut().find(|(k, _)| *k == kind) {
                    Some(entry) => entry,
                    None => {
                        record.groups.push((kind, Vec::new()));
                        let last = record.groups.len() - 1;
                        &mut record.groups[last]
                    }
                };
                for id in ids {
                    if !entry.1.iter().any(|known| known.eq_ignore_ascii_case(&id)) {
                        entry.1.push(id);
                    }
                }
            }
        }
        "remove" => {
            needs_groups(record)?;
            for (kind, ids) in groups {
                if let Some(entry) = record.groups.iter_mut().find(|(k, _)| *k == kind) {
                    entry.1.retain(|known| !ids.iter().any(|id| id.eq_ignore_ascii_case(known)));
                }
            }
            record.groups.retain(|(_, ids)| !ids.is_empty());
        }
        "reset" => {
            record.groups.clear();
            record.community = false;
        }
        "enablecommunity" => {
            if !record.permissions.eq_ignore_ascii_case("Community") {
                return Err(ArmError::operation_not_allowed(format!(
                    "Gallery '{}' sharing profile permissions is '{}'. EnableCommunity requires the permission 'Community'.",
                    record.name, record.permissions
                )));
            }
            record.community = true;
        }
        other => {
            return Err(ArmError::invalid_parameter(
                format!(
                    "The value '{other}' of parameter 'operationType' is invalid; allowed: Add, Remove, Reset, EnableCommunity."
                ),
                "operationType",
            ));
        }
    }
    let location = record.location.clone();
    let groups: Vec<Value> = record.groups.iter().map(|(kind, ids)| json!({"type": kind, "ids": ids})).collect();
    let output = json!({"operationType": operation, "groups": groups});
    let op = st.new_operation(sub, now, now, None, Some(output));
    drop(st);
    Ok(respond(StatusCode::ACCEPTED, None, &req.op_headers(sub, "Microsoft.Compute", &location, &op, true)))
}

/// `GET /subscriptions/S/providers/Microsoft.Compute/locations/L/sharedGalleries/U/images/I/versions/V`:
/// 200 only when gallery `U` is shared with subscription `S` (or `S` owns it).
pub(crate) fn shared_version(
    ctx: &Ctx,
    sub: &str,
    location: &str,
    gallery: &str,
    image: &str,
    version: &str,
) -> Result<Response, ArmError> {
    let st = ctx.store.lock_at(Instant::now());
    let not_found = || direct_version_not_found("sharedGalleries", location, gallery, image, version);
    let record = st
        .galleries
        .values()
        .find(|g| g.unique_name.eq_ignore_ascii_case(gallery))
        .filter(|g| g.location.replace(' ', "").eq_ignore_ascii_case(&location.replace(' ', "")))
        .filter(|g| g.shared_with(sub) || g.sub.eq_ignore_ascii_case(sub))
        .ok_or_else(not_found)?;
    let (image, version) = record.version(image, version).ok_or_else(not_found)?;
    Ok(respond(StatusCode::OK, Some(render::shared_version(record, image, version)), &[]))
}

/// `GET /subscriptions/S/providers/Microsoft.Compute/locations/L/communityGalleries/G/images/I/versions/V`:
/// any subscription may read a community gallery, but only in a region the version is
/// replicated to (the community gallery reads are regional); elsewhere 404 `ResourceNotFound`.
pub(crate) fn community_version(
    ctx: &Ctx,
    location: &str,
    gallery: &str,
    image: &str,
    version: &str,
) -> Result<Response, ArmError> {
    let st = ctx.store.lock_at(Instant::now());
    let not_found = || direct_version_not_found("communityGalleries", location, gallery, image, version);
    let record = st
        .galleries
        .values()
        .find(|g| g.community && render::community_name(g).eq_ignore_ascii_case(gallery))
        .ok_or_else(not_found)?;
    let (image, version) = record.version_in(image, Some(version), location).ok_or_else(not_found)?;
    Ok(respond(StatusCode::OK, Some(render::community_version(record, image, version, location)), &[]))
}

/// ARM's 404 `ResourceNotFound` for the read of a version of a directly shared gallery
/// image (`kind` is `sharedGalleries` or `communityGalleries`) in `location`.
fn direct_version_not_found(kind: &str, location: &str, gallery: &str, image: &str, version: &str) -> ArmError {
    ArmError::resource_not_found(
        &format!("Microsoft.Compute/locations/{location}/{kind}/{gallery}/images/{image}/versions/{version}"),
        "<null>",
    )
}
