//! UpdateMachine against fake-ec2 (issue 32): tags added, changed and
//! removed on the instance, its launch volume and its interface in the
//! fewest calls; `validate_only` writes nothing; replacement-only changes
//! refused naming the field; a repeat writes nothing; another cluster's
//! instance is NOT_FOUND and untouched; a lost answer then a retry
//! converges; EBS size/IOPS/throughput changed with ModifyVolume, never twice;
//! security groups and the source/destination check of the class's
//! interfaces (one ModifyNetworkInterfaceAttribute per attribute, an
//! interface the class does not name untouched) and the metadata options
//! (ModifyInstanceMetadataOptions, once even after a lost answer).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use fake_cloud_support::{AdminClient, Fault, OpClass, PlantRequest};
use machine_driver_api::{
    CallContext, ChangeOutcome, CreateMachine, Driver, ErrorKind, FieldChange, Machine, MachineClass, MachineRef,
    NEEDS_REPLACEMENT, SecretData, UpdateMachine,
};
use machine_driver_aws::{AwsConfig, AwsDriver};
use serde_json::{Value, json};

const POOL: &str = "worker.gardener.cloud/pool";

fn ctx() -> CallContext {
    CallContext::with_timeout("test", Duration::from_secs(20))
}

fn secret() -> SecretData {
    let secret: BTreeMap<String, String> = serde_json::from_str(include_str!("../examples/secret.json")).unwrap();
    secret.into_iter().collect()
}

/// JSON merge patch (RFC 7386) of `patch` onto `base`.
fn merge(base: &mut Value, patch: &Value) {
    match (base.as_object_mut(), patch.as_object()) {
        (Some(b), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    b.remove(k);
                } else {
                    merge(b.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *base = patch.clone(),
    }
}

fn example() -> Value {
    serde_json::from_str(include_str!("../examples/machine-class.json")).unwrap()
}

fn class_of(spec: &Value) -> MachineClass {
    MachineClass {
        name: "class".into(),
        provider: "AWS".into(),
        provider_spec: serde_json::to_vec(spec).unwrap(),
        node_template: None,
    }
}

fn patched(patch: &Value) -> MachineClass {
    let mut spec = example();
    merge(&mut spec, patch);
    class_of(&spec)
}

/// The example class with a removable user tag (`base` of the tag tests).
fn base() -> MachineClass {
    patched(&json!({"tags": {"team": "a", "old": "x"}}))
}

/// `base` changed: `team` changed, `new` added, `old` removed.
fn retagged() -> MachineClass {
    patched(&json!({"tags": {"team": "b", "new": "z"}}))
}

struct Setup {
    _fake: fake_ec2::FakeHandle,
    admin: AdminClient,
    driver: AwsDriver,
}

impl Setup {
    async fn start(boot_ms: u64) -> Self {
        let fake = fake_ec2::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let admin = AdminClient::for_cloud_url(&fake.url()).unwrap();
        admin.post("timing", json!({"boot_ms": boot_ms, "stop_ms": 50})).await.unwrap();
        let driver =
            AwsDriver::new(AwsConfig::default().with_endpoints(Some(fake.url().to_string()), |_| None)).unwrap();
        Self { _fake: fake, admin, driver }
    }

    async fn create(&self, name: &str, class: &MachineClass) -> Machine {
        let machine = Machine { name: name.into(), uid: format!("uid-{name}"), ..Machine::default() };
        let req = CreateMachine {
            machine: machine.clone(),
            class: class.clone(),
            secret: secret(),
            user_data: Default::default(),
        };
        let created = self.driver.create_machine(&ctx(), req).await.unwrap();
        let machine = Machine { provider_id: Some(created.provider_id), ..machine };
        // UpdateMachine is for machines past initialization (the example class turns the
        // source/destination check off there).
        let init = MachineRef { machine: machine.clone(), class: class.clone(), secret: secret() };
        self.driver.initialize_machine(&ctx(), init).await.unwrap();
        machine
    }

    async fn update(
        &self,
        m: &Machine,
        class: &MachineClass,
        previous: Option<&MachineClass>,
        validate_only: bool,
    ) -> machine_driver_api::Result<Vec<FieldChange>> {
        let req = UpdateMachine {
            machine: m.clone(),
            class: class.clone(),
            previous_class: previous.cloned(),
            secret: secret(),
            validate_only,
        };
        self.driver.update_machine(&ctx(), req).await.map(|u| u.changes)
    }

    /// The calls since the last take, by operation, and the writes among them.
    async fn take_calls(&self) -> (BTreeMap<String, u64>, u64) {
        let counts = self.admin.calls().await.unwrap();
        self.admin.reset_calls().await.unwrap();
        let writes = counts.classes.get(&OpClass::Write).copied().unwrap_or(0);
        (counts.calls, writes)
    }

    /// The inventory record of the instance `m` runs on.
    async fn record(&self, m: &Machine) -> Value {
        let id = m.provider_id.as_deref().unwrap().rsplit('/').next().unwrap().to_string();
        let i = self.admin.instances().await.unwrap().into_iter().find(|i| i.id == id).unwrap();
        let mut v = Value::Object(i.extra);
        v["tags"] = json!(i.tags);
        v
    }
}

fn outcome<'a>(changes: &'a [FieldChange], field: &str) -> Option<&'a FieldChange> {
    changes.iter().find(|c| c.field == field)
}

/// The tags of the instance, its root volume and its interface.
fn all_tags(record: &Value) -> Vec<Value> {
    vec![
        record["tags"].clone(),
        record["block_devices"][0]["tags"].clone(),
        record["network_interfaces"][0]["tags"].clone(),
    ]
}

#[tokio::test]
async fn tags_are_added_changed_and_removed_on_the_instance_its_volume_and_interface_in_two_writes() {
    let s = Setup::start(50).await;
    let m = s.create("upd-tags", &base()).await;
    let before = s.record(&m).await;
    for tags in all_tags(&before) {
        assert_eq!((tags["team"].as_str(), tags["old"].as_str()), (Some("a"), Some("x")), "{tags}");
    }
    s.take_calls().await;

    let changes = s.update(&m, &retagged(), Some(&base()), false).await.unwrap();
    let tags = outcome(&changes, "providerSpec.tags").unwrap();
    assert_eq!(tags.outcome, ChangeOutcome::Applied, "{changes:?}");
    assert!(tags.detail.contains("set new, team; removed old on instance i-"), "{}", tags.detail);
    assert!(tags.detail.contains("on volume vol-") && tags.detail.contains("on network interface eni-"));
    assert_eq!(outcome(&changes, "providerSpec.machineType").unwrap().outcome, ChangeOutcome::Unchanged);
    let (calls, writes) = s.take_calls().await;
    // One DescribeInstances, DescribeVolumes, DescribeNetworkInterfaces; one DeleteTags and one CreateTags for all three.
    assert_eq!(writes, 2, "{calls:?}");
    assert_eq!((calls.get("CreateTags"), calls.get("DeleteTags")), (Some(&1), Some(&1)), "{calls:?}");
    assert_eq!(calls.values().sum::<u64>(), 5, "{calls:?}");

    let after = s.record(&m).await;
    for tags in all_tags(&after) {
        assert_eq!((tags["team"].as_str(), tags["new"].as_str()), (Some("b"), Some("z")), "{tags}");
        assert!(tags.get("old").is_none(), "removed: {tags}");
        assert_eq!(tags["Name"], "upd-tags");
        assert_eq!(tags["mcm.gardener.cloud/machine-uid"], "uid-upd-tags", "the driver's markers stay");
        assert_eq!(tags[POOL], "worker-a");
    }

    // A repeat: all UNCHANGED, reads only.
    let again = s.update(&m, &retagged(), Some(&base()), false).await.unwrap();
    assert!(again.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "{again:?}");
    let (calls, writes) = s.take_calls().await;
    assert_eq!(writes, 0, "{calls:?}");
    assert_eq!(calls.values().sum::<u64>(), 3, "{calls:?}");
}

#[tokio::test]
async fn without_the_previous_class_nothing_is_removed() {
    let s = Setup::start(50).await;
    let m = s.create("upd-noprev", &base()).await;
    let changes = s.update(&m, &retagged(), None, false).await.unwrap();
    assert_eq!(outcome(&changes, "providerSpec.tags").unwrap().outcome, ChangeOutcome::Applied);
    for tags in all_tags(&s.record(&m).await) {
        assert_eq!((tags["team"].as_str(), tags["old"].as_str()), (Some("b"), Some("x")), "{tags}");
    }
}

#[tokio::test]
async fn validate_only_answers_the_same_and_writes_nothing() {
    let s = Setup::start(50).await;
    let m = s.create("upd-validate", &base()).await;
    let before = all_tags(&s.record(&m).await);
    s.take_calls().await;
    let changes = s.update(&m, &retagged(), Some(&base()), true).await.unwrap();
    let tags = outcome(&changes, "providerSpec.tags").unwrap();
    assert_eq!(tags.outcome, ChangeOutcome::Applied);
    assert!(tags.detail.contains("removed old"), "{}", tags.detail);
    let (calls, writes) = s.take_calls().await;
    assert_eq!(writes, 0, "{calls:?}");
    assert!(calls.keys().all(|k| k.starts_with("Describe")), "{calls:?}");
    assert_eq!(all_tags(&s.record(&m).await), before);
}

#[tokio::test]
async fn a_replacement_only_change_is_refused_naming_the_field_and_beside_a_tag_change_is_reported() {
    let s = Setup::start(50).await;
    let m = s.create("upd-replace", &base()).await;
    s.take_calls().await;
    let bigger = patched(&json!({"tags": {"team": "a", "old": "x"}, "machineType": "m5.xlarge"}));
    let err = s.update(&m, &bigger, Some(&base()), false).await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::FailedPrecondition, NEEDS_REPLACEMENT));
    assert!(err.message().contains("providerSpec.machineType"), "{}", err.message());
    assert!(!err.message().contains("providerSpec.tags"), "{}", err.message());
    assert_eq!(s.take_calls().await.1, 0);

    let other_ami = patched(&json!({"ami": "ami-0000000000000a11d"}));
    let err = s.update(&m, &other_ami, None, false).await.unwrap_err();
    assert!(err.message().contains("providerSpec.ami"), "{}", err.message());

    let both = patched(&json!({"tags": {"team": "c"}, "machineType": "m5.xlarge"}));
    let changes = s.update(&m, &both, Some(&base()), false).await.unwrap();
    let replaced = outcome(&changes, "providerSpec.machineType").unwrap();
    assert_eq!(replaced.outcome, ChangeOutcome::NeedsReplacement);
    assert!(replaced.detail.contains("m5.large") && replaced.detail.contains("m5.xlarge"), "{}", replaced.detail);
    assert_eq!(outcome(&changes, "providerSpec.tags").unwrap().outcome, ChangeOutcome::Applied);
    let record = s.record(&m).await;
    assert_eq!(record["instance_type"], "m5.large", "never replaced or resized");
    for tags in all_tags(&record) {
        assert_eq!(tags["team"], "c");
        assert!(tags.get("old").is_none());
    }
}

#[tokio::test]
async fn an_invalid_class_is_refused_as_create_refuses_it() {
    let s = Setup::start(50).await;
    let m = s.create("upd-invalid", &base()).await;
    s.take_calls().await;
    let err = s.update(&m, &patched(&json!({"machineType": ""})), None, false).await.unwrap_err();
    assert_eq!((err.kind(), err.field()), (ErrorKind::InvalidArgument, Some("providerSpec.machineType")));
    let reserved = patched(&json!({"tags": {"aws:owner": "me"}}));
    let err = s.update(&m, &reserved, None, false).await.unwrap_err();
    assert_eq!(err.field(), Some("providerSpec.tags[aws:owner]"));
    let many: serde_json::Map<String, Value> = (0..48).map(|n| (format!("k{n}"), json!("v"))).collect();
    let err = s.update(&m, &patched(&json!({"tags": many})), None, false).await.unwrap_err();
    assert_eq!(err.field(), Some("providerSpec.tags"), "{}", err.message());
    assert_eq!(s.take_calls().await.0.values().sum::<u64>(), 0, "refused before any call");
}

#[tokio::test]
async fn another_clusters_instance_is_not_found_and_untouched() {
    let s = Setup::start(50).await;
    let foreign_tags: BTreeMap<String, String> = [
        ("kubernetes.io/cluster/shoot--demo--other", "1"),
        ("kubernetes.io/role/node", "1"),
        (POOL, "worker-a"),
        ("team", "a"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let planted = s
        .admin
        .plant(&PlantRequest {
            name: "upd-foreign".into(),
            tags: foreign_tags.clone(),
            scope: [("region".to_string(), "eu-west-1".to_string())].into_iter().collect(),
            ..PlantRequest::default()
        })
        .await
        .unwrap();
    let m = Machine {
        name: "upd-foreign".into(),
        uid: "uid-upd-foreign".into(),
        provider_id: Some(format!("aws:///eu-west-1/{}", planted.id)),
        ..Machine::default()
    };
    s.take_calls().await;
    let err = s.update(&m, &retagged(), Some(&base()), false).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err:?}");
    assert_eq!(s.take_calls().await.1, 0);
    let record = s.record(&m).await;
    let mut expected = foreign_tags;
    expected.insert("Name".into(), "upd-foreign".into());
    assert_eq!(record["tags"], json!(expected));
}

#[tokio::test]
async fn a_lost_create_tags_answer_then_a_retry_converges() {
    let s = Setup::start(50).await;
    let m = s.create("upd-lost", &base()).await;
    s.admin
        .add_fault(Fault { operation: "CreateTags", kind: "unavailable", times: Some(1), phase: "after" })
        .await
        .unwrap();
    let err = s.update(&m, &retagged(), Some(&base()), false).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    s.take_calls().await;
    let retried = s.update(&m, &retagged(), Some(&base()), false).await.unwrap();
    assert_eq!(outcome(&retried, "providerSpec.tags").unwrap().outcome, ChangeOutcome::Unchanged, "{retried:?}");
    assert_eq!(s.take_calls().await.1, 0, "the lost write took effect: nothing left to write");
    for tags in all_tags(&s.record(&m).await) {
        assert_eq!((tags["team"].as_str(), tags.get("old")), (Some("b"), None), "{tags}");
    }
}

#[tokio::test]
async fn ebs_size_iops_and_throughput_change_in_place_once_even_after_a_lost_answer() {
    // Each modification state lasts boot_ms: 1.5 s modifying, 1.5 s optimizing.
    let s = Setup::start(1500).await;
    let m = s.create("upd-ebs", &base()).await;
    let faster =
        patched(&json!({"blockDevices": [{"deviceName": "/root", "ebs": {"volumeSize": 60, "volumeType": "gp3",
            "encrypted": true, "deleteOnTermination": true, "iops": 4000, "throughput": 250}}]}));
    // validate_only: answered, nothing modified.
    let planned = s.update(&m, &faster, None, true).await.unwrap();
    assert_eq!(outcome(&planned, "providerSpec.blockDevices[0].ebs.iops").unwrap().outcome, ChangeOutcome::Applied);
    s.take_calls().await;

    s.admin
        .add_fault(Fault { operation: "ModifyVolume", kind: "unavailable", times: Some(1), phase: "after" })
        .await
        .unwrap();
    let err = s.update(&m, &faster, None, false).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    let (calls, _) = s.take_calls().await;
    assert_eq!(calls.get("ModifyVolume"), Some(&1), "{calls:?}");
    let volume = &s.record(&m).await["block_devices"][0];
    assert_eq!((volume["modification_state"].as_str(), volume["size_gib"].as_i64()), (Some("modifying"), Some(50)));

    // The retry sees the modification under way to these values: no second ModifyVolume.
    let retried = s.update(&m, &faster, None, false).await.unwrap();
    for field in ["volumeSize", "iops", "throughput", "volumeType"] {
        let f = format!("providerSpec.blockDevices[0].ebs.{field}");
        assert_eq!(outcome(&retried, &f).unwrap().outcome, ChangeOutcome::Unchanged, "{retried:?}");
    }
    let (calls, writes) = s.take_calls().await;
    assert_eq!((writes, calls.get("DescribeVolumesModifications")), (0, Some(&1)), "{calls:?}");

    tokio::time::sleep(Duration::from_millis(3200)).await;
    let volume = &s.record(&m).await["block_devices"][0];
    assert_eq!(volume["modification_state"], "completed");
    assert_eq!(
        (volume["size_gib"].as_i64(), volume["iops"].as_i64(), volume["throughput"].as_i64()),
        (Some(60), Some(4000), Some(250))
    );
    let settled = s.update(&m, &faster, None, false).await.unwrap();
    assert!(settled.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "{settled:?}");
    let (calls, writes) = s.take_calls().await;
    assert_eq!((writes, calls.values().sum::<u64>()), (0, 3), "{calls:?}");

    // A smaller volume only a new machine can have.
    let smaller =
        patched(&json!({"blockDevices": [{"deviceName": "/root", "ebs": {"volumeSize": 40, "volumeType": "gp3",
        "encrypted": true, "iops": 4000, "throughput": 250}}]}));
    let err = s.update(&m, &smaller, None, false).await.unwrap_err();
    assert!(err.message().contains("providerSpec.blockDevices[0].ebs.volumeSize"), "{}", err.message());
}

#[tokio::test]
async fn a_volume_modified_applies_once_and_reports_what_changed() {
    let s = Setup::start(50).await;
    let m = s.create("upd-ebs-once", &base()).await;
    let bigger =
        patched(&json!({"blockDevices": [{"deviceName": "/root", "ebs": {"volumeSize": 80, "volumeType": "gp3",
            "encrypted": true, "deleteOnTermination": true}}]}));
    s.take_calls().await;
    let changes = s.update(&m, &bigger, None, false).await.unwrap();
    let size = outcome(&changes, "providerSpec.blockDevices[0].ebs.volumeSize").unwrap();
    assert_eq!(size.outcome, ChangeOutcome::Applied);
    assert!(size.detail.contains("50 -> 80 GiB"), "{}", size.detail);
    let (calls, writes) = s.take_calls().await;
    assert_eq!((writes, calls.get("ModifyVolume")), (1, Some(&1)), "{calls:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(s.record(&m).await["block_devices"][0]["size_gib"], 80);
}

/// The example class's interface with other fields (`patch` merged into it).
fn interface(patch: &Value) -> Value {
    let mut nic = example()["networkInterfaces"][0].clone();
    merge(&mut nic, patch);
    nic
}

const SG: &str = "sg-0123456789abcdef0";
const SG_EXTRA: &str = "sg-0fedcba9876543210";

#[tokio::test]
async fn security_groups_and_source_dest_check_change_in_place_one_attribute_per_call() {
    let s = Setup::start(50).await;
    let m = s.create("upd-nic", &base()).await;
    let nic = &s.record(&m).await["network_interfaces"][0];
    assert_eq!((nic["security_groups"].clone(), nic["source_dest_check"].clone()), (json!([SG]), json!(false)));
    let wider = patched(&json!({"tags": {"team": "a", "old": "x"}, "srcAndDstChecksEnabled": true,
        "networkInterfaces": [interface(&json!({"securityGroupIDs": [SG_EXTRA, SG]}))]}));
    s.take_calls().await;

    // validate_only: the same answer, nothing written.
    let planned = s.update(&m, &wider, Some(&base()), true).await.unwrap();
    let groups = outcome(&planned, "providerSpec.networkInterfaces[0].securityGroupIDs").unwrap();
    assert_eq!(groups.outcome, ChangeOutcome::Applied, "{planned:?}");
    assert!(
        groups.detail.contains(&format!("{SG} -> {SG}, {SG_EXTRA} on network interface eni-")),
        "{}",
        groups.detail
    );
    let check = outcome(&planned, "providerSpec.srcAndDstChecksEnabled").unwrap();
    assert_eq!(check.outcome, ChangeOutcome::Applied);
    assert!(check.detail.contains("off -> on on network interface eni-"), "{}", check.detail);
    assert_eq!(outcome(&planned, "providerSpec.tags").unwrap().outcome, ChangeOutcome::Unchanged);
    let (calls, writes) = s.take_calls().await;
    assert_eq!((writes, calls.values().sum::<u64>()), (0, 3), "{calls:?}");

    let changes = s.update(&m, &wider, Some(&base()), false).await.unwrap();
    assert_eq!(
        changes.iter().filter(|c| c.outcome == ChangeOutcome::Applied).count(),
        2,
        "groups and check only: {changes:?}"
    );
    let (calls, writes) = s.take_calls().await;
    // EC2 takes one attribute per call: groups, then the check. No extra read.
    assert_eq!((writes, calls.get("ModifyNetworkInterfaceAttribute")), (2, Some(&2)), "{calls:?}");
    assert_eq!(calls.values().sum::<u64>(), 5, "{calls:?}");
    let nic = &s.record(&m).await["network_interfaces"][0];
    assert_eq!(nic["security_groups"], json!([SG_EXTRA, SG]));
    assert_eq!(nic["source_dest_check"], true);
    assert_eq!(s.record(&m).await["security_groups"], json!([SG_EXTRA, SG]), "the primary's are the instance's");

    // A repeat, and the same set in another order: nothing written.
    let reordered = patched(&json!({"tags": {"team": "a", "old": "x"}, "srcAndDstChecksEnabled": true,
        "networkInterfaces": [interface(&json!({"securityGroupIDs": [SG, SG_EXTRA]}))]}));
    let again = s.update(&m, &reordered, Some(&wider), false).await.unwrap();
    assert!(again.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "{again:?}");
    assert_eq!(s.take_calls().await.1, 0);

    // The check dropped from the class (the previous one set it): back to EC2's default, on: already so.
    let unset = patched(&json!({"tags": {"team": "a", "old": "x"}, "srcAndDstChecksEnabled": null,
        "networkInterfaces": [interface(&json!({"securityGroupIDs": [SG, SG_EXTRA]}))]}));
    let dropped = s.update(&m, &unset, Some(&base()), false).await.unwrap();
    assert_eq!(outcome(&dropped, "providerSpec.srcAndDstChecksEnabled").unwrap().outcome, ChangeOutcome::Unchanged);
    // Back to the example's: one group, check off.
    let back = s.update(&m, &base(), Some(&wider), false).await.unwrap();
    assert_eq!(back.iter().filter(|c| c.outcome == ChangeOutcome::Applied).count(), 2, "{back:?}");
    let nic = &s.record(&m).await["network_interfaces"][0];
    assert_eq!((nic["security_groups"].clone(), nic["source_dest_check"].clone()), (json!([SG]), json!(false)));
}

#[tokio::test]
async fn an_interface_the_class_does_not_name_is_untouched() {
    let s = Setup::start(50).await;
    let second = json!({"subnetID": "subnet-0de0fa0000000000b", "securityGroupIDs": [SG]});
    let two = patched(&json!({"networkInterfaces": [interface(&json!({})), second]}));
    let m = s.create("upd-two-nics", &two).await;
    let before = s.record(&m).await["network_interfaces"].clone();
    assert_eq!(before.as_array().unwrap().len(), 2);
    assert_eq!((before[1]["device_index"].clone(), before[1]["source_dest_check"].clone()), (json!(1), json!(false)));
    // The class names only device 0 now (device 1 is, say, a CNI's).
    let one = patched(&json!({"srcAndDstChecksEnabled": true,
        "networkInterfaces": [interface(&json!({"securityGroupIDs": [SG_EXTRA]}))]}));
    s.take_calls().await;
    let changes = s.update(&m, &one, Some(&two), false).await.unwrap();
    assert!(outcome(&changes, "providerSpec.networkInterfaces[1].securityGroupIDs").is_none(), "{changes:?}");
    assert_eq!(s.take_calls().await.0.get("ModifyNetworkInterfaceAttribute"), Some(&2));
    let after = s.record(&m).await["network_interfaces"].clone();
    assert_eq!(
        (after[0]["security_groups"].clone(), after[0]["source_dest_check"].clone()),
        (json!([SG_EXTRA]), json!(true))
    );
    assert_eq!(after[1], before[1], "the other interface is untouched");
}

#[tokio::test]
async fn a_security_group_ec2_refuses_is_invalid_argument_naming_the_interface() {
    let s = Setup::start(50).await;
    let m = s.create("upd-bad-sg", &base()).await;
    let groups: Vec<String> = (1..=6).map(|n| format!("sg-0123456789abcde{n:02}")).collect();
    let six = patched(&json!({"networkInterfaces": [interface(&json!({"securityGroupIDs": groups}))]}));
    let err = s.update(&m, &six, None, false).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err:?}");
    assert_eq!(err.field(), Some("providerSpec.networkInterfaces[0].securityGroupIDs"), "{}", err.message());
    assert_eq!(s.record(&m).await["network_interfaces"][0]["security_groups"], json!([SG]));
}

#[tokio::test]
async fn metadata_options_change_in_place_once_even_after_a_lost_answer() {
    let s = Setup::start(50).await;
    let m = s.create("upd-imds", &base()).await;
    let options = |r: &Value| r["metadata_options"].clone();
    let launched = options(&s.record(&m).await);
    assert_eq!(
        (launched["http_tokens"].as_str(), launched["http_put_response_hop_limit"].as_i64()),
        (Some("required"), Some(2))
    );
    // The hop limit alone: the driver also sends HttpTokens (omitted, EC2 would take its default, optional).
    let hops =
        patched(&json!({"tags": {"team": "a", "old": "x"}, "instanceMetadataOptions": {"httpPutResponseHopLimit": 3}}));
    s.take_calls().await;

    let planned = s.update(&m, &hops, Some(&base()), true).await.unwrap();
    let hop = outcome(&planned, "providerSpec.instanceMetadataOptions.httpPutResponseHopLimit").unwrap();
    assert_eq!((hop.outcome, hop.detail.as_str()), (ChangeOutcome::Applied, "2 -> 3"));
    assert_eq!(
        outcome(&planned, "providerSpec.instanceMetadataOptions.httpTokens").unwrap().outcome,
        ChangeOutcome::Unchanged
    );
    assert_eq!(s.take_calls().await.1, 0, "validate_only writes nothing");
    assert_eq!(options(&s.record(&m).await)["http_put_response_hop_limit"], 2);

    s.admin
        .add_fault(Fault {
            operation: "ModifyInstanceMetadataOptions",
            kind: "unavailable",
            times: Some(1),
            phase: "after",
        })
        .await
        .unwrap();
    let err = s.update(&m, &hops, Some(&base()), false).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    let (calls, _) = s.take_calls().await;
    assert_eq!(calls.get("ModifyInstanceMetadataOptions"), Some(&1), "{calls:?}");
    let now = options(&s.record(&m).await);
    assert_eq!((now["http_tokens"].as_str(), now["http_put_response_hop_limit"].as_i64()), (Some("required"), Some(3)));

    // The retry sees the new values (state pending or applied): nothing written.
    let retried = s.update(&m, &hops, Some(&base()), false).await.unwrap();
    assert!(retried.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "{retried:?}");
    let (calls, writes) = s.take_calls().await;
    assert_eq!((writes, calls.values().sum::<u64>()), (0, 3), "{calls:?}");

    // Two options at once: one call.
    let closed = patched(&json!({"tags": {"team": "a", "old": "x"},
        "instanceMetadataOptions": {"httpPutResponseHopLimit": 1, "httpEndpoint": "disabled"}}));
    let changes = s.update(&m, &closed, Some(&hops), false).await.unwrap();
    assert_eq!(changes.iter().filter(|c| c.outcome == ChangeOutcome::Applied).count(), 2, "{changes:?}");
    let (calls, writes) = s.take_calls().await;
    assert_eq!((writes, calls.get("ModifyInstanceMetadataOptions")), (1, Some(&1)), "{calls:?}");
    let now = options(&s.record(&m).await);
    assert_eq!(
        (now["http_tokens"].as_str(), now["http_put_response_hop_limit"].as_i64(), now["http_endpoint"].as_str()),
        (Some("required"), Some(1), Some("disabled"))
    );
}
