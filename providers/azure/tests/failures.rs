//! Failed creates leave nothing behind, and a retry within Azure's NIC
//! reservation window succeeds.

#![allow(clippy::unwrap_used)]

mod support;

use fake_cloud_support::Fault;
use machine_driver_api::{Driver, ErrorKind};
use serde_json::json;
use support::{FakeCloud, ctx};

#[tokio::test]
async fn an_allocation_failure_after_the_nic_was_made_leaves_nothing() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    cloud.admin("/azure/vm-failures", json!({"code": "AllocationFailed", "times": 1})).await;
    let err = driver.create_machine(&ctx("create", 30), cloud.create_request("f-1")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err:?}");
    assert_eq!(err.reason(), "AllocationFailed");
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
async fn a_retry_within_the_nic_reservation_succeeds_and_delete_cleans_up() {
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
    // Azure keeps the NIC reserved: it could not be deleted.
    assert_eq!(cloud.live_resources("r-1").await, vec!["r-1-nic"]);

    let created = driver.create_machine(&ctx("create", 30), cloud.create_request("r-1")).await.unwrap();
    assert_eq!(created.provider_id, "azure:///westeurope/r-1");
    let live = cloud.live_resources("r-1-nic").await;
    assert!(live.contains(&"r-1-nic-1".to_string()), "{live:?}");

    // The orphan collector sees the reserved NIC's machine; delete removes the VM, and,
    // once the reservation ends, the leftover NIC.
    let listed = driver.list_machines(&ctx("list", 10), cloud.list_request()).await.unwrap();
    assert!(listed.iter().any(|(_, name)| name == "r-1"), "{listed:?}");
    let mut req = cloud.machine_ref("r-1");
    req.machine.provider_id = Some(created.provider_id);
    driver.delete_machine(&ctx("delete", 10), req.clone()).await.unwrap();
    cloud.admin("/azure/nic-reservation", json!({"ms": 0})).await;
    let started = std::time::Instant::now();
    loop {
        let _ = driver.delete_machine(&ctx("delete", 10), req.clone()).await;
        if cloud.live_resources("r-1").await.is_empty() {
            break;
        }
        assert!(started.elapsed().as_secs() < 10, "left behind: {:?}", cloud.live_resources("r-1").await);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_throttled_create_keeps_its_nic_and_the_retry_answers_its_address() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    cloud
        .admin
        .add_fault(Fault { operation: "create", kind: "throttle", times: Some(2), phase: "before" })
        .await
        .unwrap();
    let err = driver.create_machine(&ctx("create", 30), cloud.create_request("t-1")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err:?}");
    assert_eq!(cloud.live_resources("t-1").await, vec!["t-1-nic"]);
    let created = driver.create_machine(&ctx("create", 30), cloud.create_request("t-1")).await.unwrap();
    assert!(created.addresses.iter().any(|a| a.address.starts_with("10.250.")), "{:?}", created.addresses);
}
