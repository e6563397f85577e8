//! The AWS provider spec: the machine class's `providerSpec` JSON, field for
//! field as the Go provider (`machine-controller-manager-provider-aws`) reads it.
//!
//! Unknown fields are refused (INVALID_ARGUMENT naming them); every accepted
//! field reaches RunInstances (see `launch`). Validation rules live in
//! `spec_validation`.

use std::collections::BTreeMap;

use machine_driver_api::{DriverError, Result};
use serde::Deserialize;

/// Tag key prefix identifying the cluster of a VM.
pub(crate) const CLUSTER_TAG_PREFIX: &str = "kubernetes.io/cluster/";
/// Tag key prefix identifying the node role of a VM.
pub(crate) const ROLE_TAG_PREFIX: &str = "kubernetes.io/role/";
/// Block device name standing for "the AMI's root device".
pub(crate) const ROOT_DEVICE_NAME: &str = "/root";

/// The typed AWS provider spec.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AwsProviderSpec {
    /// API version of the spec (informational, e.g. `mcm.gardener.cloud/v1alpha1`).
    #[serde(default)]
    pub api_version: Option<String>,
    /// AMI id.
    #[serde(default)]
    pub ami: String,
    /// Block device mappings.
    #[serde(default)]
    pub block_devices: Vec<BlockDevice>,
    /// Capacity reservation target.
    #[serde(default)]
    pub capacity_reservation: Option<CapacityReservation>,
    /// EBS-optimized instance.
    #[serde(default)]
    pub ebs_optimized: bool,
    /// IAM instance profile (name or ARN).
    #[serde(default)]
    pub iam: Iam,
    /// Instance type.
    #[serde(default)]
    pub machine_type: String,
    /// SSH key pair name.
    #[serde(default)]
    pub key_name: Option<String>,
    /// Detailed monitoring.
    #[serde(default)]
    pub monitoring: bool,
    /// Network interfaces, in device order.
    #[serde(default)]
    pub network_interfaces: Vec<NetworkInterface>,
    /// Region.
    #[serde(default)]
    pub region: String,
    /// Spot instance when set; an empty string means "no maximum price".
    #[serde(default)]
    pub spot_price: Option<String>,
    /// `false` disables source/destination checks (done by InitializeMachine).
    #[serde(default)]
    pub src_and_dst_checks_enabled: Option<bool>,
    /// Tags of the instance, its volumes and interfaces (cluster and role tags required).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Instance metadata service options.
    #[serde(default)]
    pub instance_metadata_options: Option<InstanceMetadataOptions>,
    /// CPU options.
    #[serde(default, rename = "cpuOptions")]
    pub cpu_options: Option<CpuOptions>,
    /// Placement.
    #[serde(default)]
    pub placement: Option<Placement>,
    /// Market options (spot); exclusive with `spotPrice`.
    #[serde(default)]
    pub instance_market_options: Option<InstanceMarketOptions>,
}

/// IAM instance profile: exactly one of name and ARN.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Iam {
    /// Profile name.
    #[serde(default)]
    pub name: String,
    /// Profile ARN.
    #[serde(default)]
    pub arn: String,
}

/// One network interface created at launch.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct NetworkInterface {
    /// Public IPv4 address on this interface.
    #[serde(default, rename = "associatePublicIPAddress")]
    pub associate_public_ip_address: Option<bool>,
    /// IPv6 addresses assigned at launch.
    #[serde(default)]
    pub ipv6_address_count: Option<i32>,
    /// IPv6 prefixes: requested at launch when the interface asks for no IPv6
    /// address count (EC2 takes one count or the other per interface), else
    /// assigned by InitializeMachine ([`NetworkInterface::ipv6_prefixes_at_launch`]).
    #[serde(default)]
    pub ipv6_prefix_count: Option<i32>,
    /// Delete with the instance (default true).
    #[serde(default)]
    pub delete_on_termination: Option<bool>,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
    /// Security groups.
    #[serde(default, rename = "securityGroupIDs")]
    pub security_group_ids: Vec<String>,
    /// Subnet.
    #[serde(default, rename = "subnetID")]
    pub subnet_id: String,
    /// `interface`, `efa` or `efa-only`.
    #[serde(default)]
    pub interface_type: Option<String>,
    /// Network card index.
    #[serde(default)]
    pub network_card_index: Option<i32>,
    /// Device index (default: position in the list).
    #[serde(default)]
    pub device_index: Option<i32>,
    /// First IPv6 address is primary.
    #[serde(default)]
    pub primary_ipv6: Option<bool>,
}

impl NetworkInterface {
    /// EFA interfaces keep source/dest checks (EC2 refuses to change them).
    pub(crate) fn is_efa(&self) -> bool {
        is_efa_type(self.interface_type.as_deref())
    }

    /// The IPv6 prefix count RunInstances requests for this interface: the
    /// class's `ipv6PrefixCount` when it asks for no `ipv6AddressCount` (EC2
    /// refuses a count of addresses beside a count of prefixes on one
    /// interface). Otherwise `None`, and InitializeMachine assigns the prefixes.
    pub(crate) fn ipv6_prefixes_at_launch(&self) -> Option<i32> {
        self.ipv6_prefix_count.filter(|c| *c > 0).filter(|_| self.ipv6_address_count.unwrap_or(0) == 0)
    }
}

/// True for EC2 interface types `efa` and `efa-only`.
pub(crate) fn is_efa_type(t: Option<&str>) -> bool {
    matches!(t, Some("efa" | "efa-only"))
}

/// One block device mapping.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct BlockDevice {
    /// `/root` (the AMI's root device) or `/dev/sdX`, `/dev/xvdX`.
    #[serde(default)]
    pub device_name: String,
    /// EBS volume.
    #[serde(default)]
    pub ebs: Ebs,
    /// Suppresses a device of the AMI.
    #[serde(default)]
    pub no_device: Option<String>,
    /// Instance store name (`ephemeralN`).
    #[serde(default)]
    pub virtual_name: Option<String>,
}

/// An EBS volume created at launch.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Ebs {
    /// Delete with the instance (default true).
    #[serde(default)]
    pub delete_on_termination: Option<bool>,
    /// Encrypted volume.
    #[serde(default)]
    pub encrypted: bool,
    /// Provisioned IOPS (required for io1/io2).
    #[serde(default)]
    pub iops: i32,
    /// Throughput in MiB/s (gp3).
    #[serde(default)]
    pub throughput: Option<i32>,
    /// KMS key for encryption.
    #[serde(default, rename = "kmsKeyID")]
    pub kms_key_id: Option<String>,
    /// Source snapshot.
    #[serde(default, rename = "snapshotID")]
    pub snapshot_id: Option<String>,
    /// Size in GiB.
    #[serde(default)]
    pub volume_size: i32,
    /// standard, gp2, gp3, io1, io2, st1 or sc1.
    #[serde(default)]
    pub volume_type: String,
}

/// Capacity reservation targeting.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CapacityReservation {
    /// `open` or `none`.
    #[serde(default)]
    pub capacity_reservation_preference: Option<String>,
    /// A reservation id.
    #[serde(default, rename = "capacityReservationId")]
    pub capacity_reservation_id: Option<String>,
    /// A reservation resource group ARN.
    #[serde(default)]
    pub capacity_reservation_resource_group_arn: Option<String>,
    /// ML capacity block: market type `capacity-block`.
    #[serde(default, rename = "isMLCapacityBlock")]
    pub is_ml_capacity_block: Option<bool>,
}

/// Instance metadata service options.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InstanceMetadataOptions {
    /// `enabled` or `disabled`.
    #[serde(default, rename = "httpEndpoint")]
    pub http_endpoint: Option<String>,
    /// 1..=64.
    #[serde(default, rename = "httpPutResponseHopLimit")]
    pub http_put_response_hop_limit: Option<i32>,
    /// `required` or `optional`.
    #[serde(default, rename = "httpTokens")]
    pub http_tokens: Option<String>,
    /// `enabled` or `disabled`.
    #[serde(default, rename = "httpProtocolIpv6")]
    pub http_protocol_ipv6: Option<String>,
}

/// CPU options.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CpuOptions {
    /// Cores.
    #[serde(default)]
    pub core_count: Option<i32>,
    /// 1 or 2.
    #[serde(default)]
    pub threads_per_core: Option<i32>,
    /// `enabled` or `disabled`.
    #[serde(default)]
    pub amd_sev_snp: Option<String>,
}

/// Placement.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Placement {
    /// Placement group id.
    #[serde(default, rename = "groupId")]
    pub group_id: Option<String>,
    /// Placement group name.
    #[serde(default)]
    pub group_name: Option<String>,
    /// `default`, `dedicated` or `host`.
    #[serde(default)]
    pub tenancy: Option<String>,
    /// Dedicated host id.
    #[serde(default, rename = "hostId")]
    pub host_id: Option<String>,
    /// Partition number.
    #[serde(default)]
    pub partition_number: Option<i32>,
    /// `default` or `host`.
    #[serde(default)]
    pub affinity: Option<String>,
    /// Availability zone (normally implied by the subnet).
    #[serde(default)]
    pub availability_zone: Option<String>,
    /// ARN of the host resource group to launch into.
    #[serde(default)]
    pub host_resource_group_arn: Option<String>,
}

/// The node template annotation the Go provider reads an EC2 placement from
/// (the JSON of an EC2 `Placement`, Go field names matched case-insensitively).
pub(crate) const PLACEMENT_ANNOTATION: &str = "machine.sapcloud.io/awsPlacement";

/// The placement a machine's node template annotation asks for, which wins
/// over the class's `placement` as in the Go provider; `None` when absent or
/// empty. A value that is no placement is INVALID_ARGUMENT naming the annotation.
pub(crate) fn placement_annotation(machine: &machine_driver_api::Machine) -> Result<Option<Placement>> {
    let Some(raw) = machine.node_template.annotations.get(PLACEMENT_ANNOTATION).filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    let field = format!("machine.node_template_spec.annotations[{PLACEMENT_ANNOTATION}]");
    let placement: Placement = machine_driver_api::parse_provider_spec(raw.as_bytes()).map_err(|e| {
        DriverError::invalid_argument(field.clone(), format!("is not an EC2 placement as JSON ({})", e.message()))
    })?;
    // The same values the class's `placement` may hold (spec_validation).
    let words: [(&str, Option<&str>, &[&str]); 2] = [
        ("Tenancy", placement.tenancy.as_deref(), &["default", "dedicated", "host"]),
        ("Affinity", placement.affinity.as_deref(), &["default", "host"]),
    ];
    for (name, value, allowed) in words {
        if let Some(v) = value.filter(|v| !allowed.contains(v)) {
            return Err(DriverError::invalid_argument(
                field,
                format!("{name} {v:?} must be one of {}", allowed.join(", ")),
            ));
        }
    }
    Ok((placement != Placement::default()).then_some(placement))
}

/// Market options.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct InstanceMarketOptions {
    /// A RunInstances market type of the SDK: `spot`, `capacity-block`,
    /// `interruptible-capacity-reservation` (`spec_validation::run_instances_market_types`).
    #[serde(default)]
    pub market_type: Option<String>,
    /// Spot options.
    #[serde(default)]
    pub spot_options: Option<SpotOptions>,
}

/// Spot market options.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SpotOptions {
    /// Maximum hourly price.
    #[serde(default)]
    pub max_price: Option<String>,
    /// `one-time` or `persistent`.
    #[serde(default)]
    pub spot_instance_type: Option<String>,
    /// `terminate`, `stop` or `hibernate`.
    #[serde(default)]
    pub instance_interruption_behavior: Option<String>,
}

impl AwsProviderSpec {
    /// The device index interface `i` gets: its `deviceIndex`, else its position.
    pub(crate) fn device_index(&self, i: usize) -> i32 {
        self.network_interfaces.get(i).and_then(|n| n.device_index).unwrap_or(i32::try_from(i).unwrap_or(i32::MAX))
    }

    /// True when a block device stands for the AMI's root device (so its real
    /// name must be looked up): named `/root`, or the single unnamed device.
    pub(crate) fn needs_root_device_name(&self) -> bool {
        self.block_devices.iter().any(|d| d.device_name == ROOT_DEVICE_NAME) || self.block_devices.len() == 1
    }
}
