//! `disks.createOrUpdate`, `.update`, `.get`, `.listByResourceGroup`, `.delete`.

use std::time::{Duration, Instant, SystemTime};

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::{Ctx, Req, body_location, list_in_group, operations, respond};
use crate::error::ArmError;

use crate::state::{DiskPhase, DiskRecord, PERFORMANCE_CHANGES_PER_DAY, State, key, render};
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
    let location = body_location(&body)?;
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
                performance: requested_performance(&body, path_str(&body, &["sku", "name"]).unwrap_or("")),
                performance_changes: Vec::new(),
            },
        );
    }
    let op = st.new_operation(sub, now, until, None, None);
    let rendered = st.disks.get(&disk_key).map(render::disk).ok_or_else(|| not_found(name, rg))?;
    let headers = operations::compute_headers(&st, req, sub, &location, &op, now, true);
    drop(st);
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
    list_in_group(&st, req, (sub, rg), &st.disks, |_| true, render::disk)
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
    let headers = operations::compute_headers(&st, req, sub, &location, &op, now, true);
    Ok(respond(StatusCode::ACCEPTED, None, &headers))
}

/// Disk types whose IOPS and throughput are provisioned apart from their size.
const PROVISIONED: &[&str] = &["UltraSSD_LRS", "PremiumV2_LRS"];
/// The size beyond which a Standard HDD, Standard SSD or Premium SSD grows
/// while attached (GiB): one of 4 TiB or less grows past 4 TiB only detached.
const LIVE_RESIZE_BOUNDARY_GB: u64 = 4096;
/// How far back performance changes are counted.
const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// Whether `sku` is an Ultra Disk or a Premium SSD v2.
fn provisioned(sku: &str) -> bool {
    PROVISIONED.iter().any(|p| p.eq_ignore_ascii_case(sku))
}

/// The `diskIOPSReadWrite`/`diskMBpsReadWrite` of a create body, for the types that take them.
fn requested_performance(body: &Value, sku: &str) -> Option<(u64, u64)> {
    if !provisioned(sku) {
        return None;
    }
    let iops = path(body, &["properties", "diskIOPSReadWrite"]).and_then(Value::as_u64);
    let mbps = path(body, &["properties", "diskMBpsReadWrite"]).and_then(Value::as_u64);
    if iops.is_none() && mbps.is_none() {
        return None;
    }
    let size = path(body, &["properties", "diskSizeGB"]).and_then(Value::as_u64).unwrap_or(0);
    let (default_iops, default_mbps) = render::default_performance(sku, size);
    Some((iops.unwrap_or(default_iops), mbps.unwrap_or(default_mbps)))
}

/// The bounds of a provisioned disk's performance at `size` GiB:
/// learn.microsoft.com/azure/virtual-machines/disks-types: Premium SSD v2
/// 3,000 to 80,000 IOPS (500 per GiB above 6 GiB), 125 to 1,200 MB/s (0.25
/// MB/s per provisioned IOPS above 125); Ultra Disk 100 to 400,000 IOPS (300
/// per GiB), 1 to 10,000 MB/s (0.25 MB/s per provisioned IOPS).
fn performance_bounds(sku: &str, size: u64, iops: u64) -> ((u64, u64), (u64, u64)) {
    if sku.eq_ignore_ascii_case("PremiumV2_LRS") {
        ((3_000, size.saturating_mul(500).clamp(3_000, 80_000)), (125, (iops / 4).clamp(125, 1_200)))
    } else {
        ((100, size.saturating_mul(300).clamp(100, 400_000)), (1, (iops / 4).clamp(1, 10_000)))
    }
}

/// The VM a disk is attached to, when it runs (is not deallocated).
fn attached_to_running_vm(st: &State, disk: &DiskRecord) -> bool {
    let Some(vm) = &disk.managed_by else { return false };
    st.vms.values().any(|v| v.id.eq_ignore_ascii_case(vm) && !v.deallocated)
}

/// `PATCH .../disks/NAME` (Disks - Update, learn.microsoft.com/rest/api/compute/disks/update):
/// a resize (`properties.diskSizeGB`) and, on an Ultra Disk or a Premium SSD
/// v2, a performance change (`diskIOPSReadWrite`, `diskMBpsReadWrite`); 202
/// with `Location` + `Azure-AsyncOperation`, `Updating` for half of
/// `boot_ms`. Refused, nothing changed:
/// - 400 `BadRequest` for a smaller size (a managed disk only grows), and for
///   performance on any other type;
/// - 400 `InvalidParameter` (its target named) for a size or performance out
///   of the type's bounds;
/// - 409 `OperationNotAllowed` for a growth Azure does only with the VM
///   deallocated (learn.microsoft.com/azure/virtual-machines/linux/expand-disks,
///   "Expand without downtime": data disks only, not shared ones, and a
///   Standard HDD/SSD or Premium SSD of 4 TiB or less not past 4 TiB), for a
///   fifth performance change within 24 hours, and while the disk is being
///   deleted;
/// - 409 `AnotherOperationInProgress` while another create or update of it runs.
pub(crate) fn patch(ctx: &Ctx, req: &Req, sub: &str, rg: &str, name: &str) -> Result<Response, ArmError> {
    let body = req.json_body()?;
    let now = Instant::now();
    let settle = ctx.admin.timing().boot() / 2;
    let mut st = ctx.store.lock_at(now);
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let disk_key = key(sub, rg, name);
    let disk = st.disks.get(&disk_key).ok_or_else(|| not_found(name, rg))?;
    match disk.phase {
        DiskPhase::Deleting(_) => {
            return Err(ArmError::operation_not_allowed(format!("Disk {name} is being deleted.")));
        }
        DiskPhase::Updating(_) => {
            return Err(ArmError::new(
                StatusCode::CONFLICT,
                "AnotherOperationInProgress",
                format!("Another operation on disk {name} is in progress; retry when it has completed."),
            ));
        }
        DiskPhase::Succeeded => {}
    }
    let size = path(&body, &["properties", "diskSizeGB"]).and_then(Value::as_u64);
    let iops = path(&body, &["properties", "diskIOPSReadWrite"]).and_then(Value::as_u64);
    let mbps = path(&body, &["properties", "diskMBpsReadWrite"]).and_then(Value::as_u64);
    let sku = disk.sku.clone();
    let new_size = size.unwrap_or(disk.size_gb);
    if let Some(size) = size.filter(|s| *s != disk.size_gb) {
        if size < disk.size_gb {
            return Err(ArmError::new(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                format!(
                    "Disk size reduction is not supported: disk {name} is {} GB, {size} GB was requested.",
                    disk.size_gb
                ),
            ));
        }
        let max = if provisioned(&sku) { 65_536 } else { 32_767 };
        if size > max {
            return Err(ArmError::invalid_parameter(
                format!("The value {size} of diskSizeGB is out of range for {sku} (at most {max})."),
                "diskSizeGB",
            ));
        }
        let live = disk.os_type.is_none()
            && path(&body, &["properties", "maxShares"]).and_then(Value::as_u64).unwrap_or(1) <= 1
            && (provisioned(&sku) || disk.size_gb > LIVE_RESIZE_BOUNDARY_GB || size <= LIVE_RESIZE_BOUNDARY_GB);
        if !live && attached_to_running_vm(&st, disk) {
            return Err(ArmError::operation_not_allowed(format!(
                "Disk {name} cannot be resized from {} GB to {size} GB while its VM is running: \
                 deallocate the VM or detach the disk first.",
                disk.size_gb
            )));
        }
    }
    let current = render::performance(disk);
    let wanted = (iops.unwrap_or(current.0), mbps.unwrap_or(current.1));
    let performance_change = (iops.is_some() || mbps.is_some()) && wanted != current;
    if (iops.is_some() || mbps.is_some()) && !provisioned(&sku) {
        return Err(ArmError::new(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!(
                "diskIOPSReadWrite and diskMBpsReadWrite can be set only on UltraSSD_LRS and PremiumV2_LRS disks; disk {name} is {sku}."
            ),
        ));
    }
    if performance_change {
        let ((iops_min, iops_max), (mbps_min, mbps_max)) = performance_bounds(&sku, new_size, wanted.0);
        if !(iops_min..=iops_max).contains(&wanted.0) {
            return Err(ArmError::invalid_parameter(
                format!(
                    "The value {} of diskIOPSReadWrite is out of range for a {sku} disk of {new_size} GB ({iops_min} to {iops_max}).",
                    wanted.0
                ),
                "diskIOPSReadWrite",
            ));
        }
        if !(mbps_min..=mbps_max).contains(&wanted.1) {
            return Err(ArmError::invalid_parameter(
                format!(
                    "The value {} of diskMBpsReadWrite is out of range for a {sku} disk of {} IOPS ({mbps_min} to {mbps_max}).",
                    wanted.1, wanted.0
                ),
                "diskMBpsReadWrite",
            ));
        }
        let recent = disk.performance_changes.iter().filter(|at| now.duration_since(**at) < DAY).count();
        if recent >= PERFORMANCE_CHANGES_PER_DAY {
            return Err(ArmError::operation_not_allowed(format!(
                "The performance of disk {name} can be changed at most {PERFORMANCE_CHANGES_PER_DAY} times within 24 hours."
            )));
        }
    }
    let until = now + settle;
    let Some(disk) = st.disks.get_mut(&disk_key) else { return Err(not_found(name, rg)) };
    disk.size_gb = new_size;
    if performance_change {
        disk.performance = Some(wanted);
        disk.performance_changes.retain(|at| now.duration_since(*at) < DAY);
        disk.performance_changes.push(now);
    }
    if let Some(tags) = field(&body, "tags") {
        disk.tags = Some(tags.clone());
    }
    disk.phase = DiskPhase::Updating(until);
    let location = disk.location.clone();
    let vm = disk.managed_by.clone();
    if let Some(vm) = vm {
        show_size_on_vm(&mut st, &vm, &disk_key, new_size);
    }
    let op = st.new_operation(sub, now, until, None, None);
    let rendered = st.disks.get(&disk_key).map(render::disk).ok_or_else(|| not_found(name, rg))?;
    let headers = operations::compute_headers(&st, req, sub, &location, &op, now, true);
    drop(st);
    Ok(respond(StatusCode::ACCEPTED, Some(rendered), &headers))
}

/// The VM `vm_id`'s record shows its disk `disk_key` at `size_gb` (as ARM's
/// VM GET shows a managed disk's size in `storageProfile`).
fn show_size_on_vm(st: &mut State, vm_id: &str, disk_key: &crate::state::Key, size_gb: u64) {
    let Some(vm) = st.vms.values_mut().find(|v| v.id.eq_ignore_ascii_case(vm_id)) else { return };
    let storage = vm.model.pointer_mut("/properties/storageProfile");
    let Some(storage) = storage else { return };
    if vm.os_disk.key == *disk_key {
        if let Some(os) = storage.get_mut("osDisk").and_then(Value::as_object_mut) {
            os.insert("diskSizeGB".into(), Value::from(size_gb));
        }
        return;
    }
    let Some(lun) = vm.data_disks.iter().find(|a| a.key == *disk_key).and_then(|a| a.lun) else { return };
    let disks = storage.get_mut("dataDisks").and_then(Value::as_array_mut).into_iter().flatten();
    for d in disks.filter(|d| d.get("lun").and_then(Value::as_i64) == Some(lun)) {
        d["diskSizeGB"] = Value::from(size_gb);
    }
}
