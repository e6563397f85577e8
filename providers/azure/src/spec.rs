//! The Azure machine class providerSpec, as the Go provider
//! (gardener/machine-controller-manager-provider-azure, `AzureProviderSpec`)
//! and the Gardener Azure extension write it, read as leniently as Go reads it
//! ([`parse_provider_spec`]), with validation that names the offending field.
//!
//! Fields the Go provider parses but ignores (`osDisk.name`,
//! `managedDisk.id`, `osProfile.computerName`/`adminPassword`/`customData`,
//! `networkProfile.networkInterfaces`) are accepted and ignored here too.

use std::collections::{BTreeMap, HashSet};

use machine_driver_api::{ClusterMarkers, DriverError, parse_provider_spec};
use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::naming::{check_arm_id, check_arm_name, check_location, check_resource_group};

/// Tag key prefix naming the cluster (`kubernetes.io-cluster-<name>`).
pub(crate) const CLUSTER_TAG_PREFIX: &str = "kubernetes.io-cluster-";
/// Tag key prefix naming the role (`kubernetes.io-role-<role>`).
pub(crate) const ROLE_TAG_PREFIX: &str = "kubernetes.io-role-";

/// Most tags ARM keeps on one resource (learn.microsoft.com/azure/azure-resource-manager/management/tag-resources,
/// "Limitations"; Tags API: "a maximum of 50 tags at the end of the operation").
pub(crate) const MAX_TAGS: usize = 50;
/// Longest tag name ARM takes on a VM, NIC or disk (characters; 128 only on storage accounts).
pub(crate) const MAX_TAG_NAME: usize = 512;
/// Longest tag value ARM takes (characters).
pub(crate) const MAX_TAG_VALUE: usize = 256;

/// The providerSpec of an Azure machine class.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AzureProviderSpec {
    /// Azure region (`westeurope`).
    #[serde(default)]
    pub(crate) location: String,
    /// Resource group of the VMs, NICs and disks.
    #[serde(default)]
    pub(crate) resource_group: String,
    /// Tags of every resource; must hold the cluster and role keys.
    #[serde(default)]
    pub(crate) tags: BTreeMap<String, String>,
    /// The Azure cloud (public, China, Government).
    #[serde(default)]
    pub(crate) cloud_configuration: Option<CloudConfiguration>,
    /// The subnet of the machines' NICs.
    #[serde(default)]
    pub(crate) subnet_info: SubnetInfo,
    /// The VM's properties.
    #[serde(default)]
    pub(crate) properties: Properties,
}

/// `cloudConfiguration`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CloudConfiguration {
    /// `AzurePublic`, `AzureChina` or `AzureGovernment`.
    #[serde(default)]
    pub(crate) name: String,
}

/// `subnetInfo`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SubnetInfo {
    /// Virtual network.
    #[serde(default)]
    pub(crate) vnet_name: String,
    /// Subnet of the virtual network.
    #[serde(default)]
    pub(crate) subnet_name: String,
    /// Resource group of the virtual network (default: the spec's).
    #[serde(default)]
    pub(crate) vnet_resource_group: Option<String>,
}

/// `properties`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Properties {
    /// `hardwareProfile`.
    #[serde(default)]
    pub(crate) hardware_profile: HardwareProfile,
    /// `storageProfile`.
    #[serde(default)]
    pub(crate) storage_profile: StorageProfile,
    /// `osProfile`.
    #[serde(default)]
    pub(crate) os_profile: OsProfile,
    /// `networkProfile`.
    #[serde(default)]
    pub(crate) network_profile: NetworkProfile,
    /// Availability set (at most one of zone, availability set, scale set).
    #[serde(default)]
    pub(crate) availability_set: Option<SubResource>,
    /// Flexible scale set (VMO).
    #[serde(default)]
    pub(crate) virtual_machine_scale_set: Option<SubResource>,
    /// Deprecated: mapped onto `availabilitySet` (kind `availabilityset`) or
    /// `virtualMachineScaleSet` (kind `vmo`).
    #[serde(default)]
    pub(crate) machine_set: Option<MachineSet>,
    /// Availability zone number.
    #[serde(default)]
    pub(crate) zone: Option<i64>,
    /// User-assigned identity resource id.
    #[serde(rename = "identityID", default)]
    pub(crate) identity_id: Option<String>,
    /// Boot diagnostics.
    #[serde(default)]
    pub(crate) diagnostics_profile: Option<DiagnosticsProfile>,
    /// Trusted launch / confidential VM.
    #[serde(default)]
    pub(crate) security_profile: Option<SecurityProfile>,
    /// Capacity reservation group.
    #[serde(default)]
    pub(crate) capacity_reservation: Option<CapacityReservation>,
    /// ARM's `VirtualMachinePriorityTypes`: `Regular`, `Spot` or `Low` (Spot's
    /// older name). Beyond the Go provider (issue 28).
    #[serde(default)]
    pub(crate) priority: Option<String>,
    /// `Deallocate` or `Delete`: what Azure does with a Spot VM it evicts (only with Spot).
    #[serde(default)]
    pub(crate) eviction_policy: Option<String>,
    /// The most a Spot VM may cost (only with Spot).
    #[serde(default)]
    pub(crate) billing_profile: Option<BillingProfile>,
}

/// `billingProfile`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct BillingProfile {
    /// US dollars an hour: `-1` (up to the pay-as-you-go price, never evicted for
    /// price) or a decimal greater than 0 with at most 5 decimals.
    #[serde(default)]
    pub(crate) max_price: Option<f64>,
}

/// `hardwareProfile`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct HardwareProfile {
    /// VM size (`Standard_D2s_v3`).
    #[serde(default)]
    pub(crate) vm_size: String,
}

/// `storageProfile`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct StorageProfile {
    /// The OS image.
    #[serde(default)]
    pub(crate) image_reference: ImageReference,
    /// The OS disk.
    #[serde(default)]
    pub(crate) os_disk: OsDisk,
    /// Data disks.
    #[serde(default)]
    pub(crate) data_disks: Vec<DataDisk>,
    /// `SCSI` or `NVMe`.
    #[serde(default)]
    pub(crate) disk_controller_type: Option<String>,
}

/// An image: exactly one of `id`, `urn`, `communityGalleryImageID`, `sharedGalleryImageID`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ImageReference {
    /// ARM id of a custom image or gallery image version.
    #[serde(default)]
    pub(crate) id: Option<String>,
    /// Marketplace image `publisher:offer:sku:version`.
    #[serde(default)]
    pub(crate) urn: Option<String>,
    /// `/CommunityGalleries/<name>/Images/<def>/Versions/<ver>`.
    #[serde(rename = "communityGalleryImageID", default)]
    pub(crate) community_gallery_image_id: Option<String>,
    /// `/SharedGalleries/<uniqueName>/Images/<def>/Versions/<ver>`.
    #[serde(rename = "sharedGalleryImageID", default)]
    pub(crate) shared_gallery_image_id: Option<String>,
    /// With a `urn`: do not read the image's purchase plan nor accept its
    /// marketplace terms, and send no `plan` (as the Go provider; the
    /// extension writes it from the cloud profile's image version,
    /// pkg/controller/worker/machines.go).
    #[serde(default)]
    pub(crate) skip_marketplace_agreement: bool,
}

/// `osDisk`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct OsDisk {
    /// Ignored (the disk is named `<vm>-os-disk`, as the Go provider names it).
    #[serde(default, rename = "name")]
    pub(crate) _name: Option<IgnoredAny>,
    /// `None`, `ReadOnly`, `ReadWrite`.
    #[serde(default)]
    pub(crate) caching: Option<String>,
    /// Managed disk options.
    #[serde(default)]
    pub(crate) managed_disk: ManagedDisk,
    /// Size in GB (> 0).
    #[serde(rename = "diskSizeGB", default)]
    pub(crate) disk_size_gb: i64,
    /// `FromImage`.
    #[serde(default)]
    pub(crate) create_option: String,
}

/// `osDisk.managedDisk`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ManagedDisk {
    /// Ignored by the Go provider.
    #[serde(default, rename = "id")]
    pub(crate) _id: Option<IgnoredAny>,
    /// `Standard_LRS`, `Premium_LRS`, `StandardSSD_LRS`, ...
    #[serde(default)]
    pub(crate) storage_account_type: Option<String>,
    /// Confidential VM disk encryption.
    #[serde(default)]
    pub(crate) security_profile: Option<DiskSecurityProfile>,
}

/// `managedDisk.securityProfile`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct DiskSecurityProfile {
    /// `VMGuestStateOnly`, `DiskWithVMGuestState`.
    #[serde(default)]
    pub(crate) security_encryption_type: Option<String>,
}

/// One data disk.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct DataDisk {
    /// Part of the disk's name (`<vm>-<name>-<lun>-data-disk`).
    #[serde(default)]
    pub(crate) name: Option<String>,
    /// Logical unit, unique per VM.
    #[serde(default)]
    pub(crate) lun: Option<i64>,
    /// Caching.
    #[serde(default)]
    pub(crate) caching: Option<String>,
    /// Storage type (required).
    #[serde(default)]
    pub(crate) storage_account_type: String,
    /// Size in GB (> 0).
    #[serde(rename = "diskSizeGB", default)]
    pub(crate) disk_size_gb: i64,
    /// An image the disk is made from (created before the VM).
    #[serde(default)]
    pub(crate) image_ref: Option<ImageReference>,
    /// Provisioned IOPS of an `UltraSSD_LRS` or `PremiumV2_LRS` disk (beyond
    /// the Go provider, issue 32; Disk `properties.diskIOPSReadWrite`). A disk
    /// with performance is made before the VM, as one from an image is.
    #[serde(rename = "diskIOPSReadWrite", default)]
    pub(crate) disk_iops_read_write: Option<i64>,
    /// Provisioned throughput (MB/s) of an `UltraSSD_LRS` or `PremiumV2_LRS`
    /// disk (Disk `properties.diskMBpsReadWrite`).
    #[serde(rename = "diskMBpsReadWrite", default)]
    pub(crate) disk_mbps_read_write: Option<i64>,
}

/// Disk types whose IOPS and throughput are provisioned apart from the size
/// (learn.microsoft.com/azure/virtual-machines/disks-types: Ultra Disk and
/// Premium SSD v2), and changed while attached (Disks - Update).
pub(crate) const PROVISIONED_PERFORMANCE_TYPES: [&str; 2] = ["UltraSSD_LRS", "PremiumV2_LRS"];

/// Whether disk type `sku` takes provisioned IOPS and throughput.
pub(crate) fn has_provisioned_performance(sku: &str) -> bool {
    PROVISIONED_PERFORMANCE_TYPES.iter().any(|t| t.eq_ignore_ascii_case(sku.trim()))
}

/// The bounds of a provisioned disk's performance
/// (learn.microsoft.com/azure/virtual-machines/disks-types): Premium SSD v2
/// 3,000 to 80,000 IOPS, at most 500 per GiB above 6 GiB, 125 to 1,200 MB/s,
/// at most 0.25 MB/s per IOPS above 125; Ultra Disk 100 to 400,000 IOPS, at
/// most 300 per GiB, 1 to 10,000 MB/s, at most 0.25 MB/s per IOPS. The
/// ratios are checked when the class sets the IOPS.
fn check_performance(d: &DataDisk, field: &str) -> Result<(), DriverError> {
    if !d.has_performance() {
        return Ok(());
    }
    let bad = |field: &str, problem: &str| Err(DriverError::invalid_argument(format!("providerSpec.{field}"), problem));
    let v2 = d.storage_account_type.trim().eq_ignore_ascii_case("PremiumV2_LRS");
    let size = d.disk_size_gb;
    let (iops_min, iops_max) = if v2 {
        (3_000, size.saturating_mul(500).clamp(3_000, 80_000))
    } else {
        (100, size.saturating_mul(300).clamp(100, 400_000))
    };
    if let Some(iops) = d.disk_iops_read_write
        && !(iops_min..=iops_max).contains(&iops)
    {
        return bad(
            &format!("{field}.diskIOPSReadWrite"),
            &format!(
                "{iops} is outside {iops_min}..={iops_max} for a {} disk of {size} GB",
                d.storage_account_type.trim()
            ),
        );
    }
    let (mbps_min, mbps_cap) = if v2 { (125, 1_200) } else { (1, 10_000) };
    let mbps_max = d.disk_iops_read_write.map_or(mbps_cap, |iops| (iops / 4).clamp(mbps_min, mbps_cap));
    if let Some(mbps) = d.disk_mbps_read_write
        && !(mbps_min..=mbps_max).contains(&mbps)
    {
        return bad(
            &format!("{field}.diskMBpsReadWrite"),
            &format!(
                "{mbps} is outside {mbps_min}..={mbps_max} MB/s for a {} disk with its IOPS",
                d.storage_account_type.trim()
            ),
        );
    }
    Ok(())
}

impl DataDisk {
    /// Whether the class sets the disk's IOPS or throughput.
    pub(crate) fn has_performance(&self) -> bool {
        self.disk_iops_read_write.is_some() || self.disk_mbps_read_write.is_some()
    }

    /// Whether the disk is made with its own PUT before the VM (from its
    /// image, or with its performance, which a VM PUT cannot set) and attached.
    pub(crate) fn made_before_vm(&self) -> bool {
        self.image_ref.is_some() || self.has_performance()
    }
}

/// `osProfile`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct OsProfile {
    /// Admin user (required).
    #[serde(default)]
    pub(crate) admin_username: String,
    /// Ignored (the VM's computer name is the machine name).
    #[serde(default, rename = "computerName")]
    pub(crate) _computer_name: Option<IgnoredAny>,
    /// Ignored.
    #[serde(default, rename = "adminPassword")]
    pub(crate) _admin_password: Option<IgnoredAny>,
    /// Ignored (the secret's user data is used).
    #[serde(default, rename = "customData")]
    pub(crate) _custom_data: Option<IgnoredAny>,
    /// Linux options.
    #[serde(default)]
    pub(crate) linux_configuration: LinuxConfiguration,
}

/// `osProfile.linuxConfiguration`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct LinuxConfiguration {
    /// Ignored: password login is always off (the Go provider sets it on every VM).
    #[serde(default, rename = "disablePasswordAuthentication")]
    pub(crate) _disable_password_authentication: bool,
    /// SSH keys.
    #[serde(default)]
    pub(crate) ssh: SshConfiguration,
}

/// `linuxConfiguration.ssh`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SshConfiguration {
    /// One key (an object, not a list, in the Go spec).
    #[serde(default)]
    pub(crate) public_keys: SshPublicKey,
}

/// `ssh.publicKeys`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SshPublicKey {
    /// Where the key is installed.
    #[serde(default)]
    pub(crate) path: String,
    /// The public key.
    #[serde(default)]
    pub(crate) key_data: String,
}

/// `networkProfile`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct NetworkProfile {
    /// Ignored by the Go provider.
    #[serde(default, rename = "networkInterfaces")]
    pub(crate) _network_interfaces: Option<IgnoredAny>,
    /// Accelerated networking on the NIC.
    #[serde(default)]
    pub(crate) accelerated_networking: Option<bool>,
}

/// A reference to another resource.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SubResource {
    /// Its ARM id.
    #[serde(default)]
    pub(crate) id: String,
}

/// Deprecated `machineSet`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct MachineSet {
    /// ARM id.
    #[serde(default)]
    pub(crate) id: String,
    /// `availabilityset` or `vmo`.
    #[serde(default)]
    pub(crate) kind: String,
}

/// `diagnosticsProfile`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct DiagnosticsProfile {
    /// Boot diagnostics on.
    #[serde(default)]
    pub(crate) enabled: bool,
    /// Storage account URI (managed storage when absent).
    #[serde(rename = "storageURI", default)]
    pub(crate) storage_uri: Option<String>,
}

/// `securityProfile`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SecurityProfile {
    /// `TrustedLaunch` or `ConfidentialVM`.
    #[serde(default)]
    pub(crate) security_type: Option<String>,
    /// UEFI options.
    #[serde(default)]
    pub(crate) uefi_settings: Option<UefiSettings>,
    /// Encryption at host (temporary disk and disk caches encrypted on the host);
    /// the subscription needs the `Microsoft.Compute/EncryptionAtHost` feature.
    #[serde(default)]
    pub(crate) encryption_at_host: Option<bool>,
}

/// `securityProfile.uefiSettings`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct UefiSettings {
    /// Virtual TPM.
    #[serde(rename = "vtpmEnabled", default)]
    pub(crate) vtpm_enabled: Option<bool>,
    /// Secure boot.
    #[serde(default)]
    pub(crate) secure_boot_enabled: Option<bool>,
}

/// `capacityReservation`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CapacityReservation {
    /// Capacity reservation group id.
    #[serde(rename = "capacityReservationGroupID", default)]
    pub(crate) capacity_reservation_group_id: Option<String>,
}

/// Where the VM is placed, after the deprecated `machineSet` is mapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Placement {
    /// No placement constraint.
    Anywhere,
    /// An availability zone (`"1"`).
    Zone(String),
    /// An availability set id.
    AvailabilitySet(String),
    /// A flexible scale set id.
    ScaleSet(String),
}

impl AzureProviderSpec {
    /// Parses and validates raw providerSpec JSON; errors name the field (the tests' shorthand).
    #[cfg(test)]
    pub(crate) fn parse(raw: &[u8]) -> Result<Self, DriverError> {
        Self::parse_with_markers(raw).map(|(spec, _)| spec)
    }

    /// Parses and validates raw providerSpec JSON (errors name the field),
    /// with the class's cluster and role markers (its `kubernetes.io-cluster-…`
    /// and `kubernetes.io-role-…` tag keys, exactly one each), read once per
    /// request: every path that acts on an existing VM judges it with them
    /// ([`crate::ownership`]).
    pub(crate) fn parse_with_markers(raw: &[u8]) -> Result<(Self, ClusterMarkers), DriverError> {
        let spec: Self = parse_provider_spec(raw)?;
        let markers = spec.validate()?;
        Ok((spec, markers))
    }

    /// The spec's `cloudConfiguration.name`.
    pub(crate) fn cloud(&self) -> Option<&str> {
        self.cloud_configuration.as_ref().map(|c| c.name.as_str())
    }

    /// The resource group of the virtual network.
    pub(crate) fn vnet_resource_group(&self) -> &str {
        self.subnet_info.vnet_resource_group.as_deref().filter(|g| !g.is_empty()).unwrap_or(&self.resource_group)
    }

    /// Whether the class asks for a Spot VM (`priority` `Spot`, or `Low`, its older name).
    pub(crate) fn is_spot(&self) -> bool {
        self.properties
            .priority
            .as_deref()
            .map(str::trim)
            .is_some_and(|v| v.eq_ignore_ascii_case("Spot") || v.eq_ignore_ascii_case("Low"))
    }

    /// The VM's placement (validated: at most one).
    pub(crate) fn placement(&self) -> Placement {
        let p = &self.properties;
        if let Some(z) = p.zone {
            return Placement::Zone(z.to_string());
        }
        if let Some(a) = p.availability_set.as_ref().filter(|a| !a.id.is_empty()) {
            return Placement::AvailabilitySet(a.id.clone());
        }
        if let Some(s) = p.virtual_machine_scale_set.as_ref().filter(|s| !s.id.is_empty()) {
            return Placement::ScaleSet(s.id.clone());
        }
        match p.machine_set.as_ref().filter(|m| !m.id.is_empty()) {
            Some(m) if m.kind.eq_ignore_ascii_case("vmo") => Placement::ScaleSet(m.id.clone()),
            Some(m) => Placement::AvailabilitySet(m.id.clone()),
            None => Placement::Anywhere,
        }
    }

    /// Validates the spec (errors name the field) and answers its markers.
    /// Every value that goes into a request path, or into an ARM id of a
    /// request body, is checked against Azure's syntax for it
    /// ([`crate::naming`]): `rg/../other` is refused, never sent.
    fn validate(&self) -> Result<ClusterMarkers, DriverError> {
        let bad =
            |field: &str, problem: &str| Err(DriverError::invalid_argument(format!("providerSpec.{field}"), problem));
        if self.location.trim().is_empty() {
            return bad("location", "is required");
        }
        check_location("providerSpec.location", &self.location)?;
        if self.resource_group.trim().is_empty() {
            return bad("resourceGroup", "is required");
        }
        check_resource_group("providerSpec.resourceGroup", &self.resource_group)?;
        let markers = ClusterMarkers::from_keys(
            self.tags.keys().map(String::as_str),
            CLUSTER_TAG_PREFIX,
            ROLE_TAG_PREFIX,
            "providerSpec.tags",
        )?;
        if let Some(key) = self.tags.keys().find(|k| k.contains(['<', '>', '%', '&', '\\', '?', '/'])) {
            return bad("tags", &format!("key {key:?} contains a character Azure refuses in tag names"));
        }
        // ARM's limits on the VM's tags, which are the class's plus the driver's machine-uid tag.
        if self.tags.len() >= MAX_TAGS {
            return bad(
                "tags",
                &format!(
                    "has {} tags; ARM keeps at most {MAX_TAGS} on a resource and the driver adds its machine-uid tag: at most {}",
                    self.tags.len(),
                    MAX_TAGS - 1
                ),
            );
        }
        if let Some(key) = self.tags.keys().find(|k| k.chars().any(char::is_control)) {
            return bad("tags", &format!("key {key:?} contains a control character, which Azure refuses in tag names"));
        }
        if let Some(key) = self.tags.keys().find(|k| k.trim().is_empty() || k.chars().count() > MAX_TAG_NAME) {
            return bad("tags", &format!("key {key:.40?} must have 1 to {MAX_TAG_NAME} characters"));
        }
        if let Some((key, _)) = self.tags.iter().find(|(_, v)| v.chars().count() > MAX_TAG_VALUE) {
            return bad("tags", &format!("the value of {key:?} is longer than {MAX_TAG_VALUE} characters"));
        }
        if self.subnet_info.vnet_name.trim().is_empty() {
            return bad("subnetInfo.vnetName", "is required");
        }
        check_arm_name("providerSpec.subnetInfo.vnetName", &self.subnet_info.vnet_name, 64)?;
        if self.subnet_info.subnet_name.trim().is_empty() {
            return bad("subnetInfo.subnetName", "is required");
        }
        check_arm_name("providerSpec.subnetInfo.subnetName", &self.subnet_info.subnet_name, 80)?;
        if let Some(group) = self.subnet_info.vnet_resource_group.as_deref().filter(|g| !g.is_empty()) {
            check_resource_group("providerSpec.subnetInfo.vnetResourceGroup", group)?;
        }
        let p = &self.properties;
        if p.hardware_profile.vm_size.trim().is_empty() {
            return bad("properties.hardwareProfile.vmSize", "is required");
        }
        validate_image(&p.storage_profile.image_reference, "properties.storageProfile.imageReference")?;
        let os = &p.storage_profile.os_disk;
        if os.disk_size_gb <= 0 {
            return bad("properties.storageProfile.osDisk.diskSizeGB", "must be greater than 0");
        }
        if os.create_option.trim().is_empty() {
            return bad("properties.storageProfile.osDisk.createOption", "is required");
        }
        let mut luns = HashSet::new();
        for (i, d) in p.storage_profile.data_disks.iter().enumerate() {
            let field = format!("properties.storageProfile.dataDisks[{i}]");
            let lun = d
                .lun
                .ok_or_else(|| DriverError::invalid_argument(format!("providerSpec.{field}.lun"), "is required"))?;
            if lun < 0 {
                return bad(&format!("{field}.lun"), "must not be negative");
            }
            if !luns.insert(lun) {
                return bad(&format!("{field}.lun"), &format!("{lun} is used by another data disk"));
            }
            if d.disk_size_gb <= 0 {
                return bad(&format!("{field}.diskSizeGB"), "must be greater than 0");
            }
            if d.storage_account_type.trim().is_empty() {
                return bad(&format!("{field}.storageAccountType"), "is required");
            }
            // Part of the disk's name, which goes into the disk's request paths.
            if let Some(name) = d.name.as_deref().filter(|n| !n.is_empty())
                && !(name.len() <= 64
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
            {
                return bad(&format!("{field}.name"), "must be at most 64 letters, digits, - _ .");
            }
            if let Some(image) = &d.image_ref {
                validate_image(image, &format!("{field}.imageRef"))?;
            }
            for (key, value) in
                [("diskIOPSReadWrite", d.disk_iops_read_write), ("diskMBpsReadWrite", d.disk_mbps_read_write)]
            {
                let Some(value) = value else { continue };
                if !has_provisioned_performance(&d.storage_account_type) {
                    return bad(
                        &format!("{field}.{key}"),
                        &format!(
                            "only an UltraSSD_LRS or PremiumV2_LRS disk takes provisioned performance, not {}",
                            d.storage_account_type.trim()
                        ),
                    );
                }
                if value <= 0 {
                    return bad(&format!("{field}.{key}"), "must be greater than 0");
                }
            }
            check_performance(d, &field)?;
        }
        if p.os_profile.admin_username.trim().is_empty() {
            return bad("properties.osProfile.adminUsername", "is required");
        }
        let placements = [
            p.zone.is_some(),
            p.availability_set.as_ref().is_some_and(|a| !a.id.is_empty()),
            p.virtual_machine_scale_set.as_ref().is_some_and(|s| !s.id.is_empty()),
        ];
        if placements.iter().filter(|set| **set).count() > 1 {
            return bad("properties.zone", "set at most one of zone, availabilitySet and virtualMachineScaleSet");
        }
        if let Some(m) = p.machine_set.as_ref().filter(|m| !m.id.is_empty()) {
            if placements.iter().any(|set| *set) {
                return bad(
                    "properties.machineSet",
                    "cannot be combined with zone, availabilitySet or virtualMachineScaleSet",
                );
            }
            if !m.kind.eq_ignore_ascii_case("vmo") && !m.kind.eq_ignore_ascii_case("availabilityset") {
                return bad("properties.machineSet.kind", "must be vmo or availabilityset");
            }
        }
        if let Some(z) = p.zone
            && z <= 0
        {
            return bad("properties.zone", "must be a zone number (1, 2, 3)");
        }
        let ids = [
            ("properties.availabilitySet.id", p.availability_set.as_ref().map(|a| a.id.as_str())),
            ("properties.virtualMachineScaleSet.id", p.virtual_machine_scale_set.as_ref().map(|s| s.id.as_str())),
            ("properties.machineSet.id", p.machine_set.as_ref().map(|m| m.id.as_str())),
            ("properties.identityID", p.identity_id.as_deref()),
            (
                "properties.capacityReservation.capacityReservationGroupID",
                p.capacity_reservation.as_ref().and_then(|c| c.capacity_reservation_group_id.as_deref()),
            ),
        ];
        for (field, id) in ids {
            if let Some(id) = id.filter(|i| !i.is_empty()) {
                check_arm_id(&format!("providerSpec.{field}"), id)?;
            }
        }
        validate_spot(p, self.placement())?;
        // ARM refuses any other form (`InvalidIdentityId`): refused here, naming the field.
        if let Some(id) = p.identity_id.as_deref().map(str::trim).filter(|i| !i.is_empty())
            && !is_user_assigned_identity(id)
        {
            return bad(
                "properties.identityID",
                "must be a user-assigned identity's ARM id: /subscriptions/<subscription>/resourceGroups/<group>/providers/Microsoft.ManagedIdentity/userAssignedIdentities/<name>",
            );
        }
        Ok(markers)
    }
}

/// `/subscriptions/<s>/resourceGroups/<rg>/providers/Microsoft.ManagedIdentity/userAssignedIdentities/<name>`
/// (segment names case-insensitive, as ARM reads them).
fn is_user_assigned_identity(id: &str) -> bool {
    let parts: Vec<&str> = id.strip_prefix('/').unwrap_or("").split('/').collect();
    let is = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    matches!(parts.as_slice(), [s, sub, r, rg, p, ns, t, name]
        if is(s, "subscriptions") && is(r, "resourceGroups") && is(p, "providers")
            && is(ns, "Microsoft.ManagedIdentity") && is(t, "userAssignedIdentities")
            && [sub, rg, name].iter().all(|x| !x.is_empty()))
}

/// `priority`, `evictionPolicy` and `billingProfile.maxPrice` as ARM documents them
/// (Compute REST `VirtualMachinePriorityTypes`, `VirtualMachineEvictionPolicyTypes`,
/// `BillingProfile`; the Spot error table, learn.microsoft.com/azure/virtual-machines/error-codes-spot:
/// `EvictionPolicyCanBeSetOnlyOnAzureSpotVirtualMachines`, `MaxPriceValueInvalid`,
/// `AzureSpotVMNotSupportedInAvailabilitySet`), refused here naming the field.
fn validate_spot(p: &Properties, placement: Placement) -> Result<(), DriverError> {
    let bad = |field: &str, problem: &str| {
        Err(DriverError::invalid_argument(format!("providerSpec.properties.{field}"), problem))
    };
    let priority = p.priority.as_deref().map(str::trim).filter(|v| !v.is_empty());
    let spot = match priority {
        None => false,
        Some(v) if v.eq_ignore_ascii_case("Regular") => false,
        Some(v) if v.eq_ignore_ascii_case("Spot") || v.eq_ignore_ascii_case("Low") => true,
        Some(v) => return bad("priority", &format!("{v:?} is not one of Regular, Spot, Low")),
    };
    if let Some(policy) = p.eviction_policy.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
        if !policy.eq_ignore_ascii_case("Deallocate") && !policy.eq_ignore_ascii_case("Delete") {
            return bad("evictionPolicy", &format!("{policy:?} is not one of Deallocate, Delete"));
        }
        if !spot {
            return bad("evictionPolicy", "can be set only with priority Spot (or Low)");
        }
    }
    if let Some(price) = p.billing_profile.as_ref().and_then(|b| b.max_price) {
        let five_decimals = ((price * 100_000.0).round() / 100_000.0 - price).abs() <= 1e-9 * price.abs().max(1.0);
        if price != -1.0 && !(price > 0.0 && price.is_finite() && five_decimals) {
            return bad(
                "billingProfile.maxPrice",
                &format!("{price} is neither -1 nor a decimal greater than 0 with at most 5 decimals"),
            );
        }
        if !spot {
            return bad("billingProfile.maxPrice", "can be set only with priority Spot (or Low)");
        }
    }
    if spot && matches!(placement, Placement::AvailabilitySet(_)) {
        return bad(
            "priority",
            "a Spot VM cannot be in an availability set (ARM: AzureSpotVMNotSupportedInAvailabilitySet)",
        );
    }
    Ok(())
}

fn validate_image(image: &ImageReference, field: &str) -> Result<(), DriverError> {
    let set = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.trim().is_empty());
    let count = [&image.id, &image.urn, &image.community_gallery_image_id, &image.shared_gallery_image_id]
        .into_iter()
        .filter(|v| set(v))
        .count();
    if count != 1 {
        return Err(DriverError::invalid_argument(
            format!("providerSpec.{field}"),
            "set exactly one of id, urn, communityGalleryImageID and sharedGalleryImageID",
        ));
    }
    if let Some(urn) = image.urn.as_deref().filter(|u| !u.trim().is_empty()) {
        let urn = urn.trim();
        if urn.split(':').count() != 4 || urn.split(':').any(str::is_empty) {
            return Err(DriverError::invalid_argument(
                format!("providerSpec.{field}.urn"),
                format!("{urn:?} is not publisher:offer:sku:version"),
            ));
        }
        // The parts make the platform image id of a disk made from the image.
        for part in urn.split(':') {
            check_arm_name(&format!("providerSpec.{field}.urn"), part, 256)?;
        }
    }
    for (key, id) in [
        ("id", &image.id),
        ("communityGalleryImageID", &image.community_gallery_image_id),
        ("sharedGalleryImageID", &image.shared_gallery_image_id),
    ] {
        if let Some(id) = id.as_deref().map(str::trim).filter(|i| !i.is_empty()) {
            check_arm_id(&format!("providerSpec.{field}.{key}"), id)?;
        }
    }
    Ok(())
}

/// A class as the Gardener extension writes it, for the crate's tests.
#[cfg(test)]
pub(crate) mod tests_support {
    /// The example class of `examples/machine-class.json`, reduced.
    pub(crate) fn example() -> serde_json::Value {
        serde_json::json!({
            "location": "westeurope",
            "resourceGroup": "shoot--dev--conf",
            "tags": {"kubernetes.io-cluster-shoot--dev--conf": "1", "kubernetes.io-role-node": "1", "Name": "shoot--dev--conf"},
            "subnetInfo": {"vnetName": "shoot--dev--conf", "subnetName": "shoot--dev--conf-nodes"},
            "properties": {
                "hardwareProfile": {"vmSize": "Standard_D2s_v3"},
                "storageProfile": {
                    "imageReference": {"urn": "sap:gardenlinux:greatest:1443.3.0"},
                    "osDisk": {"caching": "None", "diskSizeGB": 50, "createOption": "FromImage",
                               "managedDisk": {"storageAccountType": "Premium_LRS"}}
                },
                "osProfile": {"adminUsername": "core", "linuxConfiguration": {"disablePasswordAuthentication": true,
                    "ssh": {"publicKeys": {"path": "/home/core/.ssh/authorized_keys", "keyData": "ssh-rsa AAAA"}}}},
                "zone": 1
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::example;
    use super::*;

    fn parse(v: &serde_json::Value) -> Result<AzureProviderSpec, DriverError> {
        AzureProviderSpec::parse(&serde_json::to_vec(v).unwrap())
    }

    #[test]
    fn a_gardener_class_parses() {
        let s = parse(&example()).unwrap();
        assert_eq!(s.placement(), Placement::Zone("1".into()));
        let (_, markers) = AzureProviderSpec::parse_with_markers(&serde_json::to_vec(&example()).unwrap()).unwrap();
        assert_eq!(markers.cluster(), "kubernetes.io-cluster-shoot--dev--conf");
        assert_eq!(markers.role(), "kubernetes.io-role-node");
        assert_eq!(s.vnet_resource_group(), "shoot--dev--conf");
    }

    #[test]
    fn go_json_nulls_empty_objects_and_ignored_fields_are_accepted() {
        let mut v = example();
        v["properties"]["osProfile"]["computerName"] = serde_json::json!("x");
        v["properties"]["osProfile"]["customData"] = serde_json::Value::Null;
        v["properties"]["networkProfile"] = serde_json::json!({"networkInterfaces": {}, "acceleratedNetworking": null});
        v["properties"]["securityProfile"] = serde_json::json!({"securityType": null, "uefiSettings": {}});
        v["properties"]["storageProfile"]["osDisk"]["name"] = serde_json::json!("ignored");
        v["properties"]["availabilitySet"] = serde_json::Value::Null;
        v["cloudConfiguration"] = serde_json::json!({"name": "AzurePublic"});
        parse(&v).unwrap();
    }

    #[test]
    fn provisioned_performance_only_on_its_types_within_their_bounds() {
        let disk = |d: serde_json::Value| {
            let mut v = example();
            v["properties"]["storageProfile"]["dataDisks"] = serde_json::json!([d]);
            parse(&v).err().map(|e| (e.field().unwrap_or("no field").to_string(), e.message().to_string()))
        };
        let iops = "providerSpec.properties.storageProfile.dataDisks[0].diskIOPSReadWrite";
        let mbps = "providerSpec.properties.storageProfile.dataDisks[0].diskMBpsReadWrite";
        let v2 = |i: i64, m: i64| {
            serde_json::json!({"lun": 0, "diskSizeGB": 64, "storageAccountType": "PremiumV2_LRS",
                               "diskIOPSReadWrite": i, "diskMBpsReadWrite": m})
        };
        assert_eq!(disk(v2(4000, 150)), None);
        let (field, message) =
            disk(serde_json::json!({"lun": 0, "diskSizeGB": 64, "storageAccountType": "Premium_LRS",
                                                        "diskIOPSReadWrite": 4000}))
            .unwrap();
        assert_eq!(field, iops);
        assert!(message.contains("Premium_LRS"), "{message}");
        assert_eq!(disk(v2(2000, 150)).unwrap().0, iops, "below Premium SSD v2's 3,000");
        assert_eq!(disk(v2(40_000, 150)).unwrap().0, iops, "above 500 per GiB of 64 GiB");
        assert_eq!(disk(v2(4000, 1100)).unwrap().0, mbps, "above 0.25 MB/s per IOPS");
        assert_eq!(disk(v2(4000, 0)).unwrap().0, mbps);
        let ultra = serde_json::json!({"lun": 0, "diskSizeGB": 64, "storageAccountType": "UltraSSD_LRS",
                                       "diskIOPSReadWrite": 19_200, "diskMBpsReadWrite": 4800});
        assert_eq!(disk(ultra), None, "300 per GiB, 0.25 MB/s per IOPS");
    }

    #[test]
    fn bad_values_name_their_field() {
        let field = |patch: &dyn Fn(&mut serde_json::Value)| {
            let mut v = example();
            patch(&mut v);
            parse(&v).unwrap_err().field().map(str::to_string)
        };
        assert_eq!(field(&|v| v["location"] = "".into()).as_deref(), Some("providerSpec.location"));
        assert_eq!(
            field(&|v| v["properties"]["storageProfile"]["imageReference"]["id"] = "/x".into()).as_deref(),
            Some("providerSpec.properties.storageProfile.imageReference")
        );
        assert_eq!(
            field(&|v| v["properties"]["storageProfile"]["imageReference"]["urn"] = "a:b:c".into()).as_deref(),
            Some("providerSpec.properties.storageProfile.imageReference.urn")
        );
        assert_eq!(
            field(&|v| v["properties"]["availabilitySet"] = serde_json::json!({"id": "/as"})).as_deref(),
            Some("providerSpec.properties.zone")
        );
        assert_eq!(
            field(&|v| v["properties"]["storageProfile"]["dataDisks"] = serde_json::json!([
                {"lun": 0, "diskSizeGB": 10, "storageAccountType": "Standard_LRS"},
                {"lun": 0, "diskSizeGB": 10, "storageAccountType": "Standard_LRS"}]))
            .as_deref(),
            Some("providerSpec.properties.storageProfile.dataDisks[1].lun")
        );
        assert_eq!(field(&|v| v["tags"] = serde_json::json!({"a": "b"})).as_deref(), Some("providerSpec.tags"));
        // ARM's tag limits: 50 a resource (one is the driver's uid tag), names 512, values 256.
        let field = |patch: &dyn Fn(&mut serde_json::Value)| {
            let mut v = example();
            patch(&mut v);
            parse(&v).err().map(|e| e.field().unwrap_or("no field").to_string())
        };
        let many = |n: usize| {
            move |v: &mut serde_json::Value| {
                for i in 0..n {
                    v["tags"][format!("t{i}")] = "x".into();
                }
            }
        };
        let base = example()["tags"].as_object().unwrap().len();
        assert_eq!(field(&many(49 - base)), None, "49 class tags + the uid tag fit");
        assert_eq!(field(&many(50 - base)).as_deref(), Some("providerSpec.tags"));
        assert_eq!(field(&|v| v["tags"]["k".repeat(513)] = "1".into()).as_deref(), Some("providerSpec.tags"));
        assert_eq!(field(&|v| v["tags"]["k".repeat(512)] = "1".into()), None);
        assert_eq!(field(&|v| v["tags"]["team"] = "v".repeat(257).into()).as_deref(), Some("providerSpec.tags"));
        assert_eq!(field(&|v| v["tags"]["team"] = "v".repeat(256).into()), None);
        assert_eq!(field(&|v| v["tags"]["a\u{7}b"] = "1".into()).as_deref(), Some("providerSpec.tags"));
        assert_eq!(
            field(&|v| v["tags"]["kubernetes.io-cluster-shoot--other"] = "1".into()).as_deref(),
            Some("providerSpec.tags"),
            "two cluster keys: which cluster's VMs these are is unclear"
        );
    }

    #[test]
    fn path_building_fields_are_checked_against_azures_syntax() {
        let field = |patch: &dyn Fn(&mut serde_json::Value)| {
            let mut v = example();
            patch(&mut v);
            parse(&v).unwrap_err().field().map(str::to_string)
        };
        assert_eq!(
            field(&|v| v["resourceGroup"] = "other/../shoot--dev--conf".into()).as_deref(),
            Some("providerSpec.resourceGroup")
        );
        assert_eq!(
            field(&|v| v["subnetInfo"]["vnetResourceGroup"] = "rg/../other".into()).as_deref(),
            Some("providerSpec.subnetInfo.vnetResourceGroup")
        );
        assert_eq!(
            field(&|v| v["subnetInfo"]["subnetName"] = "nodes/../../x".into()).as_deref(),
            Some("providerSpec.subnetInfo.subnetName")
        );
        assert_eq!(field(&|v| v["location"] = "west/europe".into()).as_deref(), Some("providerSpec.location"));
        assert_eq!(
            field(&|v| v["properties"]["storageProfile"]["dataDisks"] = serde_json::json!([
                {"name": "../x", "lun": 0, "diskSizeGB": 10, "storageAccountType": "Standard_LRS"}]))
            .as_deref(),
            Some("providerSpec.properties.storageProfile.dataDisks[0].name")
        );
        assert_eq!(
            field(&|v| {
                v["properties"]["storageProfile"]["imageReference"] =
                    serde_json::json!({"id": "/subscriptions/s/resourceGroups/../x/providers/Microsoft.Compute/images/i"});
            })
            .as_deref(),
            Some("providerSpec.properties.storageProfile.imageReference.id")
        );
        assert_eq!(
            field(&|v| v["properties"]["storageProfile"]["imageReference"]["urn"] = "a/..:b:c:d".into()).as_deref(),
            Some("providerSpec.properties.storageProfile.imageReference.urn")
        );
    }

    #[test]
    fn the_identity_must_be_a_user_assigned_identitys_id() {
        let with = |id: &str| {
            let mut v = example();
            v["properties"]["identityID"] = serde_json::json!(id);
            parse(&v).map(|_| ()).map_err(|e| e.field().map(str::to_string))
        };
        let good =
            "/subscriptions/s-1/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/id-1";
        assert_eq!(with(good), Ok(()));
        assert_eq!(with(&good.to_ascii_lowercase()), Ok(()));
        for bad in [
            "/subscriptions/s-1/resourceGroups/rg/providers/Micrososft.ManagedIdentity/userAssignedIdentities/id-1",
            "/subscriptions/s-1/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities",
            "id-1",
        ] {
            assert_eq!(with(bad), Err(Some("providerSpec.properties.identityID".to_string())), "{bad}");
        }
    }

    #[test]
    fn spot_fields_are_checked_as_arm_documents_them() {
        let with = |props: serde_json::Value| {
            let mut v = example();
            merge(&mut v["properties"], props);
            parse(&v).map(|_| ()).map_err(|e| e.field().map(str::to_string))
        };
        let field = |f: &str| Err(Some(format!("providerSpec.properties.{f}")));
        use serde_json::json;
        assert_eq!(
            with(json!({"priority": "Spot", "evictionPolicy": "Delete", "billingProfile": {"maxPrice": -1}})),
            Ok(())
        );
        assert_eq!(
            with(json!({"priority": "low", "evictionPolicy": "deallocate", "billingProfile": {"maxPrice": 0.01538}})),
            Ok(())
        );
        assert_eq!(with(json!({"priority": "Regular"})), Ok(()));
        assert_eq!(with(json!({"priority": "Cheap"})), field("priority"));
        // Only with Spot: evictionPolicy and maxPrice (EvictionPolicyCanBeSetOnlyOnAzureSpotVirtualMachines).
        assert_eq!(with(json!({"evictionPolicy": "Delete"})), field("evictionPolicy"));
        assert_eq!(with(json!({"priority": "Regular", "evictionPolicy": "Delete"})), field("evictionPolicy"));
        assert_eq!(with(json!({"priority": "Spot", "evictionPolicy": "Stop"})), field("evictionPolicy"));
        assert_eq!(with(json!({"billingProfile": {"maxPrice": 0.5}})), field("billingProfile.maxPrice"));
        // -1 or > 0 with at most 5 decimals (MaxPriceValueInvalid).
        for price in [0.0, -0.5, -2.0, 0.123456] {
            assert_eq!(
                with(json!({"priority": "Spot", "billingProfile": {"maxPrice": price}})),
                field("billingProfile.maxPrice"),
                "{price}"
            );
        }
        // Not in an availability set (AzureSpotVMNotSupportedInAvailabilitySet).
        let set = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/availabilitySets/as-1";
        assert_eq!(with(json!({"zone": null, "priority": "Spot", "availabilitySet": {"id": set}})), field("priority"));
        assert_eq!(with(json!({"securityProfile": {"encryptionAtHost": true}})), Ok(()));
    }

    fn merge(target: &mut serde_json::Value, patch: serde_json::Value) {
        if let (Some(t), serde_json::Value::Object(p)) = (target.as_object_mut(), patch) {
            for (k, v) in p {
                t.insert(k, v);
            }
        }
    }

    #[test]
    fn machine_set_maps_onto_placement() {
        let mut v = example();
        v["properties"]["zone"] = serde_json::Value::Null;
        v["properties"]["machineSet"] = serde_json::json!({"id": "/vmss", "kind": "vmo"});
        assert_eq!(parse(&v).unwrap().placement(), Placement::ScaleSet("/vmss".into()));
    }
}
