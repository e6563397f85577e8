//! "Cannot place it here": a machine type the zone does not offer (GCE
//! refuses the insert at once: 400 "does not exist in zone") and a zone
//! that cannot host the machine now (the insert's operation fails with
//! `ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS`) are RESOURCE_EXHAUSTED, so
//! that MCM's autoscaler backs off the pool and tries another zone.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use machine_driver_api::{CallContext, Driver, ErrorKind};
use serde_json::json;
use support::FakeCloud;

fn ctx() -> CallContext {
    CallContext::with_timeout("CreateMachine", Duration::from_secs(20))
}

#[tokio::test]
async fn a_machine_type_not_offered_in_the_zone_is_resource_exhausted() {
    let s = FakeCloud::start().await;
    let driver = s.driver(0.0, 1).await;
    s.admin("faults", json!({"operation": "create", "kind": "placement", "times": 1})).await;
    let err = driver.create_machine(&ctx(), s.create_request("place-1")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("does not exist in zone 'europe-west1-b'"), "{}", err.message());
    assert!(s.inventory().await.iter().all(|i| !i.live), "nothing was made");
}

#[tokio::test]
async fn a_zone_that_cannot_place_the_machine_now_is_resource_exhausted() {
    let s = FakeCloud::start().await;
    let driver = s.driver(0.0, 1).await;
    s.admin("timing", json!({"boot_ms": 400, "stop_ms": 50})).await;
    s.admin("faults", json!({"operation": "create", "kind": "placement", "times": 1, "phase": "after"})).await;
    let err = driver.create_machine(&ctx(), s.create_request("place-2")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err:?}");
    assert_eq!(err.reason(), "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS");
    assert!(err.message().contains("n1-standard-2 VM instance is currently unavailable"), "{}", err.message());
    assert!(s.inventory().await.iter().all(|i| !i.live), "the instance vanished with the operation");
}
