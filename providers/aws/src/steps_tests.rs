use aws_sdk_ec2::types::{Instance, InstanceIpv6Prefix, InstanceNetworkInterface, InstanceNetworkInterfaceAttachment};

use super::*;
use crate::spec::{AwsProviderSpec, NetworkInterface};

fn nic(device_index: Option<i32>, ipv6_prefix_count: Option<i32>, interface_type: Option<&str>) -> NetworkInterface {
    NetworkInterface {
        subnet_id: "subnet-1".into(),
        security_group_ids: vec!["sg-1".into()],
        device_index,
        ipv6_prefix_count,
        interface_type: interface_type.map(str::to_string),
        ..Default::default()
    }
}

fn eni(id: &str, device: i32, check: bool, prefixes: usize, interface_type: &str) -> InstanceNetworkInterface {
    let mut b = InstanceNetworkInterface::builder()
        .network_interface_id(id)
        .source_dest_check(check)
        .interface_type(interface_type)
        .attachment(InstanceNetworkInterfaceAttachment::builder().device_index(device).network_card_index(0).build());
    for n in 0..prefixes {
        b = b.ipv6_prefixes(InstanceIpv6Prefix::builder().ipv6_prefix(format!("2a05:d018::{n}:0/80")).build());
    }
    b.build()
}

fn instance(enis: Vec<InstanceNetworkInterface>) -> Instance {
    Instance::builder().instance_id("i-1").set_network_interfaces(Some(enis)).build()
}

#[test]
fn fresh_instance_needs_both_steps_only_where_due() {
    let spec = AwsProviderSpec {
        src_and_dst_checks_enabled: Some(false),
        network_interfaces: vec![nic(None, Some(2), None), nic(None, None, Some("efa"))],
        ..Default::default()
    };
    let i = instance(vec![eni("eni-0", 0, true, 0, "interface"), eni("eni-1", 1, true, 0, "efa")]);
    let work = interface_work(&spec, &i);
    assert_eq!(
        work,
        vec![InterfaceWork {
            network_interface_id: "eni-0".into(),
            disable_source_dest_check: true,
            missing_ipv6_prefixes: 2
        }],
        "the EFA interface keeps its check"
    );
    assert_eq!(pending_steps(&work), vec![DISABLE_SOURCE_DEST_CHECK, ASSIGN_IPV6_PREFIXES]);
}

#[test]
fn converged_instance_has_no_steps() {
    let spec = AwsProviderSpec {
        src_and_dst_checks_enabled: Some(false),
        network_interfaces: vec![nic(None, Some(1), None)],
        ..Default::default()
    };
    let i = instance(vec![eni("eni-0", 0, false, 1, "interface")]);
    assert!(interface_work(&spec, &i).is_empty());
    assert!(pending_steps(&interface_work(&spec, &i)).is_empty());
}

#[test]
fn checks_left_on_when_enabled_or_unset_and_partial_prefixes_counted() {
    for enabled in [None, Some(true)] {
        let spec = AwsProviderSpec {
            src_and_dst_checks_enabled: enabled,
            network_interfaces: vec![nic(None, Some(3), None)],
            ..Default::default()
        };
        let work = interface_work(&spec, &instance(vec![eni("eni-0", 0, true, 1, "interface")]));
        assert_eq!(pending_steps(&work), vec![ASSIGN_IPV6_PREFIXES]);
        assert_eq!(work[0].missing_ipv6_prefixes, 2);
    }
}

#[test]
fn interfaces_match_by_explicit_device_index() {
    let spec = AwsProviderSpec { network_interfaces: vec![nic(Some(1), Some(1), None)], ..Default::default() };
    let i = instance(vec![eni("eni-0", 0, true, 0, "interface"), eni("eni-1", 1, true, 0, "interface")]);
    let work = interface_work(&spec, &i);
    assert_eq!(work.len(), 1);
    assert_eq!(work[0].network_interface_id, "eni-1");
}

#[test]
fn prefixes_requested_at_launch_count_as_assigned_only_right_after_the_launch() {
    let spec = AwsProviderSpec {
        src_and_dst_checks_enabled: Some(false),
        network_interfaces: vec![
            nic(None, Some(1), None),
            NetworkInterface { ipv6_address_count: Some(1), ..nic(None, Some(1), None) },
        ],
        ..Default::default()
    };
    // RunInstances' answer may not list the prefixes it was asked for.
    let i = instance(vec![eni("eni-0", 0, true, 0, "interface"), eni("eni-1", 1, true, 0, "interface")]);
    let at_launch = launch_work(&spec, &i);
    assert_eq!(
        at_launch.iter().map(|w| (w.network_interface_id.as_str(), w.missing_ipv6_prefixes)).collect::<Vec<_>>(),
        vec![("eni-0", 0), ("eni-1", 1)],
        "eni-0's prefix came with the launch; eni-1 counts addresses, so its prefix is InitializeMachine's"
    );
    assert!(at_launch.iter().all(|w| w.disable_source_dest_check));
    // A read shows what EC2 really has: a missing prefix is missing.
    assert_eq!(interface_work(&spec, &i)[0].missing_ipv6_prefixes, 1);
}
