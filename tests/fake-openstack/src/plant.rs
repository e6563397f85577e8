//! `POST /_admin/instances` on OpenStack: an `ACTIVE` server booted by someone
//! else (another cluster, an operator with the CLI), with exactly the
//! requested metadata (`tags`), named as requested, from the public image with
//! flavor `m1.large`, the project's `default` security group and one port Nova
//! made on the network (a fixed IP from each of its subnets); no key pair, no
//! server group, no user data.
//!
//! Scope keys: `project` (default the cluster project), `region` (the only
//! region), `network` (default the cluster network; it must belong to the
//! project), `availabilityZone` (default `nova`).

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime};

use fake_cloud_support::{PlantError, PlantRequest, Planted};

use crate::state::Store;
use crate::state::compute::{Server, ServerPhase};
use crate::state::network::{FixedIp, Port, random_mac};

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

/// Plants the server described by `request` into `store`.
pub(crate) fn plant(store: &Store, request: &PlantRequest) -> Result<Planted, PlantError> {
    request.check_scope_keys(SCOPE_KEYS)?;
    request.refuse_network_tags("OpenStack")?;
    check_metadata(&request.tags)?;
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
    let mut fixed_ips = Vec::new();
    for subnet in &subnets {
        let ip = state.allocate_ip(subnet).ok_or_else(|| PlantError::Invalid(format!("subnet {subnet} is full")))?;
        fixed_ips.push(FixedIp { subnet_id: subnet.clone(), ip_address: ip });
    }
    let port = Port {
        id: uuid::Uuid::new_v4().to_string(),
        project_id: project.clone(),
        name: String::new(),
        description: String::new(),
        network_id: network_id.clone(),
        mac_address: random_mac(),
        status: "ACTIVE",
        device_id: id.clone(),
        device_owner: format!("compute:{zone}"),
        fixed_ips,
        security_groups: vec![crate::DEFAULT_SECURITY_GROUP_ID.to_owned()],
        allowed_address_pairs: Vec::new(),
        tags: Vec::new(),
        created,
        updated: created,
        revision: 1,
        made_by_nova: true,
    };
    let port_id = port.id.clone();
    state.ports.insert(port_id.clone(), port);
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
            image_id: Some(crate::PUBLIC_IMAGE.to_owned()),
            key_name: None,
            availability_zone: zone.clone(),
            config_drive: false,
            metadata: request.tags.clone(),
            user_data: None,
            server_group: None,
            security_groups: vec!["default".to_owned()],
            ports: vec![port_id],
            volumes: Vec::new(),
            fault: None,
        },
    );
    Ok(Planted::new(
        id,
        request.name.clone(),
        [("project", project), ("region", region), ("network", network_id), ("availabilityZone", zone)],
    ))
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
