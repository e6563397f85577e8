//! `POST /_admin/instances` on OpenStack: an `ACTIVE` server booted by someone
//! else (another cluster, an operator with the CLI), with exactly the
//! requested metadata (`tags`), named as requested, from the public image with
//! flavor `m1.large`, the project's `default` security group and one port Nova
//! made on the network (a fixed IP from each of its subnets); no key pair, no
//! server group, no user data.
//!
//! `attached` describes what was made before the server instead: `port`s (a
//! user's port passed as `{"port": ID}`, not deleted with the server: its
//! `name`, Neutron `string_tags`, fixed IPs from `subnets` (default one from
//! each subnet of the network) and `security_groups` (ids or names, default
//! the project's `default`)) and `volume`s (Cinder volumes attached by a
//! `source_type: volume` block device mapping: `name`, `tags` as volume
//! metadata, `size_gb` (default 50), type `standard`; the `boot` one is made
//! from the public image and the server then shows no image, as Nova does;
//! `delete_with_vm` is the mapping's `delete_on_termination`, default false).
//! Without a port, Nova makes one as before.
//!
//! Scope keys: `project` (default the cluster project), `region` (the only
//! region), `network` (default the cluster network; it must belong to the
//! project), `availabilityZone` (default `nova`).

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime};

use fake_cloud_support::{AttachedKind, PlantAttached, PlantError, PlantRequest, Planted, PlantedAttached};

use crate::api::servers::nova_port;
use crate::state::compute::{AttachedVolume, Server, ServerPhase};
use crate::state::network::{FixedIp, Port};
use crate::state::volumes::{Attachment, Volume, VolumePhase};
use crate::state::{State, Store};

/// The scope keys OpenStack planting knows.
const SCOPE_KEYS: &[&str] = &["project", "region", "network", "availabilityZone"];
/// Nova's limit of metadata items per server.
const MAX_METADATA: usize = 128;

fn check_metadata(metadata: &BTreeMap<String, String>) -> Result<(), PlantError> {
    if metadata.len() > MAX_METADATA {
        return Err(PlantError::Invalid(format!("at most {MAX_METADATA} metadata items per server")));
    }
    match metadata.iter().find(|(k, v)| k.is_empty() || k.chars().count() > 255 || v.chars().count() > 255) {
        Some((key, _)) => Err(PlantError::Invalid(format!("metadata item {key:?}: key 1-255, value 0-255 characters"))),
        None => Ok(()),
    }
}

/// Neutron's rule for a tag (1-255 characters, no comma).
fn check_string_tags(tags: &[String]) -> Result<(), PlantError> {
    match tags.iter().find(|t| t.is_empty() || t.chars().count() > 255 || t.contains(',')) {
        Some(bad) => Err(PlantError::Invalid(format!("'{bad}' is not a valid tag."))),
        None => Ok(()),
    }
}

/// The security group ids of `wanted` (ids or names) in `project`; empty: its `default` group.
fn group_ids(state: &State, project: &str, wanted: &[String]) -> Result<Vec<String>, PlantError> {
    if wanted.is_empty() {
        return Ok(state
            .security_groups
            .values()
            .filter(|g| g.project_id == project && g.name == "default")
            .map(|g| g.id.clone())
            .collect());
    }
    wanted
        .iter()
        .map(|w| {
            state
                .security_groups
                .values()
                .find(|g| g.project_id == project && (&g.id == w || &g.name == w))
                .map(|g| g.id.clone())
                .ok_or_else(|| PlantError::Invalid(format!("security group {w} not found in project {project}")))
        })
        .collect()
}

/// A user's port on `network_id` for server `server_id` (fixed IPs from `spec.subnets`, or each subnet).
fn user_port(
    state: &mut State,
    spec: &PlantAttached,
    project: &str,
    network_id: &str,
    subnets: &[String],
    server_id: &str,
    zone: &str,
) -> Result<Port, PlantError> {
    check_string_tags(&spec.string_tags)?;
    let wanted = if spec.subnets.is_empty() { subnets.to_vec() } else { spec.subnets.clone() };
    if let Some(bad) = wanted.iter().find(|s| !subnets.contains(s)) {
        return Err(PlantError::Invalid(format!("subnet {bad} is not a subnet of network {network_id}")));
    }
    let security_groups = group_ids(state, project, &spec.security_groups)?;
    let mut fixed_ips = Vec::new();
    for subnet in &wanted {
        let ip = state.allocate_ip(subnet).ok_or_else(|| PlantError::Invalid(format!("subnet {subnet} is full")))?;
        fixed_ips.push(FixedIp { subnet_id: subnet.clone(), ip_address: ip });
    }
    // The port as Nova makes it for a server, then what a user-made port
    // differs in: its name and tags, and that Nova did not make it. The
    // planted server is ACTIVE, so its port is too.
    let mut port = nova_port(project, server_id, zone, network_id, fixed_ips, security_groups, SystemTime::now());
    port.name = spec.name.clone();
    port.tags = spec.string_tags.clone();
    port.status = "ACTIVE";
    port.made_by_nova = false;
    Ok(port)
}

/// Plants the server described by `request` into `store`.
pub(crate) fn plant(store: &Store, request: &PlantRequest) -> Result<Planted, PlantError> {
    request.check_scope_keys(SCOPE_KEYS)?;
    request.refuse_network_tags("OpenStack")?;
    request.refuse_metadata("OpenStack")?;
    request.check_attached("OpenStack", &[AttachedKind::Port, AttachedKind::Volume], &[AttachedKind::Port])?;
    check_metadata(&request.tags)?;
    for volume in request.attached_of(AttachedKind::Volume) {
        check_metadata(&volume.tags)?;
        if volume.size_gb.is_some_and(|s| s == 0) {
            return Err(PlantError::Invalid("a volume's size_gb must be positive".into()));
        }
    }
    let project = request.scope_or("project", crate::PROJECT_ID);
    let region = request.scope_or("region", crate::REGION);
    let network_id = request.scope_or("network", crate::NETWORK_ID);
    let zone = request.scope_or("availabilityZone", crate::AVAILABILITY_ZONES[0]);
    if region != crate::REGION {
        return Err(PlantError::Invalid(format!("scope.region: the fake serves {} only", crate::REGION)));
    }
    if !crate::AVAILABILITY_ZONES.contains(&zone.as_str()) {
        return Err(PlantError::Invalid(format!("scope.availabilityZone {zone:?} does not exist")));
    }
    if request.name.is_empty() || request.name.chars().count() > 255 {
        return Err(PlantError::Invalid("name: 1-255 characters".into()));
    }
    let now = Instant::now();
    let mut state = store.lock_at(now);
    let subnets = state
        .networks
        .get(&network_id)
        .filter(|n| n.project_id == project)
        .map(|n| n.subnets.clone())
        .ok_or_else(|| PlantError::Invalid(format!("network {network_id} of project {project} does not exist")))?;
    let id = uuid::Uuid::new_v4().to_string();
    let created = SystemTime::now();
    let nova_port = PlantAttached::new(AttachedKind::Port, "");
    let user_ports: Vec<&PlantAttached> = request.attached_of(AttachedKind::Port).collect();
    let mut ports = Vec::new();
    for spec in if user_ports.is_empty() { vec![&nova_port] } else { user_ports.clone() } {
        let mut port = user_port(&mut state, spec, &project, &network_id, &subnets, &id, &zone)?;
        if user_ports.is_empty() {
            port.security_groups = vec![crate::DEFAULT_SECURITY_GROUP_ID.to_owned()];
            port.made_by_nova = true;
        }
        ports.push(port);
    }
    let group_names: Vec<String> = {
        let ids: std::collections::BTreeSet<&String> = ports.iter().flat_map(|p| &p.security_groups).collect();
        let mut names: Vec<String> =
            ids.iter().filter_map(|g| state.security_groups.get(*g)).map(|g| g.name.clone()).collect();
        names.dedup();
        names
    };
    let mut volumes = Vec::new();
    let mut planted_volumes = Vec::new();
    for (index, spec) in request.attached_of(AttachedKind::Volume).enumerate() {
        let seq = state.seq();
        let device = format!("/dev/vd{}", char::from(b'a' + u8::try_from(index.min(25)).unwrap_or(0)));
        let volume = Volume {
            seq,
            id: uuid::Uuid::new_v4().to_string(),
            project_id: project.clone(),
            name: spec.name.clone(),
            description: None,
            size: spec.size_gb.unwrap_or(50),
            volume_type: crate::VOLUME_TYPES[0].to_owned(),
            availability_zone: zone.clone(),
            image_id: spec.boot.then(|| crate::PUBLIC_IMAGE.to_owned()),
            metadata: spec.tags.clone(),
            phase: VolumePhase::Ready,
            attachment: Some(Attachment {
                server_id: id.clone(),
                attachment_id: uuid::Uuid::new_v4().to_string(),
                device,
            }),
            delete_on_termination: spec.delete_with_vm.unwrap_or(false),
            created,
            updated: created,
        };
        volumes.push(AttachedVolume { id: volume.id.clone(), delete_on_termination: volume.delete_on_termination });
        planted_volumes.push(volume);
    }
    let boot_volume = request.attached_of(AttachedKind::Volume).any(|v| v.boot);
    // The answer's attached resources, in request order.
    let mut by_kind: Vec<PlantedAttached> = Vec::new();
    let (mut port_ids, mut volume_ids) = (ports.iter(), planted_volumes.iter());
    for spec in &request.attached {
        let made = match spec.kind {
            AttachedKind::Port => port_ids.next().map(|p| (p.id.clone(), p.name.clone())),
            _ => volume_ids.next().map(|v| (v.id.clone(), v.name.clone())),
        };
        if let Some((made_id, name)) = made {
            by_kind.push(PlantedAttached { kind: spec.kind, id: made_id, name });
        }
    }
    let server_ports: Vec<String> = ports.iter().map(|p| p.id.clone()).collect();
    for port in ports {
        state.ports.insert(port.id.clone(), port);
    }
    for volume in planted_volumes {
        state.volumes.insert(volume.id.clone(), volume);
    }
    let seq = state.seq();
    state.servers.insert(
        id.clone(),
        Server {
            seq,
            id: id.clone(),
            project_id: project.clone(),
            user_id: crate::USER_ID.to_owned(),
            name: request.name.clone(),
            created,
            updated: created,
            visible_at: now,
            phase: ServerPhase::Active,
            flavor_id: "4".to_owned(),
            image_id: (!boot_volume).then(|| crate::PUBLIC_IMAGE.to_owned()),
            key_name: None,
            availability_zone: zone.clone(),
            config_drive: false,
            metadata: request.tags.clone(),
            user_data: None,
            server_group: None,
            security_groups: group_names,
            ports: server_ports,
            volumes,
            fault: None,
        },
    );
    Ok(Planted::new(
        id,
        request.name.clone(),
        [("project", project), ("region", region), ("network", network_id), ("availabilityZone", zone)],
    )
    .with_attached(by_kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(name: &str) -> PlantRequest {
        PlantRequest {
            name: name.into(),
            tags: [("kubernetes.io-cluster-shoot--other".to_owned(), "1".to_owned())].into(),
            ..Default::default()
        }
    }

    #[test]
    fn plants_an_active_server_with_exactly_the_metadata_and_a_port() {
        let store = Store::new();
        let planted = plant(&store, &request("m-1")).unwrap();
        let now = Instant::now();
        let state = store.lock_at(now);
        let server = &state.servers[&planted.id];
        assert_eq!(server.status(), "ACTIVE");
        assert_eq!(server.metadata, request("m-1").tags);
        let port = &state.ports[&server.ports[0]];
        assert_eq!(port.device_id, planted.id);
        assert_eq!(port.fixed_ips.len(), 2, "one address from each subnet of the network");
        drop(state);
        let again = plant(&store, &request("m-1")).unwrap();
        assert_ne!(again.id, planted.id, "Nova names need not be unique");
    }

    #[test]
    fn terminating_a_planted_server_takes_its_port() {
        use fake_cloud_support::CloudHooks;
        let hooks = crate::hooks::OpenStackHooks { store: std::sync::Arc::new(Store::new()) };
        let planted = hooks.plant(&request("m-1")).unwrap();
        assert!(hooks.terminate(&planted.id));
        let inventory = hooks.inventory();
        assert!(inventory.instances.iter().chain(&inventory.dependents).all(|i| !i.live));
    }

    fn go_shaped(name: &str) -> PlantRequest {
        let mut port = PlantAttached::new(AttachedKind::Port, name);
        port.string_tags = vec!["kubernetes.io-cluster-shoot--other".into(), "kubernetes.io-role-node".into()];
        port.subnets = vec![crate::SUBNET_ID.into()];
        port.security_groups = vec![crate::SECURITY_GROUP_NAME.into()];
        let mut volume = PlantAttached::new(AttachedKind::Volume, name);
        volume.boot = true;
        volume.size_gb = Some(50);
        volume.tags = request(name).tags;
        PlantRequest { attached: vec![port, volume], ..request(name) }
    }

    #[test]
    fn plants_the_described_port_and_boot_volume_which_stay_after_the_server() {
        use fake_cloud_support::CloudHooks;
        let hooks = crate::hooks::OpenStackHooks { store: std::sync::Arc::new(Store::new()) };
        let planted = hooks.plant(&go_shaped("m-2")).unwrap();
        let kinds: Vec<(AttachedKind, &str)> = planted.attached.iter().map(|a| (a.kind, a.name.as_str())).collect();
        assert_eq!(kinds, [(AttachedKind::Port, "m-2"), (AttachedKind::Volume, "m-2")]);
        {
            let state = hooks.store.lock_at(Instant::now());
            let server = &state.servers[&planted.id];
            assert!(server.image_id.is_none(), "a server booted from a volume shows no image");
            assert_eq!(server.security_groups, [crate::SECURITY_GROUP_NAME]);
            let port = &state.ports[&server.ports[0]];
            assert!(!port.made_by_nova);
            assert_eq!(port.tags.len(), 2);
            assert_eq!(port.fixed_ips.len(), 1, "only the requested subnet");
            assert_eq!(port.security_groups, [crate::SECURITY_GROUP_ID]);
            let volume = &state.volumes[&server.volumes[0].id];
            assert_eq!((volume.status(), volume.bootable(), volume.delete_on_termination), ("in-use", "true", false));
            assert_eq!(volume.metadata, request("m-2").tags);
        }
        let inventory = hooks.inventory();
        let server = inventory.instances.iter().find(|i| i.id == planted.id).unwrap();
        for a in &planted.attached {
            let listed =
                server.extra["ports"].as_array().unwrap().iter().chain(server.extra["volumes"].as_array().unwrap());
            assert!(listed.into_iter().any(|v| v == a.id.as_str()), "{a:?} listed by its server");
        }
        assert!(hooks.terminate(&planted.id));
        let live: Vec<String> = hooks.inventory().dependents.into_iter().filter(|d| d.live).map(|d| d.name).collect();
        assert_eq!(live, ["m-2", "m-2"], "Nova keeps a user's port and a volume not deleted on termination");
        let mut bad_subnet = go_shaped("m-3");
        bad_subnet.attached[0].subnets = vec!["nope".into()];
        assert!(hooks.plant(&bad_subnet).is_err());
        let mut bad_tag = go_shaped("m-4");
        bad_tag.attached[0].string_tags = vec!["a,b".into()];
        assert!(hooks.plant(&bad_tag).is_err());
        let mut disk = go_shaped("m-5");
        disk.attached[1].kind = AttachedKind::Disk;
        assert!(hooks.plant(&disk).is_err());
    }

    #[test]
    fn refuses_what_openstack_would_not_hold() {
        let store = Store::new();
        let mut elsewhere = request("m-1");
        elsewhere.scope.insert("network".into(), "nope".into());
        assert!(plant(&store, &elsewhere).is_err());
        let mut tagged = request("m-1");
        tagged.network_tags.push("fw".into());
        assert!(plant(&store, &tagged).is_err());
        let mut long = request("m-1");
        long.tags.insert("k".repeat(256), String::new());
        assert!(plant(&store, &long).is_err());
        assert!(store.lock_at(Instant::now()).servers.is_empty());
    }
}
