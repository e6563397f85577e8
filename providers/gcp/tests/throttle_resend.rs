//! A request Compute throttles is sent once more after the limiter resynced:
//! one throttle never reaches the caller, a second one in a row does, and no
//! other failure is resent.

#![cfg(feature = "embedded-fake")]
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use machine_driver_api::{
    CallContext, CreateMachine, CreatedMachine, Driver, DriverError, ErrorKind, Machine, MachineClass, SecretData,
};
use machine_driver_gcp::{GcpDriver, GcpOptions};
use serde_json::{Value, json};

struct Setup {
    fake: fake_gce::FakeHandle,
    http: reqwest::Client,
    driver: GcpDriver,
    class: MachineClass,
    secret: SecretData,
}

impl Setup {
    async fn start() -> Self {
        // A real client-side limiter, so that the resend goes through penalize().
        Self::start_limited(50.0, 5).await
    }

    async fn start_limited(rate_limit: f64, burst: u32) -> Self {
        let fake = fake_gce::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let driver =
            GcpDriver::new(GcpOptions { cloud_endpoint: Some(fake.url()), rate_limit, burst, embedded_fake: None })
                .await
                .unwrap();
        let secret_json: BTreeMap<String, String> =
            serde_json::from_str(include_str!("../examples/secret.json")).unwrap();
        let class = MachineClass {
            name: "class".into(),
            provider: "GCP".into(),
            provider_spec: include_bytes!("../examples/machine-class.json").to_vec(),
            node_template: None,
        };
        let setup =
            Self { fake, http: reqwest::Client::new(), driver, class, secret: secret_json.into_iter().collect() };
        setup.admin("timing", json!({"boot_ms": 20, "stop_ms": 20})).await;
        setup
    }

    async fn admin(&self, path: &str, body: Value) -> Value {
        let resp = self.http.post(format!("{}/{path}", self.fake.admin_url())).json(&body).send().await.unwrap();
        assert!(resp.status().is_success(), "admin {path}");
        resp.json().await.unwrap()
    }

    async fn admin_get(&self, path: &str) -> Value {
        self.http.get(format!("{}/{path}", self.fake.admin_url())).send().await.unwrap().json().await.unwrap()
    }

    /// `instances.insert` requests the fake received since the last reset.
    async fn inserts(&self) -> u64 {
        self.admin_get("calls").await["calls"]["instances.insert"].as_u64().unwrap_or(0)
    }

    /// Names of the live instances the fake holds.
    async fn live_instances(&self) -> Vec<String> {
        let inventory = self.admin_get("inventory").await;
        inventory["instances"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["live"].as_bool() == Some(true))
            .map(|i| i["name"].as_str().unwrap().to_string())
            .collect()
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
        let req = CreateMachine {
            machine: Machine { name: name.into(), uid: format!("uid-{name}"), ..Default::default() },
            class: self.class.clone(),
            secret: self.secret.clone(),
            user_data: Default::default(),
        };
        self.driver.create_machine(&CallContext::with_timeout("test", deadline), req).await
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
