//! The GCP machine class providerSpec, as the Go provider
//! (gardener/machine-controller-manager-provider-gcp) and the Gardener GCP
//! extension write it, with validation that names the offending field.
//!
//! Unknown fields are refused. Fields the Gardener extension writes but that
//! carry nothing for the VM (`secret`, `credentialsSecretRef`,
//! `operatingSystem`) are accepted and ignored, so that existing classes parse.

use std::collections::BTreeMap;

use machine_driver_api::{ClusterMarkers, DriverError, parse_provider_spec};
use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::naming::{is_gce_name, is_label_key, is_label_value};

/// Network tag prefix naming the cluster (`kubernetes-io-cluster-<name>`).
pub(crate) const CLUSTER_TAG_PREFIX: &str = "kubernetes-io-cluster-";
/// Network tag prefix naming the role (`kubernetes-io-role-<role>`).
pub(crate) const ROLE_TAG_PREFIX: &str = "kubernetes-io-role-";

/// Disk type of local SSDs in the spec.
pub(crate) const DISK_TYPE_SCRATCH: &str = "SCRATCH";

/// Smallest disk size accepted here (GB). The Go provider has no minimum and
/// Gardener passes the user's volume size: Compute itself refuses a size below
/// the disk type's or the image's minimum.
const MIN_DISK_SIZE_GB: i64 = 1;
/// Largest persistent disk GCE offers (GB).
const MAX_DISK_SIZE_GB: i64 = 65_536;

/// The providerSpec of a GCP machine class.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct GcpProviderSpec {
    /// Machine type name (`n1-standard-2`) or partial URL.
    #[serde(default)]
    pub(crate) machine_type: String,
    /// Region, e.g. `europe-west1`.
    #[serde(default)]
    pub(crate) region: String,
    /// Zone, e.g. `europe-west1-b` (must be in `region`).
    #[serde(default)]
    pub(crate) zone: String,
    /// IP forwarding.
    #[serde(default)]
    pub(crate) can_ip_forward: bool,
    /// Deletion protection.
    #[serde(default)]
    pub(crate) deletion_protection: bool,
    /// Free-form description.
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// Disks; exactly one is the boot disk.
    #[serde(default)]
    pub(crate) disks: Vec<Disk>,
    /// Instance labels.
    #[serde(default)]
    pub(crate) labels: BTreeMap<String, String>,
    /// Metadata items.
    #[serde(default)]
    pub(crate) metadata: Vec<MetadataItem>,
    /// Network interfaces (at least one).
    #[serde(default)]
    pub(crate) network_interfaces: Vec<NetworkInterface>,
    /// Scheduling options.
    #[serde(default)]
    pub(crate) scheduling: Scheduling,
    /// Service accounts of the VM.
    #[serde(default)]
    pub(crate) service_accounts: Vec<ServiceAccount>,
    /// Network tags; must contain the cluster and the role tag.
    #[serde(default)]
    pub(crate) tags: Vec<String>,
    /// Attached GPUs.
    #[serde(default)]
    pub(crate) gpu: Option<Gpu>,
    /// Minimum CPU platform, e.g. `Intel Cascade Lake`.
    #[serde(default)]
    pub(crate) min_cpu_platform: Option<String>,
    /// Secure manager tags (`tagKeys/123: tagValues/456`), set at creation.
    #[serde(default)]
    pub(crate) resource_manager_tags: BTreeMap<String, String>,
    /// Shielded VM options.
    #[serde(default)]
    pub(crate) shielded_instance_configuration: Option<ShieldedInstanceConfiguration>,
    /// Dual-stack marker written by the Gardener extension; the interfaces' `stackType` decides.
    #[serde(default, rename = "dualStack")]
    pub(crate) _dual_stack: bool,
    /// Written by the Gardener extension (user data copy); ignored, the secret's `userData` is used.
    #[serde(default, rename = "secret")]
    pub(crate) _secret: Option<IgnoredAny>,
    /// Written by the Gardener extension; ignored.
    #[serde(default, rename = "credentialsSecretRef")]
    pub(crate) _credentials_secret_ref: Option<IgnoredAny>,
    /// Written by the Gardener extension; ignored.
    #[serde(default, rename = "operatingSystem")]
    pub(crate) _operating_system: Option<IgnoredAny>,
}

/// One disk.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Disk {
    /// Delete with the instance (default true).
    #[serde(default)]
    pub(crate) auto_delete: Option<bool>,
    /// The boot disk.
    #[serde(default)]
    pub(crate) boot: bool,
    /// Size in GB (persistent disks).
    #[serde(default)]
    pub(crate) size_gb: i64,
    /// Disk type (`pd-balanced`, `pd-ssd`, ..., or `SCRATCH` for a local SSD).
    #[serde(default, rename = "type")]
    pub(crate) disk_type: String,
    /// `NVME` or `SCSI` (local SSDs).
    #[serde(default)]
    pub(crate) interface: Option<String>,
    /// Source image (boot disk).
    #[serde(default)]
    pub(crate) image: String,
    /// Disk labels.
    #[serde(default)]
    pub(crate) labels: BTreeMap<String, String>,
    /// Customer-managed encryption key.
    #[serde(default)]
    pub(crate) encryption: Option<DiskEncryption>,
    /// Provisioned IOPS (pd-extreme, hyperdisk).
    #[serde(default)]
    pub(crate) provisioned_iops: Option<i64>,
    /// Provisioned throughput in MiB/s (hyperdisk).
    #[serde(default)]
    pub(crate) provisioned_throughput: Option<i64>,
    /// Hyperdisk storage pool.
    #[serde(default)]
    pub(crate) storage_pool: Option<String>,
}

/// A customer-managed encryption key.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct DiskEncryption {
    /// KMS key name.
    #[serde(default)]
    pub(crate) kms_key_name: String,
    /// Service account allowed to use the key (default: the Compute service agent).
    #[serde(default)]
    pub(crate) kms_key_service_account: String,
}

impl DiskEncryption {
    /// No key and no service account (`{}`): Google-managed encryption.
    pub(crate) fn is_empty(&self) -> bool {
        self.kms_key_name.is_empty() && self.kms_key_service_account.is_empty()
    }
}

/// One metadata item.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MetadataItem {
    /// Key.
    #[serde(default)]
    pub(crate) key: String,
    /// Value.
    #[serde(default)]
    pub(crate) value: Option<String>,
}

/// One network interface.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct NetworkInterface {
    /// No external (NAT) IPv4 address.
    #[serde(default, rename = "disableExternalIP")]
    pub(crate) disable_external_ip: bool,
    /// Network name or URL.
    #[serde(default)]
    pub(crate) network: String,
    /// Subnetwork name or URL.
    #[serde(default)]
    pub(crate) subnetwork: String,
    /// `IPV4_ONLY`, `IPV4_IPV6` or `IPV6_ONLY`.
    #[serde(default)]
    pub(crate) stack_type: Option<String>,
    /// `EXTERNAL` or `INTERNAL` (dual stack). The Gardener extension writes `ipv6accessType`.
    #[serde(default, alias = "ipv6accessType")]
    pub(crate) ipv6_access_type: Option<String>,
    /// Alias IP range for pods: a netmask (`/24`), an address or a CIDR.
    #[serde(default)]
    pub(crate) ip_cidr_range: Option<String>,
    /// Secondary range of the subnetwork the alias range comes from.
    #[serde(default)]
    pub(crate) subnetwork_range_name: Option<String>,
    /// Whether the interface gets the alias range (`ipCidrRange`,
    /// `subnetworkRangeName`). Written `true` by the Gardener extension for
    /// dual-stack and IPv6 shoots; when absent, the Go provider's rule decides
    /// (an `IPV4_IPV6` interface gets it), see [`NetworkInterface::alias_ips`].
    #[serde(default, rename = "useAliasIPs")]
    pub(crate) use_alias_ips: Option<bool>,
}

/// The stack type with which the Go provider adds IPv6 and the alias range.
pub(crate) const STACK_DUAL: &str = "IPV4_IPV6";
/// Compute's default stack type.
pub(crate) const STACK_IPV4_ONLY: &str = "IPV4_ONLY";

impl NetworkInterface {
    /// Whether the interface is created dual-stack (`stackType: IPV4_IPV6`).
    pub(crate) fn dual_stack(&self) -> bool {
        self.stack_type.as_deref() == Some(STACK_DUAL)
    }

    /// Whether the alias IP range is added: `useAliasIPs` when given; when
    /// absent, for an `IPV4_IPV6` interface (the Go provider adds the range
    /// to every dual-stack interface and knows no `useAliasIPs`).
    pub(crate) fn alias_ips(&self) -> bool {
        self.use_alias_ips.unwrap_or_else(|| self.dual_stack())
    }
}

/// Scheduling options.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Scheduling {
    /// Restart after a host failure.
    #[serde(default)]
    pub(crate) automatic_restart: bool,
    /// `MIGRATE` or `TERMINATE`.
    #[serde(default)]
    pub(crate) on_host_maintenance: String,
    /// Preemptible VM.
    #[serde(default)]
    pub(crate) preemptible: bool,
}

/// A service account of the VM.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServiceAccount {
    /// Email.
    #[serde(default)]
    pub(crate) email: String,
    /// OAuth scopes.
    #[serde(default)]
    pub(crate) scopes: Vec<String>,
}

/// GPUs to attach.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Gpu {
    /// Accelerator type, e.g. `nvidia-tesla-t4`.
    #[serde(default)]
    pub(crate) accelerator_type: String,
    /// How many.
    #[serde(default)]
    pub(crate) count: i64,
}

/// Shielded VM options.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ShieldedInstanceConfiguration {
    /// Secure boot.
    #[serde(default)]
    pub(crate) secure_boot: Option<bool>,
    /// Virtual TPM.
    #[serde(default)]
    pub(crate) vtpm: Option<bool>,
    /// Integrity monitoring.
    #[serde(default)]
    pub(crate) integrity_monitoring: Option<bool>,
}

impl GcpProviderSpec {
    /// Parses and validates raw providerSpec JSON.
    pub(crate) fn parse(raw: &[u8]) -> Result<Self, DriverError> {
        let spec: Self = parse_provider_spec(raw)?;
        spec.validate()?;
        Ok(spec)
    }

    /// The class's cluster and role markers: its network tags
    /// `kubernetes-io-cluster-<cluster>` and `kubernetes-io-role-<role>`,
    /// exactly one of each (the kit's [`ClusterMarkers::from_keys`]; checked by
    /// [`GcpProviderSpec::parse`], INVALID_ARGUMENT naming `providerSpec.tags`).
    pub(crate) fn markers(&self) -> Result<ClusterMarkers, DriverError> {
        ClusterMarkers::from_keys(
            self.tags.iter().map(String::as_str),
            CLUSTER_TAG_PREFIX,
            ROLE_TAG_PREFIX,
            "providerSpec.tags",
        )
    }

    /// Checks every value, naming the first offending field.
    fn validate(&self) -> Result<(), DriverError> {
        let f = |path: &str| format!("providerSpec.{path}");
        for (name, value) in [("machineType", &self.machine_type), ("region", &self.region), ("zone", &self.zone)] {
            if value.trim().is_empty() {
                return Err(DriverError::invalid_argument(f(name), "is required"));
            }
        }
        // Both go into Compute URLs (the zone as a path segment): GCE names only.
        for (name, value) in [("region", &self.region), ("zone", &self.zone)] {
            if !is_gce_name(value) {
                return Err(DriverError::invalid_argument(
                    f(name),
                    format!("{value:?} is not a GCE {name} name (lowercase letters, digits and '-')"),
                ));
            }
        }
        if !self.zone.starts_with(&format!("{}-", self.region)) {
            return Err(DriverError::invalid_argument(
                f("zone"),
                format!("zone {:?} is not in region {:?}", self.zone, self.region),
            ));
        }
        self.validate_disks()?;
        validate_labels(&self.labels, "labels")?;
        for (i, item) in self.metadata.iter().enumerate() {
            if item.key.is_empty() {
                return Err(DriverError::invalid_argument(f(&format!("metadata[{i}].key")), "is required"));
            }
            if item.key == "user-data" {
                return Err(DriverError::invalid_argument(
                    f(&format!("metadata[{i}].key")),
                    "user-data is set from the secret's userData and must not be given in the spec",
                ));
            }
        }
        if self.network_interfaces.is_empty() {
            return Err(DriverError::invalid_argument(
                f("networkInterfaces"),
                "at least one network interface is required",
            ));
        }
        for (i, nic) in self.network_interfaces.iter().enumerate() {
            if nic.network.is_empty() && nic.subnetwork.is_empty() {
                return Err(DriverError::invalid_argument(
                    f(&format!("networkInterfaces[{i}]")),
                    "network or subnetwork (or both) is required",
                ));
            }
            if let Some(st) = &nic.stack_type
                && !["IPV4_ONLY", "IPV4_IPV6", "IPV6_ONLY"].contains(&st.as_str())
            {
                return Err(DriverError::invalid_argument(
                    f(&format!("networkInterfaces[{i}].stackType")),
                    format!("{st:?} is not one of IPV4_ONLY, IPV4_IPV6, IPV6_ONLY"),
                ));
            }
            if let Some(at) = &nic.ipv6_access_type
                && !["EXTERNAL", "INTERNAL"].contains(&at.as_str())
            {
                return Err(DriverError::invalid_argument(
                    f(&format!("networkInterfaces[{i}].ipv6AccessType")),
                    format!("{at:?} is not one of EXTERNAL, INTERNAL"),
                ));
            }
        }
        let ohm = self.scheduling.on_host_maintenance.as_str();
        if ohm != "MIGRATE" && ohm != "TERMINATE" {
            return Err(DriverError::invalid_argument(
                f("scheduling.onHostMaintenance"),
                format!("{ohm:?} is not one of MIGRATE, TERMINATE"),
            ));
        }
        if let Some(gpu) = &self.gpu {
            if gpu.accelerator_type.trim().is_empty() {
                return Err(DriverError::invalid_argument(f("gpu.acceleratorType"), "is required"));
            }
            if gpu.count <= 0 || gpu.count > i64::from(i32::MAX) {
                return Err(DriverError::invalid_argument(f("gpu.count"), "must be greater than 0"));
            }
            if ohm != "TERMINATE" {
                return Err(DriverError::invalid_argument(
                    f("scheduling.onHostMaintenance"),
                    "must be TERMINATE for VMs with GPUs (live migration is not possible)",
                ));
            }
        }
        for (i, sa) in self.service_accounts.iter().enumerate() {
            if sa.email.trim().is_empty() {
                return Err(DriverError::invalid_argument(f(&format!("serviceAccounts[{i}].email")), "is required"));
            }
        }
        for (i, tag) in self.tags.iter().enumerate() {
            if !is_gce_name(tag) {
                return Err(DriverError::invalid_argument(
                    f(&format!("tags[{i}]")),
                    format!("{tag:?} is not a valid network tag (lowercase letters, digits and '-', at most 63)"),
                ));
            }
        }
        self.markers()?;
        Ok(())
    }

    fn validate_disks(&self) -> Result<(), DriverError> {
        let f = |path: String| format!("providerSpec.{path}");
        if self.disks.is_empty() {
            return Err(DriverError::invalid_argument(f("disks".into()), "at least one disk is required"));
        }
        let boots = self.disks.iter().filter(|d| d.boot).count();
        if boots != 1 {
            return Err(DriverError::invalid_argument(
                f("disks".into()),
                format!("exactly one boot disk is required, found {boots}"),
            ));
        }
        for (i, d) in self.disks.iter().enumerate() {
            let at = |field: &str| f(format!("disks[{i}].{field}"));
            if d.disk_type == DISK_TYPE_SCRATCH {
                if d.boot {
                    return Err(DriverError::invalid_argument(at("boot"), "a SCRATCH (local SSD) disk cannot boot"));
                }
                let iface = d.interface.as_deref().unwrap_or("");
                if iface != "NVME" && iface != "SCSI" {
                    return Err(DriverError::invalid_argument(
                        at("interface"),
                        format!("{iface:?} is not one of NVME, SCSI (required for SCRATCH disks)"),
                    ));
                }
            } else {
                if d.disk_type.is_empty()
                    || !d.disk_type.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                {
                    return Err(DriverError::invalid_argument(
                        at("type"),
                        format!(
                            "{:?} is not a disk type (pd-standard, pd-balanced, pd-ssd, hyperdisk-..., or SCRATCH)",
                            d.disk_type
                        ),
                    ));
                }
                if !(MIN_DISK_SIZE_GB..=MAX_DISK_SIZE_GB).contains(&d.size_gb) {
                    return Err(DriverError::invalid_argument(
                        at("sizeGb"),
                        format!("{} is out of range ({MIN_DISK_SIZE_GB}..={MAX_DISK_SIZE_GB} GB)", d.size_gb),
                    ));
                }
                if let Some(iface) = d.interface.as_deref()
                    && !iface.is_empty()
                    && iface != "SCSI"
                    && iface != "NVME"
                {
                    return Err(DriverError::invalid_argument(
                        at("interface"),
                        format!("{iface:?} is not one of NVME, SCSI"),
                    ));
                }
            }
            if d.boot && d.image.trim().is_empty() {
                return Err(DriverError::invalid_argument(at("image"), "is required for the boot disk"));
            }
            // `{}` is what the Gardener extension writes for an encryption
            // setting without a key: Google-managed encryption, as the Go
            // provider's empty key means.
            if let Some(enc) = d.encryption.as_ref().filter(|e| !e.is_empty()) {
                if enc.kms_key_name.trim().is_empty() {
                    return Err(DriverError::invalid_argument(at("encryption.kmsKeyName"), "is required"));
                }
                if !enc.kms_key_service_account.is_empty() && enc.kms_key_service_account.trim().is_empty() {
                    return Err(DriverError::invalid_argument(
                        at("encryption.kmsKeyServiceAccount"),
                        "must be a service account or left out (the Compute service agent is used then)",
                    ));
                }
            }
            for (name, v) in
                [("provisionedIops", d.provisioned_iops), ("provisionedThroughput", d.provisioned_throughput)]
            {
                if v.is_some_and(|v| v < 0) {
                    return Err(DriverError::invalid_argument(at(name), "must not be negative"));
                }
            }
            validate_labels(&d.labels, &format!("disks[{i}].labels"))?;
        }
        Ok(())
    }
}

/// Checks GCE label syntax for every key and value.
fn validate_labels(labels: &BTreeMap<String, String>, path: &str) -> Result<(), DriverError> {
    for (k, v) in labels {
        if !is_label_key(k) {
            return Err(DriverError::invalid_argument(
                format!("providerSpec.{path}"),
                format!("key {k:?} is not a GCE label key ([a-z][a-z0-9_-]{{0,62}})"),
            ));
        }
        if !is_label_value(v) {
            return Err(DriverError::invalid_argument(
                format!("providerSpec.{path}.{k}"),
                format!("{v:?} is not a GCE label value ([a-z0-9_-]{{0,63}})"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use machine_driver_api::ErrorKind;
    use serde_json::{Value, json};

    /// The shape the Gardener GCP extension writes.
    fn gardener_spec() -> Value {
        json!({
            "region": "europe-west1",
            "zone": "europe-west1-b",
            "canIpForward": true,
            "deletionProtection": false,
            "description": "Machine of Shoot shoot--p--c created by machine-controller-manager.",
            "disks": [
                {"autoDelete": true, "boot": true, "sizeGb": 50, "type": "pd-balanced",
                 "image": "projects/debian-cloud/global/images/debian-12", "labels": {"name": "worker"}},
                {"autoDelete": true, "boot": false, "sizeGb": 375, "type": "SCRATCH", "interface": "NVME", "labels": {}}
            ],
            "labels": {"name": "worker"},
            "metadata": [{"key": "block-project-ssh-keys", "value": "TRUE"}],
            "machineType": "n1-standard-2",
            "minCpuPlatform": "Intel Cascade Lake",
            "networkInterfaces": [{"subnetwork": "shoot--p--c-nodes", "disableExternalIP": true,
                "stackType": "IPV4_IPV6", "ipv6accessType": "EXTERNAL", "ipCidrRange": "/24",
                "subnetworkRangeName": "ipv4-pod-cidr"}],
            "scheduling": {"automaticRestart": true, "onHostMaintenance": "TERMINATE", "preemptible": false},
            "secret": {"cloudConfig": "CANARY-USER-DATA"},
            "credentialsSecretRef": {"name": "cloudprovider", "namespace": "shoot--p--c"},
            "serviceAccounts": [{"email": "sa@p.iam.gserviceaccount.com", "scopes": ["https://www.googleapis.com/auth/compute"]}],
            "tags": ["shoot--p--c", "kubernetes-io-cluster-shoot--p--c", "kubernetes-io-role-node"],
            "operatingSystem": {"operatingSystemName": "gardenlinux", "operatingSystemVersion": "1592.1.0"},
            "gpu": {"acceleratorType": "nvidia-tesla-t4", "count": 1}
        })
    }

    /// A change that breaks one field of a valid spec.
    type Mutation = Box<dyn Fn(&mut Value)>;

    fn parse(v: &Value) -> Result<GcpProviderSpec, DriverError> {
        GcpProviderSpec::parse(v.to_string().as_bytes())
    }

    fn field_of(v: &Value) -> String {
        let e = parse(v).expect_err("must be rejected");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        e.field().unwrap_or("").to_string()
    }

    #[test]
    fn gardener_extension_spec_parses() {
        let s = parse(&gardener_spec()).expect("valid");
        assert_eq!(s.machine_type, "n1-standard-2");
        assert_eq!(s.network_interfaces[0].ipv6_access_type.as_deref(), Some("EXTERNAL"));
        let markers = s.markers().unwrap();
        assert_eq!(markers.cluster(), "kubernetes-io-cluster-shoot--p--c");
        assert_eq!(markers.role(), "kubernetes-io-role-node");
        assert!(!format!("{s:?}").contains("CANARY"), "the ignored secret copy must not print");
    }

    #[test]
    fn an_empty_encryption_means_google_managed_as_in_the_go_provider() {
        let mut v = gardener_spec();
        v["disks"][0]["encryption"] = json!({});
        let s = parse(&v).expect("`{}` is what the extension writes for an encryption without a key");
        let disk = crate::instance::attached_disk(&s.disks[0], &s.zone);
        assert!(disk.disk_encryption_key.is_none(), "no customer-managed key is sent");
        v["disks"][0]["encryption"] = json!({"kmsKeyServiceAccount": "sa@p.iam.gserviceaccount.com"});
        assert_eq!(field_of(&v), "providerSpec.disks[0].encryption.kmsKeyName");
    }

    #[test]
    fn the_example_class_is_valid() {
        GcpProviderSpec::parse(include_bytes!("../examples/machine-class.json")).expect("example must be valid");
    }

    #[test]
    fn fields_of_newer_extensions_are_ignored_and_mistyped_fields_named() {
        // Written by Gardener's GCP extension and by newer versions.
        let mut v = gardener_spec();
        v["apiVersion"] = json!("gcp.provider.extensions.gardener.cloud/v1alpha1");
        v["advancedMachineFeatures"] = json!({"enableNestedVirtualization": null});
        v["networkInterfaces"][0]["useAliasIPs"] = json!(true);
        v["disks"][1] = json!({"autoDelete": true, "boot": false, "sizeGb": 10, "type": "pd-standard", "labels": {}});
        v["bogus"] = json!(1);
        let spec = parse(&v).expect("accepted as the Go provider accepts it");
        assert_eq!(spec.disks[1].size_gb, 10, "small data disks are the cloud's to refuse");
        assert_eq!(spec.network_interfaces[0].use_alias_ips, Some(true), "useAliasIPs is a field, not ignored");
        let mut v = gardener_spec();
        v["networkInterfaces"][0]["useAliasIPs"] = json!("yes");
        assert_eq!(field_of(&v), "providerSpec.networkInterfaces[0].useAliasIPs");
        let mut v = gardener_spec();
        v["disks"][0]["sizeGb"] = json!("big");
        assert_eq!(field_of(&v), "providerSpec.disks[0].sizeGb");
    }

    #[test]
    fn each_rule_names_its_field() {
        let cases: Vec<(&str, Mutation)> = vec![
            ("providerSpec.machineType", Box::new(|v| v["machineType"] = json!(""))),
            ("providerSpec.zone", Box::new(|v| v["zone"] = json!("us-east1-b"))),
            ("providerSpec.zone", Box::new(|v| v["zone"] = json!("europe-west1-.."))),
            ("providerSpec.zone", Box::new(|v| v["zone"] = json!("europe-west1-b/../../x"))),
            ("providerSpec.region", Box::new(|v| v["region"] = json!("europe-west1/.."))),
            ("providerSpec.disks", Box::new(|v| v["disks"][0]["boot"] = json!(false))),
            ("providerSpec.disks", Box::new(|v| v["disks"][1]["boot"] = json!(true))),
            ("providerSpec.disks", Box::new(|v| v["disks"] = json!([]))),
            ("providerSpec.disks[0].sizeGb", Box::new(|v| v["disks"][0]["sizeGb"] = json!(0))),
            ("providerSpec.disks[0].type", Box::new(|v| v["disks"][0]["type"] = json!("Fast Disk"))),
            ("providerSpec.disks[0].image", Box::new(|v| v["disks"][0]["image"] = json!(""))),
            ("providerSpec.disks[1].interface", Box::new(|v| v["disks"][1]["interface"] = json!("IDE"))),
            (
                "providerSpec.disks[0].encryption.kmsKeyName",
                Box::new(|v| v["disks"][0]["encryption"] = json!({"kmsKeyName": " "})),
            ),
            ("providerSpec.labels", Box::new(|v| v["labels"] = json!({"Bad.Key": "x"}))),
            ("providerSpec.metadata[0].key", Box::new(|v| v["metadata"][0]["key"] = json!("user-data"))),
            ("providerSpec.networkInterfaces", Box::new(|v| v["networkInterfaces"] = json!([]))),
            (
                "providerSpec.networkInterfaces[0]",
                Box::new(|v| v["networkInterfaces"] = json!([{"disableExternalIP": true}])),
            ),
            (
                "providerSpec.networkInterfaces[0].stackType",
                Box::new(|v| v["networkInterfaces"][0]["stackType"] = json!("IPV5")),
            ),
            (
                "providerSpec.scheduling.onHostMaintenance",
                Box::new(|v| v["scheduling"]["onHostMaintenance"] = json!("MIGRATE")),
            ),
            ("providerSpec.gpu.count", Box::new(|v| v["gpu"]["count"] = json!(0))),
            ("providerSpec.serviceAccounts[0].email", Box::new(|v| v["serviceAccounts"][0]["email"] = json!(""))),
            ("providerSpec.tags", Box::new(|v| v["tags"] = json!(["shoot--p--c", "kubernetes-io-role-node"]))),
            ("providerSpec.tags", Box::new(|v| v["tags"] = json!(["kubernetes-io-cluster-shoot--p--c"]))),
            (
                "providerSpec.tags",
                Box::new(|v| {
                    v["tags"] = json!(["kubernetes-io-cluster-a", "kubernetes-io-cluster-b", "kubernetes-io-role-node"])
                }),
            ),
            ("providerSpec.tags[0]", Box::new(|v| v["tags"][0] = json!("Shoot"))),
        ];
        for (field, mutate) in cases {
            let mut v = gardener_spec();
            mutate(&mut v);
            assert_eq!(field_of(&v), field);
        }
    }
}
