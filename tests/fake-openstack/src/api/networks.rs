//! Neutron's read-only resources (networks, subnets, security groups) and the list
//! machinery shared with ports: field filters, `limit`/`marker` paging, `*_links`.

use std::time::Instant;

use axum::Json;
use axum::http::{Method, StatusCode};
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::paging::{PageError, next_query, page};
use super::{Call, Ctx};
use crate::clock;
use crate::error::{ApiError, ApiResult};
use crate::state::State;
use crate::state::network::{Network, SecurityGroup, Subnet};

/// The operation of a network, subnet or security group path.
pub(crate) fn operation(method: &Method, path: &[&str]) -> Option<&'static str> {
    match (method.as_str(), path) {
        ("GET", ["networks"]) => Some("networks.list"),
        ("GET", ["networks", _]) => Some("networks.get"),
        ("GET", ["subnets"]) => Some("subnets.list"),
        ("GET", ["subnets", _]) => Some("subnets.get"),
        ("GET", ["security-groups"]) => Some("security_groups.list"),
        ("GET", ["security-groups", _]) => Some("security_groups.get"),
        _ => None,
    }
}

/// A Neutron 400 `InvalidInput`.
pub(crate) fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::neutron(
        StatusCode::BAD_REQUEST,
        "InvalidInput",
        format!("Invalid input for operation: {}", message.into()),
    )
}

/// A Neutron 404 of `kind` (`PortNotFound`, `NetworkNotFound`, ...).
pub(crate) fn missing(kind: &'static str, what: &str, id: &str) -> ApiError {
    ApiError::neutron(StatusCode::NOT_FOUND, kind, format!("{what} {id} could not be found."))
}

/// The text a filter compares with (strings as is, other scalars as JSON).
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(_) | Value::Number(_) => Some(value.to_string()),
        _ => None,
    }
}

/// Keeps the items whose field `key` equals one of the query's values for each key in `keys`.
pub(crate) fn filter(items: Vec<Value>, call: &Call, keys: &[&str]) -> Vec<Value> {
    items
        .into_iter()
        .filter(|item| {
            keys.iter().all(|key| {
                let wanted = call.params(key);
                wanted.is_empty() || item.get(*key).and_then(scalar).is_some_and(|have| wanted.contains(&have.as_str()))
            })
        })
        .collect()
}

/// Pages `items` (sorted by id) and answers `{collection: [...], collection_links?: [...]}`.
pub(crate) fn paged(mut items: Vec<Value>, call: &Call, collection: &str, path: &str, page_size: usize) -> ApiResult {
    items.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    let page = page(items, call, page_size, |item| item["id"].as_str().unwrap_or("")).map_err(|error| match error {
        PageError::BadLimit(limit) => invalid(format!("Bad limit request: limit must be an integer, got {limit}.")),
        PageError::UnknownMarker(marker) => invalid(format!("marker {marker} not found")),
    })?;
    let mut body = json!({ collection: page.items });
    if let Some(marker) = page.next_marker {
        let href = format!("{}/network/v2.0/{path}?{}", call.base, next_query(call, page.limit, &marker));
        body[format!("{collection}_links")] = json!([{"rel": "next", "href": href}]);
    }
    Ok(Json(body).into_response())
}

fn network_json(network: &Network) -> Value {
    json!({
        "id": network.id,
        "name": network.name,
        "tenant_id": network.project_id,
        "project_id": network.project_id,
        "status": "ACTIVE",
        "admin_state_up": true,
        "subnets": network.subnets,
        "shared": false,
        "router:external": false,
        "mtu": 1450,
        "availability_zones": ["nova"],
        "port_security_enabled": true,
        "description": "",
        "tags": [],
        "revision_number": 1,
        "created_at": "2025-01-01T00:00:00Z",
        "updated_at": "2025-01-01T00:00:00Z",
    })
}

fn subnet_json(subnet: &Subnet) -> Value {
    json!({
        "id": subnet.id,
        "name": subnet.name,
        "network_id": subnet.network_id,
        "tenant_id": subnet.project_id,
        "project_id": subnet.project_id,
        "cidr": subnet.cidr(),
        "ip_version": subnet.ip_version,
        "gateway_ip": subnet.gateway.to_string(),
        "enable_dhcp": true,
        "allocation_pools": [],
        "dns_nameservers": [],
        "host_routes": [],
        "ipv6_address_mode": if subnet.ip_version == 6 { json!("slaac") } else { Value::Null },
        "ipv6_ra_mode": if subnet.ip_version == 6 { json!("slaac") } else { Value::Null },
        "subnetpool_id": null,
        "description": "",
        "tags": [],
        "revision_number": 1,
        "created_at": "2025-01-01T00:00:00Z",
        "updated_at": "2025-01-01T00:00:00Z",
    })
}

fn security_group_json(group: &SecurityGroup) -> Value {
    let created = clock::seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_735_689_600));
    json!({
        "id": group.id,
        "name": group.name,
        "description": group.description,
        "tenant_id": group.project_id,
        "project_id": group.project_id,
        "security_group_rules": [],
        "stateful": true,
        "shared": false,
        "tags": [],
        "revision_number": 1,
        "created_at": created,
        "updated_at": created,
    })
}

fn own(state: &State, call: &Call) -> (Vec<Value>, Vec<Value>, Vec<Value>) {
    let project = call.project_id.as_str();
    (
        state.networks.values().filter(|n| n.project_id == project).map(network_json).collect(),
        state.subnets.values().filter(|s| s.project_id == project).map(subnet_json).collect(),
        state.security_groups.values().filter(|g| g.project_id == project).map(security_group_json).collect(),
    )
}

/// Dispatches a network, subnet or security group operation.
pub(crate) fn handle(ctx: &Ctx, call: &Call, operation: &str) -> ApiResult {
    let state = ctx.store.lock_at(Instant::now());
    let page_size = state.page_size;
    let (networks, subnets, groups) = own(&state, call);
    drop(state);
    let id = call.seg(1);
    let one = |items: Vec<Value>, key: &str, kind: &'static str, what: &str| -> ApiResult {
        let item = items.into_iter().find(|i| i["id"] == id).ok_or_else(|| missing(kind, what, id))?;
        Ok(Json(json!({ key: item })).into_response())
    };
    match operation {
        "networks.list" => {
            let items = filter(
                networks,
                call,
                &["id", "name", "status", "project_id", "tenant_id", "shared", "router:external"],
            );
            paged(items, call, "networks", "networks", page_size)
        }
        "networks.get" => one(networks, "network", "NetworkNotFound", "Network"),
        "subnets.list" => {
            let items =
                filter(subnets, call, &["id", "name", "network_id", "ip_version", "cidr", "project_id", "tenant_id"]);
            paged(items, call, "subnets", "subnets", page_size)
        }
        "subnets.get" => one(subnets, "subnet", "SubnetNotFound", "Subnet"),
        "security_groups.list" => {
            let items = filter(groups, call, &["id", "name", "project_id", "tenant_id"]);
            paged(items, call, "security_groups", "security-groups", page_size)
        }
        _ => one(groups, "security_group", "SecurityGroupNotFound", "Security group"),
    }
}
