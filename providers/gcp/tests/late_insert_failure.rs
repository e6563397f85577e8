//! An insert operation that fails after instances.insert answered (a zone
//! stockout, a quota reached while the VM is being created): CreateMachine
//! waits for the operation within its deadline and answers the failure; when
//! the deadline comes first, the status polls that follow answer it, never
//! NOT_FOUND for a providerID the controller already stored.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use machine_driver_api::{CallContext, Driver, ErrorKind};
use serde_json::json;
use support::FakeCloud;

/// The fake reports the stockout on the operation after half the boot time.
async fn stockout_after(s: &FakeCloud, boot_ms: u64) {
    s.admin("timing", json!({"boot_ms": boot_ms, "stop_ms": 50})).await;
    s.admin("faults", json!({"operation": "create", "kind": "capacity", "times": 1, "phase": "after"})).await;
}

#[tokio::test]
async fn create_waits_for_the_operation_and_answers_its_failure() {
    let s = FakeCloud::start().await;
    let driver = s.driver(0.0, 1).await;
    // Reported after 6 s: longer than the 5 s the driver used to wait.
    stockout_after(&s, 12_000).await;
    let ctx = CallContext::with_timeout("CreateMachine", Duration::from_secs(20));
    let err = driver.create_machine(&ctx, s.create_request("late-1")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err:?}");
}

#[tokio::test]
async fn a_failure_after_the_deadline_reaches_the_next_status_polls() {
    let s = FakeCloud::start().await;
    let driver = s.driver(0.0, 1).await;
    stockout_after(&s, 3_000).await;
    let ctx = CallContext::with_timeout("CreateMachine", Duration::from_millis(1_200));
    let created = driver.create_machine(&ctx, s.create_request("late-2")).await.unwrap();

    let mut machine = s.machine_ref("late-2");
    machine.machine.provider_id = Some(created.provider_id);
    let status_ctx = || CallContext::with_timeout("GetMachineStatus", Duration::from_secs(5));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let failure = loop {
        match driver.get_machine_status(&status_ctx(), machine.clone()).await {
            Ok(_provisioning_or_not_visible) => {
                assert!(tokio::time::Instant::now() < deadline, "the operation's failure never surfaced");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => break e,
        }
    };
    assert_eq!(failure.kind(), ErrorKind::ResourceExhausted, "never NOT_FOUND: {failure:?}");
    // Kept: later polls answer the same without reading the operation again.
    s.admin("calls/reset", json!({})).await;
    let again = driver.get_machine_status(&status_ctx(), machine).await.unwrap_err();
    assert_eq!(again.kind(), ErrorKind::ResourceExhausted);
    let calls = s.calls().await;
    assert_eq!(calls.of("zoneOperations.get"), 0, "{calls:?}");
}
