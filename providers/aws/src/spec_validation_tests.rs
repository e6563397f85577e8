use serde_json::{Value, json};

use super::*;

fn valid() -> Value {
    json!({
        "ami": "ami-0123456789abcdef0",
        "region": "eu-west-1",
        "machineType": "m5.large",
        "iam": {"name": "nodes"},
        "keyName": "ssh-key",
        "networkInterfaces": [{"subnetID": "subnet-1", "securityGroupIDs": ["sg-1"], "ipv6PrefixCount": 1}],
        "blockDevices": [
            {"deviceName": "/root", "ebs": {"volumeSize": 50, "volumeType": "gp3", "encrypted": true, "kmsKeyID": "k"}},
            {"deviceName": "/dev/sdf", "ebs": {"volumeSize": 100, "volumeType": "io1", "iops": 3000}}
        ],
        "tags": {"kubernetes.io/cluster/shoot--a--b": "1", "kubernetes.io/role/node": "1"},
        "srcAndDstChecksEnabled": false
    })
}

fn check(v: Value) -> Result<AwsProviderSpec> {
    parse_and_validate(&serde_json::to_vec(&v).unwrap())
}

fn field_of(v: Value) -> String {
    check(v).unwrap_err().field().unwrap_or("<none>").to_string()
}

#[test]
fn accepts_a_go_provider_class() {
    let s = check(valid()).unwrap();
    assert_eq!(s.network_interfaces[0].ipv6_prefix_count, Some(1));
    assert_eq!(s.block_devices[0].ebs.kms_key_id.as_deref(), Some("k"));
    let markers = crate::ownership::markers(&s).unwrap();
    assert_eq!(markers.cluster(), "kubernetes.io/cluster/shoot--a--b");
    assert_eq!(markers.role(), "kubernetes.io/role/node");
    assert!(s.needs_root_device_name());
}

#[test]
fn keys_are_read_as_go_reads_them() {
    // Go's encoding/json: a key differing only in case is the field; an unknown key is skipped.
    let mut v = valid();
    let nic = v["networkInterfaces"][0].as_object_mut().unwrap();
    nic.remove("subnetID");
    nic.insert("subnetId".into(), json!("subnet-7"));
    nic.insert("fieldOfANewerExtension".into(), json!({"x": 1}));
    // As Gardener writes it when only SEV-SNP is asked for.
    v["cpuOptions"] = json!({"coreCount": null, "threadsPerCore": null, "amdSevSnp": "enabled"});
    let s = check(v).unwrap();
    assert_eq!(s.network_interfaces[0].subnet_id, "subnet-7");
    let cpu = s.cpu_options.unwrap();
    assert_eq!((cpu.core_count, cpu.threads_per_core, cpu.amd_sev_snp.as_deref()), (None, None, Some("enabled")));
}

type Mutation = fn(&mut Value);

#[test]
fn each_rule_names_its_field() {
    let cases: Vec<(Mutation, &str)> = vec![
        (|v| v["ami"] = json!(""), "providerSpec.ami"),
        (|v| v["region"] = json!(""), "providerSpec.region"),
        (|v| v["region"] = json!("eu-west-1.evil.example/x"), "providerSpec.region"),
        (|v| v["machineType"] = json!(""), "providerSpec.machineType"),
        (|v| v["iam"] = json!({"name": "a", "arn": "b"}), "providerSpec.iam"),
        (|v| v["iam"] = json!({}), "providerSpec.iam"),
        (|v| v["tags"] = json!({"kubernetes.io/role/node": "1"}), "providerSpec.tags"),
        (|v| v["tags"] = json!({"kubernetes.io/cluster/x": "1"}), "providerSpec.tags"),
        (
            |v| {
                v["tags"] = json!({"kubernetes.io/cluster/x": "1", "kubernetes.io/cluster/y": "1", "kubernetes.io/role/node": "1"})
            },
            "providerSpec.tags",
        ),
        (|v| v["networkInterfaces"] = json!([]), "providerSpec.networkInterfaces"),
        (|v| v["networkInterfaces"][0]["subnetID"] = json!(""), "providerSpec.networkInterfaces[0].subnetID"),
        (
            |v| v["networkInterfaces"][0]["securityGroupIDs"] = json!([]),
            "providerSpec.networkInterfaces[0].securityGroupIDs",
        ),
        (
            |v| v["networkInterfaces"][0]["interfaceType"] = json!("weird"),
            "providerSpec.networkInterfaces[0].interfaceType",
        ),
        (|v| v["blockDevices"][1]["ebs"]["volumeType"] = json!("gp9"), "providerSpec.blockDevices[1].ebs.volumeType"),
        (|v| v["blockDevices"][1]["ebs"]["iops"] = json!(0), "providerSpec.blockDevices[1].ebs.iops"),
        (|v| v["blockDevices"][1]["ebs"]["volumeSize"] = json!(0), "providerSpec.blockDevices[1].ebs.volumeSize"),
        (|v| v["blockDevices"][1]["deviceName"] = json!("/root"), "providerSpec.blockDevices[1].deviceName"),
        (|v| v["blockDevices"][1]["deviceName"] = json!("/dev/hda"), "providerSpec.blockDevices[1].deviceName"),
        (|v| v["blockDevices"][0]["deviceName"] = json!("/dev/sdg"), "providerSpec.blockDevices"),
        (|v| v["blockDevices"][0]["ebs"]["encrypted"] = json!(false), "providerSpec.blockDevices[0].ebs.kmsKeyID"),
        (|v| v["cpuOptions"] = json!({"coreCount": 2, "threadsPerCore": 3}), "providerSpec.cpuOptions.threadsPerCore"),
        (|v| v["cpuOptions"] = json!({"coreCount": 2}), "providerSpec.cpuOptions.threadsPerCore"),
        (
            |v| v["instanceMetadataOptions"] = json!({"httpTokens": "maybe"}),
            "providerSpec.instanceMetadataOptions.httpTokens",
        ),
        (
            |v| v["instanceMetadataOptions"] = json!({"httpPutResponseHopLimit": 65}),
            "providerSpec.instanceMetadataOptions.httpPutResponseHopLimit",
        ),
        (
            |v| {
                v["capacityReservation"] =
                    json!({"capacityReservationPreference": "open", "capacityReservationId": "cr-1"})
            },
            "providerSpec.capacityReservation",
        ),
        (
            |v| {
                v["spotPrice"] = json!("");
                v["instanceMarketOptions"] = json!({"marketType": "spot"});
            },
            "providerSpec.instanceMarketOptions",
        ),
        (|v| v["ebsOptimized"] = json!("yes"), "providerSpec.ebsOptimized"),
    ];
    for (i, (mutate, field)) in cases.into_iter().enumerate() {
        let mut v = valid();
        mutate(&mut v);
        assert_eq!(field_of(v), field, "case {i}");
    }
}

#[test]
fn single_unnamed_device_is_the_root_and_io2_needs_iops() {
    let mut v = valid();
    v["blockDevices"] = json!([{"ebs": {"volumeSize": 20, "volumeType": "gp2"}}]);
    assert!(check(v.clone()).unwrap().needs_root_device_name());
    v["blockDevices"] = json!([{"ebs": {"volumeSize": 20, "volumeType": "io2"}}]);
    assert_eq!(field_of(v), "providerSpec.blockDevices[0].ebs.iops");
}

#[test]
fn data_device_names() {
    for ok in ["/dev/sdf", "/dev/xvdb", "/dev/xvdba"] {
        assert!(is_data_device_name(ok), "{ok}");
    }
    for bad in ["/dev/sdF", "/dev/xvdd", "/dev/sdaa", "sdf", "/dev/xvdbA"] {
        assert!(!is_data_device_name(bad), "{bad}");
    }
}

#[test]
fn every_run_instances_market_type_of_the_sdk_is_accepted_and_on_demand_is_refused() {
    use aws_sdk_ec2::types::MarketType;
    let accepted: Vec<&str> = run_instances_market_types().collect();
    // InstanceMarketOptionsRequest.MarketType in the EC2 API reference.
    for documented in ["spot", "capacity-block", "interruptible-capacity-reservation"] {
        assert!(accepted.contains(&documented), "{documented} missing from {accepted:?}");
    }
    for value in MarketType::values() {
        let mut v = valid();
        v["instanceMarketOptions"] = json!({"marketType": value});
        match check(v) {
            Ok(s) => {
                assert_ne!(*value, "on-demand");
                assert_eq!(s.instance_market_options.and_then(|m| m.market_type).as_deref(), Some(*value));
            }
            Err(e) => {
                assert_eq!(*value, "on-demand", "{value} refused: {e}");
                assert_eq!(e.field(), Some("providerSpec.instanceMarketOptions.marketType"));
            }
        }
    }
    for bad in ["Spot", "reserved", "capacity-reservation"] {
        let mut v = valid();
        v["instanceMarketOptions"] = json!({"marketType": bad});
        assert_eq!(field_of(v), "providerSpec.instanceMarketOptions.marketType", "{bad}");
    }
    let mut v = valid();
    v["instanceMarketOptions"] = json!({"marketType": ""});
    assert!(check(v).is_ok(), "an empty market type is absent, as the Go SDK omits it");
}
