//! The seeded initial state: the cluster account's VPC, vSwitch and two security groups, the
//! system image and the owner account's two private images.

use std::net::Ipv4Addr;

use super::{Image, SecurityGroup, State, VSwitch};
use crate::{
    ACCOUNT_ID, ALLOWED_IMAGE, NOT_ALLOWED_IMAGE, OWNER_ACCOUNT_ID, PUBLIC_IMAGE, SECURITY_GROUP, SECURITY_GROUP_B,
    VPC, VSWITCH, ZONE_A,
};

/// First host offset allocated in a vSwitch (`10.250.0.10`).
pub(crate) const FIRST_HOST: u32 = 10;

/// Fills `state` with the seeds.
pub(crate) fn seed(state: &mut State) {
    state.vswitches.insert(
        VSWITCH.to_owned(),
        VSwitch {
            id: VSWITCH.to_owned(),
            account: ACCOUNT_ID.to_owned(),
            vpc: VPC.to_owned(),
            zone: ZONE_A.to_owned(),
            network: Ipv4Addr::new(10, 250, 0, 0),
            prefix_len: 16,
            next_host: FIRST_HOST,
        },
    );
    for group in [SECURITY_GROUP, SECURITY_GROUP_B] {
        state
            .security_groups
            .insert(group.to_owned(), SecurityGroup { account: ACCOUNT_ID.to_owned(), vpc: VPC.to_owned() });
    }
    let image = |id: &str, name: &str, owner: Option<&str>, os_name: &str, platform: &str| Image {
        id: id.to_owned(),
        name: name.to_owned(),
        owner: owner.map(str::to_owned),
        shared_with: Vec::new(),
        is_public: owner.is_none(),
        os_name: os_name.to_owned(),
        platform: platform.to_owned(),
        creation_time: "2025-01-01T00:00:00Z".to_owned(),
    };
    for img in [
        image(PUBLIC_IMAGE, PUBLIC_IMAGE.trim_end_matches(".vhd"), None, "Ubuntu  24.04 64位", "Ubuntu"),
        image(ALLOWED_IMAGE, "gardenlinux-1443.3.0", Some(OWNER_ACCOUNT_ID), "Garden Linux 1443.3.0", "Others Linux"),
        image(NOT_ALLOWED_IMAGE, "not-allowed-image", Some(OWNER_ACCOUNT_ID), "Garden Linux 1443.3.0", "Others Linux"),
    ] {
        state.images.insert(img.id.clone(), img);
    }
}
