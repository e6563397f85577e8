//! `networkInterfaces.createOrUpdate`, `.get`, `.list`, `.delete`, and `subnets.get`.

use std::time::Instant;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::{Ctx, Req, body_location, list_in_group, respond};
use crate::error::ArmError;

use crate::state::{key, render};
use crate::wire::{field, path_str};

fn not_found(name: &str, rg: &str) -> ArmError {
    ArmError::resource_not_found(&format!("Microsoft.Network/networkInterfaces/{name}"), rg)
}

/// The ARM id of network interface `name`.
pub(crate) fn nic_id(sub: &str, rg: &str, name: &str) -> String {
    format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces/{name}")
}

/// `PUT .../networkInterfaces/NAME`: 201 new / 200 update, `Succeeded` at once, with an
/// `Azure-AsyncOperation` whose operation is already Succeeded.
pub(crate) fn put(ctx: &Ctx, req: &Req, sub: &str, rg: &str, name: &str) -> Result<Response, ArmError> {
    let mut body = req.json_body()?;
    let now = Instant::now();
    let mut st = ctx.store.lock_at(now);
    let rg_name = st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?.name.clone();
    let id = nic_id(sub, &rg_name, name);
    let location = body_location(&body)?;
    let configs = field(&body, "properties")
        .and_then(|p| field(p, "ipConfigurations"))
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
        .cloned()
        .ok_or_else(|| {
            ArmError::new(
                StatusCode::BAD_REQUEST,
                "NetworkInterfaceMustHaveAtLeastOneIpConfiguration",
                format!("Network interface {id} must have one or more IP configurations."),
            )
        })?;
    let mut subnet_lc = None;
    for config in &configs {
        let subnet = path_str(config, &["properties", "subnet", "id"]).unwrap_or("");
        let lc = subnet.trim_end_matches('/').to_ascii_lowercase();
        if !st.subnets.contains_key(&lc) {
            return Err(ArmError::invalid_reference(subnet, &id));
        }
        subnet_lc.get_or_insert(lc);
    }
    if let Some(map) = body.as_object_mut() {
        for k in ["id", "name", "type", "etag"] {
            map.remove(k);
        }
        if let Some(props) = map.get_mut("properties").and_then(Value::as_object_mut) {
            for k in ["provisioningState", "resourceGuid", "virtualMachine", "macAddress", "primary"] {
                props.remove(k);
            }
        }
    }
    let nic_key = key(sub, rg, name);
    let status = if let Some(existing) = st.nics.get_mut(&nic_key) {
        if existing.deleting_until.is_some() {
            return Err(ArmError::another_operation_in_progress(&id));
        }
        existing.model = body;
        existing.location = location.clone();
        existing.generation += 1;
        StatusCode::OK
    } else {
        st.create_nic(
            (sub, &rg_name, name),
            id.clone(),
            location.clone(),
            body,
            subnet_lc.as_deref().unwrap_or(""),
            now,
        );
        StatusCode::CREATED
    };
    let op = st.new_operation(sub, now, now, None, None);
    let rendered = st.nics.get(&nic_key).map(|nic| render::nic(nic, now)).ok_or_else(|| not_found(name, rg))?;
    drop(st);
    Ok(respond(status, Some(rendered), &req.op_headers(sub, "Microsoft.Network", &location, &op, false)))
}

/// `GET .../networkInterfaces/NAME`.
pub(crate) fn get(ctx: &Ctx, sub: &str, rg: &str, name: &str) -> Result<Response, ArmError> {
    let now = Instant::now();
    let st = ctx.store.lock_at(now);
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let nic = st.nics.get(&key(sub, rg, name)).ok_or_else(|| not_found(name, rg))?;
    Ok(respond(StatusCode::OK, Some(render::nic(nic, now)), &[]))
}

/// `GET .../networkInterfaces`: paged by name.
pub(crate) fn list(ctx: &Ctx, req: &Req, sub: &str, rg: &str) -> Result<Response, ArmError> {
    let now = Instant::now();
    let st = ctx.store.lock_at(now);
    list_in_group(&st, req, (sub, rg), &st.nics, |_| true, |nic| render::nic(nic, now))
}

/// `DELETE .../networkInterfaces/NAME`: 204 absent, 400 `NicInUse`/`NicReservedForAnotherVm`, else 202.
pub(crate) fn delete(ctx: &Ctx, req: &Req, sub: &str, rg: &str, name: &str) -> Result<Response, ArmError> {
    let now = Instant::now();
    let stop = ctx.admin.timing().stop();
    let mut st = ctx.store.lock_at(now);
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let nic_key = key(sub, rg, name);
    let Some(nic) = st.nics.get(&nic_key) else {
        return Ok(respond(StatusCode::NO_CONTENT, None, &[]));
    };
    if let Some(vm) = &nic.vm {
        return Err(ArmError::nic_in_use(&nic.id, vm));
    }
    if let Some(reservation) = &nic.reserved
        && st.reservation_active(reservation, now)
    {
        return Err(ArmError::nic_reserved(&reservation.vm, st.reservation_seconds()));
    }
    let until = nic.deleting_until.unwrap_or(now + stop);
    let location = nic.location.clone();
    if let Some(nic) = st.nics.get_mut(&nic_key) {
        nic.deleting_until = Some(until);
    }
    let op = st.new_operation(sub, now, until, None, None);
    Ok(respond(StatusCode::ACCEPTED, None, &req.op_headers(sub, "Microsoft.Network", &location, &op, true)))
}

/// `GET .../virtualNetworks/V/subnets/N`.
pub(crate) fn subnet(ctx: &Ctx, sub: &str, rg: &str, vnet: &str, name: &str) -> Result<Response, ArmError> {
    let st = ctx.store.lock_at(Instant::now());
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let wanted = format!(
        "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/{vnet}/subnets/{name}"
    )
    .to_ascii_lowercase();
    let subnet = st.subnets.get(&wanted).ok_or_else(|| {
        ArmError::network_not_found(&format!("Microsoft.Network/virtualNetworks/{vnet}/subnets/{name}"), rg)
    })?;
    let configs: Vec<Value> = st
        .nics
        .values()
        .filter(|nic| {
            field(&nic.model, "properties")
                .and_then(|p| field(p, "ipConfigurations"))
                .and_then(Value::as_array)
                .is_some_and(|c| {
                    c.iter().any(|c| {
                        path_str(c, &["properties", "subnet", "id"])
                            .is_some_and(|id| id.eq_ignore_ascii_case(&subnet.id))
                    })
                })
        })
        .map(|nic| json!({"id": format!("{}/ipConfigurations/ipconfig1", nic.id)}))
        .collect();
    Ok(respond(
        StatusCode::OK,
        Some(json!({
            "name": subnet.name,
            "id": subnet.id,
            "etag": "W/\"00000000-0000-0000-0000-000000000001\"",
            "type": "Microsoft.Network/virtualNetworks/subnets",
            "properties": {
                "provisioningState": "Succeeded",
                "addressPrefix": subnet.prefix,
                "ipConfigurations": configs,
                "delegations": [],
                "privateEndpointNetworkPolicies": "Disabled",
                "privateLinkServiceNetworkPolicies": "Enabled",
            },
        })),
        &[],
    ))
}
