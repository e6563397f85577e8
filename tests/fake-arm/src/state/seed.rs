//! What every fresh (or reset) fake starts with.
//!
//! - Subscription [`SUBSCRIPTION_ID`](crate::SUBSCRIPTION_ID): resource group
//!   [`RESOURCE_GROUP`](crate::RESOURCE_GROUP) in [`LOCATION`](crate::LOCATION) with
//!   virtual network [`VNET`](crate::VNET) and subnet [`SUBNET`](crate::SUBNET) (`10.250.0.0/16`).
//! - Subscription [`OWNER_SUBSCRIPTION_ID`](crate::OWNER_SUBSCRIPTION_ID): resource group
//!   `images` with gallery `gardenlinux` (images `gardenlinux` and `not-allowed`,
//!   version `1.0.0` each, sharing permissions `Groups`, shared with nobody) and gallery
//!   `shared` (image `gardenlinux` version `1.0.0`, already shared with
//!   `SUBSCRIPTION_ID`).
//! - Marketplace images usable by everyone: [`MARKETPLACE`].

use std::collections::BTreeMap;

use super::{GalleryImage, GalleryRecord, ResourceGroup, State, Subnet, key};
use crate::{LOCATION, OWNER_SUBSCRIPTION_ID, RESOURCE_GROUP, SUBNET, SUBSCRIPTION_ID, VNET};

/// The owner subscription's image resource group.
pub(crate) const IMAGES_RG: &str = "images";

/// Marketplace images: `(publisher, offer, sku, versions)`; `latest` always matches.
pub(crate) const MARKETPLACE: &[(&str, &str, &str, &[&str])] = &[
    ("sap", "gardenlinux", "greatest", &["1443.3.0"]),
    ("Canonical", "ubuntu-24_04-lts", "server", &["24.04.202501140"]),
];

/// VM sizes the fake knows (case-insensitive), with their vCPU count.
pub(crate) const VM_SIZES: &[(&str, u32)] = &[
    ("Standard_B1s", 1),
    ("Standard_B2s", 2),
    ("Standard_D2s_v3", 2),
    ("Standard_D4s_v3", 4),
    ("Standard_D8s_v3", 8),
    ("Standard_D2s_v5", 2),
    ("Standard_D4s_v5", 4),
    ("Standard_E2s_v5", 2),
    ("Standard_DC2as_v5", 2),
];

/// The marketplace image matching `publisher:offer:sku:version` case-insensitively
/// (`latest` matches any); returns the concrete version.
pub(crate) fn marketplace(publisher: &str, offer: &str, sku: &str, version: &str) -> Option<&'static str> {
    MARKETPLACE.iter().find_map(|(p, o, s, versions)| {
        if !(p.eq_ignore_ascii_case(publisher) && o.eq_ignore_ascii_case(offer) && s.eq_ignore_ascii_case(sku)) {
            return None;
        }
        if version.eq_ignore_ascii_case("latest") {
            versions.last().copied()
        } else {
            versions.iter().find(|v| v.eq_ignore_ascii_case(version)).copied()
        }
    })
}

fn gallery(name: &str, unique: &str, images: &[&str], groups: Vec<(String, Vec<String>)>) -> GalleryRecord {
    GalleryRecord {
        sub: OWNER_SUBSCRIPTION_ID.to_owned(),
        rg: IMAGES_RG.to_owned(),
        name: name.to_owned(),
        location: LOCATION.to_owned(),
        unique_name: format!("{OWNER_SUBSCRIPTION_ID}-{unique}"),
        permissions: "Groups".to_owned(),
        groups,
        community: false,
        images: images
            .iter()
            .map(|image| {
                (
                    image.to_ascii_lowercase(),
                    GalleryImage { name: (*image).to_owned(), versions: vec!["1.0.0".to_owned()] },
                )
            })
            .collect::<BTreeMap<_, _>>(),
    }
}

/// Fills `state` with the seeds.
pub(crate) fn seed(state: &mut State) {
    for (sub, rg) in [(SUBSCRIPTION_ID, RESOURCE_GROUP), (OWNER_SUBSCRIPTION_ID, IMAGES_RG)] {
        state.resource_groups.insert(
            (sub.to_ascii_lowercase(), rg.to_ascii_lowercase()),
            ResourceGroup { sub: sub.to_owned(), name: rg.to_owned(), location: LOCATION.to_owned() },
        );
    }
    let subnet_id = format!(
        "/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.Network/virtualNetworks/{VNET}/subnets/{SUBNET}"
    );
    state.subnets.insert(
        subnet_id.to_ascii_lowercase(),
        Subnet { id: subnet_id, name: SUBNET.to_owned(), prefix: "10.250.0.0/16".to_owned(), next_host: 4 },
    );
    let galleries = [
        gallery("gardenlinux", "GARDENLINUX", &["gardenlinux", "not-allowed"], Vec::new()),
        gallery(
            "shared",
            "SHARED",
            &["gardenlinux"],
            vec![("Subscriptions".to_owned(), vec![SUBSCRIPTION_ID.to_owned()])],
        ),
    ];
    for record in galleries {
        state.galleries.insert(key(&record.sub, &record.rg, &record.name), record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marketplace_matches_case_insensitively_and_latest() {
        assert_eq!(marketplace("SAP", "GardenLinux", "greatest", "1443.3.0"), Some("1443.3.0"));
        assert_eq!(marketplace("canonical", "ubuntu-24_04-lts", "server", "latest"), Some("24.04.202501140"));
        assert_eq!(marketplace("sap", "gardenlinux", "greatest", "1.0"), None);
        assert_eq!(marketplace("x", "y", "z", "latest"), None);
    }
}
