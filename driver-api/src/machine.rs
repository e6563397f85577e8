//! The machine-controller's objects as plain Rust types.

use std::collections::BTreeMap;
use std::time::SystemTime;

use crate::driver::MachineStatus;
use crate::recent::VISIBILITY_GRACE;

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
    /// spec.providerID, when known: never blank, no surrounding whitespace
    /// (the server trims it and maps a blank one to `None`, so drivers use it as is).
    pub provider_id: Option<String>,
    /// The node name, when known (trimmed and never blank, like `provider_id`).
    pub node_name: Option<String>,
    /// status.lastKnownState as returned earlier by the driver.
    pub last_known_state: String,
    /// metadata.creationTimestamp, when the caller sent it.
    pub created_at: Option<SystemTime>,
    /// metadata.annotations.
    pub annotations: BTreeMap<String, String>,
    /// spec.nodeTemplate: the node's labels, annotations and taints.
    pub node_template: NodeTemplateSpec,
}

/// Machine.spec.nodeTemplate (MCM's `NodeTemplateSpec`): what the machine's
/// node is registered with. Providers read settings from its annotations as
/// the Go providers do (AWS: `machine.sapcloud.io/awsPlacement`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeTemplateSpec {
    /// The node's labels.
    pub labels: BTreeMap<String, String>,
    /// The node's annotations.
    pub annotations: BTreeMap<String, String>,
    /// The node's taints.
    pub taints: Vec<Taint>,
}

/// A node taint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Taint {
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

impl Machine {
    /// True when the machine was created less than [`VISIBILITY_GRACE`] ago (a
    /// creation time in the future, clock skew, counts as young).
    pub fn is_young(&self) -> bool {
        self.created_at.is_some_and(|t| t.elapsed().map_or(true, |age| age < VISIBILITY_GRACE))
    }

    /// The answer for a machine whose providerID names a VM the cloud does not
    /// show, when the machine is young: its VM is on its way (also after a
    /// driver restart, when no memory of the create is left). `None` otherwise.
    pub fn young_not_visible_yet(&self, node_name: &str) -> Option<MachineStatus> {
        let provider_id = self.provider_id.as_deref()?;
        self.is_young().then(|| MachineStatus::not_visible_yet(provider_id.to_string(), node_name.to_string()))
    }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn only_a_young_machine_with_a_provider_id_is_not_visible_yet() {
        let now = SystemTime::now();
        let young = Machine { provider_id: Some("p".into()), created_at: Some(now), ..Machine::default() };
        let status = young.young_not_visible_yet("node-1").expect("young");
        assert_eq!((status.provider_id.as_str(), status.node_name.as_str()), ("p", "node-1"));
        assert_eq!(status.pending_steps, vec![crate::AWAIT_VISIBILITY.to_string()]);

        let old = Machine { created_at: Some(now - VISIBILITY_GRACE - Duration::from_secs(1)), ..young.clone() };
        assert!(old.young_not_visible_yet("n").is_none());
        let unknown_age = Machine { created_at: None, ..young.clone() };
        assert!(unknown_age.young_not_visible_yet("n").is_none());
        let no_provider_id = Machine { provider_id: None, ..young.clone() };
        assert!(no_provider_id.young_not_visible_yet("n").is_none());
        let skewed = Machine { created_at: Some(now + Duration::from_secs(30)), ..young };
        assert!(skewed.is_young(), "a creation time in the future counts as young");
    }
}
