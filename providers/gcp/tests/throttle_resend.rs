//! A request Compute throttles is sent once more after the limiter resynced:
//! one throttle never reaches the caller, a second one in a row does, and no
//! other failure is resent.

#![allow(clippy::unwrap_used)]

mod support;

use std::ops::Deref;
use std::time::Duration;

use machine_driver_api::{CallContext, CreatedMachine, Driver, DriverError, ErrorKind};
use machine_driver_gcp::GcpDriver;
use serde_json::json;
use support::FakeCloud;

struct Setup {
    cloud: FakeCloud,
    driver: GcpDriver,
}

impl Deref for Setup {
    type Target = FakeCloud;
    fn deref(&self) -> &FakeCloud {
        &self.cloud
    }
}

impl Setup {
    async fn start() -> Self {
        // A real client-side limiter, so that the resend goes through penalize().
        Self::start_limited(50.0, 5).await
    }

    async fn start_limited(rate_limit: f64, burst: u32) -> Self {
        let cloud = FakeCloud::start().await;
        let driver = cloud.driver(rate_limit, burst).await;
        cloud.admin("timing", json!({"boot_ms": 20, "stop_ms": 20})).await;
        Self { cloud, driver }
    }

    /// `instances.insert` requests the fake received since the last reset.
    async fn inserts(&self) -> u64 {
        self.calls().await.of("instances.insert")
    }

    /// Names of the live instances the fake holds.
    async fn live_instances(&self) -> Vec<String> {
        self.inventory().await.into_iter().filter(|i| i.live).map(|i| i.name).collect()
    }

    /// Injects `times` faults of `kind` into `instances.insert`, zeroes the counters.
    async fn fail_inserts(&self, kind: &str, times: u32) {
        self.admin("faults", json!({"operation": "instances.insert", "kind": kind, "times": times})).await;
        self.admin("calls/reset", json!({})).await;
    }

    async fn create(&self, name: &str) -> Result<CreatedMachine, DriverError> {
        self.create_within(name, Duration::from_secs(20)).await
    }

    async fn create_within(&self, name: &str, deadline: Duration) -> Result<CreatedMachine, DriverError> {
        self.driver.create_machine(&CallContext::with_timeout("test", deadline), self.create_request(name)).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_throttled_insert_is_resent_and_the_machine_is_created() {
    let s = Setup::start().await;
    s.fail_inserts("throttle", 1).await;
    let created = s.create("throttled-once").await.unwrap();
    assert_eq!(created.provider_id, "gce:///demo-project/europe-west1-b/throttled-once");
    assert_eq!(s.inserts().await, 2, "the throttled insert and its resend");
    assert_eq!(s.live_instances().await, vec!["throttled-once".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_throttle_in_a_row_reaches_the_caller() {
    let s = Setup::start().await;
    s.fail_inserts("throttle", 2).await;
    let err = s.create("throttled-twice").await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::Unavailable, "rateLimitExceeded"), "{err:?}");
    assert!(err.retry_after().is_some(), "{err:?}");
    assert_eq!(s.inserts().await, 2, "resent once, not more");
    assert!(s.live_instances().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_failures_are_not_resent() {
    let s = Setup::start().await;
    s.fail_inserts("unavailable", 1).await;
    let err = s.create("backend-error").await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::Unavailable, "backendError"), "{err:?}");
    assert_eq!(s.inserts().await, 1, "a 503 is left to the machine-controller's backoff");
    assert!(s.live_instances().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resend_without_time_left_answers_with_the_throttle() {
    // One request per second: after the throttle, the resend would wait a whole second.
    let s = Setup::start_limited(1.0, 1).await;
    s.fail_inserts("throttle", 1).await;
    let err = s.create_within("no-time-to-resend", Duration::from_millis(300)).await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::Unavailable, "rateLimitExceeded"), "{err:?}");
    assert!(err.retry_after().is_some(), "{err:?}");
    assert_eq!(s.inserts().await, 1, "no time was left for the resend");
}
