//! `PATCH .../virtualMachines/NAME`: a JSON merge patch of the stored model; only tags and
//! the delete options take effect.

use std::time::Instant;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::spec::normalize;
use super::{delete_option, not_found};
use crate::api::{Ctx, Req, respond};
use crate::error::ArmError;
use crate::state::{VmPhase, key, render};
use crate::wire::{field, path};

/// Deep-merges a JSON merge patch into `target`.
pub(super) fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if k == "tags" || !v.is_object() {
                    t.insert(k.clone(), v.clone());
                } else {
                    merge(t.entry(k.clone()).or_insert_with(|| json!({})), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// `PATCH .../virtualMachines/NAME`: tags and delete options (200 + already finished async op).
pub(crate) fn patch(ctx: &Ctx, req: &Req, sub: &str, rg: &str, name: &str) -> Result<Response, ArmError> {
    let body = req.json_body()?;
    let (patch, custom_data) = normalize(body);
    let now = Instant::now();
    let mut st = ctx.store.lock_at(now);
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let vm_key = key(sub, rg, name);
    let record = st.vms.get_mut(&vm_key).ok_or_else(|| not_found(name, rg))?;
    if matches!(record.phase, VmPhase::Deleting { .. }) {
        return Err(ArmError::operation_not_allowed(format!(
            "Operation 'PATCH' is not allowed on VM '{}' since the VM is marked for deletion.",
            record.name
        )));
    }
    if let Some(new) = &custom_data
        && record.custom_data.as_deref() != Some(new.as_str())
    {
        return Err(ArmError::property_change_not_allowed("customData"));
    }
    merge(&mut record.model, &patch);
    let model = record.model.clone();
    for nic in &mut record.nics {
        if let Some(entry) = path(&model, &["properties", "networkProfile", "networkInterfaces"])
            .and_then(Value::as_array)
            .and_then(|l| {
                l.iter()
                    .find(|n| field(n, "id").and_then(Value::as_str).is_some_and(|id| id.eq_ignore_ascii_case(&nic.id)))
            })
        {
            nic.delete_option = delete_option(path(entry, &["properties", "deleteOption"]));
        }
    }
    if let Some(option) = path(&model, &["properties", "storageProfile", "osDisk", "deleteOption"]) {
        record.os_disk.delete_option = delete_option(Some(option));
    }
    for disk in &mut record.data_disks {
        if let Some(entry) = path(&model, &["properties", "storageProfile", "dataDisks"])
            .and_then(Value::as_array)
            .and_then(|l| l.iter().find(|d| field(d, "lun").and_then(Value::as_i64) == disk.lun))
            && let Some(option) = field(entry, "deleteOption")
        {
            disk.delete_option = delete_option(Some(option));
        }
    }
    let body = render::vm(record, false);
    let location = record.location.clone();
    let op = st.new_operation(sub, now, now, None, None);
    Ok(respond(StatusCode::OK, Some(body), &req.op_headers(sub, "Microsoft.Compute", &location, &op, false)))
}
