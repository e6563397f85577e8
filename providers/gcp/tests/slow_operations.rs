//! Insert operations as long as GCE's (tens of seconds; the fake's
//! `operation_ms`): the driver's calls while it waits stay bounded, also when
//! `zoneOperations.wait` answers a running operation at once (GCE's wait is
//! best-effort: it "might return after zero seconds").

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use machine_driver_api::{CallContext, Driver};
use serde_json::json;
use support::FakeCloud;
use tokio::task::JoinSet;

/// Operations take 20 s.
const OPERATION_MS: u64 = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_create_does_not_poll_a_slow_operation_in_a_tight_loop() {
    let s = FakeCloud::start().await;
    s.admin("timing", json!({"boot_ms": 200, "stop_ms": 50, "operation_ms": OPERATION_MS})).await;
    s.admin("gce/wait", json!({"limit_ms": 0})).await;
    s.admin("calls/reset", json!({})).await;
    let driver = s.driver(0.0, 1).await;
    let started = Instant::now();
    let ctx = CallContext::with_timeout("CreateMachine", Duration::from_secs(40));
    driver.create_machine(&ctx, s.create_request("slow-lone")).await.unwrap();
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(OPERATION_MS), "answered before the operation was done: {took:?}");
    let calls = s.calls().await;
    assert_eq!(calls.of("instances.insert"), 1, "{calls:?}");
    // Waits at 0, 1, 3, 7, 12, 17, 22 s at most (spacing 1 s doubling to 5 s).
    assert!(calls.of("zoneOperations.wait") <= 8, "a wait answered at once must not be repeated at once: {calls:?}");
    assert!(calls.total <= 9, "{calls:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_of_slow_operations_list_at_a_slowing_pace() {
    const CREATES: usize = 12;
    let s = FakeCloud::start().await;
    s.admin("timing", json!({"boot_ms": 200, "stop_ms": 50, "operation_ms": OPERATION_MS})).await;
    s.admin("calls/reset", json!({})).await;
    let driver = Arc::new(s.driver(0.0, 1).await);
    let mut set = JoinSet::new();
    let started = Instant::now();
    for i in 0..CREATES {
        let driver = Arc::clone(&driver);
        let request = s.create_request(&format!("slow-{i}"));
        set.spawn(async move {
            let ctx = CallContext::with_timeout("CreateMachine", Duration::from_secs(40));
            driver.create_machine(&ctx, request).await
        });
    }
    while let Some(joined) = set.join_next().await {
        joined.unwrap().unwrap();
    }
    assert!(started.elapsed() >= Duration::from_millis(OPERATION_MS));
    let calls = s.calls().await;
    assert_eq!(calls.of("instances.insert"), CREATES as u64, "{calls:?}");
    // One listing at 0.25 s, then every 0.75 s doubling to 5 s: about 7 for
    // 20 s (one every 750 ms would be 27); the first create's own waits until
    // it joins the poller (the fake answers a wait after 2 s).
    assert!(calls.of("zoneOperations.list") <= 9, "{calls:?}");
    assert!(calls.of("zoneOperations.wait") <= 2, "{calls:?}");
    assert_eq!(calls.of("zoneOperations.get"), 0, "{calls:?}");
}
