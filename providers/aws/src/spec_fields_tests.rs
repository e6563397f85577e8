//! No accepted providerSpec key is silently dropped: every key the spec type
//! accepts (found by walking the type, `spec_walk`) is a row of the README's
//! "Provider spec fields" table, and changing it changes what the row says it
//! reaches (the RunInstances request, InitializeMachine's work, the EC2
//! endpoint's region), or the row says `ignored` and changing it changes nothing.

use aws_sdk_ec2::config::{BehaviorVersion, Region};
use aws_sdk_ec2::types::{Instance, InstanceNetworkInterface, InstanceNetworkInterfaceAttachment};
use serde_json::{Value, json};

use crate::driver::AwsDriver;
use crate::launch::{LaunchParams, run_instances};
use crate::spec::AwsProviderSpec;
use crate::spec_validation::parse_and_validate;
use crate::steps::interface_work;
use machine_driver_api::spec_walk::{field_paths, readme_table};

const README: &str = include_str!("../README.md");
const TABLE: &str = "Provider spec fields";

/// A valid class in which every field can be changed to another valid value.
fn base() -> Value {
    json!({
        "apiVersion": "mcm.gardener.cloud/v1alpha1",
        "ami": "ami-0123456789abcdef0",
        "region": "eu-west-1",
        "machineType": "m5.large",
        "iam": {"name": "nodes"},
        "keyName": "key-a",
        "networkInterfaces": [{"subnetID": "subnet-1", "securityGroupIDs": ["sg-1"]}],
        "blockDevices": [
            {"deviceName": "/root", "ebs": {"volumeSize": 50, "volumeType": "gp3", "encrypted": true}},
            {"deviceName": "/dev/sdf", "ebs": {"volumeSize": 100, "volumeType": "gp3"}}
        ],
        "tags": {"kubernetes.io/cluster/c": "1", "kubernetes.io/role/node": "1"},
        "srcAndDstChecksEnabled": true,
        "cpuOptions": {"coreCount": 2, "threadsPerCore": 2}
    })
}

/// Sets one key of a class: `false` its "before" value (or its context, e.g.
/// the other fields of its object), `true` its "after" value. Nothing else differs.
type Mutation = fn(&mut Value, bool);

/// The value `on` picks.
fn pick(on: bool, before: Value, after: Value) -> Value {
    if on { after } else { before }
}

/// One change per key that must reach something.
fn mutations() -> Vec<(&'static str, Mutation)> {
    vec![
        ("ami", |v, on| v["ami"] = pick(on, json!("ami-0123456789abcdef0"), json!("ami-0123456789abcdef1"))),
        ("region", |v, on| v["region"] = pick(on, json!("eu-west-1"), json!("eu-central-1"))),
        ("machineType", |v, on| v["machineType"] = pick(on, json!("m5.large"), json!("m5.xlarge"))),
        ("iam.name", |v, on| v["iam"] = json!({"name": pick(on, json!("nodes"), json!("others"))})),
        (
            "iam.arn",
            |v, on| v["iam"] = json!({"arn": pick(on, json!("arn:aws:iam::1:instance-profile/a"), json!("arn:aws:iam::1:instance-profile/b"))}),
        ),
        ("keyName", |v, on| v["keyName"] = pick(on, json!("key-a"), json!("key-b"))),
        ("ebsOptimized", |v, on| v["ebsOptimized"] = json!(on)),
        ("monitoring", |v, on| v["monitoring"] = json!(on)),
        ("spotPrice", |v, on| v["spotPrice"] = pick(on, json!("0.4"), json!("0.5"))),
        ("srcAndDstChecksEnabled", |v, on| v["srcAndDstChecksEnabled"] = json!(!on)),
        ("tags", |v, on| v["tags"]["team"] = pick(on, json!("a"), json!("b"))),
        ("networkInterfaces[].subnetID", |v, on| {
            v["networkInterfaces"][0]["subnetID"] = pick(on, json!("subnet-1"), json!("subnet-2"))
        }),
        ("networkInterfaces[].securityGroupIDs", |v, on| {
            v["networkInterfaces"][0]["securityGroupIDs"] = pick(on, json!(["sg-1"]), json!(["sg-1", "sg-2"]))
        }),
        ("networkInterfaces[].associatePublicIPAddress", |v, on| {
            v["networkInterfaces"][0]["associatePublicIPAddress"] = json!(on)
        }),
        ("networkInterfaces[].ipv6AddressCount", |v, on| {
            v["networkInterfaces"][0]["ipv6AddressCount"] = pick(on, json!(1), json!(2))
        }),
        ("networkInterfaces[].ipv6PrefixCount", |v, on| {
            v["networkInterfaces"][0]["ipv6PrefixCount"] = pick(on, json!(1), json!(2))
        }),
        ("networkInterfaces[].deleteOnTermination", |v, on| {
            v["networkInterfaces"][0]["deleteOnTermination"] = json!(!on)
        }),
        ("networkInterfaces[].description", |v, on| {
            v["networkInterfaces"][0]["description"] = pick(on, json!("a"), json!("b"))
        }),
        ("networkInterfaces[].interfaceType", |v, on| {
            v["networkInterfaces"][0]["interfaceType"] = pick(on, json!("interface"), json!("efa"))
        }),
        ("networkInterfaces[].networkCardIndex", |v, on| {
            v["networkInterfaces"][0]["networkCardIndex"] = pick(on, json!(0), json!(1))
        }),
        ("networkInterfaces[].deviceIndex", |v, on| {
            v["networkInterfaces"][0]["deviceIndex"] = pick(on, json!(0), json!(1))
        }),
        ("networkInterfaces[].primaryIpv6", |v, on| {
            v["networkInterfaces"][0]["ipv6AddressCount"] = json!(1);
            v["networkInterfaces"][0]["primaryIpv6"] = json!(!on);
        }),
        ("blockDevices[].deviceName", |v, on| {
            v["blockDevices"][1]["deviceName"] = pick(on, json!("/dev/sdf"), json!("/dev/sdg"))
        }),
        ("blockDevices[].noDevice", |v, on| v["blockDevices"][1]["noDevice"] = pick(on, json!(null), json!(""))),
        ("blockDevices[].virtualName", |v, on| {
            v["blockDevices"][1]["virtualName"] = pick(on, json!("ephemeral0"), json!("ephemeral1"))
        }),
        ("blockDevices[].ebs.deleteOnTermination", |v, on| {
            v["blockDevices"][1]["ebs"]["deleteOnTermination"] = json!(!on)
        }),
        ("blockDevices[].ebs.encrypted", |v, on| v["blockDevices"][1]["ebs"]["encrypted"] = json!(on)),
        ("blockDevices[].ebs.iops", |v, on| v["blockDevices"][1]["ebs"]["iops"] = pick(on, json!(3000), json!(4000))),
        ("blockDevices[].ebs.throughput", |v, on| {
            v["blockDevices"][1]["ebs"]["throughput"] = pick(on, json!(200), json!(250))
        }),
        ("blockDevices[].ebs.kmsKeyID", |v, on| {
            v["blockDevices"][0]["ebs"]["kmsKeyID"] = pick(on, json!("kms-1"), json!("kms-2"))
        }),
        ("blockDevices[].ebs.snapshotID", |v, on| {
            v["blockDevices"][1]["ebs"]["snapshotID"] = pick(on, json!("snap-1"), json!("snap-2"))
        }),
        ("blockDevices[].ebs.volumeSize", |v, on| {
            v["blockDevices"][1]["ebs"]["volumeSize"] = pick(on, json!(100), json!(200))
        }),
        ("blockDevices[].ebs.volumeType", |v, on| {
            v["blockDevices"][1]["ebs"]["volumeType"] = pick(on, json!("gp3"), json!("gp2"))
        }),
        ("capacityReservation.capacityReservationPreference", |v, on| {
            v["capacityReservation"] = json!({"capacityReservationPreference": pick(on, json!("open"), json!("none"))})
        }),
        ("capacityReservation.capacityReservationId", |v, on| {
            v["capacityReservation"] =
                json!({"capacityReservationId": pick(on, json!("cr-0123456789abcdef0"), json!("cr-0123456789abcdef1"))})
        }),
        ("capacityReservation.capacityReservationResourceGroupArn", |v, on| {
            v["capacityReservation"] =
                json!({"capacityReservationResourceGroupArn": pick(on, json!("arn:a"), json!("arn:b"))})
        }),
        ("capacityReservation.isMLCapacityBlock", |v, on| {
            v["capacityReservation"] = json!({"capacityReservationId": "cr-0123456789abcdef0", "isMLCapacityBlock": on})
        }),
        ("instanceMetadataOptions.httpEndpoint", |v, on| {
            v["instanceMetadataOptions"] =
                json!({"httpTokens": "required", "httpEndpoint": pick(on, json!("enabled"), json!("disabled"))})
        }),
        ("instanceMetadataOptions.httpPutResponseHopLimit", |v, on| {
            v["instanceMetadataOptions"] =
                json!({"httpTokens": "required", "httpPutResponseHopLimit": pick(on, json!(2), json!(3))})
        }),
        ("instanceMetadataOptions.httpTokens", |v, on| {
            v["instanceMetadataOptions"] =
                json!({"httpEndpoint": "enabled", "httpTokens": pick(on, json!("optional"), json!("required"))})
        }),
        ("instanceMetadataOptions.httpProtocolIpv6", |v, on| {
            v["instanceMetadataOptions"] =
                json!({"httpTokens": "required", "httpProtocolIpv6": pick(on, json!("disabled"), json!("enabled"))})
        }),
        ("cpuOptions.coreCount", |v, on| v["cpuOptions"]["coreCount"] = pick(on, json!(2), json!(4))),
        ("cpuOptions.threadsPerCore", |v, on| v["cpuOptions"]["threadsPerCore"] = pick(on, json!(2), json!(1))),
        ("cpuOptions.amdSevSnp", |v, on| v["cpuOptions"]["amdSevSnp"] = pick(on, json!("disabled"), json!("enabled"))),
        ("placement.groupId", |v, on| {
            v["placement"] = json!({"tenancy": "default", "groupId": pick(on, json!("pg-1"), json!("pg-2"))})
        }),
        ("placement.groupName", |v, on| {
            v["placement"] = json!({"tenancy": "default", "groupName": pick(on, json!("a"), json!("b"))})
        }),
        ("placement.tenancy", |v, on| {
            v["placement"] = json!({"groupName": "a", "tenancy": pick(on, json!("default"), json!("dedicated"))})
        }),
        ("placement.hostId", |v, on| {
            v["placement"] = json!({"tenancy": "host", "hostId": pick(on, json!("h-1"), json!("h-2"))})
        }),
        ("placement.partitionNumber", |v, on| {
            v["placement"] = json!({"groupName": "a", "partitionNumber": pick(on, json!(1), json!(2))})
        }),
        ("placement.affinity", |v, on| {
            v["placement"] = json!({"tenancy": "host", "affinity": pick(on, json!("default"), json!("host"))})
        }),
        ("placement.availabilityZone", |v, on| {
            v["placement"] =
                json!({"tenancy": "default", "availabilityZone": pick(on, json!("eu-west-1a"), json!("eu-west-1b"))})
        }),
        ("placement.hostResourceGroupArn", |v, on| {
            v["placement"] =
                json!({"tenancy": "host", "hostResourceGroupArn": pick(on, json!("arn:a"), json!("arn:b"))})
        }),
        ("instanceMarketOptions.marketType", |v, on| {
            v["instanceMarketOptions"] =
                json!({"marketType": pick(on, json!("spot"), json!("interruptible-capacity-reservation"))})
        }),
        (
            "instanceMarketOptions.spotOptions.maxPrice",
            |v, on| v["instanceMarketOptions"] = json!({"marketType": "spot", "spotOptions": {"spotInstanceType": "one-time", "maxPrice": pick(on, json!("0.2"), json!("0.3"))}}),
        ),
        (
            "instanceMarketOptions.spotOptions.spotInstanceType",
            |v, on| v["instanceMarketOptions"] = json!({"marketType": "spot", "spotOptions": {"maxPrice": "0.2", "spotInstanceType": pick(on, json!("one-time"), json!("persistent"))}}),
        ),
        (
            "instanceMarketOptions.spotOptions.instanceInterruptionBehavior",
            |v, on| v["instanceMarketOptions"] = json!({"marketType": "spot", "spotOptions": {"maxPrice": "0.2", "instanceInterruptionBehavior": pick(on, json!("terminate"), json!("stop"))}}),
        ),
    ]
}

/// One change per key the README lists as ignored.
fn ignored_mutations() -> Vec<(&'static str, Mutation)> {
    vec![("apiVersion", |v, on| v["apiVersion"] = pick(on, json!("mcm.gardener.cloud/v1alpha1"), json!("v2")))]
}

/// What a class reaches: the RunInstances request (`Debug` of its input), the
/// work InitializeMachine would do on the instance launched from it, and the
/// region the EC2 client is made for.
#[derive(Debug, PartialEq)]
struct Reached {
    run_instances: String,
    initialize: String,
    endpoint: String,
}

fn reached(v: &Value) -> Reached {
    let spec = parse_and_validate(&serde_json::to_vec(v).unwrap()).unwrap_or_else(|e| panic!("{e}: {v}"));
    let conf = aws_sdk_ec2::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("eu-west-1"))
        .build();
    let params = LaunchParams {
        machine_name: "m-1",
        machine_uid: "uid-1",
        client_token: "tok",
        user_data: b"#!/bin/sh",
        root_device_name: Some("/dev/xvda"),
        placement: spec.placement.as_ref(),
    };
    let run = run_instances(aws_sdk_ec2::Client::from_conf(conf).run_instances(), &spec, &params);
    Reached {
        run_instances: format!("{:?}", run.as_input()),
        initialize: format!("{:?}", interface_work(&spec, &launched(&spec))),
        endpoint: AwsDriver::locate(&spec, &machine_driver_api::Machine::default()).unwrap().0,
    }
}

/// The instance EC2 launches from `spec`: each interface attached where the
/// spec put it, source/dest check on, no IPv6 prefixes yet.
fn launched(spec: &AwsProviderSpec) -> Instance {
    let enis = spec
        .network_interfaces
        .iter()
        .enumerate()
        .map(|(i, n)| {
            InstanceNetworkInterface::builder()
                .network_interface_id(format!("eni-{i}"))
                .source_dest_check(true)
                .set_interface_type(n.interface_type.clone())
                .attachment(
                    InstanceNetworkInterfaceAttachment::builder()
                        .device_index(spec.device_index(i))
                        .network_card_index(n.network_card_index.unwrap_or(0))
                        .build(),
                )
                .build()
        })
        .collect();
    Instance::builder().instance_id("i-1").set_network_interfaces(Some(enis)).build()
}

#[test]
fn the_readme_field_table_is_the_spec_type() {
    let accepted = field_paths::<AwsProviderSpec>().expect("the spec type walks");
    let rows = readme_table(README, TABLE).unwrap_or_else(|e| panic!("{e}"));
    let named: Vec<&String> = rows.iter().flat_map(|r| &r.paths).collect();
    let listed: std::collections::BTreeSet<String> = named.iter().map(|k| (*k).clone()).collect();
    assert_eq!(named.len(), listed.len(), "a key is listed twice in the README's {TABLE:?} table");
    let missing: Vec<_> = accepted.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&accepted).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "README table: missing {missing:?}, not in the spec type {stale:?}"
    );
}

#[test]
fn every_accepted_key_reaches_what_the_readme_says_or_is_listed_as_ignored() {
    let rows = readme_table(README, TABLE).unwrap_or_else(|e| panic!("{e}"));
    let ignored: std::collections::BTreeSet<&str> = rows
        .iter()
        .filter(|r| r.cells.get(1).is_some_and(|c| c.starts_with("ignored")))
        .flat_map(|r| r.paths.iter().map(String::as_str))
        .collect();
    let mutations = mutations();
    let changed: std::collections::BTreeSet<&str> = mutations.iter().map(|(k, _)| *k).collect();
    let accepted = field_paths::<AwsProviderSpec>().expect("the spec type walks");
    for key in &accepted {
        assert!(
            changed.contains(key.as_str()) != ignored.contains(key.as_str()),
            "{key}: needs exactly one of a mutation here (it is applied) or `ignored` in the README table"
        );
    }
    let ignored_changed: std::collections::BTreeSet<&str> = ignored_mutations().iter().map(|(k, _)| *k).collect();
    assert_eq!(ignored_changed, ignored, "every key listed as ignored has a change showing it reaches nothing");
    let state = |mutate: Mutation, on: bool| {
        let mut v = base();
        mutate(&mut v, on);
        reached(&v)
    };
    for (key, mutate) in mutations {
        let cells = &rows
            .iter()
            .find(|r| r.paths.iter().any(|p| p == key))
            .unwrap_or_else(|| panic!("{key} not in the README"))
            .cells;
        let place = cells.get(1).copied().unwrap_or("");
        let (before, after) = (state(mutate, false), state(mutate, true));
        let mut reaches = Vec::new();
        if after.run_instances != before.run_instances {
            reaches.push("RunInstances");
        }
        if after.initialize != before.initialize {
            reaches.push("InitializeMachine");
        }
        if after.endpoint != before.endpoint {
            reaches.push("EC2 endpoint");
        }
        assert!(!reaches.is_empty(), "{key} changed and nothing it reaches changed: silently dropped");
        assert!(reaches.iter().any(|r| place.contains(r)), "{key} reaches {reaches:?}, the README says {place:?}");
    }
    for (key, mutate) in ignored_mutations() {
        assert_eq!(state(mutate, false), state(mutate, true), "{key} is listed as ignored but reaches something");
    }
}
