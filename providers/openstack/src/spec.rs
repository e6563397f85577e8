//! The OpenStack machine class providerSpec: the Go provider's
//! `MachineProviderConfig` envelope (`apiVersion`
//! `openstack.machine.gardener.cloud/v1alpha1`, `kind`, `spec`) with its fields
//! unchanged, read as leniently as Go reads it, validated with
//! INVALID_ARGUMENT naming the field (`providerSpec.spec.flavorName`).

use std::collections::BTreeMap;

use machine_driver_api::{ClusterMarkers, DriverError, parse_provider_spec};
use serde::Deserialize;

/// Tag key part naming the cluster (`kubernetes.io-cluster-<shoot>`).
pub(crate) const CLUSTER_TAG: &str = "kubernetes.io-cluster-";
/// Tag key part naming the role (`kubernetes.io-role-<role>`).
pub(crate) const ROLE_TAG: &str = "kubernetes.io-role-";
/// The envelope's kind.
const KIND: &str = "MachineProviderConfig";
/// Most metadata items Nova takes on a server (128), less the machine uid.
const MAX_TAGS: usize = 127;
/// Most allowed address pairs Neutron takes on a port (its default `max_allowed_address_pair`).
const MAX_POD_CIDRS: usize = 10;

/// The envelope.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Envelope {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    spec: Option<OpenStackSpec>,
}

/// `spec` of the MachineProviderConfig.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct OpenStackSpec {
    /// Image id (one of `imageID`, `imageName`).
    #[serde(rename = "imageID", default)]
    pub(crate) image_id: Option<String>,
    /// Image name, looked up in Glance.
    #[serde(default)]
    pub(crate) image_name: Option<String>,
    /// Region: selects the catalog's endpoints.
    #[serde(default)]
    pub(crate) region: String,
    /// Availability zone.
    #[serde(default)]
    pub(crate) availability_zone: String,
    /// Flavor name.
    #[serde(default)]
    pub(crate) flavor_name: String,
    /// SSH key pair.
    #[serde(default)]
    pub(crate) key_name: Option<String>,
    /// Security group names (or ids).
    #[serde(default)]
    pub(crate) security_groups: Vec<String>,
    /// Server metadata; must hold the cluster and role keys.
    #[serde(default)]
    pub(crate) tags: BTreeMap<String, String>,
    /// The one network (xor `networks`).
    #[serde(rename = "networkID", default)]
    pub(crate) network_id: Option<String>,
    /// The subnet of `networkID` for the port's fixed IP.
    #[serde(rename = "subnetID", default)]
    pub(crate) subnet_id: Option<String>,
    /// Subnets of `networkID` for the port's fixed IPs (dual stack).
    #[serde(rename = "subnetIDs", default)]
    pub(crate) subnet_ids: Vec<String>,
    /// Several networks (xor `networkID`).
    #[serde(default)]
    pub(crate) networks: Vec<NetworkRef>,
    /// The pod CIDR (xor `podNetworkCIDRs`).
    #[serde(default)]
    pub(crate) pod_network_cidr: Option<String>,
    /// The pod CIDRs (dual stack).
    #[serde(rename = "podNetworkCIDRs", default)]
    pub(crate) pod_network_cidrs: Vec<String>,
    /// Boot volume size in GB; 0 boots from the image on the hypervisor's disk.
    #[serde(default)]
    pub(crate) root_disk_size: i64,
    /// Boot volume type.
    #[serde(default)]
    pub(crate) root_disk_type: Option<String>,
    /// Config drive for the user data.
    #[serde(default)]
    pub(crate) use_config_drive: Option<bool>,
    /// Server group (scheduler hint).
    #[serde(rename = "serverGroupID", default)]
    pub(crate) server_group_id: Option<String>,
}

/// One entry of `networks`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct NetworkRef {
    /// Network id (xor name).
    #[serde(default)]
    pub(crate) id: Option<String>,
    /// Network name (xor id).
    #[serde(default)]
    pub(crate) name: Option<String>,
    /// The pod network: its port gets the pod CIDRs as allowed address pairs.
    #[serde(default)]
    pub(crate) pod_network: bool,
}

/// One network a machine gets a port on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PortPlan {
    /// Network by id or name.
    pub(crate) network: NetworkRef,
    /// Subnets for the fixed IPs (empty: one IP of each subnet, as Neutron does).
    pub(crate) subnets: Vec<String>,
}

impl OpenStackSpec {
    /// Parses and validates raw providerSpec JSON; errors name the field.
    pub(crate) fn parse(raw: &[u8]) -> Result<Self, DriverError> {
        let envelope: Envelope = parse_provider_spec(raw)?;
        if let Some(kind) = envelope.kind.as_deref().filter(|k| !k.is_empty())
            && kind != KIND
        {
            return Err(DriverError::invalid_argument("providerSpec.kind", format!("must be {KIND}, got {kind:?}")));
        }
        if let Some(v) = envelope.api_version.as_deref().filter(|v| !v.is_empty())
            && !v.starts_with("openstack.machine.gardener.cloud/")
        {
            tracing::debug!(api_version = v, "providerSpec apiVersion of another group; reading it anyway");
        }
        let spec = envelope.spec.ok_or_else(|| {
            DriverError::invalid_argument("providerSpec.spec", "is required (a MachineProviderConfig)")
        })?;
        spec.validate()?;
        Ok(spec)
    }

    /// The class's cluster and role markers (its two metadata keys, see
    /// [`crate::ownership`]); INVALID_ARGUMENT `providerSpec.spec.tags` when
    /// either is missing or ambiguous. Every RPC that acts on an existing
    /// server builds them once from its class.
    pub(crate) fn markers(&self) -> Result<ClusterMarkers, DriverError> {
        crate::ownership::class_markers(self.tags.keys().map(String::as_str))
    }

    /// The pod CIDRs (`podNetworkCIDRs`, or `podNetworkCidr`), without duplicates.
    pub(crate) fn pod_cidrs(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in self.pod_network_cidrs.iter().chain(self.pod_network_cidr.as_ref()) {
            let c = c.trim();
            if !c.is_empty() && !out.iter().any(|o| o == c) {
                out.push(c.to_string());
            }
        }
        out
    }

    /// The ports a machine gets, in the order the server is given them; the
    /// bool is true for a pod network's port.
    pub(crate) fn port_plans(&self) -> Vec<(PortPlan, bool)> {
        if let Some(id) = self.network_id.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
            let mut subnets: Vec<String> = self.subnet_ids.iter().map(|s| s.trim().to_string()).collect();
            if let Some(s) = self.subnet_id.as_deref().map(str::trim).filter(|s| !s.is_empty())
                && !subnets.iter().any(|x| x == s)
            {
                subnets.insert(0, s.to_string());
            }
            subnets.retain(|s| !s.is_empty());
            let network = NetworkRef { id: Some(id.to_string()), name: None, pod_network: true };
            return vec![(PortPlan { network, subnets }, true)];
        }
        let single = self.networks.len() == 1;
        self.networks
            .iter()
            .map(|n| (PortPlan { network: n.clone(), subnets: Vec::new() }, n.pod_network || single))
            .collect()
    }

    /// The image, by id or name.
    pub(crate) fn image(&self) -> ImageRef<'_> {
        match (self.image_id.as_deref().map(str::trim).filter(|i| !i.is_empty()), self.image_name.as_deref()) {
            (Some(id), _) => ImageRef::Id(id),
            (None, name) => ImageRef::Name(name.unwrap_or_default().trim()),
        }
    }

    fn validate(&self) -> Result<(), DriverError> {
        let bad = |field: &str, problem: &str| {
            Err(DriverError::invalid_argument(format!("providerSpec.spec.{field}"), problem))
        };
        for (field, value) in
            [("region", &self.region), ("availabilityZone", &self.availability_zone), ("flavorName", &self.flavor_name)]
        {
            if value.trim().is_empty() {
                return bad(field, "is required");
            }
        }
        if let ImageRef::Name("") = self.image() {
            return bad("imageID", "is required (or imageName)");
        }
        self.markers()?;
        if self.tags.len() > MAX_TAGS {
            return bad(
                "tags",
                &format!("at most {MAX_TAGS} (Nova takes 128 metadata items; the driver adds the machine uid)"),
            );
        }
        if self.tags.contains_key(crate::naming::MACHINE_UID_KEY) {
            return bad("tags", &format!("{} is set by the driver", crate::naming::MACHINE_UID_KEY));
        }
        for (k, v) in &self.tags {
            let key_ok = k.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_:. ".contains(&b));
            if k.is_empty() || k.len() > 255 || v.len() > 255 || !key_ok {
                return bad(
                    "tags",
                    &format!("key {k:?}: Nova takes keys of 1-255 characters of [A-Za-z0-9-_:. ] and values up to 255"),
                );
            }
        }
        let has_network_id = self.network_id.as_deref().is_some_and(|n| !n.trim().is_empty());
        match (has_network_id, self.networks.is_empty()) {
            (true, false) => return bad("networks", "and networkID exclude each other: give one"),
            (false, true) => return bad("networkID", "is required (or networks)"),
            _ => {}
        }
        for (i, n) in self.networks.iter().enumerate() {
            let id = n.id.as_deref().is_some_and(|x| !x.trim().is_empty());
            let name = n.name.as_deref().is_some_and(|x| !x.trim().is_empty());
            if id == name {
                return bad(&format!("networks[{i}]"), "needs exactly one of id and name");
            }
        }
        if !has_network_id && (self.subnet_id.is_some() || !self.subnet_ids.is_empty()) {
            return bad("subnetID", "needs networkID");
        }
        let cidrs = self.pod_cidrs();
        if cidrs.is_empty() {
            return bad("podNetworkCidr", "is required (or podNetworkCIDRs)");
        }
        if cidrs.len() > MAX_POD_CIDRS {
            return bad(
                "podNetworkCIDRs",
                &format!("at most {MAX_POD_CIDRS} (Neutron's limit of address pairs per port)"),
            );
        }
        for (i, c) in cidrs.iter().enumerate() {
            if !is_cidr(c) {
                return bad(
                    &format!("podNetworkCIDRs[{i}]"),
                    &format!("{c:?} is not a CIDR (10.96.0.0/11, fd00::/48)"),
                );
            }
        }
        if self.root_disk_size < 0 {
            return bad("rootDiskSize", "must not be negative");
        }
        if self.root_disk_type.as_deref().is_some_and(|t| !t.trim().is_empty()) && self.root_disk_size == 0 {
            return bad("rootDiskType", "needs rootDiskSize");
        }
        Ok(())
    }
}

/// The class's image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImageRef<'a> {
    /// `imageID`.
    Id(&'a str),
    /// `imageName`.
    Name(&'a str),
}

/// True for an IPv4 or IPv6 CIDR without host bits (`10.96.0.0/11`,
/// `fd00::/48`; Neutron refuses `10.96.0.1/11`).
pub(crate) fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u32>() else {
        return false;
    };
    let host_bits_clear = |value: u128, width: u32| {
        let Some(host) = width.checked_sub(bits) else {
            return false;
        };
        let mask = if host >= 128 { u128::MAX } else { (1u128 << host) - 1 };
        value & mask == 0
    };
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(v4)) => host_bits_clear(u128::from(u32::from(v4)), 32),
        Ok(std::net::IpAddr::V6(v6)) => host_bits_clear(u128::from(v6), 128),
        Err(_) => false,
    }
}

/// A class as the Gardener extension writes it, for the crate's tests.
#[cfg(test)]
pub(crate) mod tests_support {
    /// The example class.
    pub(crate) fn example() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "openstack.machine.gardener.cloud/v1alpha1",
            "kind": "MachineProviderConfig",
            "spec": {
                "imageID": "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
                "region": "RegionOne",
                "availabilityZone": "nova",
                "flavorName": "m1.large",
                "keyName": "shoot--dev--conf-ssh-publickey",
                "securityGroups": ["shoot--dev--conf"],
                "tags": {"kubernetes.io-cluster-shoot--dev--conf": "1", "kubernetes.io-role-node": "1"},
                "networkID": "b1a2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
                "podNetworkCIDRs": ["100.96.0.0/11", "fd00:100:96::/48"],
                "rootDiskSize": 0,
                "useConfigDrive": null
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<OpenStackSpec, DriverError> {
        OpenStackSpec::parse(&serde_json::to_vec(&v).unwrap())
    }

    fn patched(patch: serde_json::Value) -> serde_json::Value {
        let mut v = tests_support::example();
        for (k, val) in patch.as_object().unwrap() {
            if val.is_null() {
                v["spec"].as_object_mut().unwrap().remove(k);
            } else {
                v["spec"][k] = val.clone();
            }
        }
        v
    }

    #[test]
    fn the_example_parses_with_its_ports() {
        let spec = parse(tests_support::example()).unwrap();
        assert_eq!(spec.pod_cidrs(), vec!["100.96.0.0/11", "fd00:100:96::/48"]);
        let plans = spec.port_plans();
        assert_eq!(plans.len(), 1);
        assert!(plans[0].1);
        assert_eq!(spec.image(), ImageRef::Id("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"));
    }

    #[test]
    fn refusals_name_the_field() {
        let field = |patch| parse(patched(patch)).unwrap_err().field().map(str::to_string);
        assert_eq!(field(json!({"flavorName": ""})).as_deref(), Some("providerSpec.spec.flavorName"));
        assert_eq!(field(json!({"imageID": null})).as_deref(), Some("providerSpec.spec.imageID"));
        assert_eq!(field(json!({"networks": [{"id": "n"}]})).as_deref(), Some("providerSpec.spec.networks"));
        assert_eq!(
            field(json!({"podNetworkCIDRs": ["10.0.0.0/33"]})).as_deref(),
            Some("providerSpec.spec.podNetworkCIDRs[0]")
        );
        assert_eq!(field(json!({"rootDiskSize": -1})).as_deref(), Some("providerSpec.spec.rootDiskSize"));
        assert_eq!(field(json!({"tags": {"a": "b"}})).as_deref(), Some("providerSpec.spec.tags"));
        assert_eq!(field(json!({"rootDiskSize": "big"})).as_deref(), Some("providerSpec.spec.rootDiskSize"));
        let mut wrong_kind = tests_support::example();
        wrong_kind["kind"] = json!("WorkerConfig");
        assert_eq!(parse(wrong_kind).unwrap_err().field(), Some("providerSpec.kind"));
        assert_eq!(parse(json!({"kind": "MachineProviderConfig"})).unwrap_err().field(), Some("providerSpec.spec"));
    }

    #[test]
    fn networks_list_and_single_pod_cidr() {
        let spec = parse(patched(json!({
            "networkID": null,
            "podNetworkCIDRs": null,
            "podNetworkCidr": "100.96.0.0/11",
            "networks": [{"name": "shoot"}, {"id": "storage-net", "podNetwork": false}, {"id": "pods", "podNetwork": true}],
        })))
        .unwrap();
        let pods: Vec<bool> = spec.port_plans().iter().map(|(_, pod)| *pod).collect();
        assert_eq!(pods, vec![false, false, true]);
        assert_eq!(spec.pod_cidrs(), vec!["100.96.0.0/11"]);
    }

    #[test]
    fn cidrs() {
        assert!(is_cidr("10.0.0.0/8"));
        assert!(is_cidr("fd00::/48"));
        assert!(!is_cidr("10.0.0.0"));
        assert!(!is_cidr("fd00::/129"));
        assert!(!is_cidr("x/1"));
        assert!(!is_cidr("10.96.0.1/11"), "host bits set");
        assert!(is_cidr("0.0.0.0/0"));
        assert!(is_cidr("10.0.0.1/32"));
        assert!(!is_cidr("fd00::1/64"));
    }
}
