//! Concurrent GetMachineStatus polls against the fake OpenStack: a batch
//! larger than one exact-names filter is one listing of the batch's common
//! name prefix, that list answers the next waves for 2 seconds, and what it
//! cannot answer (a machine created since, one this driver deleted since) is
//! read afresh.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use machine_driver_api::{Driver, DriverError, ErrorKind, MachineStatus};
use machine_driver_openstack::OpenStackDriver;
use serde_json::json;
use support::{FakeCloud, ctx};

/// Gardener's names: a long shared prefix, then the machine's own part.
const PREFIX: &str = "shoot--dev--conf-worker-z1-5d9a3";

/// A fake with room for `n` servers that boot at once, and a driver on it.
async fn cloud_for(n: usize) -> (FakeCloud, Arc<OpenStackDriver>) {
    let cloud = FakeCloud::start().await;
    cloud.admin("/openstack/quota", json!({"instances": n + 10})).await;
    cloud.admin("/timing", json!({"boot_ms": 0, "stop_ms": 5000})).await;
    let driver = Arc::new(cloud.driver());
    (cloud, driver)
}

/// The context of a create: for a few machines (made between a list and the
/// polls it is to answer) 900 ms, too short for the create to wait for the
/// scheduler's verdict (it waits at most half its time, and reads first after
/// 0.5 s), so that they are made well within the list's 2 s.
fn create_ctx(few: bool) -> machine_driver_api::CallContext {
    if few {
        machine_driver_api::CallContext::with_timeout("create", Duration::from_millis(900))
    } else {
        ctx("create", 60)
    }
}

/// Creates the machines `names` at once; their providerIDs, in order.
async fn create_all(cloud: &FakeCloud, driver: &Arc<OpenStackDriver>, names: &[String]) -> Vec<String> {
    let few = names.len() <= 10;
    let tasks: Vec<_> = names
        .iter()
        .map(|name| {
            let driver = Arc::clone(driver);
            let req = cloud.create_request(name);
            tokio::spawn(async move { driver.create_machine(&create_ctx(few), req).await.unwrap().provider_id })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// Polls every machine of `machines` (name, providerID) at once; the answers, in order.
async fn wave(
    cloud: &FakeCloud,
    driver: &Arc<OpenStackDriver>,
    machines: &[(String, String)],
) -> Vec<Result<MachineStatus, DriverError>> {
    let tasks: Vec<_> = machines
        .iter()
        .map(|(name, pid)| {
            let driver = Arc::clone(driver);
            let mut req = cloud.machine_ref(name);
            req.machine.provider_id = Some(pid.clone());
            tokio::spawn(async move { driver.get_machine_status(&ctx("status", 30), req).await })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// Every answer is its own machine's, running.
fn assert_running(machines: &[(String, String)], answers: &[Result<MachineStatus, DriverError>]) {
    assert_eq!(machines.len(), answers.len());
    for ((name, pid), answer) in machines.iter().zip(answers) {
        let status = answer.as_ref().unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(&status.provider_id, pid, "{name}");
        assert_eq!(&status.node_name, name);
        assert_eq!(status.vm_state, "running", "{name}");
        assert!(status.addresses.iter().any(|a| a.address.starts_with("10.250.")), "{name}: {:?}", status.addresses);
    }
}

/// Polls `machines` at once on fresh call counters, checks every answer is
/// its own machine's, running, and returns the calls the wave made.
async fn polled_running(
    cloud: &FakeCloud,
    driver: &Arc<OpenStackDriver>,
    machines: &[(String, String)],
) -> fake_cloud_support::CallCounts {
    cloud.admin.reset_calls().await.unwrap();
    assert_running(machines, &wave(cloud, driver, machines).await);
    cloud.calls().await
}

/// Makes `names` and pairs them with their providerIDs.
async fn make(cloud: &FakeCloud, driver: &Arc<OpenStackDriver>, names: Vec<String>) -> Vec<(String, String)> {
    let pids = create_all(cloud, driver, &names).await;
    names.into_iter().zip(pids).collect()
}

#[tokio::test]
async fn a_wave_of_polls_is_one_prefix_list_and_the_next_wave_within_two_seconds_is_none() {
    let (cloud, driver) = cloud_for(130).await;
    let machines = make(&cloud, &driver, (0..120).map(|i| format!("{PREFIX}-{i:03}")).collect()).await;
    // A server of the project outside the prefix is neither listed nor answered.
    let _other = make(&cloud, &driver, vec!["other-cluster-machine".into()]).await;
    // The creates' reads for the scheduler's verdict are status reads too (one
    // prefix list for the 120): past its window, the polls list anew.
    tokio::time::sleep(Duration::from_millis(2100)).await;

    let calls = polled_running(&cloud, &driver, &machines).await;
    // The first poll alone (a GET), the other 119 in one batch: one list of the prefix (one page).
    assert_eq!(calls.of("servers.list"), 1, "{}", calls.breakdown());
    assert!(calls.of("servers.get") <= 1, "{}", calls.breakdown());
    assert_eq!(calls.total, calls.of("servers.list") + calls.of("servers.get"), "{}", calls.breakdown());

    // The next wave within the window: every server is in the list, no call at all (lone polls neither).
    let listed_at = Instant::now();
    cloud.admin.reset_calls().await.unwrap();
    let answers = wave(&cloud, &driver, &machines).await;
    assert_running(&machines, &answers);
    let lone = wave(&cloud, &driver, &machines[7..8]).await;
    assert_running(&machines[7..8], &lone);
    assert!(listed_at.elapsed() < Duration::from_secs(1), "the test was too slow to be within the window");
    assert_eq!(cloud.calls().await.total, 0, "{}", cloud.calls().await.breakdown());

    // After the window, a wave lists again.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let calls = polled_running(&cloud, &driver, &machines).await;
    assert_eq!(calls.of("servers.list"), 1, "{}", calls.breakdown());
    assert!(calls.of("servers.get") <= 1, "{}", calls.breakdown());
}

#[tokio::test]
async fn machines_created_since_the_list_are_read_afresh() {
    let (cloud, driver) = cloud_for(130).await;
    let mut machines = make(&cloud, &driver, (0..100).map(|i| format!("{PREFIX}-{i:03}")).collect()).await;
    let answers = wave(&cloud, &driver, &machines).await;
    assert_running(&machines, &answers);

    // Three machines made after the list: a wave with them lists again (their names, one list);
    // the 100 others come from the list.
    let listed_at = Instant::now();
    let new = make(&cloud, &driver, (100..103).map(|i| format!("{PREFIX}-{i:03}")).collect()).await;
    let both: Vec<_> = machines.iter().chain(&new).cloned().collect();
    let calls = polled_running(&cloud, &driver, &both).await;
    assert!(listed_at.elapsed() < Duration::from_millis(1500), "the test was too slow to be within the window");
    assert_eq!(calls.breakdown(), "servers.list×1", "one list of the three new names");

    // One more machine, polled alone: one GET of it (the list does not show it).
    let listed_at = Instant::now();
    let lone = make(&cloud, &driver, vec![format!("{PREFIX}-999")]).await;
    assert_eq!(polled_running(&cloud, &driver, &lone).await.breakdown(), "servers.get×1");
    // The old ones are still answered from the list.
    machines.truncate(10);
    assert_running(&machines, &wave(&cloud, &driver, &machines).await);
    assert!(listed_at.elapsed() < Duration::from_millis(1500), "the test was too slow to be within the window");
    assert_eq!(cloud.calls().await.breakdown(), "servers.get×1");
}

#[tokio::test]
async fn a_server_this_driver_deleted_after_the_list_is_not_answered_from_it() {
    let (cloud, driver) = cloud_for(70).await;
    let machines = make(&cloud, &driver, (0..60).map(|i| format!("{PREFIX}-{i:03}")).collect()).await;
    assert_running(&machines, &wave(&cloud, &driver, &machines).await);

    let (name, pid) = machines[3].clone();
    let mut req = cloud.machine_ref(&name);
    req.machine.provider_id = Some(pid.clone());
    driver.delete_machine(&ctx("delete", 30), req).await.unwrap();
    cloud.admin.reset_calls().await.unwrap();
    let answers = wave(&cloud, &driver, &machines).await;
    for (i, ((name, _), answer)) in machines.iter().zip(&answers).enumerate() {
        if i == 3 {
            // Read alone: being deleted (the fake takes 5 s), or gone.
            match answer {
                Ok(status) => assert_eq!(status.vm_state, "deleting", "{status:?}"),
                Err(e) => assert_eq!(e.kind(), ErrorKind::NotFound, "{e:?}"),
            }
        } else {
            assert_eq!(answer.as_ref().unwrap().vm_state, "running", "{name}");
        }
    }
    let calls = cloud.calls().await;
    // The deleted one by id; the others from the list (or, had the window passed, one list).
    assert_eq!(calls.of("servers.get"), 1, "{}", calls.breakdown());
    assert!(calls.of("servers.list") <= 1, "{}", calls.breakdown());
}

#[tokio::test]
async fn names_without_a_selective_common_prefix_are_read_in_lists_of_fifty_names() {
    let (cloud, driver) = cloud_for(110).await;
    // Common prefix "m" only (under 8 characters).
    let names = (0..101).map(|i| format!("m{}-{i:03}", ["a", "b", "c"][i % 3])).collect();
    let machines = make(&cloud, &driver, names).await;

    let calls = polled_running(&cloud, &driver, &machines).await;
    // The first poll alone, the other 100 in lists of at most 50 names: at least two lists.
    assert!((2..=3).contains(&calls.of("servers.list")), "{}", calls.breakdown());
    assert!(calls.of("servers.get") <= 2, "{}", calls.breakdown());

    // Exact-names lists are not kept: the next wave reads again.
    let calls = polled_running(&cloud, &driver, &machines).await;
    assert!(calls.of("servers.list") >= 2, "{}", calls.breakdown());
}
