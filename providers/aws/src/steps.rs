//! Post-creation steps: what an instance still lacks compared to its spec.
//!
//! Pure functions over the `Instance` DescribeInstances returns (its
//! `networkInterfaceSet` carries `sourceDestCheck` and `ipv6PrefixSet`), so that
//! GetMachineStatus answers with one EC2 read and InitializeMachine applies
//! exactly the difference.

use aws_sdk_ec2::types::{Instance, InstanceNetworkInterface};
use machine_driver_api::{Address, AddressType};

use crate::spec::{AwsProviderSpec, NetworkInterface, is_efa_type};

/// Step: turn off source/destination checks (`srcAndDstChecksEnabled: false`).
pub(crate) const DISABLE_SOURCE_DEST_CHECK: &str = "disable-source-dest-check";
/// Step: assign the IPv6 prefixes of `ipv6PrefixCount`.
pub(crate) const ASSIGN_IPV6_PREFIXES: &str = "assign-ipv6-prefixes";

/// The work left on one network interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InterfaceWork {
    /// The ENI id.
    pub network_interface_id: String,
    /// Source/dest check is on but must be off.
    pub disable_source_dest_check: bool,
    /// IPv6 prefixes still to assign.
    pub missing_ipv6_prefixes: i32,
}

fn spec_interface<'a>(spec: &'a AwsProviderSpec, eni: &InstanceNetworkInterface) -> Option<&'a NetworkInterface> {
    let att = eni.attachment()?;
    let (card, dev) = (att.network_card_index().unwrap_or(0), att.device_index()?);
    spec.network_interfaces
        .iter()
        .enumerate()
        .find(|(i, n)| n.network_card_index.unwrap_or(0) == card && spec.device_index(*i) == dev)
        .map(|(_, n)| n)
}

/// The interfaces of `instance` with work left, in instance order.
pub(crate) fn interface_work(spec: &AwsProviderSpec, instance: &Instance) -> Vec<InterfaceWork> {
    work(spec, instance, false)
}

/// The work left on an instance RunInstances just returned (launched with
/// these parameters): as [`interface_work`], except that prefixes requested
/// at launch ([`NetworkInterface::ipv6_prefixes_at_launch`]) count as
/// assigned whether or not RunInstances' answer lists them, since a
/// count-based AssignIpv6Addresses on top would add more prefixes than asked.
/// Whatever EC2 later shows missing is seen by the next read (status reports
/// it, InitializeMachine's retry reads and assigns it).
pub(crate) fn launch_work(spec: &AwsProviderSpec, instance: &Instance) -> Vec<InterfaceWork> {
    work(spec, instance, true)
}

fn work(spec: &AwsProviderSpec, instance: &Instance, launched_now: bool) -> Vec<InterfaceWork> {
    let disable_checks = spec.src_and_dst_checks_enabled == Some(false);
    instance
        .network_interfaces()
        .iter()
        .filter_map(|eni| {
            let id = eni.network_interface_id()?;
            let wanted = spec_interface(spec, eni);
            let efa = is_efa_type(eni.interface_type()) || wanted.is_some_and(NetworkInterface::is_efa);
            let disable = disable_checks && !efa && eni.source_dest_check() == Some(true);
            let have = i32::try_from(eni.ipv6_prefixes().len()).unwrap_or(i32::MAX);
            let missing = wanted
                .filter(|n| !(launched_now && n.ipv6_prefixes_at_launch().is_some()))
                .and_then(|n| n.ipv6_prefix_count)
                .map_or(0, |want| (want - have).max(0));
            (disable || missing > 0).then(|| InterfaceWork {
                network_interface_id: id.to_string(),
                disable_source_dest_check: disable,
                missing_ipv6_prefixes: missing,
            })
        })
        .collect()
}

/// Step names for the work left (empty = initialized).
pub(crate) fn pending_steps(work: &[InterfaceWork]) -> Vec<String> {
    let mut steps = Vec::new();
    if work.iter().any(|w| w.disable_source_dest_check) {
        steps.push(DISABLE_SOURCE_DEST_CHECK.to_string());
    }
    if work.iter().any(|w| w.missing_ipv6_prefixes > 0) {
        steps.push(ASSIGN_IPV6_PREFIXES.to_string());
    }
    steps
}

/// The node addresses of an instance.
pub(crate) fn addresses(instance: &Instance) -> Vec<Address> {
    let mut out = Vec::new();
    let mut push = |kind, v: Option<&str>| {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            out.push(Address::new(kind, v));
        }
    };
    push(AddressType::InternalIp, instance.private_ip_address());
    push(AddressType::InternalDns, instance.private_dns_name());
    push(AddressType::Hostname, instance.private_dns_name());
    push(AddressType::ExternalIp, instance.public_ip_address());
    push(AddressType::ExternalDns, instance.public_dns_name());
    out
}

#[cfg(test)]
#[path = "steps_tests.rs"]
mod tests;
