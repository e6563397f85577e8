//! The seeded network, subnets, security groups and images (see the crate README).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, UNIX_EPOCH};

use super::State;
use super::images::Image;
use super::network::{Network, SecurityGroup, Subnet};
use crate::{
    ALLOWED_IMAGE, DEFAULT_SECURITY_GROUP_ID, NETWORK_ID, NETWORK_NAME, NOT_ALLOWED_IMAGE, OWNER_PROJECT_ID,
    PROJECT_ID, PUBLIC_IMAGE, SECURITY_GROUP_ID, SECURITY_GROUP_NAME, SUBNET_ID, SUBNET_V6_ID,
};

/// The default security group of the owner project.
const OWNER_DEFAULT_SECURITY_GROUP_ID: &str = "a6b7c8d9-e0f1-4a2b-8c3d-4e5f6a7b8c9d";

fn subnet(id: &str, name: &str, network: &str, prefix_len: u32, gateway: &str) -> Subnet {
    let network_ip: IpAddr = network.parse().unwrap_or(IpAddr::V4([10, 250, 0, 0].into()));
    Subnet {
        id: id.to_owned(),
        name: name.to_owned(),
        network_id: NETWORK_ID.to_owned(),
        project_id: PROJECT_ID.to_owned(),
        ip_version: if network_ip.is_ipv4() { 4 } else { 6 },
        network: network_ip,
        prefix_len,
        gateway: gateway.parse().unwrap_or(network_ip),
        next_host: 10,
    }
}

fn image(seq: u64, id: &str, name: &str, visibility: &str) -> Image {
    let created = UNIX_EPOCH + Duration::from_secs(1_735_689_600 + seq * 3600);
    Image {
        id: id.to_owned(),
        name: name.to_owned(),
        owner: OWNER_PROJECT_ID.to_owned(),
        visibility: visibility.to_owned(),
        members: Vec::new(),
        size: 2_361_393_152 + seq,
        checksum: format!("{:032x}", u128::from(seq) * 0x9e37_79b9_7f4a_7c15),
        tags: Vec::new(),
        min_disk: 0,
        min_ram: 0,
        protected: false,
        os_hidden: false,
        properties: BTreeMap::new(),
        created,
        updated: created,
    }
}

/// Fills an empty state with the seeds.
pub(crate) fn seed(state: &mut State) {
    state.networks.insert(
        NETWORK_ID.to_owned(),
        Network {
            id: NETWORK_ID.to_owned(),
            name: NETWORK_NAME.to_owned(),
            project_id: PROJECT_ID.to_owned(),
            subnets: vec![SUBNET_ID.to_owned(), SUBNET_V6_ID.to_owned()],
        },
    );
    state.subnets.insert(SUBNET_ID.to_owned(), subnet(SUBNET_ID, NETWORK_NAME, "10.250.0.0", 16, "10.250.0.1"));
    let v6_name = format!("{NETWORK_NAME}-v6");
    state
        .subnets
        .insert(SUBNET_V6_ID.to_owned(), subnet(SUBNET_V6_ID, &v6_name, "fd00:10:250::", 64, "fd00:10:250::1"));
    for (id, name, project, description) in [
        (SECURITY_GROUP_ID, SECURITY_GROUP_NAME, PROJECT_ID, "Security group of the shoot's nodes"),
        (DEFAULT_SECURITY_GROUP_ID, "default", PROJECT_ID, "Default security group"),
        (OWNER_DEFAULT_SECURITY_GROUP_ID, "default", OWNER_PROJECT_ID, "Default security group"),
    ] {
        state.security_groups.insert(
            id.to_owned(),
            SecurityGroup {
                id: id.to_owned(),
                name: name.to_owned(),
                project_id: project.to_owned(),
                description: description.to_owned(),
            },
        );
    }
    for image in [
        image(1, PUBLIC_IMAGE, "ubuntu-24.04", "public"),
        image(2, ALLOWED_IMAGE, "gardenlinux-1877.3", "private"),
        image(3, NOT_ALLOWED_IMAGE, "owner-internal", "private"),
    ] {
        state.images.insert(image.id.clone(), image);
    }
    state.next_seq = 10;
}
