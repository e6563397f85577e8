//! The GCP machine class providerSpec, as the Go provider
//! (gardener/machine-controller-manager-provider-gcp) and the Gardener GCP
//! extension write it, with validation that names the offending field.
//!
//! Unknown fields are ignored with a warning (`parse_provider_spec`; refused
//! under `--strict-provider-spec`). Fields the Gardener extension writes but
//! that carry nothing for the VM (`secret`, `credentialsSecretRef`,
//! `operatingSystem`, `dualStack`) are accepted and ignored, so that existing
//! classes parse; the README lists them and `crate::spec_coverage` checks
//! that every other field reaches the insert body.

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
    /// Advanced machine features (nested virtualization), as the Go provider
    /// sends them (gardener/machine-controller-manager-provider-gcp #156;
    /// written by gardener/gardener-extension-provider-gcp #1523 from the
    /// worker config's `advancedMachineFeatures`).
    #[serde(default)]
    pub(crate) advanced_machine_features: Option<AdvancedMachineFeatures>,
    /// Confidential VM: Compute's `confidentialInstanceConfig` (no Go provider has it).
    #[serde(default)]
    pub(crate) confidential_instance_config: Option<ConfidentialInstanceConfig>,
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
    /// `STANDARD` or `SPOT` (Compute's `scheduling.provisioningModel`).
    #[serde(default)]
    pub(crate) provisioning_model: Option<String>,
    /// What Compute does when it reclaims a Spot VM or its `maxRunDuration`
    /// ends: `STOP` or `DELETE`.
    #[serde(default)]
    pub(crate) instance_termination_action: Option<String>,
    /// How long the VM may run before `instanceTerminationAction` is taken.
    #[serde(default)]
    pub(crate) max_run_duration: Option<RunDuration>,
}

/// A duration as Compute writes it (`{"seconds": 3600, "nanos": 0}`).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RunDuration {
    /// Whole seconds.
    #[serde(default)]
    pub(crate) seconds: i64,
    /// Fraction of a second, in nanoseconds (0..1e9).
    #[serde(default)]
    pub(crate) nanos: i32,
}

/// Compute's `scheduling.provisioningModel` of a Spot VM.
pub(crate) const PROVISIONING_SPOT: &str = "SPOT";

/// Shortest and longest `maxRunDuration` Compute accepts (30 s, 120 days:
/// "Limit the run time of a VM", `--max-run-duration`).
const MAX_RUN_DURATION_SECS: std::ops::RangeInclusive<i64> = 30..=120 * 24 * 3600;

/// A Confidential VM's technology.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ConfidentialInstanceConfig {
    /// `SEV`, `SEV_SNP` or `TDX`.
    #[serde(default)]
    pub(crate) confidential_instance_type: Option<String>,
    /// The older switch: `true` without a type is AMD SEV.
    #[serde(default)]
    pub(crate) enable_confidential_compute: Option<bool>,
}

/// The machine series (the machine type's first part: `n2d` of
/// `n2d-standard-4`) each Confidential VM technology runs on, and whether it
/// may live-migrate (Compute Engine, "Confidential VM supported
/// configurations": AMD SEV on N2D, C2D and C3D, live migration on N2D only;
/// AMD SEV-SNP on N2D; Intel TDX on C3; all others TERMINATE on host maintenance).
const CONFIDENTIAL_SERIES: &[(&str, &[&str], &[&str])] =
    &[("SEV", &["n2d", "c2d", "c3d"], &["n2d"]), ("SEV_SNP", &["n2d"], &[]), ("TDX", &["c3"], &[])];

impl ConfidentialInstanceConfig {
    /// The technology asked for: the type, or SEV for the older switch alone; `None` when off.
    pub(crate) fn technology(&self) -> Option<&str> {
        match self.confidential_instance_type.as_deref().filter(|t| !t.is_empty()) {
            Some(t) => Some(t),
            None => self.enable_confidential_compute.unwrap_or(false).then_some("SEV"),
        }
    }
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

/// Advanced machine features of the instance.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AdvancedMachineFeatures {
    /// Nested virtualization (Compute's `advancedMachineFeatures.enableNestedVirtualization`).
    #[serde(default)]
    pub(crate) enable_nested_virtualization: Option<bool>,
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
        self.validate_spot()?;
        self.validate_confidential()?;
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

    /// Spot and run-time limits as Compute documents them ("Spot VMs",
    /// "Limit the run time of a VM"): a Spot VM cannot restart automatically
    /// nor live-migrate; `instanceTerminationAction` (`STOP` or `DELETE`)
    /// belongs to a Spot VM or a `maxRunDuration`, which needs it.
    fn validate_spot(&self) -> Result<(), DriverError> {
        let f = |path: &str| format!("providerSpec.scheduling.{path}");
        let sched = &self.scheduling;
        let model = sched.provisioning_model.as_deref().filter(|m| !m.is_empty());
        if let Some(m) = model
            && m != "STANDARD"
            && m != PROVISIONING_SPOT
        {
            return Err(DriverError::invalid_argument(
                f("provisioningModel"),
                format!("{m:?} is not one of STANDARD, SPOT"),
            ));
        }
        let spot = model == Some(PROVISIONING_SPOT);
        if spot && sched.automatic_restart {
            return Err(DriverError::invalid_argument(
                f("automaticRestart"),
                "must be false for a Spot VM (provisioningModel SPOT): Compute does not restart Spot VMs",
            ));
        }
        if spot && sched.on_host_maintenance != "TERMINATE" {
            return Err(DriverError::invalid_argument(
                f("onHostMaintenance"),
                "must be TERMINATE for a Spot VM (provisioningModel SPOT): Spot VMs cannot live-migrate",
            ));
        }
        let action = sched.instance_termination_action.as_deref().filter(|a| !a.is_empty());
        if let Some(a) = action {
            if a != "STOP" && a != "DELETE" {
                return Err(DriverError::invalid_argument(
                    f("instanceTerminationAction"),
                    format!("{a:?} is not one of STOP, DELETE"),
                ));
            }
            if !spot && sched.max_run_duration.is_none() {
                return Err(DriverError::invalid_argument(
                    f("instanceTerminationAction"),
                    "applies to a Spot VM (provisioningModel SPOT) or with a maxRunDuration only",
                ));
            }
        }
        if let Some(d) = sched.max_run_duration {
            if action.is_none() {
                return Err(DriverError::invalid_argument(
                    f("instanceTerminationAction"),
                    "is required with a maxRunDuration (STOP or DELETE)",
                ));
            }
            if !MAX_RUN_DURATION_SECS.contains(&d.seconds) || !(0..1_000_000_000).contains(&d.nanos) {
                return Err(DriverError::invalid_argument(
                    f("maxRunDuration"),
                    "must be between 30 seconds and 120 days (seconds; nanos 0..999999999)",
                ));
            }
        }
        Ok(())
    }

    /// A Confidential VM's technology on a machine series that offers it,
    /// terminated on host maintenance unless the series can live-migrate it.
    fn validate_confidential(&self) -> Result<(), DriverError> {
        let Some(cc) = &self.confidential_instance_config else { return Ok(()) };
        let Some(tech) = cc.technology() else { return Ok(()) };
        let field = if cc.confidential_instance_type.as_deref().is_some_and(|t| !t.is_empty()) {
            "providerSpec.confidentialInstanceConfig.confidentialInstanceType"
        } else {
            "providerSpec.confidentialInstanceConfig.enableConfidentialCompute"
        };
        let Some((_, series, migrate)) = CONFIDENTIAL_SERIES.iter().find(|(t, _, _)| *t == tech) else {
            return Err(DriverError::invalid_argument(field, format!("{tech:?} is not one of SEV, SEV_SNP, TDX")));
        };
        let of = machine_series(&self.machine_type);
        if !series.contains(&of) {
            return Err(DriverError::invalid_argument(
                "providerSpec.machineType",
                format!(
                    "{:?} cannot host a {tech} Confidential VM (machine series {})",
                    self.machine_type,
                    series.join(", ")
                ),
            ));
        }
        if self.scheduling.on_host_maintenance != "TERMINATE" && !migrate.contains(&of) {
            return Err(DriverError::invalid_argument(
                "providerSpec.scheduling.onHostMaintenance",
                format!("must be TERMINATE for a {tech} Confidential VM on {of}: it cannot live-migrate"),
            ));
        }
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

/// The machine series of a machine type (`n2d` of `n2d-standard-4` or
/// `zones/z/machineTypes/n2d-standard-4`).
fn machine_series(machine_type: &str) -> &str {
    let name = machine_type.rsplit('/').next().unwrap_or_default();
    name.split('-').next().unwrap_or_default()
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
    fn spot_and_confidential_combinations_are_checked_as_compute_documents_them() {
        let spot = |extra: Value| {
            let mut v = gardener_spec();
            v["scheduling"] = json!({"automaticRestart": false, "onHostMaintenance": "TERMINATE",
                "provisioningModel": "SPOT"});
            v["gpu"] = Value::Null;
            for (k, x) in extra.as_object().unwrap() {
                v["scheduling"][k] = x.clone();
            }
            v
        };
        let s = parse(&spot(json!({"instanceTerminationAction": "DELETE", "maxRunDuration": {"seconds": 3600}})))
            .expect("a Spot VM with a run-time limit");
        assert_eq!(s.scheduling.max_run_duration.map(|d| d.seconds), Some(3600));
        parse(&spot(json!({}))).expect("Spot without a termination action: Compute's default STOP");
        let mut limited = gardener_spec();
        limited["scheduling"]["instanceTerminationAction"] = json!("STOP");
        limited["scheduling"]["maxRunDuration"] = json!({"seconds": 30});
        parse(&limited).expect("a standard VM with a run-time limit");
        let cases = [
            (spot(json!({"provisioningModel": "CHEAP"})), "providerSpec.scheduling.provisioningModel"),
            (spot(json!({"automaticRestart": true})), "providerSpec.scheduling.automaticRestart"),
            (spot(json!({"onHostMaintenance": "MIGRATE"})), "providerSpec.scheduling.onHostMaintenance"),
            (
                spot(json!({"instanceTerminationAction": "HIBERNATE"})),
                "providerSpec.scheduling.instanceTerminationAction",
            ),
            (spot(json!({"maxRunDuration": {"seconds": 3600}})), "providerSpec.scheduling.instanceTerminationAction"),
            (
                spot(json!({"instanceTerminationAction": "DELETE", "maxRunDuration": {"seconds": 29}})),
                "providerSpec.scheduling.maxRunDuration",
            ),
            (
                spot(json!({"instanceTerminationAction": "DELETE", "maxRunDuration": {"seconds": 121 * 24 * 3600}})),
                "providerSpec.scheduling.maxRunDuration",
            ),
            (
                spot(json!({"instanceTerminationAction": "DELETE", "maxRunDuration": {"seconds": 60, "nanos": -1}})),
                "providerSpec.scheduling.maxRunDuration",
            ),
        ];
        for (v, field) in cases {
            assert_eq!(field_of(&v), field, "{}", v["scheduling"]);
        }
        let mut standard_action = gardener_spec();
        standard_action["scheduling"]["instanceTerminationAction"] = json!("DELETE");
        assert_eq!(field_of(&standard_action), "providerSpec.scheduling.instanceTerminationAction");

        let confidential = |machine: &str, ohm: &str, cc: Value| {
            let mut v = gardener_spec();
            v["machineType"] = json!(machine);
            v["scheduling"]["onHostMaintenance"] = json!(ohm);
            v["gpu"] = Value::Null;
            v["confidentialInstanceConfig"] = cc;
            v
        };
        let sev = json!({"confidentialInstanceType": "SEV"});
        for (machine, ohm, cc) in [
            ("n2d-standard-2", "MIGRATE", sev.clone()),
            ("c2d-standard-4", "TERMINATE", sev.clone()),
            ("zones/europe-west1-b/machineTypes/c3d-standard-4", "TERMINATE", sev.clone()),
            ("n2d-standard-2", "TERMINATE", json!({"confidentialInstanceType": "SEV_SNP"})),
            ("c3-standard-4", "TERMINATE", json!({"confidentialInstanceType": "TDX"})),
            ("n2d-standard-2", "MIGRATE", json!({"enableConfidentialCompute": true})),
            ("n1-standard-2", "MIGRATE", json!({"enableConfidentialCompute": false})),
        ] {
            parse(&confidential(machine, ohm, cc.clone())).unwrap_or_else(|e| panic!("{machine} {cc}: {e}"));
        }
        for (machine, ohm, cc, field) in [
            ("n1-standard-2", "TERMINATE", sev.clone(), "providerSpec.machineType"),
            ("n2-standard-2", "TERMINATE", json!({"confidentialInstanceType": "TDX"}), "providerSpec.machineType"),
            ("c3-standard-4", "TERMINATE", json!({"confidentialInstanceType": "SEV_SNP"}), "providerSpec.machineType"),
            ("e2-standard-2", "MIGRATE", json!({"enableConfidentialCompute": true}), "providerSpec.machineType"),
            (
                "n2d-standard-2",
                "TERMINATE",
                json!({"confidentialInstanceType": "SGX"}),
                "providerSpec.confidentialInstanceConfig.confidentialInstanceType",
            ),
            (
                "n2d-standard-2",
                "MIGRATE",
                json!({"confidentialInstanceType": "SEV_SNP"}),
                "providerSpec.scheduling.onHostMaintenance",
            ),
            ("c2d-standard-4", "MIGRATE", sev.clone(), "providerSpec.scheduling.onHostMaintenance"),
            (
                "c3-standard-4",
                "MIGRATE",
                json!({"confidentialInstanceType": "TDX"}),
                "providerSpec.scheduling.onHostMaintenance",
            ),
        ] {
            assert_eq!(field_of(&confidential(machine, ohm, cc.clone())), field, "{machine} {ohm} {cc}");
        }
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
