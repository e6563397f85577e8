//! The RunInstances request of a machine: every accepted spec field, mapped.

use aws_sdk_ec2::operation::run_instances::builders::RunInstancesFluentBuilder;
use aws_sdk_ec2::types::{
    AmdSevSnpSpecification, BlockDeviceMapping, CapacityReservationPreference, CapacityReservationSpecification,
    CapacityReservationTarget, CpuOptionsRequest, EbsBlockDevice, HttpTokensState, IamInstanceProfileSpecification,
    InstanceInterruptionBehavior, InstanceMarketOptionsRequest, InstanceMetadataEndpointState,
    InstanceMetadataOptionsRequest, InstanceMetadataProtocolState, InstanceNetworkInterfaceSpecification, InstanceType,
    MarketType, Placement, RunInstancesMonitoringEnabled, SpotInstanceType, SpotMarketOptions, Tenancy, VolumeType,
};
use base64::Engine;

use crate::spec::{AwsProviderSpec, BlockDevice, ROOT_DEVICE_NAME};
use crate::tags;

/// What a launch needs besides the spec.
#[derive(Debug)]
pub(crate) struct LaunchParams<'a> {
    /// Machine name (Name tag).
    pub machine_name: &'a str,
    /// Machine uid (uid tag).
    pub machine_uid: &'a str,
    /// Idempotency token derived from the uid.
    pub client_token: &'a str,
    /// Raw user data (encoded here).
    pub user_data: &'a [u8],
    /// The AMI's root device name, when a block device says `/root`.
    pub root_device_name: Option<&'a str>,
    /// The placement: the machine's node template annotation, else the class's.
    pub placement: Option<&'a crate::spec::Placement>,
}

/// Fills `b` (a `client.run_instances()` builder) from the spec.
pub(crate) fn run_instances(
    b: RunInstancesFluentBuilder,
    spec: &AwsProviderSpec,
    p: &LaunchParams<'_>,
) -> RunInstancesFluentBuilder {
    let machine_tags = tags::machine_tags(spec, p.machine_name, p.machine_uid);
    let mut b = b
        .image_id(&spec.ami)
        .instance_type(InstanceType::from(spec.machine_type.as_str()))
        .min_count(1)
        .max_count(1)
        .client_token(p.client_token)
        .user_data(base64::engine::general_purpose::STANDARD.encode(p.user_data))
        .set_network_interfaces(Some(network_interfaces(spec)))
        .set_block_device_mappings(Some(block_devices(spec, p.root_device_name)).filter(|v| !v.is_empty()))
        .set_tag_specifications(Some(tags::tag_specifications(&machine_tags)))
        .iam_instance_profile(iam(spec));
    if let Some(k) = spec.key_name.as_deref().filter(|k| !k.is_empty()) {
        b = b.key_name(k);
    }
    if spec.ebs_optimized {
        b = b.ebs_optimized(true);
    }
    if spec.monitoring {
        b = b.monitoring(RunInstancesMonitoringEnabled::builder().enabled(true).build());
    }
    if let Some(m) = &spec.instance_metadata_options {
        b = b.metadata_options(
            InstanceMetadataOptionsRequest::builder()
                .set_http_endpoint(m.http_endpoint.as_deref().map(InstanceMetadataEndpointState::from))
                .set_http_put_response_hop_limit(m.http_put_response_hop_limit)
                .set_http_tokens(m.http_tokens.as_deref().map(HttpTokensState::from))
                .set_http_protocol_ipv6(m.http_protocol_ipv6.as_deref().map(InstanceMetadataProtocolState::from))
                .build(),
        );
    }
    if let Some(c) = &spec.cpu_options {
        b = b.cpu_options(
            CpuOptionsRequest::builder()
                .set_core_count(c.core_count)
                .set_threads_per_core(c.threads_per_core)
                .set_amd_sev_snp(c.amd_sev_snp.as_deref().map(AmdSevSnpSpecification::from))
                .build(),
        );
    }
    if let Some(pl) = p.placement {
        b = b.placement(
            Placement::builder()
                .set_group_id(pl.group_id.clone())
                .set_group_name(pl.group_name.clone())
                .set_tenancy(pl.tenancy.as_deref().map(Tenancy::from))
                .set_host_id(pl.host_id.clone())
                .set_partition_number(pl.partition_number)
                .set_affinity(pl.affinity.clone())
                .set_availability_zone(pl.availability_zone.clone())
                .set_host_resource_group_arn(pl.host_resource_group_arn.clone())
                .build(),
        );
    }
    if let Some(cr) = &spec.capacity_reservation {
        let target = (cr.capacity_reservation_id.is_some() || cr.capacity_reservation_resource_group_arn.is_some())
            .then(|| {
                CapacityReservationTarget::builder()
                    .set_capacity_reservation_id(cr.capacity_reservation_id.clone())
                    .set_capacity_reservation_resource_group_arn(cr.capacity_reservation_resource_group_arn.clone())
                    .build()
            });
        b = b.capacity_reservation_specification(
            CapacityReservationSpecification::builder()
                .set_capacity_reservation_preference(
                    cr.capacity_reservation_preference.as_deref().map(CapacityReservationPreference::from),
                )
                .set_capacity_reservation_target(target)
                .build(),
        );
    }
    b.set_instance_market_options(market_options(spec))
}

fn iam(spec: &AwsProviderSpec) -> IamInstanceProfileSpecification {
    let b = IamInstanceProfileSpecification::builder();
    if spec.iam.name.is_empty() { b.arn(&spec.iam.arn).build() } else { b.name(&spec.iam.name).build() }
}

fn network_interfaces(spec: &AwsProviderSpec) -> Vec<InstanceNetworkInterfaceSpecification> {
    spec.network_interfaces
        .iter()
        .enumerate()
        .map(|(i, n)| {
            InstanceNetworkInterfaceSpecification::builder()
                .device_index(spec.device_index(i))
                .subnet_id(&n.subnet_id)
                .set_groups(Some(n.security_group_ids.clone()))
                .set_associate_public_ip_address(n.associate_public_ip_address)
                .delete_on_termination(n.delete_on_termination.unwrap_or(true))
                .set_description(n.description.clone())
                .set_ipv6_address_count(n.ipv6_address_count)
                .set_ipv6_prefix_count(n.ipv6_prefixes_at_launch())
                .set_interface_type(n.interface_type.clone())
                .set_network_card_index(n.network_card_index)
                // As the Go provider: an interface with IPv6 addresses gets a primary
                // IPv6 address unless the class says otherwise (Gardener's IPv6 nodes need it).
                .set_primary_ipv6(n.primary_ipv6.or(n.ipv6_address_count.filter(|c| *c > 0).map(|_| true)))
                .build()
        })
        .collect()
}

/// As the Go provider: `/root`, or the only block device whatever its name,
/// is the AMI's root device.
fn device_name(d: &BlockDevice, count: usize, root: Option<&str>) -> String {
    let stands_for_root = d.device_name == ROOT_DEVICE_NAME || count == 1;
    match root {
        Some(r) if stands_for_root => r.to_string(),
        _ => d.device_name.clone(),
    }
}

fn block_devices(spec: &AwsProviderSpec, root: Option<&str>) -> Vec<BlockDeviceMapping> {
    let n = spec.block_devices.len();
    spec.block_devices
        .iter()
        .map(|d| {
            let e = &d.ebs;
            let ebs = EbsBlockDevice::builder()
                .delete_on_termination(e.delete_on_termination.unwrap_or(true))
                .encrypted(e.encrypted)
                .set_iops((e.iops > 0).then_some(e.iops))
                .set_throughput(e.throughput)
                .set_kms_key_id(e.kms_key_id.clone())
                .set_snapshot_id(e.snapshot_id.clone())
                .volume_size(e.volume_size)
                .volume_type(VolumeType::from(e.volume_type.as_str()))
                .build();
            BlockDeviceMapping::builder()
                .device_name(device_name(d, n, root))
                .ebs(ebs)
                .set_no_device(d.no_device.clone())
                .set_virtual_name(d.virtual_name.clone())
                .build()
        })
        .collect()
}

fn market_options(spec: &AwsProviderSpec) -> Option<InstanceMarketOptionsRequest> {
    if let Some(price) = &spec.spot_price {
        let spot = SpotMarketOptions::builder()
            .spot_instance_type(SpotInstanceType::OneTime)
            .set_max_price(Some(price.clone()).filter(|p| !p.is_empty()))
            .build();
        return Some(InstanceMarketOptionsRequest::builder().market_type(MarketType::Spot).spot_options(spot).build());
    }
    if let Some(m) = &spec.instance_market_options {
        let spot = m.spot_options.as_ref().map(|s| {
            SpotMarketOptions::builder()
                .set_max_price(s.max_price.clone())
                .set_spot_instance_type(s.spot_instance_type.as_deref().map(SpotInstanceType::from))
                .set_instance_interruption_behavior(
                    s.instance_interruption_behavior.as_deref().map(InstanceInterruptionBehavior::from),
                )
                .build()
        });
        return Some(
            InstanceMarketOptionsRequest::builder()
                .set_market_type(m.market_type.as_deref().filter(|t| !t.is_empty()).map(MarketType::from))
                .set_spot_options(spot)
                .build(),
        );
    }
    if spec.capacity_reservation.as_ref().and_then(|c| c.is_ml_capacity_block) == Some(true) {
        return Some(InstanceMarketOptionsRequest::builder().market_type(MarketType::CapacityBlock).build());
    }
    None
}

#[cfg(test)]
#[path = "launch_tests.rs"]
mod tests;
