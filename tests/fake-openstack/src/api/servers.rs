//! Nova servers: microversions, `POST /servers` with its validation and side effects
//! (Nova-made ports, user ports attached, boot volumes; none of them for a server the
//! scheduler cannot place, [`Scheduling::NoValidHost`]), `GET /servers[/detail]` with the
//! regex name filter and marker paging, `GET /servers/{id}` and `DELETE /servers/{id}`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Instant, SystemTime};

use axum::Json;
use axum::http::header::LOCATION;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::IntoResponse;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use super::paging::{PageError, next_query, page};
use super::{Call, Ctx, nova_max, wire};
use crate::error::{ApiError, ApiResult, Service};
use crate::state::compute::{AttachedVolume, Scheduling, Server, ServerPhase, flavor};
use crate::state::network::{FixedIp, Port, random_mac};
use crate::state::volumes::{Attachment, Volume, VolumePhase};
use crate::state::{State, compute};
use crate::{AVAILABILITY_ZONES, KEY_NAME, PROJECT_ID, SERVER_GROUP_ID, VOLUME_TYPES, clock};

const NOVA: Service = Service::Nova;

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(NOVA, message)
}

/// The requested microversion (`OpenStack-API-Version: compute X.Y` or
/// `X-OpenStack-Nova-API-Version: X.Y`; absent → 2.1, `latest` → the maximum).
pub(crate) fn microversion(headers: &HeaderMap) -> Result<(u32, u32), ApiError> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let requested = header("openstack-api-version")
        .and_then(|value| {
            value.split(',').map(str::trim).find_map(|entry| {
                let (service, version) = entry.split_once(' ')?;
                (service.eq_ignore_ascii_case("compute")).then(|| version.trim().to_owned())
            })
        })
        .or_else(|| header("x-openstack-nova-api-version").map(str::to_owned));
    let Some(requested) = requested else { return Ok((2, 1)) };
    if requested.eq_ignore_ascii_case("latest") {
        return Ok(nova_max());
    }
    let version = wire::parse_version(&requested)
        .ok_or_else(|| bad(format!("Invalid API version request string {requested}.")))?;
    if version < (2, 1) || version > nova_max() {
        let (major, minor) = nova_max();
        return Err(ApiError::new(
            NOVA,
            StatusCode::NOT_ACCEPTABLE,
            format!("Version {requested} is not supported by the API. Minimum is 2.1 and maximum is {major}.{minor}."),
        ));
    }
    Ok(version)
}

/// The operation of a server path.
pub(crate) fn operation(method: &Method, path: &[&str]) -> Option<&'static str> {
    match (method.as_str(), path) {
        ("POST", ["servers"]) => Some("servers.create"),
        ("GET", ["servers"] | ["servers", "detail"]) => Some("servers.list"),
        ("GET", ["servers", _]) => Some("servers.get"),
        ("DELETE", ["servers", _]) => Some("servers.delete"),
        _ => None,
    }
}

/// Dispatches a server operation; `scheduling` is what the scheduler decides for a
/// server that `servers.create` accepts.
pub(crate) fn handle(ctx: &Ctx, call: &Call, operation: &str, scheduling: Scheduling) -> ApiResult {
    match operation {
        "servers.create" => create(ctx, call, scheduling),
        "servers.list" => list(ctx, call),
        "servers.get" => get(ctx, call),
        "servers.delete" => delete(ctx, call),
        _ => Err(ApiError::no_route(NOVA)),
    }
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(NOVA, format!("Instance {id} could not be found."))
}

fn links(call: &Call, kind: &str, id: &str) -> Value {
    json!([
        {"rel": "self", "href": format!("{}/compute/v2.1/{kind}/{id}", call.base)},
        {"rel": "bookmark", "href": format!("{}/compute/{kind}/{id}", call.base)},
    ])
}

/// The last path segment of an id-or-URL reference.
fn id_of(reference: &str) -> &str {
    reference.trim_end_matches('/').rsplit('/').next().unwrap_or(reference)
}

/// A requested network.
enum NetRequest {
    Network { id: String, fixed_ip: Option<String> },
    Port(String),
}

fn networks(call: &Call, state: &State, server: &Map<String, Value>) -> Result<Vec<NetRequest>, ApiError> {
    let auto = || -> Result<Vec<NetRequest>, ApiError> {
        let network = state.networks.values().find(|n| n.project_id == call.project_id).ok_or_else(|| {
            bad(format!("Unable to automatically allocate a network for project {}", call.project_id))
        })?;
        Ok(vec![NetRequest::Network { id: network.id.clone(), fixed_ip: None }])
    };
    let requested = match server.get("networks") {
        None if call.at_least(2, 37) => {
            return Err(bad("Invalid input for field/attribute server. 'networks' is a required property"));
        }
        None => return auto(),
        Some(Value::String(word)) if word == "auto" && call.at_least(2, 37) => return auto(),
        Some(Value::String(word)) if word == "none" && call.at_least(2, 37) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(bad(format!("Invalid input for field/attribute networks. Value: {other}."))),
    };
    requested
        .iter()
        .map(|item| {
            let port = item.get("port").and_then(Value::as_str).filter(|p| !p.is_empty());
            let uuid = item.get("uuid").and_then(Value::as_str).filter(|u| !u.is_empty());
            let fixed_ip = item.get("fixed_ip").and_then(Value::as_str).map(str::to_owned);
            match (port, uuid) {
                (Some(port), _) => Ok(NetRequest::Port(port.to_owned())),
                (None, Some(uuid)) => Ok(NetRequest::Network { id: uuid.to_owned(), fixed_ip }),
                (None, None) => Err(bad(format!("Invalid input for field/attribute networks. Value: {item}."))),
            }
        })
        .collect()
}

fn metadata(server: &Map<String, Value>) -> Result<BTreeMap<String, String>, ApiError> {
    let Some(value) = server.get("metadata") else { return Ok(BTreeMap::new()) };
    let map = value.as_object().ok_or_else(|| bad("Invalid input for field/attribute metadata."))?;
    if map.len() > 128 {
        return Err(ApiError::forbidden(
            NOVA,
            "Quota exceeded for metadata_items: Requested 129, but already used 0 of 128 metadata_items",
        ));
    }
    map.iter()
        .map(|(key, value)| {
            let text = value.as_str().ok_or_else(|| {
                bad(format!("Invalid input for field/attribute metadata. Value: {value} is not a string."))
            })?;
            if key.is_empty() || key.chars().count() > 255 || text.chars().count() > 255 {
                return Err(bad(format!(
                    "Invalid input for field/attribute metadata. Key '{key}' or its value is too long or empty."
                )));
            }
            Ok((key.clone(), text.to_owned()))
        })
        .collect()
}

/// A parsed block device mapping: image or blank to a new volume, image to local, or an
/// existing volume (`source_type: volume`).
struct Bdm {
    boot_index: Option<i64>,
    /// `source_type: image`, `destination_type: local`: the image boot itself, no volume.
    local: bool,
    image: Option<String>,
    /// `source_type: volume`: the existing Cinder volume to attach (no volume is made).
    volume: Option<String>,
    size: u64,
    volume_type: String,
    delete_on_termination: bool,
}

/// `boot_index` as Nova reads it (absent or null: not a boot device).
fn boot_index(item: &Value) -> Result<Option<i64>, ApiError> {
    match item.get("boot_index") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_i64()),
        Some(Value::String(s)) => Ok(s.parse().ok()),
        Some(_) => Err(bad("Invalid input for field/attribute boot_index.")),
    }
}

fn bdms(call: &Call, server: &Map<String, Value>) -> Result<Vec<Bdm>, ApiError> {
    let Some(value) = server.get("block_device_mapping_v2") else { return Ok(Vec::new()) };
    let items = value.as_array().ok_or_else(|| bad("Block Device Mapping is Invalid: not a list."))?;
    items
        .iter()
        .map(|item| {
            let source = item.get("source_type").and_then(Value::as_str).unwrap_or("");
            let destination = item.get("destination_type").and_then(Value::as_str).unwrap_or("volume");
            if source == "image" && destination == "local" {
                let image = item.get("uuid").and_then(Value::as_str).map(str::to_owned);
                return Ok(Bdm { boot_index: Some(0), local: true, image, volume: None, size: 0, volume_type: String::new(), delete_on_termination: true });
            }
            if source == "volume" && destination == "volume" {
                // An existing volume (Nova's "boot from volume" with a pre-created volume):
                // its size and type are the volume's own, `volume_size` is ignored as Nova does.
                let volume = item.get("uuid").and_then(Value::as_str).filter(|u| !u.is_empty()).ok_or_else(|| bad("Block Device Mapping is Invalid: uuid is required."))?;
                let delete_on_termination = item.get("delete_on_termination").and_then(Value::as_bool).unwrap_or(false);
                return Ok(Bdm { boot_index: boot_index(item)?, local: false, image: None, volume: Some(volume.to_owned()), size: 0, volume_type: String::new(), delete_on_termination });
            }
            if !matches!(source, "image" | "blank") || destination != "volume" {
                return Err(bad("Block Device Mapping is Invalid: only image (to local or volume), blank (to volume) or volume (to volume) sources are supported."));
            }
            let boot_index = boot_index(item)?;
            let image = if source == "image" {
                Some(item.get("uuid").and_then(Value::as_str).ok_or_else(|| bad("Block Device Mapping is Invalid: uuid is required."))?.to_owned())
            } else {
                None
            };
            let size = match item.get("volume_size") {
                Some(Value::Number(n)) => n.as_u64().filter(|s| *s > 0),
                Some(Value::String(s)) => s.parse().ok().filter(|s| *s > 0),
                _ => None,
            }
            .ok_or_else(|| bad("Block Device Mapping is Invalid: You specified more local devices than the limit allows. volume_size is required."))?;
            let volume_type = match item.get("volume_type").and_then(Value::as_str) {
                None => VOLUME_TYPES[0].to_owned(),
                Some(_) if !call.at_least(2, 67) => {
                    return Err(bad("Invalid input for field/attribute block_device_mapping_v2. Additional properties are not allowed ('volume_type' was unexpected)"));
                }
                Some(kind) if VOLUME_TYPES.contains(&kind) => kind.to_owned(),
                Some(kind) => return Err(bad(format!("Volume type {kind} could not be found."))),
            };
            let delete_on_termination = item.get("delete_on_termination").and_then(Value::as_bool).unwrap_or(false);
            Ok(Bdm { boot_index, local: false, image, volume: None, size, volume_type, delete_on_termination })
        })
        .collect()
}

/// The port Nova makes for a server booted on a network (`networks: [{"uuid": …}]`)
/// once a compute host takes it: unnamed and untagged, bound to the server
/// (`device_id`, `device_owner compute:<zone>`), with the server's security groups
/// (ids) and `fixed_ips`, no allowed address pairs, `DOWN` until the server is ACTIVE
/// ([`State::advance`] turns it `ACTIVE` then), deleted with the server.
pub(crate) fn nova_port(
    project_id: &str,
    server_id: &str,
    availability_zone: &str,
    network_id: &str,
    fixed_ips: Vec<FixedIp>,
    security_groups: Vec<String>,
    created: SystemTime,
) -> Port {
    Port {
        id: uuid::Uuid::new_v4().to_string(),
        project_id: project_id.to_owned(),
        name: String::new(),
        description: String::new(),
        network_id: network_id.to_owned(),
        mac_address: random_mac(),
        status: "DOWN",
        device_id: server_id.to_owned(),
        device_owner: format!("compute:{availability_zone}"),
        fixed_ips,
        security_groups,
        allowed_address_pairs: Vec::new(),
        tags: Vec::new(),
        created,
        updated: created,
        revision: 1,
        made_by_nova: true,
    }
}

fn create(ctx: &Ctx, call: &Call, scheduling: Scheduling) -> ApiResult {
    let body = call.json(NOVA)?;
    let server = body
        .get("server")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("Invalid input for field/attribute server. 'server' is a required property"))?;
    let name = server
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("Invalid input for field/attribute server. 'name' is a required property"))?;
    if name.is_empty() || name.chars().count() > 255 || name.trim() != name {
        return Err(bad(format!("Invalid input for field/attribute name. Value: {name}.")));
    }
    let flavor_ref = server
        .get("flavorRef")
        .and_then(|v| v.as_str().map(str::to_owned).or_else(|| v.as_u64().map(|n| n.to_string())))
        .ok_or_else(|| bad("Invalid input for field/attribute server. 'flavorRef' is a required property"))?;
    let metadata = metadata(server)?;
    let user_data = match server.get("user_data") {
        None | Some(Value::Null) => None,
        Some(Value::String(data)) => {
            let decoded = STANDARD.decode(data.as_bytes()).map_err(|_| bad("User data needs to be valid base 64."))?;
            if decoded.len() > 65535 {
                return Err(bad(
                    "User data too large. User data must be no larger than 65535 bytes once base64 encoded.",
                ));
            }
            Some(data.clone())
        }
        Some(_) => return Err(bad("User data needs to be valid base 64.")),
    };
    let availability_zone = match server.get("availability_zone").and_then(Value::as_str) {
        None | Some("") => AVAILABILITY_ZONES[0].to_owned(),
        Some(zone) if AVAILABILITY_ZONES.contains(&zone) => zone.to_owned(),
        Some(_) => return Err(bad("The requested availability zone is not available")),
    };
    let config_drive = match server.get("config_drive") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(Value::String(s)) => matches!(s.to_ascii_lowercase().as_str(), "true" | "1" | "yes" | "on"),
        Some(_) => return Err(bad("Invalid input for field/attribute config_drive.")),
    };
    let key_name = match server.get("key_name").and_then(Value::as_str) {
        None => None,
        Some(key) if key == KEY_NAME && call.project_id == PROJECT_ID => Some(key.to_owned()),
        Some(_) => return Err(bad("Invalid key_name provided.")),
    };
    let hints = body.get("os:scheduler_hints").or_else(|| body.get("OS-SCH-HNT:scheduler_hints"));
    let server_group = match hints.and_then(|h| h.get("group")).and_then(Value::as_str) {
        None => None,
        Some(group) if group == SERVER_GROUP_ID && call.project_id == PROJECT_ID => Some(group.to_owned()),
        Some(_) => return Err(bad("Invalid server group")),
    };
    let mut bdms = bdms(call, server)?;
    let local_image = bdms.iter().find(|b| b.local).and_then(|b| b.image.clone());
    bdms.retain(|b| !b.local);
    let boot_volume = bdms.iter().any(|b| b.boot_index == Some(0));
    let image_ref = server
        .get("imageRef")
        .and_then(Value::as_str)
        .filter(|i| !i.is_empty())
        .or(local_image.as_deref())
        .unwrap_or("");
    if image_ref.is_empty() && !boot_volume {
        return Err(bad(
            "Block Device Mapping is Invalid: Boot sequence for the instance and image/block device mapping combination is not valid.",
        ));
    }
    let flavor_id = id_of(&flavor_ref).to_owned();
    if flavor(&flavor_id).is_none() {
        return Err(bad(format!("Flavor {flavor_id} could not be found.")));
    }

    let now = Instant::now();
    let timing = ctx.admin.timing();
    let invisible = ctx.admin.consistency().invisible();
    let mut state = ctx.store.lock_at(now);
    let image_id = (!image_ref.is_empty()).then(|| id_of(image_ref).to_owned());
    for image in image_id.iter().chain(bdms.iter().filter_map(|b| b.image.as_ref())) {
        if !state.images.get(image).is_some_and(|i| i.visible_to(&call.project_id)) {
            return Err(bad(format!("Image {image} could not be found.")));
        }
    }
    let mut attach_volumes: Vec<&str> = Vec::new();
    for bdm in &bdms {
        let Some(volume_id) = bdm.volume.as_deref() else { continue };
        // Nova reads each volume from Cinder (not found → InvalidBDMVolume), reserves an
        // attachment (only an `available` volume, once) and boots only from a bootable one.
        let volume = state
            .volumes
            .get(volume_id)
            .filter(|v| v.project_id == call.project_id)
            .ok_or_else(|| bad(format!("Block Device Mapping is Invalid: failed to get volume {volume_id}.")))?;
        if volume.status() != "available" || attach_volumes.contains(&volume_id) {
            let status = if attach_volumes.contains(&volume_id) { "reserved" } else { volume.status() };
            return Err(bad(format!(
                "Invalid volume: Volume {volume_id} status must be available or downloading to reserve, but the current status is {status}."
            )));
        }
        if bdm.boot_index == Some(0) && volume.image_id.is_none() {
            return Err(bad(format!("Block Device {volume_id} is not bootable.")));
        }
        attach_volumes.push(volume_id);
    }
    let requested_groups: Vec<String> = match server.get("security_groups") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            items.iter().map(|g| g.get("name").and_then(Value::as_str).unwrap_or("").to_owned()).collect()
        }
        Some(_) => return Err(bad("Invalid input for field/attribute security_groups.")),
    };
    let mut group_ids = Vec::new();
    let mut group_names = Vec::new();
    for wanted in if requested_groups.is_empty() { vec!["default".to_owned()] } else { requested_groups } {
        let group = state
            .security_groups
            .values()
            .find(|g| g.project_id == call.project_id && (g.id == wanted || g.name == wanted))
            .ok_or_else(|| bad(format!("Security group {wanted} not found for project {}.", call.project_id)))?;
        group_ids.push(group.id.clone());
        group_names.push(group.name.clone());
    }
    let nets = networks(call, &state, server)?;
    let mut fixed_requests = Vec::new();
    for net in &nets {
        match net {
            NetRequest::Port(id) => {
                let port = state
                    .ports
                    .get(id)
                    .filter(|p| p.project_id == call.project_id)
                    .ok_or_else(|| bad(format!("Port id {id} could not be found.")))?;
                if !port.device_id.is_empty() {
                    return Err(ApiError::conflict(NOVA, format!("Port {id} is still in use.")));
                }
            }
            NetRequest::Network { id, fixed_ip } => {
                let network = state
                    .networks
                    .get(id)
                    .filter(|n| n.project_id == call.project_id)
                    .ok_or_else(|| bad(format!("Network {id} could not be found.")))?;
                if let Some(text) = fixed_ip {
                    let ip: IpAddr = text.parse().map_err(|_| bad(format!("Invalid fixed IP address ({text})")))?;
                    let subnet =
                        network
                            .subnets
                            .iter()
                            .filter_map(|s| state.subnets.get(s))
                            .find(|s| s.contains(ip))
                            .ok_or_else(|| bad(format!("Fixed IP address {text} is not valid on network {id}.")))?;
                    if state.ip_in_use(&subnet.id, ip) || fixed_requests.contains(&(subnet.id.clone(), ip)) {
                        return Err(bad(format!("Fixed IP address {text} is already in use on instance.")));
                    }
                    fixed_requests.push((subnet.id.clone(), ip));
                }
            }
        }
    }
    let used = state.servers.values().filter(|s| s.project_id == call.project_id).count();
    if used >= state.instance_quota {
        let quota = state.instance_quota;
        return Err(ApiError::forbidden(
            NOVA,
            format!("Quota exceeded for instances: Requested 1, but already used {used} of {quota} instances"),
        ));
    }

    let id = uuid::Uuid::new_v4().to_string();
    let created = SystemTime::now();
    // Everything above is the API's own validation (4xx before any scheduling);
    // what follows happens once the scheduler placed the server on a host. A
    // server it cannot place gets none of it: its ports stay unbound (Nova binds
    // them on the compute host), it gets no Nova-made port and no new volume
    // (made on the host too); a pre-existing volume stays reserved for it.
    let placed = scheduling == Scheduling::Placed;
    let fail = match state.failures.as_mut().filter(|_| placed) {
        Some(failures) if failures.times > 0 => {
            failures.times -= 1;
            Some((failures.code, failures.message.clone()))
        }
        _ => None,
    };
    if state.failures.as_ref().is_some_and(|f| f.times == 0) {
        state.failures = None;
    }
    let device_owner = format!("compute:{availability_zone}");
    let mut port_ids = Vec::new();
    for net in nets.into_iter().filter(|_| placed) {
        match net {
            NetRequest::Port(port_id) => {
                if let Some(port) = state.ports.get_mut(&port_id) {
                    port.device_id.clone_from(&id);
                    port.device_owner.clone_from(&device_owner);
                    port.touch();
                }
                port_ids.push(port_id);
            }
            NetRequest::Network { id: network_id, fixed_ip } => {
                let subnets = state.networks.get(&network_id).map(|n| n.subnets.clone()).unwrap_or_default();
                let mut fixed_ips = Vec::new();
                if let Some(text) = fixed_ip {
                    let ip: Option<IpAddr> = text.parse().ok();
                    if let Some(subnet) =
                        subnets.iter().find(|s| state.subnets.get(*s).zip(ip).is_some_and(|(sub, ip)| sub.contains(ip)))
                    {
                        fixed_ips.push(FixedIp {
                            subnet_id: subnet.clone(),
                            ip_address: ip.map(|i| i.to_string()).unwrap_or(text),
                        });
                    }
                } else {
                    for subnet in &subnets {
                        if let Some(ip) = state.allocate_ip(subnet) {
                            fixed_ips.push(FixedIp { subnet_id: subnet.clone(), ip_address: ip });
                        }
                    }
                }
                let port = nova_port(
                    &call.project_id,
                    &id,
                    &availability_zone,
                    &network_id,
                    fixed_ips,
                    group_ids.clone(),
                    created,
                );
                port_ids.push(port.id.clone());
                state.ports.insert(port.id.clone(), port);
            }
        }
    }
    let mut volumes = Vec::new();
    for (index, bdm) in bdms.into_iter().enumerate() {
        let device = format!("/dev/vd{}", char::from(b'a' + u8::try_from(index.min(25)).unwrap_or(0)));
        if let Some(volume_id) = bdm.volume {
            if let Some(volume) = state.volumes.get_mut(&volume_id) {
                volume.attachment =
                    Some(Attachment { server_id: id.clone(), attachment_id: uuid::Uuid::new_v4().to_string(), device });
                volume.delete_on_termination = bdm.delete_on_termination;
                volume.updated = created;
            }
            volumes.push(AttachedVolume { id: volume_id, delete_on_termination: bdm.delete_on_termination });
            continue;
        }
        if !placed {
            continue;
        }
        let seq = state.seq();
        let volume_id = uuid::Uuid::new_v4().to_string();
        state.volumes.insert(
            volume_id.clone(),
            Volume {
                seq,
                id: volume_id.clone(),
                project_id: call.project_id.clone(),
                name: String::new(),
                description: None,
                size: bdm.size,
                volume_type: bdm.volume_type,
                availability_zone: availability_zone.clone(),
                image_id: bdm.image,
                metadata: BTreeMap::new(),
                phase: VolumePhase::Ready,
                attachment: Some(Attachment {
                    server_id: id.clone(),
                    attachment_id: uuid::Uuid::new_v4().to_string(),
                    device,
                }),
                delete_on_termination: bdm.delete_on_termination,
                created,
                updated: created,
            },
        );
        volumes.push(AttachedVolume { id: volume_id, delete_on_termination: bdm.delete_on_termination });
    }
    let seq = state.seq();
    let admin_pass: String = uuid::Uuid::new_v4().simple().to_string().chars().take(12).collect();
    let boot = timing.boot();
    state.servers.insert(
        id.clone(),
        Server {
            seq,
            id: id.clone(),
            project_id: call.project_id.clone(),
            user_id: call.user_id.clone(),
            name: name.to_owned(),
            created,
            updated: created,
            visible_at: now + invisible,
            phase: if placed {
                ServerPhase::Building { spawning_at: now + boot / 2, until: now + boot, fail }
            } else {
                ServerPhase::Unplaceable { until: now + boot / 2 }
            },
            flavor_id,
            image_id: if boot_volume { None } else { image_id },
            key_name,
            availability_zone,
            config_drive,
            metadata,
            user_data,
            server_group,
            security_groups: group_names.clone(),
            ports: port_ids,
            volumes,
            fault: None,
        },
    );
    drop(state);
    let answer = json!({"server": {
        "id": id,
        "links": links(call, "servers", &id),
        "OS-DCF:diskConfig": "MANUAL",
        "security_groups": group_names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
        "adminPass": admin_pass,
    }});
    let mut response = (StatusCode::ACCEPTED, Json(answer)).into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("{}/compute/v2.1/servers/{id}", call.base)) {
        response.headers_mut().insert(LOCATION, location);
    }
    Ok(response)
}

fn server_json(state: &State, server: &Server, call: &Call, now: Instant) -> Value {
    let mut addresses: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for port in server.ports.iter().filter_map(|p| state.ports.get(p)) {
        let network = state.networks.get(&port.network_id).map_or_else(|| port.network_id.clone(), |n| n.name.clone());
        let entry = addresses.entry(network).or_default();
        for fixed in &port.fixed_ips {
            let version = if fixed.ip_address.contains(':') { 6 } else { 4 };
            entry.push(json!({"addr": fixed.ip_address, "version": version, "OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": port.mac_address}));
        }
    }
    let flavor = compute::flavor(&server.flavor_id).unwrap_or(compute::FLAVORS[0]);
    let flavor_json = if call.at_least(2, 47) {
        json!({"original_name": flavor.1, "vcpus": flavor.2, "ram": flavor.3, "disk": flavor.4, "ephemeral": 0, "swap": 0, "extra_specs": {}})
    } else {
        json!({"id": flavor.0, "links": [{"rel": "bookmark", "href": format!("{}/compute/flavors/{}", call.base, flavor.0)}]})
    };
    let image = server.image_id.as_ref().map_or(json!(""), |image| {
        json!({"id": image, "links": [{"rel": "bookmark", "href": format!("{}/compute/images/{image}", call.base)}]})
    });
    let host_id =
        format!("{:x}", uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, server.project_id.as_bytes()).as_u128());
    let mut body = json!({
        "id": server.id,
        "name": server.name,
        "status": server.status(),
        "tenant_id": server.project_id,
        "user_id": server.user_id,
        "metadata": server.metadata,
        "hostId": host_id,
        "image": image,
        "flavor": flavor_json,
        "created": clock::seconds(server.created),
        "updated": clock::seconds(server.updated),
        "addresses": addresses,
        "accessIPv4": "",
        "accessIPv6": "",
        "links": links(call, "servers", &server.id),
        "OS-DCF:diskConfig": "MANUAL",
        "progress": 0,
        "OS-EXT-AZ:availability_zone": server.availability_zone,
        "config_drive": if server.config_drive { "True" } else { "" },
        "key_name": server.key_name,
        // Nova's usage fields are naive datetimes with microseconds and no zone
        // (`2026-12-01T10:00:00.000000`), unlike `created`/`updated`.
        "OS-SRV-USG:launched_at": if server.status() != "ACTIVE" { Value::Null } else { json!(clock::cinder(server.created)) },
        "OS-SRV-USG:terminated_at": null,
        "security_groups": security_group_names(state, server).iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
        "OS-EXT-STS:task_state": server.task_state(now),
        "OS-EXT-STS:vm_state": server.vm_state(),
        "OS-EXT-STS:power_state": server.power_state(),
        "os-extended-volumes:volumes_attached": server.volumes.iter().map(|v| json!({"id": v.id, "delete_on_termination": v.delete_on_termination})).collect::<Vec<_>>(),
    });
    if let Some(fault) = &server.fault {
        body["fault"] = json!({"code": fault.code, "message": fault.message, "created": clock::seconds(fault.created)});
    }
    if call.at_least(2, 9) {
        body["locked"] = json!(false);
    }
    if call.at_least(2, 19) {
        body["description"] = Value::Null;
    }
    if call.at_least(2, 26) {
        body["tags"] = json!([]);
    }
    if call.at_least(2, 73) {
        body["locked_reason"] = Value::Null;
    }
    if call.at_least(2, 96) {
        body["pinned_availability_zone"] = Value::Null;
    }
    body
}

/// The names of a server's security groups as Nova shows them: those of its
/// ports (Nova asks Neutron; a port's groups changed by `PUT /ports/{id}` show
/// here at once), or the groups it was made with when it has no port.
fn security_group_names(state: &State, server: &Server) -> Vec<String> {
    let ports: Vec<_> = server.ports.iter().filter_map(|p| state.ports.get(p)).collect();
    if ports.is_empty() {
        return server.security_groups.clone();
    }
    let mut names: Vec<String> = Vec::new();
    for id in ports.iter().flat_map(|p| &p.security_groups) {
        let name = state.security_groups.get(id).map_or_else(|| id.clone(), |g| g.name.clone());
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

fn visible<'a>(state: &'a State, call: &Call, id: &str, now: Instant) -> Option<&'a Server> {
    state.servers.get(id).filter(|s| s.project_id == call.project_id && s.visible_at <= now)
}

fn get(ctx: &Ctx, call: &Call) -> ApiResult {
    let id = call.seg(1);
    let now = Instant::now();
    let state = ctx.store.lock_at(now);
    let server = visible(&state, call, id, now).ok_or_else(|| not_found(id))?;
    Ok(Json(json!({"server": server_json(&state, server, call, now)})).into_response())
}

fn list(ctx: &Ctx, call: &Call) -> ApiResult {
    let detail = call.seg(1) == "detail";
    let name = match call.param("name") {
        Some(pattern) => {
            Some(regex::Regex::new(pattern).map_err(|_| bad(format!("Invalid regular expression: {pattern}")))?)
        }
        None => None,
    };
    let status = call.param("status").map(str::to_ascii_uppercase);
    let now = Instant::now();
    let state = ctx.store.lock_at(now);
    let mut servers: Vec<&Server> = state
        .servers
        .values()
        .filter(|s| s.project_id == call.project_id && s.visible_at <= now)
        .filter(|s| name.as_ref().is_none_or(|re| re.is_match(&s.name)))
        .filter(|s| status.as_ref().is_none_or(|st| st == s.status()))
        .collect();
    servers.sort_by(|a, b| b.created.cmp(&a.created).then(b.seq.cmp(&a.seq)).then(b.id.cmp(&a.id)));
    let page = page(servers, call, state.page_size, |s| s.id.as_str()).map_err(|error| match error {
        PageError::BadLimit(limit) => bad(format!("Invalid input for query parameters limit. Value: {limit}.")),
        PageError::UnknownMarker(marker) => bad(format!("marker [{marker}] not found")),
    })?;
    let items: Vec<Value> = page
        .items
        .iter()
        .map(|s| {
            if detail {
                server_json(&state, s, call, now)
            } else {
                json!({"id": s.id, "name": s.name, "links": links(call, "servers", &s.id)})
            }
        })
        .collect();
    let mut body = json!({"servers": items});
    if let Some(marker) = page.next_marker {
        let path = if detail { "servers/detail" } else { "servers" };
        let href = format!("{}/compute/v2.1/{path}?{}", call.base, next_query(call, page.limit, &marker));
        body["servers_links"] = json!([{"rel": "next", "href": href}]);
    }
    Ok(Json(body).into_response())
}

fn delete(ctx: &Ctx, call: &Call) -> ApiResult {
    let id = call.seg(1);
    let now = Instant::now();
    let stop = ctx.admin.timing().stop();
    let mut state = ctx.store.lock_at(now);
    let server = state.servers.get_mut(id).filter(|s| s.project_id == call.project_id).ok_or_else(|| not_found(id))?;
    if server.without_host() {
        // Nova's local delete of an instance no host took (compute API `_delete`:
        // a build request is deleted, an instance buried in cell0 destroyed), at once.
        state.remove_server(id, now);
    } else if !server.deleting() {
        let was = server.status();
        server.phase = ServerPhase::Deleting { until: now + stop, was };
        server.updated = SystemTime::now();
    }
    drop(state);
    Ok(StatusCode::NO_CONTENT.into_response())
}
