//! Concurrent creates of one zone share the waits for their insert
//! operations: one `zoneOperations.list` answers many of them, each create
//! still costs one `instances.insert`, and a failure the operation reports
//! later (a stockout) still reaches each create.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use machine_driver_api::{CallContext, CreatedMachine, Driver, DriverError, ErrorKind};
use serde_json::json;
use support::FakeCloud;
use tokio::task::JoinSet;

const CREATES: usize = 12;

/// `CREATES` creates at once; their answers in no particular order.
async fn create_all(s: &FakeCloud, prefix: &str) -> Vec<Result<CreatedMachine, DriverError>> {
    let driver = Arc::new(s.driver(0.0, 1).await);
    let mut set = JoinSet::new();
    for i in 0..CREATES {
        let driver = Arc::clone(&driver);
        let request = s.create_request(&format!("{prefix}-{i}"));
        set.spawn(async move {
            let ctx = CallContext::with_timeout("CreateMachine", Duration::from_secs(20));
            driver.create_machine(&ctx, request).await
        });
    }
    let mut out = Vec::new();
    while let Some(joined) = set.join_next().await {
        out.push(joined.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_share_operation_listings() {
    let s = FakeCloud::start().await;
    // Insert operations are DONE after 500 ms.
    s.admin("timing", json!({"boot_ms": 1000, "stop_ms": 50})).await;
    s.admin("calls/reset", json!({})).await;
    let results = create_all(&s, "shared").await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let calls = s.calls().await;
    assert_eq!(calls.of("instances.insert"), CREATES as u64, "{calls:?}");
    assert!(calls.of("zoneOperations.wait") <= 1, "only a create alone in its zone waits alone: {calls:?}");
    assert!(calls.of("zoneOperations.list") <= 3, "one listing answers many waits: {calls:?}");
    assert_eq!(calls.of("zoneOperations.get"), 0, "{calls:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stockout_reported_later_reaches_every_concurrent_create() {
    let s = FakeCloud::start().await;
    s.admin("timing", json!({"boot_ms": 1000, "stop_ms": 50})).await;
    s.admin("faults", json!({"operation": "create", "kind": "capacity", "times": CREATES, "phase": "after"})).await;
    s.admin("calls/reset", json!({})).await;
    let results = create_all(&s, "stockout").await;
    for r in &results {
        let e = r.as_ref().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ResourceExhausted, "{e:?}");
    }
    let calls = s.calls().await;
    assert!(calls.of("zoneOperations.list") <= 3, "{calls:?}");
}
