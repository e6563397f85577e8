//! A spot instance ECS reclaims, against fake-ECS: ECS stops it and locks it
//! for release (`OperationLocks` `LockReason: Recycling`) until it releases it
//! some minutes later. GetMachineStatus answers SPOT_RECLAIMED from its one
//! `DescribeInstances`; CreateMachine answers UNAVAILABLE naming the instance
//! while it waits for release (never OK for it, never a second instance) and
//! launches anew once it is released; DeleteMachine removes it; ListMachines
//! keeps listing it while it exists.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use machine_driver_api::{CreateMachine, Driver, ErrorKind, MachineClass, MachineRef, SPOT_RECLAIMED};
use serde_json::json;
use support::{FakeCloud, ctx};

/// The example class as a spot class without the protection hour (ECS can reclaim it at once).
fn spot_class(cloud: &FakeCloud) -> MachineClass {
    cloud.class_with(|v| {
        v["spotStrategy"] = "SpotAsPriceGo".into();
        v["spotDuration"] = 0.into();
    })
}

/// The instance id of a providerID.
fn instance_id(provider_id: &str) -> String {
    provider_id.strip_prefix("eu-central-1.").unwrap().to_string()
}

/// The status request of machine `name` with `provider_id` and `class`.
fn status_request(cloud: &FakeCloud, name: &str, provider_id: Option<&str>, class: &MachineClass) -> MachineRef {
    let mut req = cloud.machine_ref(name);
    req.machine.provider_id = provider_id.map(str::to_string);
    req.class = class.clone();
    req
}

/// Waits until the fake holds no live instance at all.
async fn wait_nothing_live(cloud: &FakeCloud) {
    let started = Instant::now();
    while cloud.inventory().await.instances.iter().any(|i| i.live) {
        assert!(started.elapsed() < Duration::from_secs(20), "{:?}", cloud.inventory().await.instances);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_reclaimed_spot_instance_is_spot_reclaimed_until_deleted() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    let class = spot_class(&cloud);
    let created = driver
        .create_machine(&ctx("create", 30), CreateMachine { class: class.clone(), ..cloud.create_request("m-spot") })
        .await
        .unwrap();
    // A spot class's create reads the answered instance (a token replay could answer a reclaimed one).
    assert_eq!(cloud.calls().await.breakdown(), "DescribeInstances×1, RunInstances×1");
    let id = instance_id(&created.provider_id);
    cloud.wait_running(&id).await;
    let by_pid = status_request(&cloud, "m-spot", Some(&created.provider_id), &class);
    let running = driver.get_machine_status(&ctx("status", 10), by_pid.clone()).await.unwrap();
    assert_eq!(running.vm_state, "running", "a spot instance that runs is answered as before");

    let shown = cloud.admin.reclaim(&id).await.unwrap();
    assert!(shown.contains("Recycling"), "{shown}");
    cloud.admin.reset_calls().await.unwrap();
    let err = driver.get_machine_status(&ctx("status", 10), by_pid.clone()).await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::NotFound, SPOT_RECLAIMED), "{err}");
    assert!(err.message().contains(&created.provider_id), "{err}");
    assert!(err.message().contains("Recycling") && err.message().contains("Stopped"), "{err}");
    assert_eq!(cloud.calls().await.breakdown(), "DescribeInstances×1", "no call beyond the status read");
    let by_name = status_request(&cloud, "m-spot", None, &class);
    let err = driver.get_machine_status(&ctx("status", 10), by_name).await.unwrap_err();
    assert_eq!(err.reason(), SPOT_RECLAIMED, "by name too: {err}");

    // Still there (until ECS releases it): listed, for MCM's orphan collection.
    let listed = driver.list_machines(&ctx("list", 10), cloud.list_request()).await.unwrap();
    assert_eq!(listed, vec![(created.provider_id.clone(), "m-spot".to_string())]);

    // CreateMachine (with the providerID, as MCM sends it after NOT_FOUND; and without, after a
    // lost answer): UNAVAILABLE naming the reclaimed instance, nothing launched.
    cloud.admin.reset_calls().await.unwrap();
    let after_status =
        CreateMachine { class: class.clone(), machine: by_pid.machine.clone(), ..cloud.create_request("m-spot") };
    let lost_answer = CreateMachine { class: class.clone(), ..cloud.create_request("m-spot") };
    for create in [after_status, lost_answer] {
        let err = driver.create_machine(&ctx("create", 30), create).await.unwrap_err();
        assert_eq!((err.kind(), err.reason()), (ErrorKind::Unavailable, "SPOT_INSTANCE_PENDING_RELEASE"), "{err}");
        assert!(err.message().contains(&created.provider_id), "{err}");
        assert!(err.retry_after().is_some(), "{err}");
    }
    assert_eq!(cloud.inventory().await.instances.len(), 1, "no second instance");
    let calls = cloud.calls().await;
    assert_eq!(calls.calls.get("RunInstances").copied(), Some(1), "only the token replay: {}", calls.breakdown());

    // DeleteMachine removes it; then status is the plain NOT_FOUND.
    let deleted = driver.delete_machine(&ctx("delete", 10), by_pid.clone()).await.unwrap();
    assert!(!deleted.already_gone);
    wait_nothing_live(&cloud).await;
    let inventory = cloud.inventory().await;
    assert!(inventory.instances.iter().all(|i| !i.live && i.state == "Deleted"), "{:?}", inventory.instances);
    assert!(inventory.dependents.iter().all(|d| !d.live), "its disks and ENI went with it: {:?}", inventory.dependents);
    let err = driver.get_machine_status(&ctx("status", 10), by_pid).await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::NotFound, "NOT_FOUND"), "{err}");
}

#[tokio::test]
async fn once_ecs_released_the_reclaimed_instance_create_launches_a_new_one() {
    let cloud = FakeCloud::start().await;
    cloud.admin("/ecs/reclaim-release", json!({"ms": 300})).await;
    let driver = cloud.driver();
    let class = spot_class(&cloud);
    let created = driver
        .create_machine(&ctx("create", 30), CreateMachine { class: class.clone(), ..cloud.create_request("m-spot") })
        .await
        .unwrap();
    let id = instance_id(&created.provider_id);
    cloud.admin.reclaim(&id).await.unwrap();
    wait_nothing_live(&cloud).await;
    let by_pid = status_request(&cloud, "m-spot", Some(&created.provider_id), &class);
    let err = driver.get_machine_status(&ctx("status", 10), by_pid.clone()).await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::NotFound, "NOT_FOUND"), "released: {err}");

    let create =
        || CreateMachine { class: class.clone(), machine: by_pid.machine.clone(), ..cloud.create_request("m-spot") };
    let relaunched = driver.create_machine(&ctx("create", 30), create()).await.unwrap();
    assert_ne!(relaunched.provider_id, created.provider_id);
    let new_id = instance_id(&relaunched.provider_id);
    assert_eq!(cloud.live_named("m-spot").await, vec![new_id.clone()]);
    // The relaunch repeated (its answer lost) answers the same new instance.
    assert_eq!(driver.create_machine(&ctx("create", 30), create()).await.unwrap().provider_id, relaunched.provider_id);
    assert_eq!(cloud.live_named("m-spot").await, vec![new_id]);
}

#[tokio::test]
async fn an_on_demand_instance_is_not_reclaimed_and_its_status_is_unaffected() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    let created = driver.create_machine(&ctx("create", 30), cloud.create_request("m-plain")).await.unwrap();
    assert_eq!(cloud.calls().await.breakdown(), "RunInstances×1", "an on-demand create reads nothing");
    let id = instance_id(&created.provider_id);
    cloud.wait_running(&id).await;
    let err = cloud.admin.reclaim(&id).await.unwrap_err();
    assert!(err.contains("409"), "{err}");
    let req = status_request(&cloud, "m-plain", Some(&created.provider_id), &cloud.class);
    let status = driver.get_machine_status(&ctx("status", 10), req).await.unwrap();
    assert_eq!(status.vm_state, "running");
    assert!(cloud.alive(&id).await);
}
