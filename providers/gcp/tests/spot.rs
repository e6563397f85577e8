//! Spot VMs Compute reclaims, against `fake-gce`'s admin reclaim: a Spot VM
//! stopped by its preemption (`instanceTerminationAction: STOP`) is
//! SPOT_RECLAIMED for GetMachineStatus (decided from the one read), still
//! listed, removed by DeleteMachine and started again by CreateMachine; one
//! deleted by its preemption (`DELETE`) is plain NOT_FOUND; an on-demand VM
//! and another cluster's reclaimed VM are answered as before.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use machine_driver_api::{
    CallContext, CreateMachine, Driver, ErrorKind, ListMachines, MachineClass, MachineRef, SPOT_RECLAIMED,
};
use serde_json::{Value, json};
use support::FakeCloud;

const PROVIDER_ID_PREFIX: &str = "gce:///demo-project/europe-west1-b/";

fn ctx() -> CallContext {
    CallContext::with_timeout("test", Duration::from_secs(20))
}

/// `examples/conformance.json`'s `spot` inputs: the merge patch that makes
/// the example class Spot, and what the SPOT_RECLAIMED message must show.
fn conformance_spot() -> (Value, String) {
    let file: Value = serde_json::from_str(include_str!("../examples/conformance.json")).unwrap();
    (file["spot"]["patch"].clone(), file["spot"]["shown"].as_str().unwrap().to_string())
}

/// RFC 7386 JSON merge patch.
fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// The example class patched with `conformance.json`'s `spot.patch`.
fn conformance_spot_class(s: &FakeCloud) -> MachineClass {
    let mut spec: Value = serde_json::from_slice(&s.class.provider_spec).unwrap();
    merge(&mut spec, &conformance_spot().0);
    MachineClass { provider_spec: serde_json::to_vec(&spec).unwrap(), ..s.class.clone() }
}

/// The example class as a Spot VM with termination action `action`, and
/// `tags` when given.
fn spot_class(s: &FakeCloud, action: &str, tags: Option<&[&str]>) -> MachineClass {
    let mut spec: Value = serde_json::from_slice(&s.class.provider_spec).unwrap();
    spec["scheduling"] = json!({"automaticRestart": false, "onHostMaintenance": "TERMINATE", "preemptible": false,
        "provisioningModel": "SPOT", "instanceTerminationAction": action});
    if let Some(tags) = tags {
        spec["tags"] = json!(tags);
    }
    MachineClass { provider_spec: serde_json::to_vec(&spec).unwrap(), ..s.class.clone() }
}

fn create(s: &FakeCloud, name: &str, class: &MachineClass) -> CreateMachine {
    CreateMachine { class: class.clone(), ..s.create_request(name) }
}

fn machine_ref(s: &FakeCloud, name: &str, class: &MachineClass) -> MachineRef {
    MachineRef { class: class.clone(), ..s.machine_ref(name) }
}

/// The fake's id of the live instance `name`.
async fn live_id(s: &FakeCloud, name: &str) -> String {
    let live: Vec<_> = s.inventory().await.into_iter().filter(|i| i.live && i.name == name).collect();
    assert_eq!(live.len(), 1, "{live:?}");
    live[0].id.clone()
}

/// Polls GetMachineStatus until the VM is `RUNNING`.
async fn await_running(driver: &impl Driver, req: &MachineRef) {
    for _ in 0..100 {
        if let Ok(status) = driver.get_machine_status(&ctx(), req.clone()).await
            && status.vm_state == "RUNNING"
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{} never ran", req.machine.name);
}

/// Waits until the fake holds no live instance named `name`.
async fn await_gone(s: &FakeCloud, name: &str) {
    for _ in 0..100 {
        if s.inventory().await.iter().all(|i| !(i.live && i.name == name)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{name} is still there: {:?}", s.inventory().await);
}

async fn start() -> (FakeCloud, machine_driver_gcp::GcpDriver) {
    let s = FakeCloud::start().await;
    s.admin("timing", json!({"boot_ms": 100, "stop_ms": 100})).await;
    let driver = s.driver(0.0, 0).await;
    (s, driver)
}

#[tokio::test]
async fn a_stopped_spot_vm_is_spot_reclaimed_listed_and_deleted_with_everything() {
    let (s, driver) = start().await;
    let class = conformance_spot_class(&s);
    driver.create_machine(&ctx(), create(&s, "spot-1", &class)).await.unwrap();
    let req = machine_ref(&s, "spot-1", &class);
    await_running(&driver, &req).await;
    let id = live_id(&s, "spot-1").await;

    let shown = s.admin.reclaim(&id).await.unwrap();
    assert!(shown.contains("TERMINATED"), "{shown}");
    s.admin.reset_calls().await.unwrap();
    let err = driver.get_machine_status(&ctx(), req.clone()).await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::NotFound, SPOT_RECLAIMED), "{err:?}");
    let message = err.message();
    assert!(message.contains(&format!("{PROVIDER_ID_PREFIX}spot-1")), "{message}");
    assert!(message.contains(&conformance_spot().1), "conformance.json's spot.shown: {message}");
    assert!(message.contains("instanceTerminationAction STOP, lastStopTimestamp "), "{message}");
    let calls = s.calls().await;
    assert_eq!(calls.breakdown(), "instances.get×1", "decided from the one status read");

    // Still listed, so that orphan collection can remove it.
    let listed =
        driver.list_machines(&ctx(), ListMachines { class: class.clone(), secret: s.secret.clone() }).await.unwrap();
    assert!(listed.iter().any(|(pid, name)| name == "spot-1" && pid.ends_with("/spot-1")), "{listed:?}");

    // Delete removes the instance and its disks (autoDelete): nothing is left.
    let deleted = driver.delete_machine(&ctx(), req.clone()).await.unwrap();
    assert!(!deleted.already_gone, "the stopped instance existed");
    await_gone(&s, "spot-1").await;
    let inventory = s.inventory().await;
    assert!(inventory.iter().all(|i| !i.live), "{inventory:?}");
    let err = driver.get_machine_status(&ctx(), req).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_ne!(err.reason(), SPOT_RECLAIMED, "once deleted, plain NOT_FOUND: {err:?}");
}

#[tokio::test]
async fn create_after_a_stop_reclaim_starts_the_same_vm_again_and_never_makes_a_second() {
    let (s, driver) = start().await;
    let class = spot_class(&s, "STOP", None);
    let first = driver.create_machine(&ctx(), create(&s, "spot-2", &class)).await.unwrap();
    let req = machine_ref(&s, "spot-2", &class);
    await_running(&driver, &req).await;
    let id = live_id(&s, "spot-2").await;
    s.admin.reclaim(&id).await.unwrap();

    // No Spot capacity now: the start fails, RESOURCE_EXHAUSTED; still reclaimed.
    s.admin("faults", json!({"operation": "instances.start", "kind": "capacity", "times": 1, "phase": "after"})).await;
    let mut again = create(&s, "spot-2", &class);
    again.machine.provider_id = Some(first.provider_id.clone());
    let err = driver.create_machine(&ctx(), again.clone()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("ZONE_RESOURCE_POOL_EXHAUSTED"), "{}", err.message());
    let err = driver.get_machine_status(&ctx(), req.clone()).await.unwrap_err();
    assert_eq!(err.reason(), SPOT_RECLAIMED, "{err:?}");

    // With capacity: the same instance is started again.
    s.admin.reset_calls().await.unwrap();
    let restarted = driver.create_machine(&ctx(), again).await.unwrap();
    assert_eq!(restarted.provider_id, first.provider_id);
    let calls = s.calls().await;
    assert_eq!(calls.of("instances.start"), 1, "{calls:?}");
    assert_eq!(calls.of("instances.insert"), 1, "the replayed insert, no second VM: {calls:?}");
    await_running(&driver, &req).await;
    assert_eq!(live_id(&s, "spot-2").await, id, "the same instance runs again");
    assert_eq!(s.inventory().await.iter().filter(|i| i.live).count(), 1);
    driver.delete_machine(&ctx(), req).await.unwrap();
    await_gone(&s, "spot-2").await;
}

#[tokio::test]
async fn create_without_a_provider_id_after_a_stop_reclaim_starts_it_too() {
    let (s, driver) = start().await;
    let class = spot_class(&s, "STOP", None);
    driver.create_machine(&ctx(), create(&s, "spot-3", &class)).await.unwrap();
    let req = machine_ref(&s, "spot-3", &class);
    await_running(&driver, &req).await;
    s.admin.reclaim(&live_id(&s, "spot-3").await).await.unwrap();
    // The answer of the first create lost: the same request again (its insert replays).
    driver.create_machine(&ctx(), create(&s, "spot-3", &class)).await.unwrap();
    assert_eq!(s.calls().await.of("instances.start"), 1);
    await_running(&driver, &req).await;
}

#[tokio::test]
async fn a_deleted_spot_vm_is_plain_not_found_and_an_on_demand_vm_is_not_reclaimed() {
    let (s, driver) = start().await;
    let class = spot_class(&s, "DELETE", None);
    driver.create_machine(&ctx(), create(&s, "spot-4", &class)).await.unwrap();
    let req = machine_ref(&s, "spot-4", &class);
    await_running(&driver, &req).await;
    let shown = s.admin.reclaim(&live_id(&s, "spot-4").await).await.unwrap();
    assert!(shown.starts_with("deleted"), "{shown}");
    let err = driver.get_machine_status(&ctx(), req.clone()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err:?}");
    assert_ne!(err.reason(), SPOT_RECLAIMED, "a deleted instance shows nothing more: {err:?}");
    assert!(driver.delete_machine(&ctx(), req).await.unwrap().already_gone);

    // An on-demand VM: the reclaim is refused (409) and its status is as before.
    driver.create_machine(&ctx(), s.create_request("standard-1")).await.unwrap();
    let standard = s.machine_ref("standard-1");
    await_running(&driver, &standard).await;
    let refused = s.admin.reclaim(&live_id(&s, "standard-1").await).await.unwrap_err();
    assert!(refused.contains("409"), "{refused}");
    let status = driver.get_machine_status(&ctx(), standard).await.unwrap();
    assert_eq!(status.vm_state, "RUNNING");
}

#[tokio::test]
async fn another_clusters_reclaimed_vm_is_never_reported_restarted_or_deleted_as_ours() {
    let (s, driver) = start().await;
    let other_tags: &[&str] = &["shoot--x--other", "kubernetes-io-cluster-shoot--x--other", "kubernetes-io-role-node"];
    let other = spot_class(&s, "STOP", Some(other_tags));
    let mut theirs = create(&s, "spot-5", &other);
    theirs.machine.uid = "uid-other".into();
    driver.create_machine(&ctx(), theirs).await.unwrap();
    let mut their_ref = machine_ref(&s, "spot-5", &other);
    their_ref.machine.uid = "uid-other".into();
    await_running(&driver, &their_ref).await;
    s.admin.reclaim(&live_id(&s, "spot-5").await).await.unwrap();

    let mine = spot_class(&s, "STOP", None);
    let err = driver.get_machine_status(&ctx(), machine_ref(&s, "spot-5", &mine)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_ne!(err.reason(), SPOT_RECLAIMED, "a foreign VM is not ours, reclaimed or not: {err:?}");
    let err = driver.create_machine(&ctx(), create(&s, "spot-5", &mine)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists, "{err:?}");
    assert_eq!(s.calls().await.of("instances.start"), 0, "a foreign VM is never started");
    assert!(driver.delete_machine(&ctx(), machine_ref(&s, "spot-5", &mine)).await.unwrap().already_gone);
    assert_eq!(live_id(&s, "spot-5").await.len(), 19, "left untouched");
}

#[tokio::test]
async fn a_start_still_running_at_the_deadline_is_unavailable_never_ok() {
    let (s, driver) = start().await;
    let class = spot_class(&s, "STOP", None);
    let first = driver.create_machine(&ctx(), create(&s, "spot-6", &class)).await.unwrap();
    let req = machine_ref(&s, "spot-6", &class);
    await_running(&driver, &req).await;
    s.admin.reclaim(&live_id(&s, "spot-6").await).await.unwrap();
    // Starts take 30 s now; the create has 3 s.
    s.admin("timing", json!({"boot_ms": 100, "stop_ms": 100, "operation_ms": 30_000})).await;
    let mut again = create(&s, "spot-6", &class);
    again.machine.provider_id = Some(first.provider_id.clone());
    let short = CallContext::with_timeout("CreateMachine", Duration::from_secs(3));
    let err = driver.create_machine(&short, again.clone()).await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::Unavailable, "SPOT_VM_STARTING"), "{err:?}");
    // The VM boots: no longer reclaimed; the repeated create adopts it without another start.
    let status = driver.get_machine_status(&ctx(), req).await.unwrap();
    assert_eq!(status.vm_state, "PROVISIONING");
    let adopted = driver.create_machine(&ctx(), again).await.unwrap();
    assert_eq!(adopted.provider_id, first.provider_id);
    assert_eq!(s.calls().await.of("instances.start"), 1);
}
