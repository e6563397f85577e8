use aws_sdk_ec2::config::{BehaviorVersion, Region};
use aws_sdk_ec2::types::{MarketType, ResourceType};
use serde_json::json;

use super::*;
use crate::spec_validation::parse_and_validate;
use crate::tags::MACHINE_UID_TAG;

fn client() -> aws_sdk_ec2::Client {
    let conf = aws_sdk_ec2::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("eu-west-1"))
        .build();
    aws_sdk_ec2::Client::from_conf(conf)
}

fn spec() -> AwsProviderSpec {
    parse_and_validate(&serde_json::to_vec(&spec_json()).unwrap()).unwrap()
}

fn spec_json() -> serde_json::Value {
    json!({
        "ami": "ami-12345678", "region": "eu-west-1", "machineType": "m5.large", "iam": {"arn": "arn:aws:iam::1:instance-profile/n"},
        "networkInterfaces": [{"subnetID": "subnet-1", "securityGroupIDs": ["sg-1"], "ipv6AddressCount": 1, "interfaceType": "interface"}],
        "blockDevices": [{"deviceName": "/root", "ebs": {"volumeSize": 50, "volumeType": "gp3", "throughput": 200, "encrypted": true, "kmsKeyID": "kms-1"}}],
        "tags": {"kubernetes.io/cluster/c": "1", "kubernetes.io/role/node": "1", "Name": "class-name"},
        "ebsOptimized": true, "monitoring": true, "spotPrice": "",
        "placement": {"tenancy": "dedicated", "affinity": "default"},
        "cpuOptions": {"coreCount": 2, "threadsPerCore": 1},
        "instanceMetadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2, "httpEndpoint": "enabled"},
        "capacityReservation": {"capacityReservationPreference": "open"}
    })
}

#[test]
fn the_node_template_placement_annotation_wins_as_in_the_go_provider() {
    let mut machine = machine_driver_api::Machine::default();
    assert_eq!(crate::spec::placement_annotation(&machine).unwrap(), None);
    // As the Go provider's json.Marshal of an EC2 Placement writes it.
    machine.node_template.annotations.insert(
        crate::spec::PLACEMENT_ANNOTATION.into(),
        r#"{"Affinity":null,"AvailabilityZone":"eu-west-1b","GroupName":"pg-1","HostId":null,"Tenancy":"host","PartitionNumber":2}"#.into(),
    );
    let placement = crate::spec::placement_annotation(&machine).unwrap().unwrap();
    let s = spec();
    let params = LaunchParams {
        machine_name: "m-1",
        machine_uid: "uid-1",
        client_token: "tok",
        user_data: b"",
        root_device_name: Some("/dev/xvda"),
        placement: Some(&placement),
    };
    let b = run_instances(client().run_instances(), &s, &params);
    let pl = b.as_input().get_placement().clone().unwrap();
    assert_eq!(
        (pl.availability_zone(), pl.group_name(), pl.tenancy().map(|t| t.as_str()), pl.partition_number()),
        (Some("eu-west-1b"), Some("pg-1"), Some("host"), Some(2))
    );
    assert_eq!(pl.affinity(), None, "the class's placement is replaced, not merged");

    for bad in ["[1]", r#"{"Tenancy":"shared"}"#, r#"{"Affinity":"any"}"#] {
        machine.node_template.annotations.insert(crate::spec::PLACEMENT_ANNOTATION.into(), bad.into());
        let err = crate::spec::placement_annotation(&machine).unwrap_err();
        assert_eq!(
            err.field(),
            Some("machine.node_template_spec.annotations[machine.sapcloud.io/awsPlacement]"),
            "{bad}"
        );
    }
}

#[test]
fn every_field_reaches_run_instances() {
    let s = spec();
    let params = LaunchParams {
        machine_name: "m-1",
        machine_uid: "uid-1",
        client_token: "tok",
        user_data: b"#cloud-config\n",
        root_device_name: Some("/dev/xvda"),
        placement: s.placement.as_ref(),
    };
    let b = run_instances(client().run_instances(), &s, &params);
    let input = b.as_input();
    assert_eq!(input.get_image_id().as_deref(), Some("ami-12345678"));
    assert_eq!(input.get_client_token().as_deref(), Some("tok"));
    assert_eq!(input.get_user_data().as_deref(), Some("I2Nsb3VkLWNvbmZpZwo="));
    assert_eq!((*input.get_min_count(), *input.get_max_count()), (Some(1), Some(1)));
    assert_eq!(input.get_ebs_optimized(), &Some(true));
    assert_eq!(input.get_monitoring().as_ref().and_then(|m| m.enabled()), Some(true));
    let bdm = &input.get_block_device_mappings().as_ref().unwrap()[0];
    assert_eq!(bdm.device_name(), Some("/dev/xvda"), "/root becomes the AMI's root device");
    let ebs = bdm.ebs().unwrap();
    assert_eq!(
        (ebs.kms_key_id(), ebs.throughput(), ebs.encrypted(), ebs.delete_on_termination()),
        (Some("kms-1"), Some(200), Some(true), Some(true))
    );
    let nic = &input.get_network_interfaces().as_ref().unwrap()[0];
    assert_eq!((nic.device_index(), nic.subnet_id(), nic.ipv6_address_count()), (Some(0), Some("subnet-1"), Some(1)));
    assert_eq!(
        nic.ipv6_prefix_count(),
        None,
        "no prefix count beside an address count: InitializeMachine assigns them"
    );
    assert_eq!(nic.primary_ipv6(), Some(true), "IPv6 addresses imply a primary IPv6 address, as in the Go provider");
    assert_eq!(
        input.get_iam_instance_profile().as_ref().and_then(|i| i.arn()),
        Some("arn:aws:iam::1:instance-profile/n")
    );
    let market = input.get_instance_market_options().as_ref().unwrap();
    assert_eq!(market.market_type(), Some(&MarketType::Spot));
    assert_eq!(market.spot_options().and_then(|s| s.max_price()), None, "empty spotPrice = no maximum");
    assert_eq!(input.get_placement().as_ref().and_then(|p| p.tenancy()).map(|t| t.as_str()), Some("dedicated"));
    assert_eq!(input.get_cpu_options().as_ref().and_then(|c| c.threads_per_core()), Some(1));
    assert_eq!(input.get_metadata_options().as_ref().and_then(|m| m.http_put_response_hop_limit()), Some(2));
    assert!(input.get_capacity_reservation_specification().is_some());
    let specs = input.get_tag_specifications().as_ref().unwrap();
    let types: Vec<_> = specs.iter().filter_map(|s| s.resource_type().cloned()).collect();
    assert_eq!(types, vec![ResourceType::Instance, ResourceType::Volume, ResourceType::NetworkInterface]);
    for s in specs {
        let get = |k: &str| s.tags().iter().find(|t| t.key() == Some(k)).and_then(|t| t.value());
        assert_eq!(get("Name"), Some("m-1"), "the machine name wins over a class Name tag");
        assert_eq!(get(MACHINE_UID_TAG), Some("uid-1"));
        assert_eq!(get("kubernetes.io/cluster/c"), Some("1"));
    }
}

#[test]
fn ipv6_prefixes_are_requested_at_launch_unless_addresses_are_counted() {
    let mut s = spec();
    let params = LaunchParams {
        machine_name: "m-1",
        machine_uid: "uid-1",
        client_token: "tok",
        user_data: b"",
        root_device_name: Some("/dev/xvda"),
        placement: None,
    };
    let prefix_count = |s: &AwsProviderSpec| {
        let b = run_instances(client().run_instances(), s, &params);
        b.as_input().get_network_interfaces().as_ref().unwrap()[0].ipv6_prefix_count()
    };
    s.network_interfaces[0].ipv6_prefix_count = Some(2);
    assert_eq!(prefix_count(&s), None, "beside ipv6AddressCount: assigned by InitializeMachine");
    s.network_interfaces[0].ipv6_address_count = Some(0);
    assert_eq!(prefix_count(&s), Some(2));
    s.network_interfaces[0].ipv6_address_count = None;
    assert_eq!(prefix_count(&s), Some(2));
    s.network_interfaces[0].ipv6_prefix_count = Some(0);
    assert_eq!(prefix_count(&s), None);
}

#[test]
fn an_interruptible_capacity_reservation_class_reaches_run_instances() {
    let mut v = spec_json();
    v.as_object_mut().unwrap().remove("spotPrice");
    v["instanceMarketOptions"] = json!({"marketType": "interruptible-capacity-reservation"});
    v["capacityReservation"] = json!({"capacityReservationId": "cr-0123456789abcdef0"});
    let s = parse_and_validate(&serde_json::to_vec(&v).unwrap()).unwrap();
    let params = LaunchParams {
        machine_name: "m-1",
        machine_uid: "uid-1",
        client_token: "tok",
        user_data: b"",
        root_device_name: Some("/dev/xvda"),
        placement: None,
    };
    let b = run_instances(client().run_instances(), &s, &params);
    let input = b.as_input();
    let market = input.get_instance_market_options().as_ref().unwrap();
    assert_eq!(market.market_type(), Some(&MarketType::InterruptibleCapacityReservation));
    assert_eq!(market.spot_options(), None);
    let target = input.get_capacity_reservation_specification().as_ref().and_then(|c| c.capacity_reservation_target());
    assert_eq!(target.and_then(|t| t.capacity_reservation_id()), Some("cr-0123456789abcdef0"));
}
