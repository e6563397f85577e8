//! The machine-controller's objects as plain Rust types.

use std::collections::BTreeMap;

/// The Machine object (only what drivers use).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Machine {
    /// metadata.name (empty only for delete-by-providerID from the orphan collector).
    pub name: String,
    /// metadata.namespace.
    pub namespace: String,
    /// metadata.uid: the key of create idempotency.
    pub uid: String,
    /// metadata.labels.
    pub labels: BTreeMap<String, String>,
    /// spec.providerID, when known.
    pub provider_id: Option<String>,
    /// The node name, when known.
    pub node_name: Option<String>,
    /// status.lastKnownState as returned earlier by the driver.
    pub last_known_state: String,
}

/// The MachineClass (only what drivers use).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MachineClass {
    /// metadata.name.
    pub name: String,
    /// The class's provider string.
    pub provider: String,
    /// providerSpec as raw JSON bytes, already checked to be a JSON object.
    /// Parse it with [`crate::parse_provider_spec`].
    pub provider_spec: Vec<u8>,
    /// nodeTemplate, when present.
    pub node_template: Option<NodeTemplate>,
}

/// MachineClass.nodeTemplate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeTemplate {
    /// Resource quantities by name.
    pub capacity: BTreeMap<String, String>,
    /// Instance type.
    pub instance_type: String,
    /// Region.
    pub region: String,
    /// Zone.
    pub zone: String,
}

/// Kubernetes NodeAddressType.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressType {
    /// A private IP.
    InternalIp,
    /// A public IP.
    ExternalIp,
    /// A private DNS name.
    InternalDns,
    /// A public DNS name.
    ExternalDns,
    /// The hostname.
    Hostname,
}

/// One address of a machine.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Address {
    /// Kind of address.
    pub kind: AddressType,
    /// The address.
    pub address: String,
}

impl Address {
    /// Shorthand constructor.
    pub fn new(kind: AddressType, address: impl Into<String>) -> Self {
        Self { kind, address: address.into() }
    }
}
