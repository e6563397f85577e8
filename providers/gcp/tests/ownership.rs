//! The ownership rule against `fake-gce`: an instance is this machine's only
//! with the class's cluster and role markers (network tags or this sidecar's
//! labels) and no other machine's uid. Another cluster's instance of the same
//! name, a firewall-style tag alone and an earlier machine's instance are
//! never answered for, listed, adopted or deleted; an instance the Go provider
//! made (tags, no uid) is. Hostile path parts reach no URL.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use google_cloud_auth::credentials::anonymous::Builder as Anonymous;
use google_cloud_compute_v1::client::Instances;
use google_cloud_compute_v1::model::{AttachedDisk, AttachedDiskInitializeParams, Instance, NetworkInterface, Tags};
use machine_driver_api::{CallContext, Driver, ErrorKind, ListMachines, Machine, MachineClass, MachineRef};
use serde_json::{Value, json};
use support::FakeCloud;

const PROJECT: &str = "demo-project";
const ZONE: &str = "europe-west1-b";
const MINE: &str = "kubernetes-io-cluster-shoot--demo--local";
const OTHER: &str = "kubernetes-io-cluster-shoot--x--other";
const ROLE: &str = "kubernetes-io-role-node";

fn ctx() -> CallContext {
    CallContext::with_timeout("test", Duration::from_secs(20))
}

fn provider_id(name: &str) -> String {
    format!("gce:///{PROJECT}/{ZONE}/{name}")
}

/// The example class with `tags` as its network tags.
fn class_with_tags(s: &FakeCloud, tags: &[&str]) -> MachineClass {
    let mut spec: Value = serde_json::from_slice(&s.class.provider_spec).unwrap();
    spec["tags"] = json!(tags);
    MachineClass { provider_spec: serde_json::to_vec(&spec).unwrap(), ..s.class.clone() }
}

/// The class of cluster `shoot--x--other`.
fn other_class(s: &FakeCloud) -> MachineClass {
    class_with_tags(s, &["shoot--x--other", OTHER, ROLE])
}

/// A request of this cluster's class for machine `name` with uid `uid`.
fn mine(s: &FakeCloud, name: &str, uid: &str) -> MachineRef {
    let mut r = s.machine_ref(name);
    r.machine.uid = uid.into();
    r
}

/// What the orphan collector sends: only the providerID, no name, no uid.
fn by_provider_id(s: &FakeCloud, pid: &str) -> MachineRef {
    MachineRef {
        machine: Machine { provider_id: Some(pid.into()), ..Machine::default() },
        class: s.class.clone(),
        secret: s.secret.clone(),
    }
}

async fn start() -> (FakeCloud, machine_driver_gcp::GcpDriver) {
    let s = FakeCloud::start().await;
    // Deleted instances stay STOPPING for the whole test, so a delete shows.
    s.admin("timing", json!({"boot_ms": 20, "stop_ms": 600_000})).await;
    let driver = s.driver(0.0, 0).await;
    (s, driver)
}

/// Cluster `shoot--x--other` creates `name` through the driver (uid `uid-other`).
async fn other_cluster_creates(s: &FakeCloud, driver: &machine_driver_gcp::GcpDriver, name: &str) {
    let mut req = s.create_request(name);
    req.class = other_class(s);
    req.machine.uid = "uid-other".into();
    driver.create_machine(&ctx(), req).await.unwrap();
}

/// An instance made outside this sidecar (the Go provider, a person), with
/// exactly these network tags and labels.
async fn plant(s: &FakeCloud, name: &str, tags: &[&str], labels: &[(&str, &str)]) {
    let client = Instances::builder()
        .with_endpoint(s.fake.url())
        .with_credentials(Anonymous::new().build())
        .build()
        .await
        .unwrap();
    let mut t = Tags::new();
    t.items = tags.iter().map(|t| t.to_string()).collect();
    let body = Instance::new()
        .set_name(name)
        .set_machine_type(format!("zones/{ZONE}/machineTypes/n1-standard-2"))
        .set_labels(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .set_tags(t)
        .set_disks([AttachedDisk::new().set_boot(true).set_auto_delete(true).set_initialize_params(
            AttachedDiskInitializeParams::new()
                .set_source_image("projects/debian-cloud/global/images/debian-12")
                .set_disk_size_gb(50),
        )])
        .set_network_interfaces([NetworkInterface::new().set_network("global/networks/default")]);
    client.insert().set_project(PROJECT).set_zone(ZONE).set_body(body).send().await.unwrap();
}

/// The live instance `name` is not being deleted.
async fn assert_untouched(s: &FakeCloud, name: &str) {
    let live = s.admin.live_named(name).await.unwrap();
    assert_eq!(live.len(), 1, "{name}: {live:?}");
    assert_ne!(live[0].state, "STOPPING", "{name} was deleted");
}

async fn listed(s: &FakeCloud, driver: &machine_driver_gcp::GcpDriver, class: MachineClass) -> Vec<(String, String)> {
    driver.list_machines(&ctx(), ListMachines { class, secret: s.secret.clone() }).await.unwrap()
}

async fn reset_calls(s: &FakeCloud) {
    s.admin("calls/reset", json!({})).await;
}

#[tokio::test]
async fn status_by_name_or_provider_id_does_not_answer_for_another_clusters_instance() {
    let (s, driver) = start().await;
    other_cluster_creates(&s, &driver, "m-9").await;

    let err = driver.get_machine_status(&ctx(), mine(&s, "m-9", "uid-mine")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "adopted another cluster's instance: {err:?}");
    let mut by_pid = mine(&s, "m-9", "uid-mine");
    by_pid.machine.provider_id = Some(provider_id("m-9"));
    let err = driver.get_machine_status(&ctx(), by_pid).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err:?}");
    // The other cluster still sees its own instance.
    let mut theirs = mine(&s, "m-9", "uid-other");
    theirs.class = other_class(&s);
    assert_eq!(driver.get_machine_status(&ctx(), theirs).await.unwrap().provider_id, provider_id("m-9"));
}

#[tokio::test]
async fn delete_by_name_leaves_another_clusters_instance_alone() {
    let (s, driver) = start().await;
    other_cluster_creates(&s, &driver, "m-9").await;
    reset_calls(&s).await;

    let deleted = driver.delete_machine(&ctx(), mine(&s, "m-9", "uid-mine")).await.unwrap();
    assert!(deleted.already_gone, "answered as gone: {deleted:?}");
    assert_eq!(s.calls().await.of("instances.delete"), 0);
    assert_untouched(&s, "m-9").await;
}

#[tokio::test]
async fn delete_by_provider_id_leaves_another_clusters_instance_alone() {
    let (s, driver) = start().await;
    other_cluster_creates(&s, &driver, "m-9").await;
    reset_calls(&s).await;

    let deleted = driver.delete_machine(&ctx(), by_provider_id(&s, &provider_id("m-9"))).await.unwrap();
    assert!(deleted.already_gone, "{deleted:?}");
    let calls = s.calls().await;
    assert_eq!(calls.of("instances.delete"), 0, "{calls:?}");
    assert_eq!(calls.total, 1, "one read: {calls:?}");
    assert_untouched(&s, "m-9").await;
}

#[tokio::test]
async fn list_shows_only_this_clusters_instances() {
    let (s, driver) = start().await;
    other_cluster_creates(&s, &driver, "m-9").await;
    driver.create_machine(&ctx(), s.create_request("m-1")).await.unwrap();

    let names: Vec<String> = listed(&s, &driver, s.class.clone()).await.into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["m-1"]);
    let theirs: Vec<String> = listed(&s, &driver, other_class(&s)).await.into_iter().map(|(_, n)| n).collect();
    assert_eq!(theirs, ["m-9"]);
}

#[tokio::test]
async fn create_of_a_name_another_cluster_holds_is_already_exists_and_leaves_it_alone() {
    let (s, driver) = start().await;
    other_cluster_creates(&s, &driver, "m-9").await;

    let err = driver.create_machine(&ctx(), s.create_request("m-9")).await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::AlreadyExists, "NAME_TAKEN_BY_FOREIGN_VM"), "{err:?}");
    assert_untouched(&s, "m-9").await;
}

#[tokio::test]
async fn an_earlier_machines_instance_of_the_name_is_not_this_machines() {
    let (s, driver) = start().await;
    driver.create_machine(&ctx(), s.create_request("m-2")).await.unwrap(); // uid-m-2

    let err = driver.get_machine_status(&ctx(), mine(&s, "m-2", "uid-new")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err:?}");
    assert!(driver.delete_machine(&ctx(), mine(&s, "m-2", "uid-new")).await.unwrap().already_gone);
    assert_untouched(&s, "m-2").await;
    // Its own machine (and the orphan collector, without uid) may.
    assert!(driver.get_machine_status(&ctx(), s.machine_ref("m-2")).await.is_ok());
    reset_calls(&s).await;
    let deleted = driver.delete_machine(&ctx(), by_provider_id(&s, &provider_id("m-2"))).await.unwrap();
    assert!(!deleted.already_gone);
    let calls = s.calls().await;
    assert_eq!((calls.of("instances.get"), calls.of("instances.delete")), (1, 1), "{calls:?}");
}

#[tokio::test]
async fn a_cluster_tag_without_the_role_marker_is_nobodys() {
    let (s, driver) = start().await;
    // A firewall-style tag, also as a label: still no role marker.
    plant(&s, "fw-1", &["shoot--demo--local", MINE], &[(MINE, "1")]).await;

    assert!(listed(&s, &driver, s.class.clone()).await.is_empty(), "listed, so orphan collection would delete it");
    let err = driver.get_machine_status(&ctx(), mine(&s, "fw-1", "uid-fw")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err:?}");
    assert!(driver.delete_machine(&ctx(), by_provider_id(&s, &provider_id("fw-1"))).await.unwrap().already_gone);
    assert_untouched(&s, "fw-1").await;
}

#[tokio::test]
async fn an_instance_the_go_provider_made_is_adopted_and_listed() {
    let (s, driver) = start().await;
    // The Go provider's shape: the class's network tags and labels, no marker labels, no uid.
    plant(&s, "go-1", &["shoot--demo--local", MINE, ROLE], &[("name", "worker-a")]).await;

    let status = driver.get_machine_status(&ctx(), s.machine_ref("go-1")).await.unwrap();
    assert_eq!(status.provider_id, provider_id("go-1"));
    assert!(!status.addresses.is_empty(), "{status:?}");
    let all = listed(&s, &driver, s.class.clone()).await;
    assert_eq!(all, [(provider_id("go-1"), "go-1".to_string())]);
    // A create of its machine adopts it rather than failing.
    let created = driver.create_machine(&ctx(), s.create_request("go-1")).await.unwrap();
    assert_eq!(created.provider_id, provider_id("go-1"));
    // And the orphan collector may delete it.
    assert!(!driver.delete_machine(&ctx(), by_provider_id(&s, &provider_id("go-1"))).await.unwrap().already_gone);
    assert_eq!(s.admin.live_named("go-1").await.unwrap()[0].state, "STOPPING");
}

#[tokio::test]
async fn a_class_without_both_markers_is_refused_on_every_rpc() {
    let (s, driver) = start().await;
    driver.create_machine(&ctx(), s.create_request("m-3")).await.unwrap();
    reset_calls(&s).await;
    let unmarked = class_with_tags(&s, &["shoot--demo--local", MINE]);
    let with = |mut r: MachineRef| {
        r.class = unmarked.clone();
        r
    };

    let mut errors = vec![
        driver.get_machine_status(&ctx(), with(s.machine_ref("m-3"))).await.unwrap_err(),
        driver.delete_machine(&ctx(), with(s.machine_ref("m-3"))).await.unwrap_err(),
        driver.delete_machine(&ctx(), with(by_provider_id(&s, &provider_id("m-3")))).await.unwrap_err(),
        driver
            .list_machines(&ctx(), ListMachines { class: unmarked.clone(), secret: s.secret.clone() })
            .await
            .unwrap_err(),
    ];
    let mut create = s.create_request("m-4");
    create.class = unmarked.clone();
    errors.push(driver.create_machine(&ctx(), create).await.unwrap_err());
    for e in errors {
        assert_eq!((e.kind(), e.field()), (ErrorKind::InvalidArgument, Some("providerSpec.tags")), "{e:?}");
    }
    assert_eq!(s.calls().await.total, 0);
    assert_untouched(&s, "m-3").await;
}

#[tokio::test]
async fn traversal_in_a_path_part_reaches_no_url() {
    let (s, driver) = start().await;
    driver.create_machine(&ctx(), s.create_request("m-5")).await.unwrap();
    reset_calls(&s).await;

    for pid in [
        format!("gce:///../{ZONE}/m-5"),
        format!("gce:///{PROJECT}/../m-5"),
        format!("gce:///{PROJECT}/{ZONE}/.."),
        format!("gce:///{PROJECT}/{ZONE}/m-5?alt=x"),
        format!("gce:///{PROJECT}/{ZONE}/%2e%2e"),
    ] {
        let e = driver.delete_machine(&ctx(), by_provider_id(&s, &pid)).await.unwrap_err();
        assert_eq!((e.kind(), e.field()), (ErrorKind::InvalidArgument, Some("machine.providerID")), "{pid}: {e:?}");
        let mut status = s.machine_ref("m-5");
        status.machine.provider_id = Some(pid.clone());
        let e = driver.get_machine_status(&ctx(), status).await.unwrap_err();
        assert_eq!(e.field(), Some("machine.providerID"), "{pid}: {e:?}");
    }
    // A machine name no instance can have: nothing read, nothing deleted.
    for name in ["..", "../m-5", "m-5/..", "m-5?x"] {
        let e = driver.get_machine_status(&ctx(), mine(&s, name, "uid-x")).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{name}: {e:?}");
        assert!(driver.delete_machine(&ctx(), mine(&s, name, "uid-x")).await.unwrap().already_gone, "{name}");
    }
    // The spec's zone and the secret's project go into every path too.
    let mut zone = mine(&s, "m-5", "uid-m-5");
    zone.class = {
        let mut spec: Value = serde_json::from_slice(&s.class.provider_spec).unwrap();
        spec["zone"] = json!("europe-west1-..");
        MachineClass { provider_spec: serde_json::to_vec(&spec).unwrap(), ..s.class.clone() }
    };
    let e = driver.delete_machine(&ctx(), zone).await.unwrap_err();
    assert_eq!(e.field(), Some("providerSpec.zone"), "{e:?}");
    let mut project = s.machine_ref("m-5");
    let key = String::from_utf8(project.secret.get("serviceAccountJSON").unwrap().to_vec())
        .unwrap()
        .replace("\"demo-project\"", "\"../demo-project\"");
    project.secret.insert("serviceAccountJSON", key);
    let e = driver.delete_machine(&ctx(), project).await.unwrap_err();
    assert_eq!(e.field(), Some("secret.serviceAccountJSON.project_id"), "{e:?}");

    assert_eq!(s.calls().await.total, 0, "a hostile part reached Compute");
    assert_untouched(&s, "m-5").await;
}

/// The example secret with another service account of the same project: other credentials.
fn other_secret(s: &FakeCloud) -> machine_driver_api::SecretData {
    let mut secret = s.secret.clone();
    let key = String::from_utf8(secret.get("serviceAccountJSON").unwrap().to_vec())
        .unwrap()
        .replace("machine-driver@demo-project", "other-driver@demo-project");
    secret.insert("serviceAccountJSON", key);
    secret
}

#[tokio::test]
async fn an_unseen_instance_is_deleted_unread_only_for_its_inserters_class_and_credentials() {
    let (s, driver) = start().await;
    // Compute does not show new instances for the whole test.
    s.admin("consistency", json!({"invisible_ms": 600_000})).await;
    other_cluster_creates(&s, &driver, "m-9").await;
    reset_calls(&s).await;

    // This cluster's class (same project, zone, name and secret): not the inserter's markers.
    let err = driver.get_machine_status(&ctx(), mine(&s, "m-9", "uid-mine")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "answered for another class's insert: {err:?}");
    assert!(driver.delete_machine(&ctx(), mine(&s, "m-9", "uid-mine")).await.unwrap().already_gone);
    assert!(driver.delete_machine(&ctx(), by_provider_id(&s, &provider_id("m-9"))).await.unwrap().already_gone);
    // The inserter's class with other credentials.
    let mut other_key = mine(&s, "m-9", "uid-other");
    other_key.class = other_class(&s);
    other_key.secret = other_secret(&s);
    let err = driver.get_machine_status(&ctx(), other_key.clone()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err:?}");
    assert!(driver.delete_machine(&ctx(), other_key).await.unwrap().already_gone);
    let calls = s.calls().await;
    assert_eq!(calls.of("instances.delete"), 0, "{calls:?}");
    assert_untouched(&s, "m-9").await;

    // The inserter itself (its class, its credentials) still gets both answers.
    let mut theirs = mine(&s, "m-9", "uid-other");
    theirs.class = other_class(&s);
    let status = driver.get_machine_status(&ctx(), theirs.clone()).await.unwrap();
    assert_eq!(status.provider_id, provider_id("m-9"));
    assert!(!driver.delete_machine(&ctx(), theirs).await.unwrap().already_gone, "its own delete");
    assert_eq!(s.calls().await.of("instances.delete"), 1);
    assert_eq!(s.admin.live_named("m-9").await.unwrap()[0].state, "STOPPING");
}
