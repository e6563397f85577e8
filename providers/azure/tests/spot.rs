//! Spot VMs Azure evicts (issue 28), against fake-arm's reclaim: a `Deallocate`
//! eviction keeps the VM deallocated and GetMachineStatus answers SPOT_RECLAIMED
//! from the one GET a Spot class's poll makes (with the instance view); a
//! `Delete` eviction leaves nothing (plain NOT_FOUND); DeleteMachine removes what
//! is left; CreateMachine never adopts the deallocated VM; on-demand VMs and other
//! clusters' reclaimed VMs are answered as before.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use machine_driver_api::{Driver, DriverError, ErrorKind, MachineClass, MachineRef, SPOT_RECLAIMED};
use machine_driver_azure::AzureDriver;
use serde_json::{Value, json};
use support::{FakeCloud, class_with, ctx};

async fn start() -> FakeCloud {
    let cloud = FakeCloud::start().await;
    cloud.admin("/timing", json!({"boot_ms": 100, "stop_ms": 100})).await;
    cloud
}

/// The example class as a Spot class with `policy` (`None`: Azure's default, Deallocate).
fn spot_class(class: &MachineClass, policy: Option<&str>) -> MachineClass {
    class_with(class, |spec| {
        spec["properties"]["priority"] = json!("Spot");
        spec["properties"]["billingProfile"] = json!({"maxPrice": -1});
        if let Some(policy) = policy {
            spec["properties"]["evictionPolicy"] = json!(policy);
        }
    })
}

fn request(cloud: &FakeCloud, class: &MachineClass, name: &str) -> MachineRef {
    MachineRef { class: class.clone(), ..cloud.machine_ref(name) }
}

/// Creates `name` with `class` and polls until it runs.
async fn create_running(cloud: &FakeCloud, driver: &AzureDriver, class: &MachineClass, name: &str) {
    let mut create = cloud.create_request(name);
    create.class = class.clone();
    driver.create_machine(&ctx("create", 30), create).await.unwrap();
    let started = std::time::Instant::now();
    loop {
        match driver.get_machine_status(&ctx("status", 10), request(cloud, class, name)).await {
            Ok(s) if s.vm_state == "running" => return,
            _ => {}
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{name} never runs");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The ARM id of the live VM `name` (the inventory's id).
async fn vm_id(cloud: &FakeCloud, name: &str) -> String {
    cloud.inventory().await.instances.into_iter().find(|i| i.name == name && i.live).unwrap().id
}

/// Waits until nothing named after `name` is left.
async fn wait_nothing_left(cloud: &FakeCloud, name: &str) {
    let started = std::time::Instant::now();
    while !cloud.live_resources(name).await.is_empty() {
        assert!(started.elapsed().as_secs() < 10, "left behind: {:?}", cloud.live_resources(name).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn assert_reclaimed(err: &DriverError, name: &str) {
    assert_eq!((err.kind(), err.reason()), (ErrorKind::NotFound, SPOT_RECLAIMED), "{err:?}");
    assert!(err.message().contains(&format!("azure:///westeurope/{name}")), "{}", err.message());
    assert!(err.message().contains("PowerState/deallocated"), "{}", err.message());
    assert!(err.message().contains("evictionPolicy Deallocate"), "{}", err.message());
}

#[tokio::test]
async fn a_deallocated_spot_vm_is_reclaimed_listed_and_deleted_with_its_nic_and_disks() {
    let cloud = start().await;
    let driver = cloud.driver();
    let class = spot_class(&cloud.class, Some("Deallocate"));
    create_running(&cloud, &driver, &class, "sp-1").await;
    // A running Spot VM's poll: the one GET (with the instance view), as a lone poll of any class.
    cloud.admin.reset_calls().await.unwrap();
    let running = driver.get_machine_status(&ctx("status", 10), request(&cloud, &class, "sp-1")).await.unwrap();
    assert_eq!(running.vm_state, "running");
    assert!(!running.addresses.is_empty());
    assert_eq!(cloud.calls().await.breakdown(), "virtualMachines.get×1");

    let shown = cloud.admin.reclaim(&vm_id(&cloud, "sp-1").await).await.unwrap();
    assert!(shown.contains("PowerState/deallocated"), "{shown}");
    cloud.admin.reset_calls().await.unwrap();
    let err = driver.get_machine_status(&ctx("status", 10), request(&cloud, &class, "sp-1")).await.unwrap_err();
    assert_reclaimed(&err, "sp-1");
    assert_eq!(cloud.calls().await.breakdown(), "virtualMachines.get×1", "no extra call");
    // A driver that never saw the machine (a restart) answers the same.
    let restarted = cloud.driver();
    let err = restarted.get_machine_status(&ctx("status", 10), request(&cloud, &class, "sp-1")).await.unwrap_err();
    assert_reclaimed(&err, "sp-1");

    // Still there: listed (so that the orphan collection can remove it), deleted as any machine.
    let listed = driver
        .list_machines(
            &ctx("list", 10),
            machine_driver_api::ListMachines { class: class.clone(), ..cloud.list_request() },
        )
        .await
        .unwrap();
    assert_eq!(listed, vec![("azure:///westeurope/sp-1".to_string(), "sp-1".to_string())]);
    let mut live = cloud.live_resources("sp-1").await;
    live.sort();
    assert_eq!(live, vec!["sp-1", "sp-1-containerd-0-data-disk", "sp-1-nic", "sp-1-os-disk"], "the eviction kept them");
    let deleted = driver.delete_machine(&ctx("delete", 10), request(&cloud, &class, "sp-1")).await.unwrap();
    assert!(!deleted.already_gone);
    wait_nothing_left(&cloud, "sp-1").await;
    let gone = driver.get_machine_status(&ctx("status", 10), request(&cloud, &class, "sp-1")).await.unwrap_err();
    assert_eq!(gone.kind(), ErrorKind::NotFound);
    assert_ne!(gone.reason(), SPOT_RECLAIMED, "{gone:?}");
}

#[tokio::test]
async fn create_never_adopts_a_reclaimed_vm_it_deletes_it_and_the_retry_makes_a_new_one() {
    let cloud = start().await;
    let driver = cloud.driver();
    // Azure's default eviction policy (none in the class) is Deallocate.
    let class = spot_class(&cloud.class, None);
    create_running(&cloud, &driver, &class, "sp-2").await;
    let first = vm_id(&cloud, "sp-2").await;
    let vm_uid = |inv: &fake_cloud_support::Inventory| {
        inv.instances.iter().find(|i| i.name == "sp-2" && i.live).map(|i| i.extra["vm_id"].clone())
    };
    let old_uid = vm_uid(&cloud.inventory().await).unwrap();
    cloud.admin.reclaim(&first).await.unwrap();

    let mut create = cloud.create_request("sp-2");
    create.class = class.clone();
    cloud.admin.reset_calls().await.unwrap();
    let err = driver.create_machine(&ctx("create", 30), create.clone()).await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::Unavailable, "SPOT_VM_RECLAIMED_DELETING"), "{err:?}");
    assert!(err.message().contains("azure:///westeurope/sp-2") && err.message().contains("PowerState/deallocated"));
    // The create-only PUT (412), the read that finds the VM deallocated, its DELETE.
    assert_eq!(
        cloud.calls().await.breakdown(),
        "virtualMachines.createOrUpdate×1, virtualMachines.delete×1, virtualMachines.get×1"
    );
    wait_nothing_left(&cloud, "sp-2").await;
    // The retry makes a new VM (never a second one beside the first).
    driver.create_machine(&ctx("create", 30), create).await.unwrap();
    let inventory = cloud.inventory().await;
    let live: Vec<_> = inventory.instances.iter().filter(|i| i.name == "sp-2" && i.live).collect();
    assert_eq!(live.len(), 1, "{live:?}");
    assert_ne!(vm_uid(&inventory).unwrap(), old_uid, "a new VM");
}

#[tokio::test]
async fn a_delete_eviction_leaves_nothing_and_is_plain_not_found() {
    let cloud = start().await;
    let driver = cloud.driver();
    let class = spot_class(&cloud.class, Some("Delete"));
    create_running(&cloud, &driver, &class, "sp-3").await;
    let shown = cloud.admin.reclaim(&vm_id(&cloud, "sp-3").await).await.unwrap();
    assert!(shown.contains("evictionPolicy Delete"), "{shown}");
    // The NIC and disks the driver made have deleteOption Delete: gone with the VM.
    assert!(cloud.live_resources("sp-3").await.is_empty(), "{:?}", cloud.live_resources("sp-3").await);
    let mut req = request(&cloud, &class, "sp-3");
    req.machine.provider_id = Some("azure:///westeurope/sp-3".into());
    let err = driver.get_machine_status(&ctx("status", 10), req.clone()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_ne!(err.reason(), SPOT_RECLAIMED, "Azure leaves nothing that says so: {err:?}");
    assert!(driver.delete_machine(&ctx("delete", 10), req).await.unwrap().already_gone);
}

#[tokio::test]
async fn an_on_demand_vm_is_never_reclaimed_and_its_status_is_as_before() {
    let cloud = start().await;
    let driver = cloud.driver();
    create_running(&cloud, &driver, &cloud.class, "od-1").await;
    let before = driver.get_machine_status(&ctx("status", 10), cloud.machine_ref("od-1")).await.unwrap();
    let refused = cloud.admin.reclaim(&vm_id(&cloud, "od-1").await).await.unwrap_err();
    assert!(refused.contains("409"), "{refused}");
    cloud.admin.reset_calls().await.unwrap();
    let after = driver.get_machine_status(&ctx("status", 10), cloud.machine_ref("od-1")).await.unwrap();
    assert_eq!((after.vm_state.as_str(), &after.addresses), ("running", &before.addresses));
    // A regular class's poll is unchanged: the plain GET, no instance view.
    assert_eq!(cloud.calls().await.breakdown(), "virtualMachines.get×1");
}

#[tokio::test]
async fn another_clusters_reclaimed_vm_is_never_reported_as_ours() {
    let cloud = start().await;
    let other = spot_class(&cloud.other_cluster_class(), Some("Deallocate"));
    let theirs = cloud.driver();
    create_running(&cloud, &theirs, &other, "sp-4").await;
    cloud.admin.reclaim(&vm_id(&cloud, "sp-4").await).await.unwrap();
    let ours = spot_class(&cloud.class, Some("Deallocate"));
    let driver = cloud.driver();
    let err = driver.get_machine_status(&ctx("status", 10), request(&cloud, &ours, "sp-4")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_ne!(err.reason(), SPOT_RECLAIMED, "{err:?}");
    assert!(err.message().contains("not this machine's VM"), "{}", err.message());
    // Its own cluster's driver sees the reclaim; our create leaves the VM alone.
    assert_reclaimed(
        &theirs.get_machine_status(&ctx("status", 10), request(&cloud, &other, "sp-4")).await.unwrap_err(),
        "sp-4",
    );
    let mut create = cloud.create_request("sp-4");
    create.class = ours;
    let taken = driver.create_machine(&ctx("create", 30), create).await.unwrap_err();
    assert_eq!(taken.kind(), ErrorKind::AlreadyExists, "{taken:?}");
    assert_eq!(cloud.live_resources("sp-4").await.len(), 4);
}

#[tokio::test]
async fn concurrent_spot_polls_read_each_vm_alone() {
    let cloud = start().await;
    let driver = std::sync::Arc::new(cloud.driver());
    let class = spot_class(&cloud.class, Some("Deallocate"));
    let names: Vec<String> = (0..3).map(|i| format!("spp-{i}")).collect();
    for n in &names {
        create_running(&cloud, &driver, &class, n).await;
    }
    cloud.admin.reclaim(&vm_id(&cloud, "spp-1").await).await.unwrap();
    cloud.admin.reset_calls().await.unwrap();
    let polls = names.iter().map(|n| {
        let driver = std::sync::Arc::clone(&driver);
        let req = request(&cloud, &class, n);
        async move { driver.get_machine_status(&ctx("status", 10), req).await }
    });
    let answers: Vec<_> = futures::future::join_all(polls).await;
    assert_eq!(answers[0].as_ref().unwrap().vm_state, "running");
    assert_reclaimed(answers[1].as_ref().unwrap_err(), "spp-1");
    assert_eq!(answers[2].as_ref().unwrap().vm_state, "running");
    // The generic list carries no power state: one GET each, no list.
    assert_eq!(cloud.calls().await.breakdown(), "virtualMachines.get×3");
}

/// The `spot` entry of the conformance file creates on the fake, and its reclaim shows what it says.
#[tokio::test]
async fn the_conformance_spot_patch_creates_and_its_reclaim_is_shown() {
    let cloud = start().await;
    let file: Value = serde_json::from_str(include_str!("../examples/conformance.json")).unwrap();
    let spot = &file["spot"];
    assert!(spot["source"].as_str().is_some_and(|s| !s.is_empty()));
    let class = class_with(&cloud.class, |spec| merge(spec, &spot["patch"]));
    let driver = cloud.driver();
    create_running(&cloud, &driver, &class, "cf-1").await;
    cloud.admin.reclaim(&vm_id(&cloud, "cf-1").await).await.unwrap();
    let err = driver.get_machine_status(&ctx("status", 10), request(&cloud, &class, "cf-1")).await.unwrap_err();
    assert_eq!(err.reason(), SPOT_RECLAIMED);
    assert!(err.message().contains(spot["shown"].as_str().unwrap()), "{}", err.message());
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

/// A Spot class's one read carries the instance view: a `Failed` Spot VM's failure needs no second GET.
#[tokio::test]
async fn a_failed_spot_vm_is_answered_from_the_one_read() {
    let cloud = start().await;
    cloud.admin("/azure/vm-failures", json!({"code": "AllocationFailed", "times": 1})).await;
    let driver = cloud.driver();
    let class = spot_class(&cloud.class, Some("Deallocate"));
    let mut create = cloud.create_request("spf-1");
    create.class = class.clone();
    driver.create_machine(&ctx("create", 30), create).await.unwrap();
    let started = std::time::Instant::now();
    let err = loop {
        cloud.admin.reset_calls().await.unwrap();
        match driver.get_machine_status(&ctx("status", 10), request(&cloud, &class, "spf-1")).await {
            Err(e) if e.kind() == ErrorKind::ResourceExhausted => break e,
            other => assert!(started.elapsed().as_secs() < 10, "never failed: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(err.message().contains("AllocationFailed"), "{}", err.message());
    assert_eq!(cloud.calls().await.breakdown(), "virtualMachines.get×1");
}
