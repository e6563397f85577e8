//! Neutron ports of a machine. The driver makes one port per network of the
//! class, named after the machine (as the Go provider names its port on a
//! user-managed network), tagged with the cluster and role keys, carrying the
//! pod CIDRs as allowed address pairs on a pod network from the start. The
//! server is created on these ports, so Neutron's `device_id` of a port tells
//! whether a server was made for it, even before Nova lists the server.

use machine_driver_api::{CallFailure, DriverError};
use serde_json::{Value, json};

use crate::clients::{Api, Call, Verb};
use crate::os::keystone::Service;
use crate::os::model::{AddressPair, Port, PortOne, PortsPage};

/// The post-creation step of OpenStack: the pod CIDRs as allowed address pairs.
pub(crate) const ADDRESS_PAIRS_STEP: &str = "allowed-address-pairs";

/// The ports named `name` (`GET /ports?name=`, every page).
pub(crate) async fn named(api: &Api<'_>, name: &str) -> Result<Vec<Port>, DriverError> {
    list(api, &[("name", name.to_string())]).await
}

/// The ports attached to server `id` (`GET /ports?device_id=`).
pub(crate) async fn of_server(api: &Api<'_>, id: &str) -> Result<Vec<Port>, DriverError> {
    list(api, &[("device_id", id.to_string())]).await
}

/// Every port matching `query` (every page).
pub(crate) async fn list(api: &Api<'_>, query: &[(&str, String)]) -> Result<Vec<Port>, DriverError> {
    Ok(api
        .all_pages(Call::get(Service::Network, "ports.list", "/ports"), query, |p: PortsPage| (p.ports, p.ports_links))
        .await?)
}

/// What a new port is made of.
#[derive(Debug, Clone)]
pub(crate) struct NewPort<'a> {
    /// The machine name.
    pub(crate) name: &'a str,
    /// The network id.
    pub(crate) network_id: &'a str,
    /// Subnets for fixed IPs (empty: Neutron's choice).
    pub(crate) subnets: &'a [String],
    /// Security group ids.
    pub(crate) security_groups: &'a [String],
    /// Pod CIDRs (empty on a network that is not a pod network).
    pub(crate) pod_cidrs: &'a [String],
    /// Tags (the cluster and role keys).
    pub(crate) tags: &'a [String],
}

/// `POST /ports` with the tags in the body; a Neutron that does not take
/// tags on create (before Ussuri: 400 naming `tags`) gets the port without
/// them and then `PUT /ports/{id}/tags`, as the Go provider tags its port.
pub(crate) async fn create(api: &Api<'_>, new: &NewPort<'_>) -> Result<Port, CallFailure<crate::errors::OsFailure>> {
    let mut port = json!({
        "name": new.name,
        "network_id": new.network_id,
        "tags": new.tags,
        "description": "made by machine-driver-openstack for its machine",
    });
    // No key at all (not an empty list) leaves Neutron's `default` group on the port.
    if !new.security_groups.is_empty() {
        port["security_groups"] = json!(new.security_groups);
    }
    if !new.subnets.is_empty() {
        port["fixed_ips"] = Value::Array(new.subnets.iter().map(|s| json!({"subnet_id": s})).collect());
    }
    if !new.pod_cidrs.is_empty() {
        port["allowed_address_pairs"] = Value::Array(new.pod_cidrs.iter().map(|c| json!({"ip_address": c})).collect());
    }
    let call = Call::new(Service::Network, "ports.create", Verb::Post, "/ports");
    match api.json::<PortOne>(call, &[], Some(&json!({"port": port}))).await {
        Ok(created) => Ok(created.port),
        Err(CallFailure::Cloud(_, f)) if f.http_status == Some(400) && f.message.contains("tags") => {
            if let Some(p) = port.as_object_mut() {
                p.remove("tags");
            }
            let created: PortOne = api.json(call, &[], Some(&json!({"port": port}))).await?;
            let path = format!("/ports/{}/tags", created.port.id);
            api.json::<serde_json::Value>(
                Call::new(Service::Network, "ports.tags", Verb::Put, &path),
                &[],
                Some(&json!({"tags": new.tags})),
            )
            .await?;
            Ok(created.port)
        }
        Err(e) => Err(e),
    }
}

/// The pod CIDRs `port` lacks among its allowed address pairs.
pub(crate) fn missing_pairs<'c>(port: &Port, cidrs: &'c [String]) -> Vec<&'c String> {
    cidrs.iter().filter(|c| !port.allowed_address_pairs.iter().any(|p| same_prefix(&p.ip_address, c))).collect()
}

/// Adds the missing pod CIDRs to the port's pairs, keeping every pair it has
/// (`PUT /ports/{id}` replaces the list, so the merged list is sent: the Go
/// provider sent one CIDR at a time, and only the last survived), on the
/// condition that nobody changed the port since it was read (`If-Match` on
/// its revision: a concurrent change answers 412, UNAVAILABLE, and the retry
/// reads again). No call when nothing is missing; true when it wrote.
pub(crate) async fn add_pairs(api: &Api<'_>, port: &Port, cidrs: &[String]) -> Result<bool, DriverError> {
    let missing = missing_pairs(port, cidrs);
    if missing.is_empty() {
        return Ok(false);
    }
    let mut pairs: Vec<AddressPair> = port.allowed_address_pairs.clone();
    pairs.extend(missing.into_iter().map(|c| AddressPair { ip_address: c.clone(), mac_address: None }));
    let path = format!("/ports/{}", port.id);
    let body = serde_json::to_vec(&json!({"port": {"allowed_address_pairs": pairs}})).unwrap_or_default();
    let revision = port.revision_number.map(|r| format!("revision_number={r}"));
    let headers: Vec<(&str, &str)> = revision.as_deref().map(|r| ("If-Match", r)).into_iter().collect();
    let call = Call::new(Service::Network, "ports.update", Verb::Put, &path);
    api.raw_with(call, &[], Some((&body, "application/json")), &headers).await?;
    Ok(true)
}

/// `DELETE /ports/{id}`; OK when it is gone already.
pub(crate) async fn delete(api: &Api<'_>, id: &str) -> Result<(), DriverError> {
    let path = format!("/ports/{id}");
    match api.raw(Call::new(Service::Network, "ports.delete", Verb::Delete, &path), &[], None).await {
        Ok(_) => Ok(()),
        Err(CallFailure::Cloud(_, f)) if f.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// True when two IPs or CIDRs name the same prefix (`10.0.0.0/8` and a host
/// `10.0.0.1` differ; `fd00::/48` and `fd00:0::/48` are the same).
fn same_prefix(a: &str, b: &str) -> bool {
    let split = |s: &str| -> Option<(std::net::IpAddr, u8)> {
        let (ip, bits) = s.split_once('/').unwrap_or((s, ""));
        let ip: std::net::IpAddr = ip.trim().parse().ok()?;
        let bits = if bits.is_empty() { if ip.is_ipv4() { 32 } else { 128 } } else { bits.parse().ok()? };
        Some((ip, bits))
    };
    match (split(a), split(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_pairs_compare_prefixes() {
        let port = Port {
            allowed_address_pairs: vec![
                AddressPair { ip_address: "100.96.0.0/11".into(), mac_address: None },
                AddressPair { ip_address: "fd00:0:100::/48".into(), mac_address: Some("fa:16".into()) },
            ],
            ..Default::default()
        };
        let cidrs = vec!["100.96.0.0/11".to_string(), "fd00:0:100:0::/48".to_string(), "10.0.0.0/8".to_string()];
        assert_eq!(missing_pairs(&port, &cidrs), vec![&cidrs[2]]);
        assert!(same_prefix("10.0.0.1", "10.0.0.1/32"));
        assert!(!same_prefix("10.0.0.0/8", "10.0.0.0/16"));
    }
}
