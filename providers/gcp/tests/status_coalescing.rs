//! GetMachineStatus through the driver against `fake-gce`: a lone poll is one
//! `instances.get`; concurrent polls share `instances.list` calls and still
//! get each machine's own answer.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use machine_driver_api::{CallContext, Driver, DriverError, ErrorKind, MachineStatus};
use machine_driver_gcp::GcpDriver;
use serde_json::json;
use support::FakeCloud;

const FLEET: usize = 50;

struct Setup {
    cloud: FakeCloud,
    driver: Arc<GcpDriver>,
}

impl Deref for Setup {
    type Target = FakeCloud;
    fn deref(&self) -> &FakeCloud {
        &self.cloud
    }
}

impl Setup {
    async fn start() -> Self {
        let cloud = FakeCloud::start().await;
        let driver = Arc::new(cloud.driver(0.0, 0).await);
        // Fast boot; deleted instances stay STOPPING for the whole test.
        cloud.admin("timing", json!({"boot_ms": 20, "stop_ms": 600_000})).await;
        Self { cloud, driver }
    }

    /// Instance API calls since the last reset: (instances.get, instances.list).
    async fn reads(&self) -> (u64, u64) {
        let calls = self.calls().await;
        (calls.of("instances.get"), calls.of("instances.list"))
    }

    async fn create(&self, name: &str) {
        self.driver.create_machine(&ctx(), self.create_request(name)).await.unwrap();
    }

    async fn status(&self, name: &str) -> Result<MachineStatus, DriverError> {
        self.driver.get_machine_status(&ctx(), self.machine_ref(name)).await
    }

    /// Polls every name at once, each in its own task.
    async fn poll_concurrently(&self, names: &[String]) -> Vec<(String, Result<MachineStatus, DriverError>)> {
        let tasks: Vec<_> = names
            .iter()
            .map(|name| {
                let driver = Arc::clone(&self.driver);
                let req = self.machine_ref(name);
                let name = name.clone();
                tokio::spawn(async move { (name, driver.get_machine_status(&ctx(), req).await) })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    }
}

fn ctx() -> CallContext {
    CallContext::with_timeout("test", Duration::from_secs(20))
}

fn fleet_name(i: usize) -> String {
    format!("shoot--demo--local-worker-z1-{i:03}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_poll_is_one_instances_get() {
    let s = Setup::start().await;
    s.create("lone-vm").await;
    s.admin("calls/reset", json!({})).await;
    let status = s.status("lone-vm").await.unwrap();
    assert_eq!(status.provider_id, "gce:///demo-project/europe-west1-b/lone-vm");
    assert_eq!(s.reads().await, (1, 0), "one instances.get, no instances.list");

    s.admin("calls/reset", json!({})).await;
    let err = s.status("never-created").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err:?}");
    assert_eq!(s.reads().await, (1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_polls_share_list_calls_and_get_their_own_answers() {
    let s = Setup::start().await;
    let names: Vec<String> = (0..FLEET).map(fleet_name).collect();
    for name in &names {
        s.create(name).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A few machines in another state: deleting (STOPPING for the rest of the test).
    for name in names.iter().step_by(10) {
        s.driver.delete_machine(&ctx(), s.machine_ref(name)).await.unwrap();
    }
    // One machine inserted by this driver but not visible to reads yet.
    s.admin("consistency", json!({"invisible_ms": 600_000})).await;
    s.create("shoot--demo--local-worker-z1-late").await;

    // The expected answers, one lone instances.get each.
    let mut expected = BTreeMap::new();
    for name in &names {
        expected.insert(name.clone(), s.status(name).await.unwrap());
    }
    let stopping = expected.values().filter(|st| st.vm_state == "STOPPING").count();
    assert_eq!(stopping, FLEET / 10);
    assert!(expected.values().filter(|st| st.vm_state == "RUNNING").count() == FLEET - stopping);

    let absent: Vec<String> = (0..3).map(|i| format!("shoot--demo--local-worker-z1-gone-{i}")).collect();
    let mut polled = names.clone();
    polled.extend(absent.iter().cloned());
    polled.push("shoot--demo--local-worker-z1-late".into());

    s.admin("calls/reset", json!({})).await;
    let answers = s.poll_concurrently(&polled).await;
    let (gets, lists) = s.reads().await;

    for (name, answer) in &answers {
        if let Some(want) = expected.get(name) {
            assert_eq!(answer.as_ref().unwrap(), want, "{name}");
        } else if name.ends_with("-late") {
            let status = answer.as_ref().expect("a just-created instance answers OK");
            assert_eq!(status.pending_steps, vec![machine_driver_api::AWAIT_VISIBILITY.to_string()], "{name}");
            assert_eq!(status.vm_state, "pending", "{name}");
        } else {
            let err = answer.as_ref().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::NotFound, "{name}: {err:?}");
        }
    }
    assert!(lists >= 1, "concurrent polls were not batched ({gets} gets)");
    assert!(gets + lists <= 10, "{} polls cost {gets} instances.get + {lists} instances.list", polled.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_fails_its_polls_with_the_classified_error() {
    let s = Setup::start().await;
    let names: Vec<String> = (0..20).map(fleet_name).collect();
    for name in &names {
        s.create(name).await;
    }
    s.admin("faults", json!({"operation": "instances.list", "kind": "unavailable"})).await;
    s.admin("calls/reset", json!({})).await;
    let answers = s.poll_concurrently(&names).await;
    let (_, lists) = s.reads().await;
    assert!(lists >= 1, "no batch went out as instances.list");
    let mut failed = 0;
    for (name, answer) in &answers {
        match answer {
            Ok(st) => assert_eq!(st.node_name, *name),
            Err(e) => {
                failed += 1;
                assert_eq!(e.kind(), ErrorKind::Unavailable, "{name}: {e:?}");
                assert!(e.retry_after().is_some(), "{name}: {e:?}");
                assert!(e.message().contains("instances.list"), "{name}: {}", e.message());
            }
        }
    }
    assert!(failed >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_name_filter_falls_back_to_one_get_per_name() {
    let s = Setup::start().await;
    let names: Vec<String> = (0..20).map(fleet_name).collect();
    for name in &names {
        s.create(name).await;
    }
    // Compute answers the batched list with 400 `invalid` (the filter form refused).
    s.admin("faults", json!({"operation": "instances.list", "kind": "invalid", "times": 1})).await;
    s.admin("calls/reset", json!({})).await;
    for (name, answer) in s.poll_concurrently(&names).await {
        assert_eq!(answer.unwrap().node_name, name, "every poll answered, none with INVALID_ARGUMENT");
    }
    let (gets, lists) = s.reads().await;
    assert_eq!(lists, 1, "the refused list is not tried again");
    assert!(gets >= names.len() as u64 - 1, "{gets} gets");

    // Later batches go straight to one get per name.
    s.admin("calls/reset", json!({})).await;
    for (name, answer) in s.poll_concurrently(&names).await {
        assert_eq!(answer.unwrap().node_name, name);
    }
    assert_eq!(s.reads().await, (names.len() as u64, 0));
}
