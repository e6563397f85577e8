//! `Image`: a global image resource.

use serde::Serialize;

/// An image as GCE returns it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Image {
    pub(crate) kind: &'static str,
    pub(crate) id: String,
    pub(crate) creation_timestamp: String,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) source_type: &'static str,
    pub(crate) status: &'static str,
    pub(crate) archive_size_bytes: String,
    pub(crate) disk_size_gb: String,
    pub(crate) family: String,
    pub(crate) self_link: String,
    pub(crate) label_fingerprint: String,
    pub(crate) architecture: &'static str,
    pub(crate) guest_os_features: Vec<GuestOsFeature>,
    pub(crate) storage_locations: Vec<String>,
}

/// One `guestOsFeatures` entry.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct GuestOsFeature {
    #[serde(rename = "type")]
    pub(crate) feature: &'static str,
}
