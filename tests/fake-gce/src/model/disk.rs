//! `Disk`: the zonal persistent disk resource as GCE returns it (`disks.get`),
//! made by `instances.insert` for each `initializeParams` disk.

use std::collections::BTreeMap;

use serde::Serialize;

/// A persistent disk (Compute Engine REST reference, `disks` resource:
/// <https://cloud.google.com/compute/docs/reference/rest/v1/disks>).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Disk {
    pub(crate) kind: &'static str,
    pub(crate) id: String,
    pub(crate) creation_timestamp: String,
    pub(crate) name: String,
    /// int64 as a string, as the REST API writes it.
    pub(crate) size_gb: String,
    pub(crate) zone: String,
    pub(crate) status: &'static str,
    pub(crate) self_link: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) source_image: Option<String>,
    /// The disk type's full URL (`.../zones/Z/diskTypes/pd-balanced`).
    #[serde(rename = "type")]
    pub(crate) disk_type: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) label_fingerprint: String,
    /// The instances it is attached to (full URLs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) users: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) provisioned_iops: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) provisioned_throughput: Option<String>,
}

impl Disk {
    /// The disk type's name (`pd-balanced`, `hyperdisk-balanced`).
    pub(crate) fn type_name(&self) -> &str {
        self.disk_type.rsplit('/').next().unwrap_or_default()
    }

    /// Whether the type is a Hyperdisk, whose provisioned IOPS and throughput
    /// `disks.update` changes ("Modify the settings of a Hyperdisk volume").
    pub(crate) fn is_hyperdisk(&self) -> bool {
        self.type_name().starts_with("hyperdisk-")
    }
}
