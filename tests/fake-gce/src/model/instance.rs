//! `Instance`: the insert request body as clients send it, and the resource as
//! GCE returns it.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// Deserialises an int64 sent either as a JSON string (the REST convention) or a number.
fn int64_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let value = Option::<Value>::deserialize(d)?;
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.parse::<i64>().is_ok() => Ok(Some(s)),
        Some(Value::Number(n)) if n.is_i64() => Ok(Some(n.to_string())),
        Some(other) => Err(serde::de::Error::custom(format!("invalid int64 value {other}"))),
    }
}

/// The body of `instances.insert`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InstanceRequest {
    pub(crate) name: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) machine_type: Option<String>,
    #[serde(default)]
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) tags: Option<TagsRequest>,
    pub(crate) metadata: Option<MetadataRequest>,
    #[serde(default)]
    pub(crate) disks: Vec<AttachedDiskRequest>,
    #[serde(default)]
    pub(crate) network_interfaces: Vec<NetworkInterfaceRequest>,
    #[serde(default)]
    pub(crate) service_accounts: Vec<ServiceAccount>,
    pub(crate) scheduling: Option<Map<String, Value>>,
    pub(crate) can_ip_forward: Option<bool>,
    pub(crate) deletion_protection: Option<bool>,
    /// Fields the fake does not model (shieldedInstanceConfig, guestAccelerators, ...), echoed back.
    #[serde(flatten)]
    pub(crate) other: Map<String, Value>,
}

/// `tags` in a request.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct TagsRequest {
    #[serde(default)]
    pub(crate) items: Vec<String>,
}

/// `metadata` in a request.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct MetadataRequest {
    #[serde(default)]
    pub(crate) items: Vec<MetadataItem>,
}

/// One metadata entry (`user-data`, `startup-script`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MetadataItem {
    pub(crate) key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) value: Option<String>,
}

/// One entry of `disks` in a request.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AttachedDiskRequest {
    pub(crate) boot: Option<bool>,
    pub(crate) auto_delete: Option<bool>,
    pub(crate) device_name: Option<String>,
    pub(crate) source: Option<String>,
    #[serde(rename = "type")]
    pub(crate) disk_type: Option<String>,
    pub(crate) mode: Option<String>,
    pub(crate) interface: Option<String>,
    pub(crate) initialize_params: Option<InitializeParams>,
    #[serde(flatten)]
    pub(crate) other: Map<String, Value>,
}

/// `disks[].initializeParams`: create a new disk from an image.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InitializeParams {
    pub(crate) disk_name: Option<String>,
    pub(crate) source_image: Option<String>,
    #[serde(default, deserialize_with = "int64_lenient")]
    pub(crate) disk_size_gb: Option<String>,
    pub(crate) disk_type: Option<String>,
    /// Labels of the new disk (`disks.get` shows them, `disks.setLabels` changes them).
    #[serde(default)]
    pub(crate) labels: BTreeMap<String, String>,
    /// Hyperdisk provisioned IOPS of the new disk.
    #[serde(default, deserialize_with = "int64_lenient")]
    pub(crate) provisioned_iops: Option<String>,
    /// Hyperdisk provisioned throughput (MiB/s) of the new disk.
    #[serde(default, deserialize_with = "int64_lenient")]
    pub(crate) provisioned_throughput: Option<String>,
}

/// One entry of `networkInterfaces` in a request.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NetworkInterfaceRequest {
    pub(crate) network: Option<String>,
    pub(crate) subnetwork: Option<String>,
    #[serde(rename = "networkIP")]
    pub(crate) network_ip: Option<String>,
    #[serde(default)]
    pub(crate) access_configs: Vec<AccessConfig>,
    #[serde(default)]
    pub(crate) alias_ip_ranges: Vec<AliasIpRange>,
    pub(crate) stack_type: Option<String>,
    /// Output only at GCE (inherited from the subnetwork); the fake, which
    /// has no subnetworks, takes it as the subnetwork's IPv6 access type.
    pub(crate) ipv6_access_type: Option<String>,
    #[serde(default)]
    pub(crate) ipv6_access_configs: Vec<Ipv6AccessConfig>,
    #[serde(flatten)]
    pub(crate) other: Map<String, Value>,
}

/// An alias IP range of a network interface.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AliasIpRange {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ip_cidr_range: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) subnetwork_range_name: Option<String>,
}

/// An IPv6 access config (`DIRECT_IPV6`, an external IPv6 range) of a network interface.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Ipv6AccessConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub(crate) access_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) external_ipv6: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) external_ipv6_prefix_length: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) network_tier: Option<String>,
}

/// An access config (external NAT) of a network interface.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AccessConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub(crate) access_type: Option<String>,
    #[serde(rename = "natIP", default, skip_serializing_if = "Option::is_none")]
    pub(crate) nat_ip: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) network_tier: Option<String>,
    /// The fake's own note (never on the wire): `natIP` is an ephemeral
    /// address GCE chose, released when the instance stops, rather than a
    /// static one the request named, which stays.
    #[serde(skip)]
    pub(crate) ephemeral: bool,
}

/// A service account attached to the instance.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ServiceAccount {
    #[serde(default)]
    pub(crate) email: String,
    #[serde(default)]
    pub(crate) scopes: Vec<String>,
}

/// The instance resource as GCE returns it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Instance {
    pub(crate) kind: &'static str,
    pub(crate) id: String,
    pub(crate) creation_timestamp: String,
    pub(crate) name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    pub(crate) tags: Tags,
    pub(crate) machine_type: String,
    pub(crate) status: String,
    pub(crate) zone: String,
    pub(crate) can_ip_forward: bool,
    pub(crate) network_interfaces: Vec<NetworkInterface>,
    pub(crate) disks: Vec<AttachedDisk>,
    pub(crate) metadata: Metadata,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) service_accounts: Vec<ServiceAccount>,
    pub(crate) self_link: String,
    pub(crate) scheduling: Map<String, Value>,
    pub(crate) cpu_platform: &'static str,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) label_fingerprint: String,
    pub(crate) start_restricted: bool,
    pub(crate) deletion_protection: bool,
    pub(crate) fingerprint: String,
    #[serde(flatten)]
    pub(crate) other: Map<String, Value>,
}

/// `tags` of an instance.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Tags {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) items: Vec<String>,
    pub(crate) fingerprint: String,
}

/// `metadata` of an instance.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Metadata {
    pub(crate) kind: &'static str,
    pub(crate) fingerprint: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) items: Vec<MetadataItem>,
}

/// A network interface of an instance.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NetworkInterface {
    pub(crate) kind: &'static str,
    pub(crate) network: String,
    pub(crate) subnetwork: String,
    #[serde(rename = "networkIP")]
    pub(crate) network_ip: String,
    pub(crate) name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) access_configs: Vec<AccessConfig>,
    pub(crate) fingerprint: String,
    pub(crate) stack_type: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) alias_ip_ranges: Vec<AliasIpRange>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ipv6_access_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ipv6_address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) internal_ipv6_prefix_length: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) ipv6_access_configs: Vec<Ipv6AccessConfig>,
    #[serde(flatten)]
    pub(crate) other: Map<String, Value>,
}

/// A disk attached to an instance.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AttachedDisk {
    pub(crate) kind: &'static str,
    #[serde(rename = "type")]
    pub(crate) disk_type: String,
    pub(crate) mode: String,
    pub(crate) source: String,
    pub(crate) device_name: String,
    pub(crate) index: u32,
    pub(crate) boot: bool,
    pub(crate) auto_delete: bool,
    pub(crate) interface: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) disk_size_gb: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) licenses: Vec<String>,
    #[serde(flatten)]
    pub(crate) other: Map<String, Value>,
    /// The disk resource the insert makes for an `initializeParams` disk
    /// (never on the wire: stored in the state's disks by the insert).
    #[serde(skip)]
    pub(crate) created: Option<Box<super::disk::Disk>>,
}
