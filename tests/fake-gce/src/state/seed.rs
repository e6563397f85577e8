//! The images every fresh (or reset) fake starts with.
//!
//! - `projects/debian-cloud/global/images/debian-12` (family `debian-12`):
//!   public, `roles/compute.imageUser` granted to `allUsers`.
//! - `projects/image-owner/global/images/custom-gardenlinux` (family
//!   `gardenlinux`): private, `roles/owner` held by
//!   `serviceAccount:owner@image-owner.iam.gserviceaccount.com` only.

use std::collections::BTreeMap;
use std::time::SystemTime;

use crate::clock;
use crate::model::image::{GuestOsFeature, Image};
use crate::model::policy::{Binding, Policy};
use crate::urls;

use super::{ImageRecord, fingerprint};

/// The principal that owns the private seeded image.
pub const IMAGE_OWNER: &str = "serviceAccount:owner@image-owner.iam.gserviceaccount.com";

/// The seeded images by `(project, name)`.
pub(crate) fn images() -> BTreeMap<(String, String), ImageRecord> {
    let public = image(
        "debian-cloud",
        "debian-12",
        "debian-12",
        "Debian, Debian GNU/Linux, 12 (bookworm), amd64 built on 20240110",
        vec![binding("roles/compute.imageUser", "allUsers")],
    );
    let private = image(
        "image-owner",
        "custom-gardenlinux",
        "gardenlinux",
        "Garden Linux, built for the machine driver tests",
        vec![binding("roles/owner", IMAGE_OWNER)],
    );
    [public, private].into_iter().map(|(project, record)| ((project, record.image.name.clone()), record)).collect()
}

fn binding(role: &str, member: &str) -> Binding {
    Binding { role: role.to_string(), members: vec![member.to_string()], condition: None }
}

fn image(project: &str, name: &str, family: &str, description: &str, bindings: Vec<Binding>) -> (String, ImageRecord) {
    let image = Image {
        kind: "compute#image",
        id: super::new_id(),
        creation_timestamp: clock::rfc3339(SystemTime::now()),
        name: name.to_string(),
        description: description.to_string(),
        source_type: "RAW",
        status: "READY",
        archive_size_bytes: "412324864".to_string(),
        disk_size_gb: "10".to_string(),
        family: family.to_string(),
        self_link: urls::full(&format!("projects/{project}/global/images/{name}")),
        label_fingerprint: fingerprint(b""),
        architecture: "X86_64",
        guest_os_features: vec![
            GuestOsFeature { feature: "UEFI_COMPATIBLE" },
            GuestOsFeature { feature: "VIRTIO_SCSI_MULTIQUEUE" },
            GuestOsFeature { feature: "GVNIC" },
        ],
        storage_locations: vec!["us".to_string(), "eu".to_string()],
    };
    let record = ImageRecord { image, policy: Policy { version: 1, etag: None, bindings }, policy_version: 1 };
    (project.to_string(), record)
}
