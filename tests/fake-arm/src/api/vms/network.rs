//! The NICs of a VM PUT: those `networkProfile.networkInterfaces` references, those
//! `networkInterfaceConfigurations` make, and the reservation of referenced NICs after
//! a PUT refused for capacity or quota.

use std::time::Instant;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{delete_option, vm_id};
use crate::api::{Ctx, ids, nics};
use crate::error::ArmError;
use crate::state::{Attachment, Key, NicRecord, State, key};
use crate::wire::{field, path, path_str};

/// Refuses a NIC attached to another VM, or reserved after a failed or deleted one.
pub(super) fn check_nic_free(st: &State, nic: &NicRecord, this_vm: &str, now: Instant) -> Result<(), ArmError> {
    if let Some(other) = &nic.vm
        && !other.eq_ignore_ascii_case(this_vm)
    {
        return Err(ArmError::new(
            StatusCode::BAD_REQUEST,
            "NicInUse",
            format!(
                "Network Interface {} is used by existing resource {other}. A network interface can be attached to one virtual machine only.",
                nic.id
            ),
        ));
    }
    if let Some(reservation) = &nic.reserved
        && st.reservation_active(reservation, now)
    {
        return Err(ArmError::nic_reserved(&reservation.vm, st.reservation_seconds()));
    }
    Ok(())
}

/// The NICs `networkProfile.networkInterfaces` references (they must exist).
pub(super) fn referenced_nics(
    st: &State,
    sub: &str,
    props: &Value,
    this_vm: &str,
    now: Instant,
) -> Result<Vec<Attachment>, ArmError> {
    let list = path(props, &["networkProfile", "networkInterfaces"])
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
        .ok_or_else(|| ArmError::required("networkProfile"))?;
    let mut nics: Vec<Attachment> = Vec::new();
    for entry in list {
        let id = field(entry, "id").and_then(Value::as_str).unwrap_or("");
        let parsed =
            ids::resource(id, "Microsoft.Network", "networkInterfaces").filter(|(s, _, _)| s.eq_ignore_ascii_case(sub));
        let Some((s, r, n)) = parsed else {
            return Err(ArmError::invalid_reference(id, this_vm));
        };
        let nic_key = key(&s, &r, &n);
        let Some(nic) = st.nics.get(&nic_key).filter(|nic| nic.deleting_until.is_none()) else {
            return Err(ArmError::invalid_reference(id, this_vm));
        };
        check_nic_free(st, nic, this_vm, now)?;
        if nics.iter().any(|a| a.key == nic_key) {
            return Err(ArmError::invalid_parameter(
                format!("Network interface {id} is referenced more than once."),
                "networkInterfaces",
            ));
        }
        nics.push(Attachment {
            key: nic_key,
            id: nic.id.clone(),
            name: nic.name.clone(),
            delete_option: delete_option(path(entry, &["properties", "deleteOption"])),
            lun: None,
        });
    }
    Ok(nics)
}

/// A NIC the VM PUT makes from one of its `networkInterfaceConfigurations`.
#[derive(Debug, Clone)]
pub(super) struct NicPlan {
    key: Key,
    name: String,
    id: String,
    location: String,
    /// The NIC as a `networkInterfaces.createOrUpdate` would store it (no tags).
    model: Value,
    /// Lowercase id of the first IP configuration's subnet.
    subnet_lc: String,
}

/// The NICs of `networkProfile.networkInterfaceConfigurations`: each is named
/// as configured, in the VM's resource group; one of that name that exists
/// already is taken over when it is free (as a NIC PUT of the name would
/// update it), refused when it belongs to another VM or is reserved.
#[allow(clippy::too_many_arguments)]
pub(super) fn plan_nics(
    st: &State,
    sub: &str,
    rg: &str,
    this_vm: &str,
    location: &str,
    configs: &[Value],
    now: Instant,
    plans: &mut Vec<NicPlan>,
) -> Result<Vec<Attachment>, ArmError> {
    let mut nics: Vec<Attachment> = Vec::new();
    for config in configs {
        let name = field(config, "name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ArmError::required("networkInterfaceConfigurations.name"))?;
        let props = field(config, "properties").cloned().unwrap_or(json!({}));
        let ip_configs = field(&props, "ipConfigurations")
            .and_then(Value::as_array)
            .filter(|c| !c.is_empty())
            .ok_or_else(|| ArmError::required("networkInterfaceConfigurations.properties.ipConfigurations"))?;
        let id = nics::nic_id(sub, rg, name);
        let mut subnet_lc = None;
        let mut nic_ip_configs = Vec::new();
        for (i, ip) in ip_configs.iter().enumerate() {
            let subnet = path_str(ip, &["properties", "subnet", "id"]).unwrap_or("");
            let lc = subnet.trim_end_matches('/').to_ascii_lowercase();
            if !st.subnets.contains_key(&lc) {
                return Err(ArmError::invalid_reference(subnet, &id));
            }
            subnet_lc.get_or_insert(lc);
            let ip_name = field(ip, "name").and_then(Value::as_str).unwrap_or("ipconfig1");
            let primary = path(ip, &["properties", "primary"]).and_then(Value::as_bool).unwrap_or(i == 0);
            nic_ip_configs.push(json!({
                "name": ip_name,
                "properties": {"subnet": {"id": subnet}, "privateIPAllocationMethod": "Dynamic", "primary": primary}
            }));
        }
        let nic_key = key(sub, rg, name);
        if let Some(nic) = st.nics.get(&nic_key) {
            if nic.deleting_until.is_some() {
                return Err(ArmError::another_operation_in_progress(&nic.id));
            }
            check_nic_free(st, nic, this_vm, now)?;
        }
        if nics.iter().any(|a| a.key == nic_key) {
            return Err(ArmError::invalid_parameter(
                format!("Network interface configuration {name} is specified more than once."),
                "networkInterfaceConfigurations",
            ));
        }
        let flag = |name: &str| field(&props, name).and_then(Value::as_bool).unwrap_or(false);
        let mut model_props = json!({
            "enableIPForwarding": flag("enableIPForwarding"),
            "enableAcceleratedNetworking": flag("enableAcceleratedNetworking"),
            "ipConfigurations": nic_ip_configs,
        });
        if let Some(nsg) = field(&props, "networkSecurityGroup") {
            model_props["networkSecurityGroup"] = nsg.clone();
        }
        let id = st.nics.get(&nic_key).map_or(id, |nic| nic.id.clone());
        let stored_name = st.nics.get(&nic_key).map_or_else(|| name.to_owned(), |nic| nic.name.clone());
        nics.push(Attachment {
            key: nic_key.clone(),
            id: id.clone(),
            name: stored_name.clone(),
            delete_option: delete_option(field(&props, "deleteOption")),
            lun: None,
        });
        plans.push(NicPlan {
            key: nic_key,
            name: stored_name,
            id,
            location: location.to_owned(),
            model: json!({"location": location, "properties": model_props}),
            subnet_lc: subnet_lc.unwrap_or_default(),
        });
    }
    Ok(nics)
}

/// Creates (or updates) the NICs a VM PUT makes from its configurations.
pub(super) fn realize_nics(st: &mut State, sub: &str, rg: &str, plans: &[NicPlan]) {
    for plan in plans {
        if let Some(nic) = st.nics.get_mut(&plan.key) {
            nic.model = plan.model.clone();
            nic.location.clone_from(&plan.location);
            nic.generation += 1;
            continue;
        }
        st.create_nic(
            (sub, rg, &plan.name),
            plan.id.clone(),
            plan.location.clone(),
            plan.model.clone(),
            &plan.subnet_lc,
            Instant::now(),
        );
    }
}

/// A VM PUT refused synchronously for capacity/quota reserves the NICs its body referenced.
pub(crate) fn reserve_on_refusal(ctx: &Ctx, sub: &str, rg: &str, name: &str, body: &[u8]) {
    let Ok(body) = serde_json::from_slice::<Value>(body) else { return };
    let now = Instant::now();
    let mut st = ctx.store.lock_at(now);
    let Some(rg_name) = st.resource_group(sub, rg).map(|g| g.name.clone()) else { return };
    let vm = vm_id(sub, &rg_name, name);
    let nic_keys: Vec<Key> = path(&body, &["properties", "networkProfile", "networkInterfaces"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|n| field(n, "id").and_then(Value::as_str))
        .filter_map(|id| ids::resource(id, "Microsoft.Network", "networkInterfaces"))
        .filter(|(s, _, _)| s.eq_ignore_ascii_case(sub))
        .map(|(s, r, n)| key(&s, &r, &n))
        .collect();
    for nic_key in nic_keys {
        let free = st.nics.get(&nic_key).is_some_and(|nic| nic.vm.is_none() && nic.deleting_until.is_none());
        if free {
            st.reserve_nic(&nic_key, &vm, now);
        }
    }
}
