//! Failed creates leave nothing behind, and their retries succeed.

#![allow(clippy::unwrap_used)]

mod support;

use fake_cloud_support::Fault;
use machine_driver_api::{Driver, ErrorKind};
use serde_json::json;
use support::{FakeCloud, ctx};

#[tokio::test]
async fn an_allocation_failure_is_reported_and_the_retry_leaves_nothing_then_succeeds() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    cloud.admin("/azure/vm-failures", json!({"code": "AllocationFailed", "times": 1})).await;
    // ARM accepts the VM (and makes its NIC): CreateMachine answers OK at once.
    let created = driver.create_machine(&ctx("create", 30), cloud.create_request("f-1")).await.unwrap();
    let mut req = cloud.machine_ref("f-1");
    req.machine.provider_id = Some(created.provider_id);
    let started = std::time::Instant::now();
    let err = loop {
        match driver.get_machine_status(&ctx("status", 10), req.clone()).await {
            Err(e) => break e,
            Ok(_) => {
                assert!(started.elapsed().as_secs() < 10, "the VM never failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err:?}");
    assert_eq!(err.reason(), "AllocationFailed");
    // The retry finds the failed VM, deletes it (its NIC and disks with it) and answers the failure.
    let retry = driver.create_machine(&ctx("create", 30), cloud.create_request("f-1")).await.unwrap_err();
    assert_eq!(retry.kind(), ErrorKind::ResourceExhausted, "{retry:?}");
    let started = std::time::Instant::now();
    while !cloud.live_resources("f-1").await.is_empty() {
        assert!(started.elapsed().as_secs() < 10, "left behind: {:?}", cloud.live_resources("f-1").await);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The next attempt starts clean and succeeds.
    let created = driver.create_machine(&ctx("create", 30), cloud.create_request("f-1")).await.unwrap();
    assert_eq!(created.provider_id, "azure:///westeurope/f-1");
}

#[tokio::test]
async fn a_failed_vm_is_reported_by_status_and_removed_by_the_next_create() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    cloud.admin("/azure/vm-failures", json!({"code": "ZonalAllocationFailed", "times": 1})).await;
    // A deadline too short to see the operation end: create answers OK.
    let created = driver.create_machine(&ctx("create", 2), cloud.create_request("f-2")).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let mut req = cloud.machine_ref("f-2");
    req.machine.provider_id = Some(created.provider_id);
    let err = driver.get_machine_status(&ctx("status", 10), req).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err:?}");
    let retry = driver.create_machine(&ctx("create", 30), cloud.create_request("f-2")).await.unwrap_err();
    assert_eq!(retry.reason(), "ZonalAllocationFailed");
    let started = std::time::Instant::now();
    while !cloud.live_resources("f-2").await.is_empty() {
        assert!(started.elapsed().as_secs() < 10, "left behind: {:?}", cloud.live_resources("f-2").await);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_refused_vm_put_makes_no_nic_and_the_retry_succeeds() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    cloud
        .admin
        .add_fault(Fault {
            operation: "virtualMachines.createOrUpdate",
            kind: "capacity",
            times: Some(1),
            phase: "before",
        })
        .await
        .unwrap();
    let err = driver.create_machine(&ctx("create", 30), cloud.create_request("r-1")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err:?}");
    // The NIC is made by the VM PUT: a refused PUT leaves nothing (no reserved NIC either).
    assert!(cloud.live_resources("r-1").await.is_empty(), "{:?}", cloud.live_resources("r-1").await);
    let created = driver.create_machine(&ctx("create", 30), cloud.create_request("r-1")).await.unwrap();
    assert_eq!(created.provider_id, "azure:///westeurope/r-1");
    let mut live = cloud.live_resources("r-1").await;
    live.sort();
    assert_eq!(live, vec!["r-1", "r-1-containerd-0-data-disk", "r-1-nic", "r-1-os-disk"]);

    // Delete removes the VM, and the NIC and disk go with it.
    let mut req = cloud.machine_ref("r-1");
    req.machine.provider_id = Some(created.provider_id);
    driver.delete_machine(&ctx("delete", 10), req.clone()).await.unwrap();
    let started = std::time::Instant::now();
    while !cloud.live_resources("r-1").await.is_empty() {
        assert!(started.elapsed().as_secs() < 10, "left behind: {:?}", cloud.live_resources("r-1").await);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_throttled_create_leaves_nothing_and_status_answers_the_address_of_the_retry() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    cloud
        .admin
        .add_fault(Fault { operation: "create", kind: "throttle", times: Some(2), phase: "before" })
        .await
        .unwrap();
    let err = driver.create_machine(&ctx("create", 30), cloud.create_request("t-1")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err:?}");
    assert!(cloud.live_resources("t-1").await.is_empty());
    let created = driver.create_machine(&ctx("create", 30), cloud.create_request("t-1")).await.unwrap();
    let mut req = cloud.machine_ref("t-1");
    req.machine.provider_id = Some(created.provider_id);
    let status = driver.get_machine_status(&ctx("status", 10), req).await.unwrap();
    assert!(status.addresses.iter().any(|a| a.address.starts_with("10.250.")), "{:?}", status.addresses);
}
