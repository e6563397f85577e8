//! UpdateMachine against fake-gce (issue 32): labels added, changed and
//! removed on the instance and its boot disk, network tags, with their
//! fingerprints; a disk grown with disks.resize, a shrink refused naming the
//! field; a Hyperdisk's provisioned IOPS and throughput with disks.update;
//! replacement-only changes refused naming the field; `validate_only` writes
//! nothing; a retry after a lost answer converges; a label someone else
//! writes between the read and the write makes the stale write UNAVAILABLE
//! `FINGERPRINT_CHANGED` and stays after the retry; another cluster's
//! instance is NOT_FOUND and untouched.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use fake_cloud_support::{Fault, OpClass, PlantRequest};
use machine_driver_api::{
    CallContext, ChangeOutcome, Driver, ErrorKind, FieldChange, Machine, MachineClass, NEEDS_REPLACEMENT, UpdateMachine,
};
use machine_driver_gcp::GcpDriver;
use serde_json::{Value, json};
use support::FakeCloud;

const CLUSTER: &str = "kubernetes-io-cluster-shoot--demo--local";
const ROLE: &str = "kubernetes-io-role-node";

fn ctx() -> CallContext {
    CallContext::with_timeout("test", Duration::from_secs(20))
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

fn patched(patch: &Value) -> MachineClass {
    let mut spec: Value = serde_json::from_str(include_str!("../examples/machine-class.json")).unwrap();
    merge(&mut spec, patch);
    MachineClass {
        name: "class".into(),
        provider: "GCP".into(),
        provider_spec: serde_json::to_vec(&spec).unwrap(),
        node_template: None,
    }
}

fn disk(size_gb: i64, labels: Value) -> Value {
    json!({"boot": true, "autoDelete": true, "sizeGb": size_gb, "type": "pd-balanced",
        "image": "projects/debian-cloud/global/images/debian-12", "labels": labels})
}

fn tags(extra: &[&str]) -> Value {
    let mut all = vec!["shoot--demo--local", CLUSTER, ROLE];
    all.extend_from_slice(extra);
    json!(all)
}

/// The example class with a removable label on the instance and the disk and a removable network tag.
fn base() -> MachineClass {
    let labels = json!({"name": "worker-a", "team": "a", "old": "x"});
    patched(&json!({"labels": labels.clone(), "disks": [disk(50, labels.clone())], "tags": tags(&["old-tag"])}))
}

/// `base` changed: `team` changed, `new` added, `old` removed, on the instance
/// and the disk; network tag `old-tag` removed, `web` added.
fn retagged() -> MachineClass {
    let labels = json!({"name": "worker-a", "team": "b", "new": "z"});
    patched(&json!({"labels": labels.clone(), "disks": [disk(50, labels.clone())], "tags": tags(&["web"])}))
}

struct Setup {
    s: FakeCloud,
    driver: GcpDriver,
}

impl Setup {
    async fn start() -> Self {
        let s = FakeCloud::start().await;
        s.admin("timing", json!({"boot_ms": 50, "stop_ms": 50})).await;
        let driver = s.driver(0.0, 0).await;
        Self { s, driver }
    }

    async fn create(&self, name: &str, class: &MachineClass) -> Machine {
        let mut req = self.s.create_request(name);
        req.class = class.clone();
        let created = self.driver.create_machine(&ctx(), req).await.unwrap();
        Machine { provider_id: Some(created.provider_id), ..self.s.machine(name) }
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
            secret: self.s.secret.clone(),
            validate_only,
        };
        self.driver.update_machine(&ctx(), req).await.map(|u| u.changes)
    }

    /// The calls since the last take, by operation, and the writes among them.
    async fn take_calls(&self) -> (BTreeMap<String, u64>, u64) {
        let counts = self.s.calls().await;
        self.s.admin.reset_calls().await.unwrap();
        let writes = counts.classes.get(&OpClass::Write).copied().unwrap_or(0);
        (counts.calls, writes)
    }

    /// The inventory record of instance `name`: `tags` (labels), `network_tags`, `disks`, ...
    async fn record(&self, name: &str) -> Value {
        let i = self.s.inventory().await.into_iter().find(|i| i.name == name && i.live).unwrap();
        let mut v = Value::Object(i.extra);
        v["tags"] = json!(i.tags);
        v
    }
}

fn outcome<'a>(changes: &'a [FieldChange], field: &str) -> &'a FieldChange {
    changes.iter().find(|c| c.field == field).unwrap_or_else(|| panic!("{field} not in {changes:?}"))
}

fn network_tags(record: &Value) -> Vec<String> {
    serde_json::from_value(record["network_tags"].clone()).unwrap()
}

#[tokio::test]
async fn labels_and_tags_are_added_changed_and_removed_on_the_instance_and_its_disk() {
    let u = Setup::start().await;
    let m = u.create("upd-labels", &base()).await;
    let before = u.record("upd-labels").await;
    assert_eq!((before["tags"]["old"].as_str(), before["disks"][0]["labels"]["old"].as_str()), (Some("x"), Some("x")));
    u.take_calls().await;

    let changes = u.update(&m, &retagged(), Some(&base()), false).await.unwrap();
    let labels = outcome(&changes, "providerSpec.labels");
    assert_eq!(labels.outcome, ChangeOutcome::Applied, "{changes:?}");
    assert_eq!(labels.detail, "set new, team; removed old on the instance");
    let disk = outcome(&changes, "providerSpec.disks[0].labels");
    assert_eq!(
        (disk.outcome, disk.detail.as_str()),
        (ChangeOutcome::Applied, "set new, team; removed old on disk upd-labels")
    );
    let tags = outcome(&changes, "providerSpec.tags");
    assert_eq!(
        (tags.outcome, tags.detail.as_str()),
        (ChangeOutcome::Applied, "set web; removed old-tag on the instance")
    );
    for field in
        ["providerSpec.machineType", "providerSpec.zone", "providerSpec.disks[0].sizeGb", "providerSpec.disks[0].image"]
    {
        assert_eq!(outcome(&changes, field).outcome, ChangeOutcome::Unchanged, "{field}");
    }
    let (calls, writes) = u.take_calls().await;
    // instances.get, disks.get; setLabels, setTags, disks.setLabels; a zoneOperations.wait each.
    assert_eq!(writes, 3, "{calls:?}");
    for op in ["instances.get", "disks.get", "instances.setLabels", "instances.setTags", "disks.setLabels"] {
        assert_eq!(calls.get(op), Some(&1), "{op}: {calls:?}");
    }
    assert_eq!(calls.values().sum::<u64>(), 8, "{calls:?}");

    let after = u.record("upd-labels").await;
    for labels in [&after["tags"], &after["disks"][0]["labels"]] {
        assert_eq!((labels["team"].as_str(), labels["new"].as_str()), (Some("b"), Some("z")), "{labels}");
        assert!(labels.get("old").is_none(), "removed: {labels}");
        assert_eq!(labels["name"], "worker-a");
    }
    assert_eq!(after["tags"][CLUSTER], "1", "the driver's marker labels stay");
    assert_eq!(after["tags"]["mcm-machine-uid"], "uid-upd-labels");
    assert_eq!(network_tags(&after), ["shoot--demo--local", CLUSTER, ROLE, "web"]);

    // A repeat: all UNCHANGED, the two reads only.
    let again = u.update(&m, &retagged(), Some(&base()), false).await.unwrap();
    assert!(again.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "{again:?}");
    let (calls, writes) = u.take_calls().await;
    assert_eq!((writes, calls.values().sum::<u64>()), (0, 2), "{calls:?}");
}

#[tokio::test]
async fn without_the_previous_class_nothing_is_removed() {
    let u = Setup::start().await;
    let m = u.create("upd-noprev", &base()).await;
    let changes = u.update(&m, &retagged(), None, false).await.unwrap();
    assert_eq!(outcome(&changes, "providerSpec.labels").outcome, ChangeOutcome::Applied);
    let after = u.record("upd-noprev").await;
    for labels in [&after["tags"], &after["disks"][0]["labels"]] {
        assert_eq!((labels["team"].as_str(), labels["old"].as_str()), (Some("b"), Some("x")), "{labels}");
    }
    assert!(network_tags(&after).contains(&"old-tag".to_string()), "an operator's or an earlier class's tag stays");
}

#[tokio::test]
async fn validate_only_answers_the_same_and_writes_nothing() {
    let u = Setup::start().await;
    let m = u.create("upd-validate", &base()).await;
    let before = u.record("upd-validate").await;
    u.take_calls().await;
    let bigger = {
        let labels = json!({"name": "worker-a", "team": "b", "new": "z"});
        patched(&json!({"labels": labels.clone(), "disks": [disk(80, labels.clone())], "tags": tags(&["web"])}))
    };
    let planned = u.update(&m, &bigger, Some(&base()), true).await.unwrap();
    let applied = u.update(&m, &bigger, Some(&base()), false).await;
    let (_, writes_in_both) = u.take_calls().await;
    assert!(writes_in_both > 0);
    // What validate_only answered is what the real update then did.
    assert_eq!(planned, applied.unwrap());
    assert_eq!(outcome(&planned, "providerSpec.disks[0].sizeGb").detail, "50 -> 80 GB on disk upd-validate");

    let m2 = u.create("upd-validate-2", &base()).await;
    let before2 = u.record("upd-validate-2").await;
    u.take_calls().await;
    let planned = u.update(&m2, &bigger, Some(&base()), true).await.unwrap();
    assert_eq!(outcome(&planned, "providerSpec.labels").outcome, ChangeOutcome::Applied);
    let (calls, writes) = u.take_calls().await;
    assert_eq!(writes, 0, "{calls:?}");
    assert_eq!(calls.keys().map(String::as_str).collect::<Vec<_>>(), ["disks.get", "instances.get"], "{calls:?}");
    assert_eq!(u.record("upd-validate-2").await, before2);
    assert_ne!(u.record("upd-validate").await, before, "the first one was changed");
}

#[tokio::test]
async fn a_disk_grows_in_place_and_a_smaller_one_needs_a_replacement() {
    let u = Setup::start().await;
    let m = u.create("upd-grow", &base()).await;
    u.take_calls().await;
    let labels = json!({"name": "worker-a", "team": "a", "old": "x"});
    let grown =
        patched(&json!({"labels": labels.clone(), "disks": [disk(80, labels.clone())], "tags": tags(&["old-tag"])}));
    let changes = u.update(&m, &grown, None, false).await.unwrap();
    let size = outcome(&changes, "providerSpec.disks[0].sizeGb");
    assert_eq!((size.outcome, size.detail.as_str()), (ChangeOutcome::Applied, "50 -> 80 GB on disk upd-grow"));
    let (calls, writes) = u.take_calls().await;
    assert_eq!((writes, calls.get("disks.resize")), (1, Some(&1)), "{calls:?}");
    assert_eq!(u.record("upd-grow").await["disks"][0]["sizeGb"], "80");

    let shrunk =
        patched(&json!({"labels": labels.clone(), "disks": [disk(60, labels.clone())], "tags": tags(&["old-tag"])}));
    let err = u.update(&m, &shrunk, None, false).await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::FailedPrecondition, NEEDS_REPLACEMENT));
    assert!(err.message().contains("providerSpec.disks[0].sizeGb"), "{}", err.message());
    assert_eq!(u.take_calls().await.1, 0);
}

#[tokio::test]
async fn a_hyperdisk_s_provisioned_iops_and_throughput_change_in_place() {
    let u = Setup::start().await;
    let hyper = |iops: i64, throughput: i64| {
        let mut d = disk(100, json!({"name": "worker-a"}));
        d["type"] = json!("hyperdisk-balanced");
        d["provisionedIops"] = json!(iops);
        d["provisionedThroughput"] = json!(throughput);
        patched(&json!({"machineType": "c3-standard-4", "disks": [d]}))
    };
    let m = u.create("upd-hyper", &hyper(3000, 140)).await;
    u.take_calls().await;
    let changes = u.update(&m, &hyper(5000, 200), None, false).await.unwrap();
    let iops = outcome(&changes, "providerSpec.disks[0].provisionedIops");
    assert_eq!((iops.outcome, iops.detail.as_str()), (ChangeOutcome::Applied, "3000 -> 5000 on disk upd-hyper"));
    assert_eq!(outcome(&changes, "providerSpec.disks[0].provisionedThroughput").outcome, ChangeOutcome::Applied);
    let (calls, writes) = u.take_calls().await;
    assert_eq!((writes, calls.get("disks.update")), (2, Some(&2)), "{calls:?}");
    let shown = &u.record("upd-hyper").await["disks"][0];
    assert_eq!(
        (shown["provisionedIops"].as_str(), shown["provisionedThroughput"].as_str()),
        (Some("5000"), Some("200"))
    );
    let again = u.update(&m, &hyper(5000, 200), None, false).await.unwrap();
    assert!(again.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "{again:?}");

    // A pd-balanced disk's provisioned performance only a new disk can have.
    let m2 = u.create("upd-balanced", &base()).await;
    let mut d = disk(50, json!({"name": "worker-a", "team": "a", "old": "x"}));
    d["provisionedIops"] = json!(5000);
    let err = u.update(&m2, &patched(&json!({"labels": {"name": "worker-a", "team": "a", "old": "x"}, "disks": [d], "tags": tags(&["old-tag"])})), None, false)
        .await
        .unwrap_err();
    assert!(err.message().contains("providerSpec.disks[0].provisionedIops"), "{}", err.message());
}

#[tokio::test]
async fn a_replacement_only_change_is_refused_naming_the_field_and_beside_a_label_change_is_reported() {
    let u = Setup::start().await;
    let m = u.create("upd-replace", &base()).await;
    u.take_calls().await;
    let labels = json!({"name": "worker-a", "team": "a", "old": "x"});
    let same = |patch: Value| {
        let mut p = json!({"labels": labels.clone(), "disks": [disk(50, labels.clone())], "tags": tags(&["old-tag"])});
        merge(&mut p, &patch);
        patched(&p)
    };
    let err = u.update(&m, &same(json!({"machineType": "n1-standard-4"})), Some(&base()), false).await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::FailedPrecondition, NEEDS_REPLACEMENT));
    assert!(err.message().contains("providerSpec.machineType"), "{}", err.message());
    assert!(!err.message().contains("providerSpec.labels"), "{}", err.message());
    assert_eq!(u.take_calls().await.1, 0, "nothing written");

    let mut other_image = disk(50, labels.clone());
    other_image["image"] = json!("projects/image-owner/global/images/custom-gardenlinux");
    let err = u.update(&m, &same(json!({"disks": [other_image]})), None, false).await.unwrap_err();
    assert!(err.message().contains("providerSpec.disks[0].image"), "{}", err.message());
    let err = u.update(&m, &same(json!({"canIpForward": false})), None, false).await.unwrap_err();
    assert!(err.message().contains("providerSpec.canIpForward"), "{}", err.message());

    let both = same(json!({"machineType": "n1-standard-4", "labels": {"name": "worker-a", "team": "c", "old": null}}));
    let changes = u.update(&m, &both, Some(&base()), false).await.unwrap();
    let replaced = outcome(&changes, "providerSpec.machineType");
    assert_eq!(replaced.outcome, ChangeOutcome::NeedsReplacement);
    assert_eq!(replaced.detail, "\"n1-standard-2\" -> \"n1-standard-4\"");
    assert_eq!(outcome(&changes, "providerSpec.labels").outcome, ChangeOutcome::Applied);
    let record = u.record("upd-replace").await;
    assert_eq!(record["machineType"], "n1-standard-2", "never replaced");
    assert_eq!((record["tags"]["team"].as_str(), record["tags"].get("old")), (Some("c"), None));
}

#[tokio::test]
async fn an_invalid_class_is_refused_as_create_refuses_it_before_any_call() {
    let u = Setup::start().await;
    let m = u.create("upd-invalid", &base()).await;
    u.take_calls().await;
    let err = u.update(&m, &patched(&json!({"labels": {"Not A Label": "x"}})), None, false).await.unwrap_err();
    assert_eq!((err.kind(), err.field()), (ErrorKind::InvalidArgument, Some("providerSpec.labels")));
    let err = u.update(&m, &base(), Some(&patched(&json!({"machineType": ""}))), false).await.unwrap_err();
    assert_eq!(err.field(), Some("previous_machine_class.providerSpec.machineType"), "{err:?}");
    assert_eq!(u.take_calls().await.0.values().sum::<u64>(), 0);
}

#[tokio::test]
async fn another_clusters_instance_is_not_found_and_untouched() {
    let u = Setup::start().await;
    let labels: BTreeMap<String, String> =
        [("name", "worker-a"), ("team", "a")].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let planted_tags = vec!["kubernetes-io-cluster-shoot--demo--other".to_string(), ROLE.to_string()];
    u.s.admin
        .plant(&PlantRequest {
            name: "upd-foreign".into(),
            tags: labels.clone(),
            network_tags: planted_tags.clone(),
            scope: [("project", "demo-project"), ("zone", "europe-west1-b")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..PlantRequest::default()
        })
        .await
        .unwrap();
    let m = Machine {
        provider_id: Some("gce:///demo-project/europe-west1-b/upd-foreign".into()),
        ..u.s.machine("upd-foreign")
    };
    u.take_calls().await;
    let err = u.update(&m, &retagged(), Some(&base()), false).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err:?}");
    let (calls, writes) = u.take_calls().await;
    assert_eq!((writes, calls.values().sum::<u64>()), (0, 1), "one read, no write: {calls:?}");
    let record = u.record("upd-foreign").await;
    assert_eq!(record["tags"], json!(labels));
    assert_eq!(network_tags(&record), planted_tags);
}

#[tokio::test]
async fn a_lost_set_labels_answer_then_a_retry_converges() {
    let u = Setup::start().await;
    let m = u.create("upd-lost", &base()).await;
    u.s.admin
        .add_fault(Fault { operation: "instances.setLabels", kind: "unavailable", times: Some(1), phase: "after" })
        .await
        .unwrap();
    let err = u.update(&m, &retagged(), Some(&base()), false).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err:?}");
    assert_eq!(u.record("upd-lost").await["tags"]["team"], "b", "the lost write took effect");

    let retried = u.update(&m, &retagged(), Some(&base()), false).await.unwrap();
    assert_eq!(outcome(&retried, "providerSpec.labels").outcome, ChangeOutcome::Unchanged, "{retried:?}");
    assert_eq!(outcome(&retried, "providerSpec.tags").outcome, ChangeOutcome::Applied, "what was not reached yet");
    u.take_calls().await;
    let settled = u.update(&m, &retagged(), Some(&base()), false).await.unwrap();
    assert!(settled.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "{settled:?}");
    assert_eq!(u.take_calls().await.1, 0);
    let after = u.record("upd-lost").await;
    assert_eq!((after["tags"]["team"].as_str(), after["disks"][0]["labels"]["team"].as_str()), (Some("b"), Some("b")));
    assert!(after["tags"].get("old").is_none());
}

#[tokio::test]
async fn the_driver_advertises_update_machine() {
    let u = Setup::start().await;
    assert!(u.driver.info().capabilities.update_machine);
}

#[tokio::test]
async fn a_label_written_by_someone_else_between_the_read_and_the_write_is_retryable_and_kept() {
    use google_cloud_auth::credentials::anonymous::Builder as Anonymous;
    use google_cloud_compute_v1::client::Instances;
    use google_cloud_compute_v1::model::InstancesSetLabelsRequest;

    let u = Setup::start().await;
    let m = u.create("upd-race", &base()).await;
    // The driver reads the instance, then waits in its disks.get: meanwhile an operator labels the instance.
    u.s.admin("latency", json!({"operation": "disks.get", "ms": 800})).await;
    let (new, old) = (retagged(), base());
    let update = u.update(&m, &new, Some(&old), false);
    let operator = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let client = Instances::builder()
            .with_endpoint(u.s.fake.url())
            .with_credentials(Anonymous::new().build())
            .build()
            .await
            .unwrap();
        let get = client.get().set_project("demo-project").set_zone("europe-west1-b").set_instance("upd-race");
        let vm = get.send().await.unwrap();
        let mut body = InstancesSetLabelsRequest::new();
        body.labels = vm.labels.clone();
        body.labels.insert("operator".into(), "x".into());
        body.label_fingerprint = vm.label_fingerprint.clone();
        let set = client.set_labels().set_project("demo-project").set_zone("europe-west1-b").set_instance("upd-race");
        set.set_body(body).send().await.unwrap();
    };
    let (answer, ()) = tokio::join!(update, operator);
    let err = answer.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::Unavailable, "FINGERPRINT_CHANGED"), "{err:?}");
    assert!(err.retry_after().is_some());
    assert_eq!(u.record("upd-race").await["tags"]["team"], "a", "nothing of the stale write was applied");

    u.s.admin("latency", json!({"operation": "disks.get", "ms": 0})).await;
    let retried = u.update(&m, &retagged(), Some(&base()), false).await.unwrap();
    assert_eq!(outcome(&retried, "providerSpec.labels").outcome, ChangeOutcome::Applied);
    let labels = &u.record("upd-race").await["tags"];
    assert_eq!((labels["team"].as_str(), labels["operator"].as_str()), (Some("b"), Some("x")), "{labels}");
}
