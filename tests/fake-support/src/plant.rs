//! Planting VMs out of band (`POST /_admin/instances`): a running VM made by
//! someone other than the driver under test (another cluster, an operator,
//! an older driver), described in cloud-neutral words. Each fake turns the
//! request into its cloud's own record (EC2 tags, GCE labels and network tags,
//! ARM tags, ECS tags, Nova metadata); it knows nothing of any driver's
//! conventions, so the markers come from the caller.
//!
//! The resources made with the VM (`attached`: a NIC, disks, a Neutron port,
//! a Cinder volume) are described the same way: their names and tags come
//! from the caller, so that a VM can be planted exactly as a given tool (the
//! Go provider of a cloud) makes it. Without `attached` each fake gives the
//! VM what its cloud's console gives it (as before).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Body of `POST /_admin/instances`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlantRequest {
    /// The VM's name as the cloud keeps it (EC2 `Name` tag, GCE instance
    /// name, Azure VM name, ECS `InstanceName`, Nova server name).
    pub name: String,
    /// Exactly the tags the VM carries (GCE: labels; OpenStack: server metadata).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// GCE network tags (`tags.items`); refused by clouds that have none.
    #[serde(default)]
    pub network_tags: Vec<String>,
    /// Where the VM lives (account, project, region, zone, resource group, ...),
    /// in the fake's own keys; what is absent the fake takes from its seeded
    /// state, and keys it does not know are refused.
    #[serde(default)]
    pub scope: BTreeMap<String, String>,
    /// Instance metadata items besides tags (GCE `metadata.items`, key to
    /// value); refused by clouds whose VMs have none (their key-value pairs
    /// are `tags`).
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// The resources made with the VM and attached to it, in order (the first
    /// `disk`/`volume` with `boot` is the one it boots from). Empty: what the
    /// cloud's console gives a VM. Each fake refuses the kinds it cannot attach.
    #[serde(default)]
    pub attached: Vec<PlantAttached>,
}

/// The kind of a resource planted with a VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachedKind {
    /// A network interface (Azure NIC).
    Nic,
    /// A disk (EC2 EBS volume of a block device mapping, GCE attached disk,
    /// Azure managed disk, ECS system or data disk).
    Disk,
    /// A Neutron port made before the server and passed to it.
    Port,
    /// A Cinder volume made before the server and attached to it.
    Volume,
}

impl PlantAttached {
    /// A resource of `kind` named `name`, everything else the cloud's default.
    pub fn new(kind: AttachedKind, name: &str) -> Self {
        Self {
            kind,
            name: name.to_owned(),
            tags: BTreeMap::new(),
            string_tags: Vec::new(),
            boot: false,
            delete_with_vm: None,
            size_gb: None,
            subnets: Vec::new(),
            security_groups: Vec::new(),
        }
    }
}

impl AttachedKind {
    /// Its word in requests.
    pub fn word(self) -> &'static str {
        match self {
            AttachedKind::Nic => "nic",
            AttachedKind::Disk => "disk",
            AttachedKind::Port => "port",
            AttachedKind::Volume => "volume",
        }
    }
}

/// One resource made with a planted VM, described in cloud-neutral words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlantAttached {
    /// What it is.
    pub kind: AttachedKind,
    /// Its name as the cloud keeps it; empty: the cloud's default (clouds
    /// whose resource has no name of its own refuse a non-empty one).
    #[serde(default)]
    pub name: String,
    /// Exactly the key-value tags it carries (Azure tags, GCE disk labels,
    /// Cinder volume metadata, EC2 volume tags).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Plain string tags (Neutron's port tags); refused where the cloud has none.
    #[serde(default)]
    pub string_tags: Vec<String>,
    /// The disk or volume the VM boots from.
    #[serde(default)]
    pub boot: bool,
    /// Whether the cloud deletes it with the VM (EC2 `DeleteOnTermination`,
    /// GCE `autoDelete`, Azure `deleteOption: Delete`, ECS `DeleteWithInstance`,
    /// Nova's `delete_on_termination`); absent: the cloud's API default.
    #[serde(default)]
    pub delete_with_vm: Option<bool>,
    /// Size in GiB (disks, volumes); absent: the cloud's default (the image's size).
    #[serde(default)]
    pub size_gb: Option<u64>,
    /// The subnets it takes its addresses from (a port's fixed IPs), by the
    /// cloud's ids; empty: one address from every subnet of the network.
    #[serde(default)]
    pub subnets: Vec<String>,
    /// The security groups it is in (a port's), by the cloud's ids or names;
    /// empty: the project's `default` group, as the cloud gives it.
    #[serde(default)]
    pub security_groups: Vec<String>,
}

/// One attached resource in the answer of `POST /_admin/instances`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlantedAttached {
    /// Its kind, as requested.
    pub kind: AttachedKind,
    /// Its id in the inventory (`dependents`, or the VM's own listing of it).
    pub id: String,
    /// Its name as the cloud keeps it.
    pub name: String,
}

/// Answer of `POST /_admin/instances`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planted {
    /// The inventory id (`GET /_admin/inventory`, `POST /_admin/instances/{id}/terminate`).
    pub id: String,
    /// The VM's name.
    pub name: String,
    /// The scope the VM was planted in, every key resolved (defaults included).
    #[serde(default)]
    pub scope: BTreeMap<String, String>,
    /// The resources planted with it, in request order (absent when the request named none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attached: Vec<PlantedAttached>,
}

impl Planted {
    /// The answer for VM `id` named `name`, planted in `scope` (its keys and resolved values).
    pub fn new<'a>(id: String, name: String, scope: impl IntoIterator<Item = (&'a str, String)>) -> Self {
        Self { id, name, scope: scope.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(), attached: Vec::new() }
    }

    /// The answer with its attached resources.
    pub fn with_attached(self, attached: Vec<PlantedAttached>) -> Self {
        Self { attached, ..self }
    }
}

/// Why a fake refused to plant a VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlantError {
    /// The fake cannot plant VMs (501).
    Unsupported,
    /// The request is not valid for this cloud (400): a bad name, tag,
    /// network tag or scope key.
    Invalid(String),
    /// The cloud already has a VM of that name where names are unique (409).
    Conflict(String),
}

impl fmt::Display for PlantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlantError::Unsupported => f.write_str("this fake cannot plant instances"),
            PlantError::Invalid(why) | PlantError::Conflict(why) => f.write_str(why),
        }
    }
}

impl PlantRequest {
    /// The scope value `key`, or `default` when absent.
    pub fn scope_or(&self, key: &str, default: &str) -> String {
        self.scope.get(key).cloned().unwrap_or_else(|| default.to_owned())
    }

    /// The scope value `key`, or [`PlantError::Invalid`] naming it when absent.
    pub fn scope_required(&self, key: &str) -> Result<String, PlantError> {
        self.scope.get(key).cloned().ok_or_else(|| PlantError::Invalid(format!("scope.{key} is required")))
    }

    /// Refuses scope keys outside `known` (a typo must not plant the VM somewhere else).
    pub fn check_scope_keys(&self, known: &[&str]) -> Result<(), PlantError> {
        match self.scope.keys().find(|k| !known.contains(&k.as_str())) {
            Some(bad) => Err(PlantError::Invalid(format!("unknown scope key {bad:?} (known: {})", known.join(", ")))),
            None => Ok(()),
        }
    }

    /// Refuses network tags (for clouds without them).
    pub fn refuse_network_tags(&self, cloud: &str) -> Result<(), PlantError> {
        if self.network_tags.is_empty() {
            Ok(())
        } else {
            Err(PlantError::Invalid(format!("{cloud} has no network tags; network_tags must be empty")))
        }
    }

    /// Refuses instance metadata (for clouds whose key-value pairs are `tags`).
    pub fn refuse_metadata(&self, cloud: &str) -> Result<(), PlantError> {
        if self.metadata.is_empty() {
            Ok(())
        } else {
            Err(PlantError::Invalid(format!("{cloud} keeps no instance metadata besides tags; metadata must be empty")))
        }
    }

    /// Checks `attached` against what the cloud can attach: only `kinds`, at
    /// most one `boot` resource, and it first among the disks and volumes;
    /// string tags only on `string_tag_kinds`; subnets only on ports.
    pub fn check_attached(
        &self,
        cloud: &str,
        kinds: &[AttachedKind],
        string_tag_kinds: &[AttachedKind],
    ) -> Result<(), PlantError> {
        for (i, a) in self.attached.iter().enumerate() {
            let at = format!("attached[{i}]");
            if !kinds.contains(&a.kind) {
                let known: Vec<&str> = kinds.iter().map(|k| k.word()).collect();
                return Err(PlantError::Invalid(format!(
                    "{at}: {cloud} planting attaches no {} (known: {})",
                    a.kind.word(),
                    known.join(", ")
                )));
            }
            if a.boot && !matches!(a.kind, AttachedKind::Disk | AttachedKind::Volume) {
                return Err(PlantError::Invalid(format!("{at}: only a disk or a volume can be booted from")));
            }
            if !a.string_tags.is_empty() && !string_tag_kinds.contains(&a.kind) {
                return Err(PlantError::Invalid(format!("{at}: a {cloud} {} has no string tags", a.kind.word())));
            }
            if (!a.subnets.is_empty() || !a.security_groups.is_empty()) && a.kind != AttachedKind::Port {
                return Err(PlantError::Invalid(format!("{at}: only a port takes subnets and security groups")));
            }
        }
        let storage: Vec<&PlantAttached> =
            self.attached.iter().filter(|a| matches!(a.kind, AttachedKind::Disk | AttachedKind::Volume)).collect();
        match storage.iter().filter(|a| a.boot).count() {
            0 | 1 if storage.iter().skip(1).all(|a| !a.boot) => Ok(()),
            0 | 1 => Err(PlantError::Invalid("the boot disk or volume must come first among the disks".into())),
            _ => Err(PlantError::Invalid("at most one disk or volume can be booted from".into())),
        }
    }

    /// The attached resources of `kind`, in request order.
    pub fn attached_of(&self, kind: AttachedKind) -> impl Iterator<Item = &PlantAttached> {
        self.attached.iter().filter(move |a| a.kind == kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_helpers() {
        let req = PlantRequest {
            name: "m".into(),
            scope: [("region".to_owned(), "eu-west-1".to_owned())].into(),
            ..Default::default()
        };
        assert_eq!(req.scope_or("region", "x"), "eu-west-1");
        assert_eq!(req.scope_or("zone", "z"), "z");
        assert_eq!(req.scope_required("zone"), Err(PlantError::Invalid("scope.zone is required".into())));
        assert!(req.check_scope_keys(&["region"]).is_ok());
        assert!(req.check_scope_keys(&["zone"]).unwrap_err().to_string().contains("\"region\""));
        assert!(req.refuse_network_tags("EC2").is_ok());
        let tagged = PlantRequest { network_tags: vec!["t".into()], ..req };
        assert!(tagged.refuse_network_tags("EC2").is_err());
    }

    #[test]
    fn request_refuses_unknown_fields() {
        assert!(serde_json::from_str::<PlantRequest>(r#"{"name": "m", "labels": {}}"#).is_err());
        let req: PlantRequest = serde_json::from_str(r#"{"name": "m"}"#).unwrap();
        assert!(req.tags.is_empty() && req.network_tags.is_empty() && req.scope.is_empty());
        assert!(req.metadata.is_empty() && req.attached.is_empty());
        assert!(
            serde_json::from_str::<PlantRequest>(r#"{"name": "m", "attached": [{"kind": "nic", "x": 1}]}"#).is_err()
        );
        assert!(serde_json::from_str::<PlantRequest>(r#"{"name": "m", "attached": [{"kind": "ssd"}]}"#).is_err());
    }

    #[test]
    fn attached_resources_parse_and_are_checked() {
        let req: PlantRequest = serde_json::from_str(
            r#"{"name": "m", "metadata": {"k": "v"}, "attached": [
                {"kind": "nic", "name": "m-nic", "tags": {"a": "1"}},
                {"kind": "disk", "name": "m-os-disk", "boot": true, "delete_with_vm": true, "size_gb": 50},
                {"kind": "disk", "name": "m-data"}
            ]}"#,
        )
        .unwrap();
        assert_eq!(req.attached[0].kind, AttachedKind::Nic);
        assert_eq!(req.attached[1].delete_with_vm, Some(true));
        assert_eq!(req.attached[2].delete_with_vm, None);
        assert_eq!(req.attached_of(AttachedKind::Disk).count(), 2);
        let azure = [AttachedKind::Nic, AttachedKind::Disk];
        assert!(req.check_attached("Azure", &azure, &[]).is_ok());
        assert!(req.check_attached("EC2", &[AttachedKind::Disk], &[]).unwrap_err().to_string().contains("no nic"));
        assert!(req.refuse_metadata("EC2").is_err());
        let mut late_boot = req.clone();
        late_boot.attached.swap(1, 2);
        assert!(late_boot.check_attached("Azure", &azure, &[]).unwrap_err().to_string().contains("first"));
        let mut two_boots = req.clone();
        two_boots.attached[2].boot = true;
        assert!(two_boots.check_attached("Azure", &azure, &[]).unwrap_err().to_string().contains("at most one"));
        let mut boot_nic = req.clone();
        boot_nic.attached[0].boot = true;
        assert!(boot_nic.check_attached("Azure", &azure, &[]).is_err());
        let mut tagged = req.clone();
        tagged.attached[0].string_tags.push("t".into());
        assert!(tagged.check_attached("Azure", &azure, &[]).is_err());
        assert!(tagged.check_attached("Azure", &azure, &[AttachedKind::Nic]).is_ok());
        let mut subnets = req.clone();
        subnets.attached[1].subnets.push("s".into());
        assert!(subnets.check_attached("Azure", &azure, &[]).is_err());
        let mut groups = req;
        groups.attached[0].security_groups.push("sg".into());
        assert!(groups.check_attached("Azure", &azure, &[]).is_err());
    }
}
