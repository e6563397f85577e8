//! The create/update lifecycle of a VM PUT: `If-None-Match`, the OS disk and the data
//! disks it makes, the NICs it binds, and the provisioning operation (201 on create;
//! 200 on an update, which re-provisions only when the [`fingerprint`] changed).

use std::time::{Duration, Instant, SystemTime};

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::network::realize_nics;
use super::spec::{DataDiskPlan, validate};
use super::{delete_option, disk_id, hex32, not_found, vm_id};
use crate::api::{Ctx, Req, operations, respond};
use crate::error::ArmError;
use crate::state::{Attachment, DiskPhase, DiskRecord, Failure, Key, State, VmPhase, VmRecord, key, render};
use crate::wire::{field, path, path_str, timestamp};

/// The fields whose change makes a re-PUT an update (rather than a no-op).
pub(super) fn fingerprint(model: &Value) -> Value {
    let nics: Vec<Value> = path(model, &["properties", "networkProfile", "networkInterfaces"])
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|n| {
                    json!([
                        field(n, "id").and_then(Value::as_str).map(str::to_ascii_lowercase),
                        delete_option(path(n, &["properties", "deleteOption"])),
                    ])
                })
                .collect::<Vec<Value>>()
        })
        .unwrap_or_default()
        .into_iter()
        .chain(
            path(model, &["properties", "networkProfile", "networkInterfaceConfigurations"])
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| {
                    json!([
                        field(c, "name").and_then(Value::as_str).map(str::to_ascii_lowercase),
                        delete_option(path(c, &["properties", "deleteOption"])),
                    ])
                }),
        )
        .collect();
    let disks: Vec<Value> = path(model, &["properties", "storageProfile", "dataDisks"])
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|d| json!([field(d, "lun"), field(d, "diskSizeGB"), delete_option(field(d, "deleteOption"))]))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "size": path_str(model, &["properties", "hardwareProfile", "vmSize"]).map(str::to_ascii_lowercase),
        "tags": field(model, "tags"),
        "nics": nics,
        "disks": disks,
        "osDelete": delete_option(path(model, &["properties", "storageProfile", "osDisk", "deleteOption"])),
    })
}

/// Creates the disks of `plans` that do not exist yet and marks all as used by `vm`.
pub(super) fn realize_data_disks(
    st: &mut State,
    sub: &str,
    rg: &str,
    vm: &VmRecord,
    plans: &[DataDiskPlan],
    zones: Option<&Value>,
) -> Vec<Attachment> {
    let mut out = Vec::new();
    for plan in plans {
        let (disk_key, id, name) = match &plan.attach {
            Some(existing) => existing.clone(),
            None => {
                let name = plan.name.clone().unwrap_or_else(|| format!("{}_disk{}_{}", vm.name, plan.lun + 1, hex32()));
                let id = disk_id(sub, rg, &name);
                st.disks.insert(
                    key(sub, rg, &name),
                    DiskRecord {
                        sub: sub.to_owned(),
                        rg: rg.to_owned(),
                        name: name.clone(),
                        id: id.clone(),
                        location: vm.location.clone(),
                        tags: None,
                        zones: zones.cloned(),
                        sku: plan.sku.clone(),
                        size_gb: plan.size_gb,
                        creation_data: json!({"createOption": plan.create_option}),
                        os_type: None,
                        managed_by: None,
                        phase: DiskPhase::Succeeded,
                        time_created: timestamp(SystemTime::now()),
                        unique_id: uuid::Uuid::new_v4().to_string(),
                        performance: None,
                        performance_changes: Vec::new(),
                    },
                );
                (key(sub, rg, &name), id, name)
            }
        };
        if let Some(disk) = st.disks.get_mut(&disk_key) {
            disk.managed_by = Some(vm.id.clone());
        }
        out.push(Attachment {
            key: disk_key,
            id,
            name,
            delete_option: plan.delete_option.clone(),
            lun: Some(plan.lun),
        });
    }
    out
}

/// `PUT .../virtualMachines/NAME`: create (201, `Creating`) or update (200).
pub(crate) fn put(ctx: &Ctx, req: &Req, sub: &str, rg: &str, name: &str) -> Result<Response, ArmError> {
    let body = req.json_body()?;
    let now = Instant::now();
    let boot = ctx.admin.timing().boot();
    let invisible = ctx.admin.consistency().invisible();
    let mut st = ctx.store.lock_at(now);
    let rg_name = st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?.name.clone();
    let vm_key = key(sub, rg, name);
    match req.if_none_match.as_deref() {
        None => {}
        // Create only: a VM of the name (in any state, visible to reads or not yet) refuses the PUT.
        Some("*") if st.vms.contains_key(&vm_key) => {
            return Err(ArmError::precondition_failed(&vm_id(sub, &rg_name, name)));
        }
        Some("*") => {}
        Some(_) => {
            return Err(ArmError::invalid_parameter(
                "The If-None-Match header supports the value '*' only.",
                "If-None-Match",
            ));
        }
    }
    if st.vms.contains_key(&vm_key) {
        return update(&mut st, req, sub, &rg_name, &vm_key, body, now, boot);
    }
    let spec = validate(&st, req, sub, &rg_name, name, body, None, now)?;
    realize_nics(&mut st, sub, &rg_name, &spec.nic_plans);
    let id = vm_id(sub, &rg_name, name);
    let zones = field(&spec.model, "zones").cloned();
    // The OS disk.
    let os = path(&spec.model, &["properties", "storageProfile", "osDisk"]).cloned().unwrap_or(json!({}));
    let os_name = field(&os, "name")
        .and_then(Value::as_str)
        .map_or_else(|| format!("{name}_OsDisk_1_{}", hex32()), str::to_owned);
    let (image_field, image_ref) = spec.image.clone().unwrap_or_else(|| ("imageReference".into(), json!({})));
    let mut creation = Map::new();
    creation.insert("createOption".into(), json!("FromImage"));
    creation.insert(image_field, image_ref);
    let os_key = key(sub, &rg_name, &os_name);
    let os_id = disk_id(sub, &rg_name, &os_name);
    st.disks.insert(
        os_key.clone(),
        DiskRecord {
            sub: sub.to_owned(),
            rg: rg_name.clone(),
            name: os_name.clone(),
            id: os_id.clone(),
            location: spec.location.clone(),
            tags: None,
            zones: zones.clone(),
            sku: path_str(&os, &["managedDisk", "storageAccountType"]).unwrap_or("Premium_LRS").to_owned(),
            size_gb: field(&os, "diskSizeGB").and_then(Value::as_u64).unwrap_or(30),
            creation_data: Value::Object(creation),
            os_type: Some("Linux".into()),
            managed_by: Some(id.clone()),
            phase: DiskPhase::Succeeded,
            time_created: timestamp(SystemTime::now()),
            unique_id: uuid::Uuid::new_v4().to_string(),
            performance: None,
            performance_changes: Vec::new(),
        },
    );
    for nic in &spec.nics {
        if let Some(record) = st.nics.get_mut(&nic.key) {
            record.vm = Some(id.clone());
            record.reserved = None;
            record.generation += 1;
        }
    }
    let failure = match spec.failure.clone() {
        Some(failure) => Some(failure),
        None => st.vm_failures.pop_front().map(|code| Failure::for_code(&code)),
    };
    let until = now + boot;
    let op = st.new_operation(sub, now, until, failure.clone(), None);
    let mut record = VmRecord {
        sub: sub.to_owned(),
        rg: rg_name.clone(),
        name: name.to_owned(),
        id: id.clone(),
        location: spec.location.clone(),
        model: spec.model,
        custom_data: spec.custom_data,
        vm_id: uuid::Uuid::new_v4().to_string(),
        time_created: timestamp(SystemTime::now()),
        phase: VmPhase::Provisioning { until, failure, updating: false, op: op.clone() },
        deallocated: false,
        visible_at: now + invisible,
        nics: spec.nics,
        os_disk: Attachment {
            key: os_key,
            id: os_id,
            name: os_name,
            delete_option: delete_option(field(&os, "deleteOption")),
            lun: None,
        },
        data_disks: Vec::new(),
    };
    record.data_disks = realize_data_disks(&mut st, sub, &rg_name, &record, &spec.data_disks, zones.as_ref());
    let body = render::vm(&record, false);
    let location = record.location.clone();
    st.vms.insert(vm_key, record);
    let headers = operations::compute_headers(&st, req, sub, &location, &op, now, false);
    drop(st);
    Ok(respond(StatusCode::CREATED, Some(body), &headers))
}

/// A PUT of an existing VM: the same operation again when nothing that counts changed,
/// else a re-provisioning with the new model, NICs and data disks.
#[allow(clippy::too_many_arguments)]
fn update(
    st: &mut State,
    req: &Req,
    sub: &str,
    rg: &str,
    vm_key: &Key,
    body: Value,
    now: Instant,
    boot: Duration,
) -> Result<Response, ArmError> {
    let Some(existing) = st.vms.get(vm_key).cloned() else {
        return Err(not_found(&vm_key.2, rg));
    };
    if matches!(existing.phase, VmPhase::Deleting { .. }) {
        return Err(ArmError::operation_not_allowed(format!(
            "Operation 'PUT' is not allowed on VM '{}' since the VM is marked for deletion. You can only retry the Delete operation (or wait for an ongoing one to complete).",
            existing.name
        )));
    }
    let spec = validate(st, req, sub, rg, &existing.name, body, Some(&existing), now)?;
    let unchanged = fingerprint(&spec.model) == fingerprint(&existing.model);
    let op = match &existing.phase {
        VmPhase::Provisioning { op, .. } if unchanged => op.clone(),
        VmPhase::Succeeded if unchanged => st.new_operation(sub, now, now, None, None),
        // An unchanged re-PUT of a Failed VM reports the failure again (so that a client
        // that polls by re-PUTting, like the Rust SDK's `IntoFuture`, sees the failure).
        VmPhase::Failed(failure) if unchanged => st.new_operation(sub, now, now, Some(failure.clone()), None),
        _ => {
            // A real update (changed model, or a changed retry of a Failed VM): re-provision.
            let mut record = existing.clone();
            realize_nics(st, sub, rg, &spec.nic_plans);
            for old in &existing.nics {
                if !spec.nics.iter().any(|n| n.key == old.key)
                    && let Some(nic) = st.nics.get_mut(&old.key)
                {
                    nic.vm = None;
                    nic.generation += 1;
                }
            }
            for nic in &spec.nics {
                if let Some(n) = st.nics.get_mut(&nic.key) {
                    n.vm = Some(existing.id.clone());
                    n.generation += 1;
                }
            }
            for old in &existing.data_disks {
                if !spec.data_disks.iter().any(|d| Some(d.lun) == old.lun)
                    && let Some(disk) = st.disks.get_mut(&old.key)
                {
                    disk.managed_by = None;
                }
            }
            let zones = field(&spec.model, "zones").cloned();
            record.data_disks = realize_data_disks(st, sub, rg, &record, &spec.data_disks, zones.as_ref());
            record.nics = spec.nics;
            record.os_disk.delete_option =
                delete_option(path(&spec.model, &["properties", "storageProfile", "osDisk", "deleteOption"]));
            record.model = spec.model;
            let failure = st.vm_failures.pop_front().map(|code| Failure::for_code(&code));
            let until = now + boot;
            let op = st.new_operation(sub, now, until, failure.clone(), None);
            record.phase = VmPhase::Provisioning { until, failure, updating: true, op: op.clone() };
            st.vms.insert(vm_key.clone(), record);
            op
        }
    };
    let record = st.vms.get(vm_key).ok_or_else(|| not_found(&vm_key.2, rg))?;
    let headers = operations::compute_headers(st, req, sub, &record.location, &op, now, false);
    Ok(respond(StatusCode::OK, Some(render::vm(record, false)), &headers))
}
