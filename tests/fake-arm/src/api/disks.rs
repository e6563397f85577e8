//! `disks.createOrUpdate`, `.get`, `.listByResourceGroup`, `.delete`.

use std::time::{Instant, SystemTime};

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::{Ctx, Req, operations, respond};
use crate::error::ArmError;
use crate::paging;
use crate::state::{DiskPhase, DiskRecord, key, render};
use crate::wire::{field, path, path_str, timestamp};

/// `createOption` values the Disk RP accepts.
const CREATE_OPTIONS: &[&str] = &["Empty", "FromImage", "Copy", "Import", "Attach", "Restore", "Upload"];

fn not_found(name: &str, rg: &str) -> ArmError {
    ArmError::resource_not_found(&format!("Microsoft.Compute/disks/{name}"), rg)
}

/// `PUT .../disks/NAME`: 202 with `Location` + `Azure-AsyncOperation`; `Updating` for half of `boot_ms`.
pub(crate) fn put(ctx: &Ctx, req: &Req, sub: &str, rg: &str, name: &str) -> Result<Response, ArmError> {
    let body = req.json_body()?;
    let now = Instant::now();
    let settle = ctx.admin.timing().boot() / 2;
    let mut st = ctx.store.lock_at(now);
    let rg_name = st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?.name.clone();
    let location = field(&body, "location")
        .and_then(Value::as_str)
        .filter(|l| !l.is_empty())
        .ok_or_else(|| {
            ArmError::new(
                StatusCode::BAD_REQUEST,
                "LocationRequired",
                "The location property is required for this definition.",
            )
        })?
        .to_owned();
    let size = path(&body, &["properties", "diskSizeGB"]).and_then(Value::as_u64);
    let disk_key = key(sub, rg, name);
    let until = now + settle;
    if let Some(existing) = st.disks.get_mut(&disk_key) {
        if matches!(existing.phase, DiskPhase::Deleting(_)) {
            return Err(ArmError::operation_not_allowed(format!("Disk {name} is being deleted.")));
        }
        if let Some(size) = size {
            if size < existing.size_gb {
                return Err(ArmError::new(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    format!(
                        "Disk resizing is allowed only when creating a VM or when the VM is deallocated, and the disk size cannot be decreased (from {} GB to {size} GB).",
                        existing.size_gb
                    ),
                ));
            }
            existing.size_gb = size;
        }
        if let Some(tags) = field(&body, "tags") {
            existing.tags = Some(tags.clone());
        }
        if let Some(sku) = path_str(&body, &["sku", "name"]) {
            existing.sku = sku.to_owned();
        }
        existing.phase = DiskPhase::Updating(until);
    } else {
        let creation =
            path(&body, &["properties", "creationData"]).cloned().ok_or_else(|| ArmError::required("creationData"))?;
        let option = field(&creation, "createOption").and_then(Value::as_str).unwrap_or("");
        if !CREATE_OPTIONS.iter().any(|o| o.eq_ignore_ascii_case(option)) {
            return Err(ArmError::invalid_parameter(
                format!("The value '{option}' of parameter 'creationData.createOption' is invalid."),
                "creationData.createOption",
            ));
        }
        let size_gb = match size {
            Some(s) if s > 0 && s <= 32_767 => s,
            None if !option.eq_ignore_ascii_case("Empty") => 30,
            _ => {
                return Err(ArmError::invalid_parameter(
                    "Required parameter 'diskSizeGB' is missing (null) or invalid for a disk created Empty.",
                    "diskSizeGB",
                ));
            }
        };
        st.disks.insert(
            disk_key.clone(),
            DiskRecord {
                sub: sub.to_owned(),
                rg: rg_name.clone(),
                name: name.to_owned(),
                id: format!("/subscriptions/{sub}/resourceGroups/{rg_name}/providers/Microsoft.Compute/disks/{name}"),
                location: location.clone(),
                tags: field(&body, "tags").cloned(),
                zones: field(&body, "zones").cloned(),
                sku: path_str(&body, &["sku", "name"]).unwrap_or("Standard_LRS").to_owned(),
                size_gb,
                creation_data: creation,
                os_type: path_str(&body, &["properties", "osType"]).map(str::to_owned),
                managed_by: None,
                phase: DiskPhase::Updating(until),
                time_created: timestamp(SystemTime::now()),
                unique_id: uuid::Uuid::new_v4().to_string(),
            },
        );
    }
    let op = st.new_operation(sub, now, until, None, None);
    let rendered = st.disks.get(&disk_key).map(render::disk).ok_or_else(|| not_found(name, rg))?;
    let retry = operations::retry_after(&st, &op, now);
    drop(st);
    let (async_url, location_url) = req.op_urls(sub, "Microsoft.Compute", &location, &op);
    let mut headers = vec![("Azure-AsyncOperation", async_url), ("Location", location_url)];
    headers.extend(retry);
    Ok(respond(StatusCode::ACCEPTED, Some(rendered), &headers))
}

/// `GET .../disks/NAME`.
pub(crate) fn get(ctx: &Ctx, sub: &str, rg: &str, name: &str) -> Result<Response, ArmError> {
    let st = ctx.store.lock_at(Instant::now());
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let disk = st.disks.get(&key(sub, rg, name)).ok_or_else(|| not_found(name, rg))?;
    Ok(respond(StatusCode::OK, Some(render::disk(disk)), &[]))
}

/// `GET .../disks`: paged by name.
pub(crate) fn list(ctx: &Ctx, req: &Req, sub: &str, rg: &str) -> Result<Response, ArmError> {
    let st = ctx.store.lock_at(Instant::now());
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let (s, r) = (sub.to_ascii_lowercase(), rg.to_ascii_lowercase());
    let items: Vec<(String, _)> = st
        .disks
        .iter()
        .filter(|((ks, kr, _), _)| *ks == s && *kr == r)
        .map(|((_, _, name), disk)| (name.clone(), disk))
        .collect();
    let body = paging::page(
        items,
        req.param("$skiptoken"),
        st.page_size,
        &format!("{}{}", req.base, req.path),
        &[],
        &req.api_version,
        render::disk,
    );
    Ok(respond(StatusCode::OK, Some(body), &[]))
}

/// `DELETE .../disks/NAME`: 409 while attached, 204 when absent, else 202.
pub(crate) fn delete(ctx: &Ctx, req: &Req, sub: &str, rg: &str, name: &str) -> Result<Response, ArmError> {
    let now = Instant::now();
    let stop = ctx.admin.timing().stop();
    let mut st = ctx.store.lock_at(now);
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let disk_key = key(sub, rg, name);
    let Some(disk) = st.disks.get_mut(&disk_key) else {
        return Ok(respond(StatusCode::NO_CONTENT, None, &[]));
    };
    if let Some(vm) = &disk.managed_by {
        return Err(ArmError::operation_not_allowed(format!("Disk {} is attached to VM {vm}.", disk.name)));
    }
    let until = match disk.phase {
        DiskPhase::Deleting(until) => until,
        _ => now + stop,
    };
    disk.phase = DiskPhase::Deleting(until);
    let location = disk.location.clone();
    let op = st.new_operation(sub, now, until, None, None);
    let (async_url, location_url) = req.op_urls(sub, "Microsoft.Compute", &location, &op);
    let mut headers = vec![("Azure-AsyncOperation", async_url), ("Location", location_url)];
    headers.extend(operations::retry_after(&st, &op, now));
    Ok(respond(StatusCode::ACCEPTED, None, &headers))
}
