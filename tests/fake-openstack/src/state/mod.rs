//! The fake's cloud state behind one `std::sync::Mutex` (never held across an `.await`),
//! plus Keystone's token state behind another. Transitions (BUILD → ACTIVE/ERROR,
//! deleting → gone, volume creating → available, deleting → gone) are applied lazily by
//! [`State::advance`] whenever the state is locked.

pub(crate) mod compute;
pub(crate) mod identity;
pub(crate) mod images;
pub(crate) mod network;
pub(crate) mod seed;
pub(crate) mod volumes;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use fake_cloud_support::InventoryInstance;
use serde_json::{Value, json};

use self::compute::{Server, ServerFault, ServerPhase};
use self::identity::Auth;
use self::images::Image;
use self::network::{Network, Port, SecurityGroup, Subnet};
use self::volumes::{Volume, VolumePhase};

/// Default page size of list calls.
pub(crate) const DEFAULT_PAGE_SIZE: usize = 1000;
/// Default instance quota per project.
pub(crate) const DEFAULT_INSTANCE_QUOTA: usize = 100;
/// Default fault message of servers hit by `/_admin/openstack/server-failures`.
pub(crate) const DEFAULT_FAILURE_MESSAGE: &str = compute::NO_VALID_HOST;
/// How long gone resources stay in the inventory.
const GONE_RETENTION: Duration = Duration::from_secs(600);

/// Pending server failures (`POST /_admin/openstack/server-failures`).
#[derive(Debug, Clone)]
pub(crate) struct Failures {
    /// How many more accepted servers fail.
    pub(crate) times: u32,
    /// Fault message.
    pub(crate) message: String,
    /// Fault code.
    pub(crate) code: u16,
}

/// All mutable cloud state.
#[derive(Debug)]
pub(crate) struct State {
    /// Next creation sequence number.
    pub(crate) next_seq: u64,
    /// Servers by id.
    pub(crate) servers: BTreeMap<String, Server>,
    /// Ports by id.
    pub(crate) ports: BTreeMap<String, Port>,
    /// Volumes by id.
    pub(crate) volumes: BTreeMap<String, Volume>,
    /// Images by id.
    pub(crate) images: BTreeMap<String, Image>,
    /// Networks by id.
    pub(crate) networks: BTreeMap<String, Network>,
    /// Subnets by id.
    pub(crate) subnets: BTreeMap<String, Subnet>,
    /// Security groups by id.
    pub(crate) security_groups: BTreeMap<String, SecurityGroup>,
    /// Gone servers for the inventory, with when they went.
    pub(crate) gone_servers: Vec<(Instant, InventoryInstance)>,
    /// Gone ports and volumes for the inventory, with when they went.
    pub(crate) gone_dependents: Vec<(Instant, InventoryInstance)>,
    /// Page size of list calls.
    pub(crate) page_size: usize,
    /// Instance quota per project.
    pub(crate) instance_quota: usize,
    /// Pending server failures.
    pub(crate) failures: Option<Failures>,
}

impl State {
    /// The seeded initial state.
    pub(crate) fn initial() -> Self {
        let mut state = Self {
            next_seq: 1,
            servers: BTreeMap::new(),
            ports: BTreeMap::new(),
            volumes: BTreeMap::new(),
            images: BTreeMap::new(),
            networks: BTreeMap::new(),
            subnets: BTreeMap::new(),
            security_groups: BTreeMap::new(),
            gone_servers: Vec::new(),
            gone_dependents: Vec::new(),
            page_size: DEFAULT_PAGE_SIZE,
            instance_quota: DEFAULT_INSTANCE_QUOTA,
            failures: None,
        };
        seed::seed(&mut state);
        state
    }

    /// The next sequence number.
    pub(crate) fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Applies every transition due at `now`.
    pub(crate) fn advance(&mut self, now: Instant) {
        let mut built = Vec::new();
        let mut gone = Vec::new();
        for (id, server) in &mut self.servers {
            match &server.phase {
                ServerPhase::Building { until, fail, .. } if now >= *until => {
                    let fail = fail.clone();
                    server.updated = SystemTime::now();
                    if let Some((code, message)) = fail {
                        server.phase = ServerPhase::Error;
                        server.fault = Some(ServerFault { code, message, created: SystemTime::now() });
                        built.push((id.clone(), false));
                    } else {
                        server.phase = ServerPhase::Active;
                        built.push((id.clone(), true));
                    }
                }
                ServerPhase::Unplaceable { until } if now >= *until => {
                    server.updated = SystemTime::now();
                    server.phase = ServerPhase::Buried;
                    server.fault = Some(ServerFault {
                        code: 500,
                        message: compute::NO_VALID_HOST.to_owned(),
                        created: SystemTime::now(),
                    });
                }
                ServerPhase::Deleting { until, .. } if now >= *until => gone.push(id.clone()),
                _ => {}
            }
        }
        for (id, active) in built {
            if active {
                for port in self.ports.values_mut().filter(|p| p.device_id == id) {
                    port.status = "ACTIVE";
                    port.touch();
                }
            } else {
                self.delete_nova_ports(&id, now);
            }
        }
        for id in gone {
            self.remove_server(&id, now);
        }
        let due: Vec<(String, bool)> = self
            .volumes
            .iter()
            .filter_map(|(id, v)| match v.phase {
                VolumePhase::Creating(until) if now >= until => Some((id.clone(), false)),
                VolumePhase::Deleting(until) if now >= until => Some((id.clone(), true)),
                _ => None,
            })
            .collect();
        for (id, remove) in due {
            if remove {
                self.remove_volume(&id, now);
            } else if let Some(volume) = self.volumes.get_mut(&id) {
                volume.phase = VolumePhase::Ready;
                volume.updated = SystemTime::now();
            }
        }
        self.gone_servers.retain(|(at, _)| now.saturating_duration_since(*at) < GONE_RETENTION);
        self.gone_dependents.retain(|(at, _)| now.saturating_duration_since(*at) < GONE_RETENTION);
    }

    /// Deletes the Nova-made ports of server `id` and drops them from its port list.
    fn delete_nova_ports(&mut self, id: &str, now: Instant) {
        let doomed: Vec<String> =
            self.ports.values().filter(|p| p.device_id == id && p.made_by_nova).map(|p| p.id.clone()).collect();
        for port_id in doomed {
            self.remove_port(&port_id, now);
        }
    }

    /// Removes a server that finished deleting (or one ended out of band): Nova-made
    /// ports go, user ports are detached, volumes go (`delete_on_termination`) or are
    /// detached. `false` when no server has `id`.
    pub(crate) fn remove_server(&mut self, id: &str, now: Instant) -> bool {
        let Some(server) = self.servers.remove(id) else { return false };
        self.delete_nova_ports(id, now);
        for port in self.ports.values_mut().filter(|p| p.device_id == id) {
            port.detach();
        }
        for attached in &server.volumes {
            if attached.delete_on_termination {
                self.remove_volume(&attached.id, now);
            } else if let Some(volume) = self.volumes.get_mut(&attached.id) {
                volume.attachment = None;
                volume.updated = SystemTime::now();
            }
        }
        let entry = self.server_inventory(&server, "DELETED", false, now);
        self.gone_servers.push((now, entry));
        true
    }

    /// Removes a port (remembering it for the inventory) and drops it from its server.
    pub(crate) fn remove_port(&mut self, id: &str, now: Instant) {
        let Some(port) = self.ports.remove(id) else { return };
        if let Some(server) = self.servers.get_mut(&port.device_id) {
            server.ports.retain(|p| p != id);
        }
        let entry = self.port_inventory(&port, "DELETED", false);
        self.gone_dependents.push((now, entry));
    }

    /// Removes a volume (remembering it for the inventory).
    pub(crate) fn remove_volume(&mut self, id: &str, now: Instant) {
        let Some(volume) = self.volumes.remove(id) else { return };
        if let Some(attachment) = &volume.attachment
            && let Some(server) = self.servers.get_mut(&attachment.server_id)
        {
            server.volumes.retain(|v| v.id != id);
        }
        let entry = self.volume_inventory(&volume, "deleted", false);
        self.gone_dependents.push((now, entry));
    }

    /// Every IP in use on `subnet_id`.
    pub(crate) fn used_ips(&self, subnet_id: &str) -> BTreeSet<String> {
        self.ports
            .values()
            .flat_map(|p| p.fixed_ips.iter())
            .filter(|f| f.subnet_id == subnet_id)
            .map(|f| f.ip_address.clone())
            .collect()
    }

    /// Hands out the next free IP of a subnet.
    pub(crate) fn allocate_ip(&mut self, subnet_id: &str) -> Option<String> {
        let used = self.used_ips(subnet_id);
        let subnet = self.subnets.get_mut(subnet_id)?;
        loop {
            let ip = subnet.host(subnet.next_host)?;
            subnet.next_host += 1;
            let text = ip.to_string();
            if ip != subnet.gateway && !used.contains(&text) {
                return Some(text);
            }
        }
    }

    /// Whether `ip` is in use on `subnet_id` (textual forms are normalised).
    pub(crate) fn ip_in_use(&self, subnet_id: &str, ip: IpAddr) -> bool {
        self.used_ips(subnet_id).iter().any(|used| used.parse::<IpAddr>().ok() == Some(ip))
    }

    /// The server that `port` is attached to, by name (for Nova-made dependents).
    fn server_name(&self, server_id: &str) -> Option<String> {
        if server_id.is_empty() {
            return None;
        }
        self.servers
            .get(server_id)
            .map(|s| s.name.clone())
            .or_else(|| self.gone_servers.iter().find(|(_, s)| s.id == server_id).map(|(_, s)| s.name.clone()))
    }

    /// The inventory entry of a server.
    pub(crate) fn server_inventory(&self, server: &Server, state: &str, live: bool, now: Instant) -> InventoryInstance {
        let fault = server.fault.as_ref().map_or(Value::Null, |f| json!({"code": f.code, "message": f.message}));
        let mut extra = serde_json::Map::new();
        extra.insert("kind".into(), json!("server"));
        extra.insert("user_data".into(), server.user_data.as_ref().map_or(Value::Null, |u| json!(u)));
        extra.insert("project_id".into(), json!(server.project_id));
        extra.insert("flavor".into(), json!(server.flavor_id));
        extra.insert("image".into(), json!(server.image_id));
        extra.insert("availability_zone".into(), json!(server.availability_zone));
        extra.insert("key_name".into(), json!(server.key_name));
        extra.insert("config_drive".into(), json!(server.config_drive));
        extra.insert("server_group".into(), json!(server.server_group));
        extra.insert("ports".into(), json!(server.ports));
        extra.insert("volumes".into(), json!(server.volumes.iter().map(|v| &v.id).collect::<Vec<_>>()));
        extra.insert("fault".into(), fault);
        extra.insert("task_state".into(), json!(if live { server.task_state(now) } else { None }));
        InventoryInstance {
            id: server.id.clone(),
            name: server.name.clone(),
            state: state.to_owned(),
            live,
            tags: server.metadata.clone(),
            extra,
        }
    }

    /// The inventory entry of a port.
    pub(crate) fn port_inventory(&self, port: &Port, state: &str, live: bool) -> InventoryInstance {
        let name = if port.name.is_empty() {
            self.server_name(&port.device_id).unwrap_or_default()
        } else {
            port.name.clone()
        };
        let mut extra = serde_json::Map::new();
        extra.insert("kind".into(), json!("port"));
        extra.insert("project_id".into(), json!(port.project_id));
        extra.insert("device_id".into(), json!(port.device_id));
        extra.insert("network_id".into(), json!(port.network_id));
        extra.insert(
            "fixed_ips".into(),
            json!(
                port.fixed_ips
                    .iter()
                    .map(|f| json!({"subnet_id": f.subnet_id, "ip_address": f.ip_address}))
                    .collect::<Vec<_>>()
            ),
        );
        extra.insert(
            "allowed_address_pairs".into(),
            json!(
                port.allowed_address_pairs
                    .iter()
                    .map(|p| json!({"ip_address": p.ip_address, "mac_address": p.mac_address}))
                    .collect::<Vec<_>>()
            ),
        );
        extra.insert("security_groups".into(), json!(port.security_groups));
        extra.insert("made_by".into(), json!(if port.made_by_nova { "nova" } else { "user" }));
        InventoryInstance {
            id: port.id.clone(),
            name,
            state: state.to_owned(),
            live,
            tags: port.tags.iter().map(|t| (t.clone(), String::new())).collect(),
            extra,
        }
    }

    /// The inventory entry of a volume.
    pub(crate) fn volume_inventory(&self, volume: &Volume, state: &str, live: bool) -> InventoryInstance {
        let server = volume.attachment.as_ref().map(|a| a.server_id.clone());
        let name = if volume.name.is_empty() {
            server.as_deref().and_then(|s| self.server_name(s)).unwrap_or_default()
        } else {
            volume.name.clone()
        };
        let mut extra = serde_json::Map::new();
        extra.insert("kind".into(), json!("volume"));
        extra.insert("project_id".into(), json!(volume.project_id));
        extra.insert("attached_to".into(), json!(server));
        extra.insert("size".into(), json!(volume.size));
        extra.insert("volume_type".into(), json!(volume.volume_type));
        extra.insert("delete_on_termination".into(), json!(volume.delete_on_termination));
        InventoryInstance {
            id: volume.id.clone(),
            name,
            state: state.to_owned(),
            live,
            tags: volume.metadata.clone(),
            extra,
        }
    }
}

/// The shared store: cloud state (reset by the admin API) plus Keystone's tokens (kept).
#[derive(Debug)]
pub(crate) struct Store {
    state: Mutex<State>,
    auth: Mutex<Auth>,
}

impl Store {
    /// A store in its seeded state.
    pub(crate) fn new() -> Self {
        Self { state: Mutex::new(State::initial()), auth: Mutex::default() }
    }

    /// Locks the state and applies the transitions due at `now`.
    pub(crate) fn lock_at(&self, now: Instant) -> MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.advance(now);
        state
    }

    /// Locks the token state.
    pub(crate) fn auth(&self) -> MutexGuard<'_, Auth> {
        self.auth.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Back to the seeds; default token lifetime, refusal counter zero, no `tokens.create`
    /// faults. Issued tokens stay valid (they are credentials, not cloud state).
    pub(crate) fn reset(&self) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = State::initial();
        let mut auth = self.auth();
        auth.lifetime = identity::DEFAULT_TOKEN_LIFETIME;
        auth.unauthorized = 0;
        auth.faults.clear();
    }
}
