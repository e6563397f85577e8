//! Neutron ports: list with filters (including `tags`, `tags-any` and `fixed_ips`),
//! create with IP allocation (one `{"port": …}`, or many `{"ports": […]}` in one
//! call, all or nothing, as Neutron's native bulk create), update (allowed address pairs replace, `If-Match`
//! revision checks), add/remove address pairs, tags and delete.

use std::net::IpAddr;
use std::time::{Instant, SystemTime};

use axum::Json;
use axum::http::{Method, StatusCode};
use axum::response::IntoResponse;
use serde_json::{Map, Value, json};

use super::networks::{filter, invalid, missing, paged};
use super::{Call, Ctx};
use crate::clock;
use crate::error::{ApiError, ApiResult, Service};
use crate::state::State;
use crate::state::network::{AddressPair, FixedIp, Port, random_mac};

/// Maximum allowed address pairs per port (`max_allowed_address_pair`).
const MAX_ADDRESS_PAIRS: usize = 10;

/// The operation of a port path.
pub(crate) fn operation(method: &Method, path: &[&str]) -> Option<&'static str> {
    match (method.as_str(), path) {
        ("GET", ["ports"]) => Some("ports.list"),
        ("POST", ["ports"]) => Some("ports.create"),
        ("GET", ["ports", _] | ["ports", _, "tags"] | ["ports", _, "tags", _]) => Some("ports.get"),
        ("PUT", ["ports", _] | ["ports", _, "add_allowed_address_pairs" | "remove_allowed_address_pairs"]) => {
            Some("ports.update")
        }
        ("PUT" | "DELETE", ["ports", _, "tags"] | ["ports", _, "tags", _]) => Some("ports.tags"),
        ("DELETE", ["ports", _]) => Some("ports.delete"),
        _ => None,
    }
}

/// Dispatches a port operation.
pub(crate) fn handle(ctx: &Ctx, call: &Call, operation: &str) -> ApiResult {
    match (operation, call.path.len()) {
        ("ports.list", _) => list(ctx, call),
        ("ports.create", _) => create(ctx, call),
        ("ports.get", 2) => with_port(ctx, call, |_, port| Ok(Json(json!({"port": port_json(port)})).into_response())),
        ("ports.get", 3) => with_port(ctx, call, |_, port| Ok(Json(json!({"tags": port.tags})).into_response())),
        ("ports.get", _) => with_port(ctx, call, |call, port| {
            if port.tags.iter().any(|t| t == call.seg(3)) {
                Ok(StatusCode::NO_CONTENT.into_response())
            } else {
                Err(ApiError::neutron(
                    StatusCode::NOT_FOUND,
                    "TagNotFound",
                    format!("Tag {} could not be found for port {}.", call.seg(3), port.id),
                ))
            }
        }),
        ("ports.update", _) => update(ctx, call),
        ("ports.tags", _) => tags(ctx, call),
        ("ports.delete", _) => delete(ctx, call),
        _ => Err(ApiError::no_route(Service::Neutron)),
    }
}

/// The port JSON Neutron answers.
pub(crate) fn port_json(port: &Port) -> Value {
    json!({
        "id": port.id,
        "name": port.name,
        "network_id": port.network_id,
        "tenant_id": port.project_id,
        "project_id": port.project_id,
        "mac_address": port.mac_address,
        "admin_state_up": true,
        "status": port.status,
        "device_id": port.device_id,
        "device_owner": port.device_owner,
        "fixed_ips": port.fixed_ips.iter().map(|f| json!({"subnet_id": f.subnet_id, "ip_address": f.ip_address})).collect::<Vec<_>>(),
        "security_groups": port.security_groups,
        "allowed_address_pairs": port.allowed_address_pairs.iter().map(|p| json!({"ip_address": p.ip_address, "mac_address": p.mac_address})).collect::<Vec<_>>(),
        "port_security_enabled": true,
        "binding:vnic_type": "normal",
        "extra_dhcp_opts": [],
        "dns_name": "",
        "qos_policy_id": null,
        "tags": port.tags,
        "description": port.description,
        "created_at": clock::seconds(port.created),
        "updated_at": clock::seconds(port.updated),
        "revision_number": port.revision,
    })
}

fn not_found(id: &str) -> ApiError {
    missing("PortNotFound", "Port", id)
}

fn with_port(ctx: &Ctx, call: &Call, answer: impl FnOnce(&Call, &Port) -> ApiResult) -> ApiResult {
    let state = ctx.store.lock_at(Instant::now());
    let id = call.seg(1);
    let port = state.ports.get(id).filter(|p| p.project_id == call.project_id).ok_or_else(|| not_found(id))?;
    answer(call, port)
}

/// Tag filter words: comma lists, repeated parameters allowed.
fn tag_list(call: &Call, key: &str) -> Vec<String> {
    call.params(key).iter().flat_map(|v| v.split(',')).filter(|t| !t.is_empty()).map(str::to_owned).collect()
}

fn list(ctx: &Ctx, call: &Call) -> ApiResult {
    let state = ctx.store.lock_at(Instant::now());
    let page_size = state.page_size;
    let all = tag_list(call, "tags");
    let any = tag_list(call, "tags-any");
    let not_all = tag_list(call, "not-tags");
    let not_any = tag_list(call, "not-tags-any");
    let fixed: Vec<(String, String)> = call
        .params("fixed_ips")
        .iter()
        .filter_map(|f| f.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect();
    let items: Vec<Value> = state
        .ports
        .values()
        .filter(|p| p.project_id == call.project_id)
        .filter(|p| all.iter().all(|t| p.tags.contains(t)))
        .filter(|p| any.is_empty() || any.iter().any(|t| p.tags.contains(t)))
        .filter(|p| not_all.is_empty() || !not_all.iter().all(|t| p.tags.contains(t)))
        .filter(|p| !not_any.iter().any(|t| p.tags.contains(t)))
        .filter(|p| {
            fixed.iter().all(|(key, value)| {
                p.fixed_ips.iter().any(|f| match key.as_str() {
                    "ip_address" => &f.ip_address == value,
                    "subnet_id" => &f.subnet_id == value,
                    _ => false,
                })
            })
        })
        .map(port_json)
        .collect();
    drop(state);
    let keys = [
        "id",
        "name",
        "network_id",
        "device_id",
        "device_owner",
        "status",
        "mac_address",
        "project_id",
        "tenant_id",
        "description",
    ];
    paged(filter(items, call, &keys), call, "ports", "ports", page_size)
}

/// Parses and validates `allowed_address_pairs` (MACs default to `default_mac`).
fn address_pairs(value: &Value, default_mac: &str) -> Result<Vec<AddressPair>, ApiError> {
    let items = value.as_array().ok_or_else(|| invalid("allowed_address_pairs must be a list."))?;
    let mut pairs: Vec<AddressPair> = Vec::new();
    for item in items {
        let ip = item.get("ip_address").and_then(Value::as_str).ok_or_else(|| {
            ApiError::neutron(
                StatusCode::BAD_REQUEST,
                "AllowedAddressPairsMissingIP",
                "AllowedAddressPair must contain ip_address",
            )
        })?;
        let (address, prefix) = ip.split_once('/').map_or((ip, None), |(a, p)| (a, Some(p)));
        let parsed: Option<IpAddr> = address.parse().ok();
        let prefix_ok = match (parsed, prefix) {
            (Some(_), None) => true,
            (Some(addr), Some(prefix)) => {
                prefix.parse::<u32>().is_ok_and(|p| p <= if addr.is_ipv4() { 32 } else { 128 })
            }
            (None, _) => false,
        };
        if !prefix_ok {
            return Err(invalid(format!("'{ip}' is not a valid IP address or CIDR.")));
        }
        let mac = item.get("mac_address").and_then(Value::as_str).unwrap_or(default_mac).to_owned();
        let pair = AddressPair { ip_address: ip.to_owned(), mac_address: mac };
        if pairs.contains(&pair) {
            return Err(ApiError::neutron(
                StatusCode::BAD_REQUEST,
                "DuplicateAddressPairInRequest",
                format!(
                    "Request contains duplicate address pair: mac_address {} ip_address {}.",
                    pair.mac_address, pair.ip_address
                ),
            ));
        }
        pairs.push(pair);
    }
    if pairs.len() > MAX_ADDRESS_PAIRS {
        return Err(ApiError::neutron(
            StatusCode::BAD_REQUEST,
            "AllowedAddressPairExhausted",
            format!("The number of allowed address pair exceeds the maximum {MAX_ADDRESS_PAIRS}."),
        ));
    }
    Ok(pairs)
}

fn security_groups(state: &State, call: &Call, value: &Value) -> Result<Vec<String>, ApiError> {
    let items = value.as_array().ok_or_else(|| invalid("security_groups must be a list."))?;
    items
        .iter()
        .map(|item| {
            let id = item.as_str().unwrap_or("");
            state
                .security_groups
                .get(id)
                .filter(|g| g.project_id == call.project_id)
                .map(|g| g.id.clone())
                .ok_or_else(|| missing("SecurityGroupNotFound", "Security group", id))
        })
        .collect()
}

/// Most tags on one resource (neutron-lib `tagging` `MAX_TAGS`; the networking API
/// reference, "Tag extension": `PUT /v2.0/{resource_type}/{resource_id}/tags` replaces
/// every tag with the list given, `PUT …/tags/{tag}` adds one, `DELETE …/tags/{tag}`
/// removes one).
const MAX_TAGS: usize = 50;

fn too_many_tags() -> ApiError {
    invalid(format!("The number of tags exceeds the limit of {MAX_TAGS}."))
}

fn tags_value(value: &Value) -> Result<Vec<String>, ApiError> {
    let items = value.as_array().ok_or_else(|| invalid("tags must be a list."))?;
    let mut tags: Vec<String> = Vec::new();
    for item in items {
        let tag = item.as_str().ok_or_else(|| invalid("tags must be strings."))?;
        check_tag(tag)?;
        if !tags.iter().any(|t| t == tag) {
            tags.push(tag.to_owned());
        }
    }
    if tags.len() > MAX_TAGS {
        return Err(too_many_tags());
    }
    Ok(tags)
}

fn check_tag(tag: &str) -> Result<(), ApiError> {
    if tag.is_empty() || tag.chars().count() > 255 || tag.contains(',') {
        return Err(invalid(format!("'{tag}' is not a valid tag.")));
    }
    Ok(())
}

const CREATE_KEYS: &[&str] = &[
    "name",
    "network_id",
    "fixed_ips",
    "security_groups",
    "description",
    "tags",
    "allowed_address_pairs",
    "admin_state_up",
    "device_id",
    "device_owner",
    "port_security_enabled",
    "project_id",
    "tenant_id",
    "binding:vnic_type",
    "binding:host_id",
    "binding:profile",
    "mac_address",
    "dns_name",
    "extra_dhcp_opts",
];

fn unrecognized(port: &Map<String, Value>, allowed: &[&str]) -> Result<(), ApiError> {
    let unknown: Vec<&str> = port.keys().map(String::as_str).filter(|k| !allowed.contains(k)).collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(ApiError::neutron(
            StatusCode::BAD_REQUEST,
            "HTTPBadRequest",
            format!("Unrecognized attribute(s) '{}'", unknown.join(", ")),
        ))
    }
}

fn create(ctx: &Ctx, call: &Call) -> ApiResult {
    let body = call.json(Service::Neutron)?;
    if let Some(many) = body.get("ports") {
        return create_bulk(ctx, call, many);
    }
    let port = body.get("port").and_then(Value::as_object).ok_or_else(|| invalid("Resource body required"))?;
    let mut state = ctx.store.lock_at(Instant::now());
    let answer = make_port(&mut state, call, port)?;
    Ok((StatusCode::CREATED, Json(json!({"port": answer}))).into_response())
}

/// `{"ports": [...]}`: every port or none (Neutron's bulk create is one
/// transaction: a refused item refuses the request with its error, and no
/// port of it is left).
fn create_bulk(ctx: &Ctx, call: &Call, many: &Value) -> ApiResult {
    let items = many.as_array().ok_or_else(|| invalid("Resources required"))?;
    if items.is_empty() {
        return Err(invalid("Resources required"));
    }
    let mut state = ctx.store.lock_at(Instant::now());
    let mut made: Vec<Value> = Vec::with_capacity(items.len());
    for item in items {
        let made_one = item
            .as_object()
            .ok_or_else(|| invalid("Resource body required"))
            .and_then(|port| make_port(&mut state, call, port));
        match made_one {
            Ok(answer) => made.push(answer),
            Err(error) => {
                for answer in &made {
                    state.ports.remove(answer["id"].as_str().unwrap_or_default());
                }
                return Err(error);
            }
        }
    }
    Ok((StatusCode::CREATED, Json(json!({"ports": made}))).into_response())
}

/// Validates one port of a create and stores it; its JSON.
fn make_port(state: &mut State, call: &Call, port: &Map<String, Value>) -> Result<Value, ApiError> {
    unrecognized(port, CREATE_KEYS)?;
    if let Some(owner) = port.get("project_id").or_else(|| port.get("tenant_id")).and_then(Value::as_str)
        && owner != call.project_id
    {
        return Err(ApiError::neutron(
            StatusCode::FORBIDDEN,
            "HTTPForbidden",
            "Specifying 'project_id' or 'tenant_id' other than the authenticated project in request requires admin privileges",
        ));
    }
    let network_id = port.get("network_id").and_then(Value::as_str).ok_or_else(|| invalid("network_id is required"))?;
    let text = |key: &str| port.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    let network = state
        .networks
        .get(network_id)
        .filter(|n| n.project_id == call.project_id)
        .ok_or_else(|| missing("NetworkNotFound", "Network", network_id))?
        .clone();
    let groups = match port.get("security_groups") {
        Some(value) => security_groups(state, call, value)?,
        None => state
            .security_groups
            .values()
            .filter(|g| g.project_id == call.project_id && g.name == "default")
            .map(|g| g.id.clone())
            .collect(),
    };
    let mac = port.get("mac_address").and_then(Value::as_str).map_or_else(random_mac, str::to_owned);
    let pairs = match port.get("allowed_address_pairs") {
        Some(value) => address_pairs(value, &mac)?,
        None => Vec::new(),
    };
    let tags = match port.get("tags") {
        Some(value) => tags_value(value)?,
        None => Vec::new(),
    };
    let mut fixed_ips = Vec::new();
    match port.get("fixed_ips") {
        None => {
            for subnet in &network.subnets {
                let ip = state.allocate_ip(subnet).ok_or_else(|| {
                    ApiError::neutron(
                        StatusCode::CONFLICT,
                        "IpAddressGenerationFailure",
                        format!("No more IP addresses available on network {network_id}."),
                    )
                })?;
                fixed_ips.push(FixedIp { subnet_id: subnet.clone(), ip_address: ip });
            }
        }
        Some(Value::Array(items)) => {
            for item in items {
                let ip_text = item.get("ip_address").and_then(Value::as_str);
                let ip: Option<IpAddr> = match ip_text {
                    Some(text) => {
                        Some(text.parse().map_err(|_| invalid(format!("'{text}' is not a valid IP address.")))?)
                    }
                    None => None,
                };
                let subnet_id = match (item.get("subnet_id").and_then(Value::as_str), ip) {
                    (Some(subnet), _) => subnet.to_owned(),
                    (None, Some(ip)) => network
                        .subnets
                        .iter()
                        .find(|s| state.subnets.get(*s).is_some_and(|sub| sub.contains(ip)))
                        .cloned()
                        .ok_or_else(|| {
                            invalid(format!(
                                "IP address {ip} is not a valid IP for any subnet of network {network_id}."
                            ))
                        })?,
                    (None, None) => return Err(invalid("fixed_ips entries need a subnet_id or an ip_address.")),
                };
                if !network.subnets.contains(&subnet_id) {
                    return Err(invalid(format!(
                        "Failed to create port on network {network_id}, because fixed_ips included invalid subnet {subnet_id}."
                    )));
                }
                let address = match ip {
                    Some(ip) => {
                        if !state.subnets.get(&subnet_id).is_some_and(|s| s.contains(ip)) {
                            return Err(ApiError::neutron(
                                StatusCode::BAD_REQUEST,
                                "InvalidIpForSubnet",
                                format!("IP address {ip} is not a valid IP for the specified subnet."),
                            ));
                        }
                        if state.ip_in_use(&subnet_id, ip)
                            || fixed_ips.iter().any(|f: &FixedIp| f.ip_address == ip.to_string())
                        {
                            return Err(ApiError::neutron(
                                StatusCode::CONFLICT,
                                "IpAddressAlreadyAllocated",
                                format!("IP address {ip} already allocated in subnet {subnet_id}"),
                            ));
                        }
                        ip.to_string()
                    }
                    None => state.allocate_ip(&subnet_id).ok_or_else(|| {
                        ApiError::neutron(
                            StatusCode::CONFLICT,
                            "IpAddressGenerationFailure",
                            format!("No more IP addresses available on network {network_id}."),
                        )
                    })?,
                };
                fixed_ips.push(FixedIp { subnet_id, ip_address: address });
            }
        }
        Some(_) => return Err(invalid("fixed_ips must be a list.")),
    }
    let now = SystemTime::now();
    let port = Port {
        id: uuid::Uuid::new_v4().to_string(),
        project_id: call.project_id.clone(),
        name: text("name"),
        description: text("description"),
        network_id: network_id.to_owned(),
        mac_address: mac,
        status: "DOWN",
        device_id: text("device_id"),
        device_owner: text("device_owner"),
        fixed_ips,
        security_groups: groups,
        allowed_address_pairs: pairs,
        tags,
        created: now,
        updated: now,
        revision: 1,
        made_by_nova: false,
    };
    let answer = port_json(&port);
    state.ports.insert(port.id.clone(), port);
    Ok(answer)
}

const UPDATE_KEYS: &[&str] = &[
    "name",
    "description",
    "security_groups",
    "allowed_address_pairs",
    "admin_state_up",
    "port_security_enabled",
    "binding:vnic_type",
    "binding:host_id",
    "binding:profile",
    "dns_name",
    "extra_dhcp_opts",
];

/// Checks `If-Match: revision_number=N`.
fn check_revision(call: &Call, port: &Port) -> Result<(), ApiError> {
    let Some(wanted) = call.headers.get("if-match").and_then(|v| v.to_str().ok()) else { return Ok(()) };
    let Some(number) = wanted.trim().strip_prefix("revision_number=") else {
        return Err(invalid(format!("Unrecognized If-Match value {wanted}.")));
    };
    let number: u64 = number.trim().parse().map_err(|_| invalid(format!("Unrecognized If-Match value {wanted}.")))?;
    if number != port.revision {
        return Err(ApiError::neutron(
            StatusCode::PRECONDITION_FAILED,
            "RevisionNumberConstraintFailed",
            format!("Constrained to {number}, but current revision is {}", port.revision),
        ));
    }
    Ok(())
}

fn update(ctx: &Ctx, call: &Call) -> ApiResult {
    let body = call.json(Service::Neutron)?;
    let fields = body.get("port").and_then(Value::as_object).ok_or_else(|| invalid("Resource body required"))?;
    let id = call.seg(1);
    let mut state = ctx.store.lock_at(Instant::now());
    let port = state.ports.get(id).filter(|p| p.project_id == call.project_id).ok_or_else(|| not_found(id))?.clone();
    check_revision(call, &port)?;
    let mut updated = port.clone();
    match call.seg(2) {
        "add_allowed_address_pairs" | "remove_allowed_address_pairs" => {
            let value =
                fields.get("allowed_address_pairs").ok_or_else(|| invalid("allowed_address_pairs is required"))?;
            let given = address_pairs(value, &port.mac_address)?;
            if call.seg(2) == "add_allowed_address_pairs" {
                for pair in given {
                    if !updated.allowed_address_pairs.contains(&pair) {
                        updated.allowed_address_pairs.push(pair);
                    }
                }
                if updated.allowed_address_pairs.len() > MAX_ADDRESS_PAIRS {
                    return Err(ApiError::neutron(
                        StatusCode::BAD_REQUEST,
                        "AllowedAddressPairExhausted",
                        format!("The number of allowed address pair exceeds the maximum {MAX_ADDRESS_PAIRS}."),
                    ));
                }
            } else {
                updated
                    .allowed_address_pairs
                    .retain(|p| !given.iter().any(|g| g.ip_address == p.ip_address && g.mac_address == p.mac_address));
            }
        }
        _ => {
            unrecognized(fields, UPDATE_KEYS)?;
            if let Some(value) = fields.get("allowed_address_pairs") {
                updated.allowed_address_pairs = address_pairs(value, &port.mac_address)?;
            }
            if let Some(value) = fields.get("security_groups") {
                updated.security_groups = security_groups(&state, call, value)?;
            }
            if let Some(name) = fields.get("name") {
                updated.name = name.as_str().ok_or_else(|| invalid("name must be a string."))?.to_owned();
            }
            if let Some(description) = fields.get("description") {
                updated.description =
                    description.as_str().ok_or_else(|| invalid("description must be a string."))?.to_owned();
            }
        }
    }
    updated.touch();
    let answer = port_json(&updated);
    state.ports.insert(updated.id.clone(), updated);
    Ok(Json(json!({"port": answer})).into_response())
}

fn tags(ctx: &Ctx, call: &Call) -> ApiResult {
    let id = call.seg(1);
    let body =
        if call.method == Method::PUT && call.path.len() == 3 { Some(call.json(Service::Neutron)?) } else { None };
    let mut state = ctx.store.lock_at(Instant::now());
    let port = state.ports.get_mut(id).filter(|p| p.project_id == call.project_id).ok_or_else(|| not_found(id))?;
    let response = match (call.method.as_str(), call.path.len()) {
        ("PUT", 3) => {
            let value = body.as_ref().and_then(|b| b.get("tags")).ok_or_else(|| invalid("tags is required"))?;
            port.tags = tags_value(value)?;
            Json(json!({"tags": port.tags})).into_response()
        }
        ("PUT", _) => {
            let tag = call.seg(3);
            check_tag(tag)?;
            if !port.tags.iter().any(|t| t == tag) {
                if port.tags.len() >= MAX_TAGS {
                    return Err(too_many_tags());
                }
                port.tags.push(tag.to_owned());
            }
            StatusCode::CREATED.into_response()
        }
        (_, 3) => {
            port.tags.clear();
            StatusCode::NO_CONTENT.into_response()
        }
        _ => {
            let tag = call.seg(3);
            if !port.tags.iter().any(|t| t == tag) {
                return Err(ApiError::neutron(
                    StatusCode::NOT_FOUND,
                    "TagNotFound",
                    format!("Tag {tag} could not be found for port {id}."),
                ));
            }
            port.tags.retain(|t| t != tag);
            StatusCode::NO_CONTENT.into_response()
        }
    };
    port.touch();
    Ok(response)
}

fn delete(ctx: &Ctx, call: &Call) -> ApiResult {
    let id = call.seg(1);
    let now = Instant::now();
    let mut state = ctx.store.lock_at(now);
    if state.ports.get(id).is_none_or(|p| p.project_id != call.project_id) {
        return Err(not_found(id));
    }
    state.remove_port(id, now);
    Ok(StatusCode::NO_CONTENT.into_response())
}
