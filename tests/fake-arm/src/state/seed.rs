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
//! - Subscription [`OWNER_SUBSCRIPTION_ID`](crate::OWNER_SUBSCRIPTION_ID) also has gallery
//!   `gardenlinux-community`, a community gallery (permissions `Community`, public name
//!   [`COMMUNITY_GALLERY`](crate::COMMUNITY_GALLERY)) with image `gardenlinux`: version
//!   `1443.10.0` replicated to `eastus` only, `1592.1.0` to `westeurope` and `northeurope`.
//! - Marketplace images usable by everyone: [`MARKETPLACE`]; Garden Linux's carries a
//!   purchase plan, whose terms no subscription has accepted yet.

use std::collections::BTreeMap;

use super::{GalleryImage, GalleryRecord, ResourceGroup, State, Subnet, key};
use crate::{COMMUNITY_GALLERY, LOCATION, OWNER_SUBSCRIPTION_ID, RESOURCE_GROUP, SUBNET, SUBSCRIPTION_ID, VNET};

/// The owner subscription's image resource group.
pub(crate) const IMAGES_RG: &str = "images";

/// A marketplace image purchase plan (`plan` of the image version: `name`, `product`, `publisher`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PurchasePlan {
    /// Plan id.
    pub(crate) name: &'static str,
    /// Offer id.
    pub(crate) product: &'static str,
    /// Publisher id.
    pub(crate) publisher: &'static str,
}

/// One marketplace image (publisher, offer, sku) with its versions and purchase plan.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MarketplaceImage {
    /// Publisher.
    pub(crate) publisher: &'static str,
    /// Offer.
    pub(crate) offer: &'static str,
    /// SKU.
    pub(crate) sku: &'static str,
    /// Versions, oldest first; `latest` matches the last.
    pub(crate) versions: &'static [&'static str],
    /// The purchase plan a VM of it must carry (and whose terms its subscription must accept).
    pub(crate) plan: Option<PurchasePlan>,
}

/// Marketplace images. Garden Linux's has a plan (the reason the Go provider
/// accepts terms: pkg/azure/provider/helpers/driver.go), Ubuntu's has none.
pub(crate) const MARKETPLACE: &[MarketplaceImage] = &[
    MarketplaceImage {
        publisher: "sap",
        offer: "gardenlinux",
        sku: "greatest",
        versions: &["1443.3.0"],
        plan: Some(PurchasePlan { name: "greatest", product: "gardenlinux", publisher: "sap" }),
    },
    MarketplaceImage {
        publisher: "Canonical",
        offer: "ubuntu-24_04-lts",
        sku: "server",
        versions: &["24.04.202501140"],
        plan: None,
    },
];

/// The marketplace image `publisher:offer:sku` (case-insensitive).
pub(crate) fn marketplace_image(publisher: &str, offer: &str, sku: &str) -> Option<&'static MarketplaceImage> {
    MARKETPLACE.iter().find(|m| {
        m.publisher.eq_ignore_ascii_case(publisher)
            && m.offer.eq_ignore_ascii_case(offer)
            && m.sku.eq_ignore_ascii_case(sku)
    })
}

/// The purchase plan `publisher/offer/plan` of a marketplace image (case-insensitive).
pub(crate) fn purchase_plan(publisher: &str, offer: &str, plan: &str) -> Option<PurchasePlan> {
    MARKETPLACE.iter().filter_map(|m| m.plan).find(|p| {
        p.publisher.eq_ignore_ascii_case(publisher)
            && p.product.eq_ignore_ascii_case(offer)
            && p.name.eq_ignore_ascii_case(plan)
    })
}

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
    let image = marketplace_image(publisher, offer, sku)?;
    if version.eq_ignore_ascii_case("latest") {
        image.versions.last().copied()
    } else {
        image.versions.iter().find(|v| v.eq_ignore_ascii_case(version)).copied()
    }
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
        public_name: None,
        images: images
            .iter()
            .map(|image| {
                (
                    image.to_ascii_lowercase(),
                    GalleryImage {
                        name: (*image).to_owned(),
                        versions: vec!["1.0.0".to_owned()],
                        regions: BTreeMap::new(),
                    },
                )
            })
            .collect::<BTreeMap<_, _>>(),
    }
}

/// The community gallery Garden Linux is published in (as gardenlinux publishes it:
/// a community gallery whose versions are replicated to some regions only).
fn community_gallery() -> GalleryRecord {
    let mut record = gallery("gardenlinux-community", "GARDENLINUX-COMMUNITY", &[], Vec::new());
    record.permissions = "Community".to_owned();
    record.community = true;
    record.public_name = Some(COMMUNITY_GALLERY.to_owned());
    let regions = [("1443.10.0", vec!["eastus"]), ("1592.1.0", vec!["westeurope", "northeurope"])];
    record.images.insert(
        "gardenlinux".to_owned(),
        GalleryImage {
            name: "gardenlinux".to_owned(),
            versions: regions.iter().map(|(v, _)| (*v).to_owned()).collect(),
            regions: regions
                .iter()
                .map(|(v, r)| ((*v).to_owned(), r.iter().map(|r| (*r).to_owned()).collect()))
                .collect(),
        },
    );
    record
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
        community_gallery(),
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
