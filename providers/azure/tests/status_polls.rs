//! Concurrent GetMachineStatus polls of many machines in one resource group:
//! one generic resource list and at most one Resource Graph query per batch,
//! the graph's lag, and existence taken from ARM only.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use machine_driver_api::{Driver, ErrorKind, MachineRef, MachineStatus};
use machine_driver_azure::AzureDriver;
use serde_json::json;
use support::{FakeCloud, ctx};

/// A poll request for `name` as MCM sends it for an old machine: with its providerID, created an hour ago.
fn old_machine(cloud: &FakeCloud, name: &str) -> MachineRef {
    let mut req = cloud.machine_ref(name);
    req.machine.provider_id = Some(format!("azure:///westeurope/{name}"));
    req.machine.created_at = Some(SystemTime::now() - Duration::from_secs(3600));
    req
}

/// Creates machines `names` with `driver` and waits until ARM provisioned them.
async fn create_running(cloud: &FakeCloud, driver: &AzureDriver, names: &[String]) {
    for n in names {
        driver.create_machine(&ctx("create", 30), cloud.create_request(n)).await.unwrap();
    }
    // boot_ms is 100 (below): every VM is Succeeded by then.
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// Every machine's address as read alone (`virtualMachines.get` + `networkInterfaces.get`) by a fresh driver.
async fn reference_addresses(cloud: &FakeCloud, names: &[String]) -> BTreeMap<String, Vec<String>> {
    let reference = cloud.driver();
    let mut out = BTreeMap::new();
    for n in names {
        let status = reference.get_machine_status(&ctx("status", 10), old_machine(cloud, n)).await.unwrap();
        assert_eq!(status.vm_state, "running", "{n}");
        assert!(!status.addresses.is_empty(), "{n}");
        out.insert(n.clone(), status.addresses.iter().map(|a| a.address.clone()).collect());
    }
    out
}

/// Polls every machine of `names` at once through `driver`.
async fn poll_all(
    cloud: &FakeCloud,
    driver: &Arc<AzureDriver>,
    names: &[String],
) -> Vec<(String, Result<MachineStatus, machine_driver_api::DriverError>)> {
    let polls = names.iter().map(|n| {
        let driver = Arc::clone(driver);
        let req = old_machine(cloud, n);
        let n = n.clone();
        async move { (n, driver.get_machine_status(&ctx("status", 10), req).await) }
    });
    futures::future::join_all(polls).await
}

fn addresses(status: &MachineStatus) -> Vec<String> {
    status.addresses.iter().map(|a| a.address.clone()).collect()
}

async fn start() -> FakeCloud {
    let cloud = FakeCloud::start().await;
    cloud.admin("/timing", json!({"boot_ms": 100, "stop_ms": 100})).await;
    cloud
}

#[tokio::test]
async fn many_concurrent_polls_answer_state_and_addresses_with_few_calls() {
    let cloud = start().await;
    cloud.admin("/azure/graph-lag", json!({"millis": 0})).await;
    // Compute would page 50 VMs a call: a page size of 5 shows that the batch does not use it.
    cloud.admin("/azure/page-size", json!({"size": 5})).await;
    let names: Vec<String> = (0..40).map(|i| format!("fleet-{i:02}")).collect();
    create_running(&cloud, &cloud.driver(), &names).await;
    let expected = reference_addresses(&cloud, &names).await;

    // A restarted driver: nothing remembered. A first wave of 10 polls.
    let driver = Arc::new(cloud.driver());
    cloud.admin.reset_calls().await.unwrap();
    for (n, answer) in poll_all(&cloud, &driver, &names[..10]).await {
        let status = answer.unwrap();
        assert_eq!((status.vm_state.as_str(), addresses(&status)), ("running", expected[&n].clone()), "{n}");
    }
    let calls = cloud.calls().await;
    // The first poll goes alone (virtualMachines.get, its NIC with networkInterfaces.get); the 9 others
    // share one list (1000 a page, whatever Compute's page size) and one graph query.
    assert_eq!(calls.of("resources.listByResourceGroup"), 1, "{}", calls.breakdown());
    assert_eq!(calls.of("resourceGraph.resources"), 1, "{}", calls.breakdown());
    assert_eq!(calls.of("virtualMachines.list") + calls.of("networkInterfaces.list"), 0, "{}", calls.breakdown());
    assert!(calls.of("virtualMachines.get") <= 1 && calls.total <= 4, "{}", calls.breakdown());

    let first_list = std::time::Instant::now();

    // All 40 at once: the graph query of the first wave remembered every listed VM's address,
    // so no graph query and no NIC read now; within LIST_REUSE the first wave's list (which
    // shows all 40) answers them: no list either (the first poll still goes alone).
    let all_at_once = |expected_lists: u64, round: &'static str| {
        let (cloud, driver, names, expected) = (&cloud, &driver, &names, &expected);
        async move {
            cloud.admin.reset_calls().await.unwrap();
            for (n, answer) in poll_all(cloud, driver, names).await {
                let status = answer.unwrap();
                assert_eq!((status.vm_state.as_str(), addresses(&status)), ("running", expected[&n].clone()), "{n}");
            }
            let calls = cloud.calls().await;
            assert_eq!(calls.of("resourceGraph.resources"), 0, "{round}: {}", calls.breakdown());
            let nic_reads = calls.of("networkInterfaces.get") + calls.of("networkInterfaces.list");
            assert_eq!(nic_reads, 0, "{round}: {}", calls.breakdown());
            assert_eq!(calls.of("resources.listByResourceGroup"), expected_lists, "{round}: {}", calls.breakdown());
            assert!(calls.total <= 1 + expected_lists, "{round}: {}", calls.breakdown());
        }
    };
    all_at_once(0, "within LIST_REUSE of the first list").await;

    // A VM that list does not show (made since) makes the batch list the group afresh.
    let newer = "fleet-40".to_string();
    driver.create_machine(&ctx("create", 30), cloud.create_request(&newer)).await.unwrap();
    let mut with_newer = names.clone();
    with_newer.push(newer.clone());
    cloud.admin.reset_calls().await.unwrap();
    for (n, answer) in poll_all(&cloud, &driver, &with_newer).await {
        assert!(answer.is_ok(), "{n}: {answer:?}");
    }
    let calls = cloud.calls().await;
    assert_eq!(calls.of("resources.listByResourceGroup"), 1, "a VM the last list lacks: {}", calls.breakdown());
    assert!(first_list.elapsed() < machine_driver_azure::LIST_REUSE, "the test machine is too slow for the window");

    // Once LIST_REUSE has passed since the last list, the next batch lists the group again.
    tokio::time::sleep(machine_driver_azure::LIST_REUSE + Duration::from_millis(100)).await;
    all_at_once(1, "after LIST_REUSE").await;
}

#[tokio::test]
async fn a_lagging_graph_leaves_the_address_empty_until_a_later_poll() {
    let cloud = start().await;
    cloud.admin("/azure/graph-lag", json!({"millis": 2000})).await;
    let names: Vec<String> = (0..5).map(|i| format!("lag-{i}")).collect();
    let started = std::time::Instant::now();
    create_running(&cloud, &cloud.driver(), &names).await;
    let driver = Arc::new(cloud.driver());
    let first_query = std::time::Instant::now();

    for round in 0..2 {
        cloud.admin.reset_calls().await.unwrap();
        let answers = poll_all(&cloud, &driver, &names).await;
        let mut empty = 0;
        for (n, answer) in answers {
            let status = answer.unwrap();
            assert_eq!(status.vm_state, "running", "{n}: the graph's lag does not hide the VM");
            empty += usize::from(status.addresses.is_empty());
        }
        // Only a poll that went alone (its NIC read by name) has an address.
        assert!(empty >= names.len() - 1, "round {round}: {empty} without address");
        let calls = cloud.calls().await;
        // Nothing remembered: a query in the first round; the second is within GRAPH_REQUERY of it.
        let expected = u64::from(round == 0);
        assert_eq!(calls.of("resourceGraph.resources"), expected, "round {round}: {}", calls.breakdown());
    }
    assert!(started.elapsed() < Duration::from_millis(2000), "the test machine is too slow for this lag");

    // Past the lag (2 s) and GRAPH_REQUERY since the first query.
    let wait = machine_driver_azure::GRAPH_REQUERY.saturating_sub(first_query.elapsed());
    tokio::time::sleep(wait + Duration::from_millis(200)).await;
    let expected = reference_addresses(&cloud, &names).await;
    cloud.admin.reset_calls().await.unwrap();
    for (n, answer) in poll_all(&cloud, &driver, &names).await {
        assert_eq!(addresses(&answer.unwrap()), expected[&n], "{n}: filled once the graph shows it");
    }
    assert!(cloud.calls().await.of("resourceGraph.resources") <= 1);
    cloud.admin.reset_calls().await.unwrap();
    poll_all(&cloud, &driver, &names).await;
    assert_eq!(cloud.calls().await.of("resourceGraph.resources"), 0, "remembered");
}

#[tokio::test]
async fn a_vm_absent_from_the_list_is_not_found_for_an_old_machine_whatever_the_graph_shows() {
    let cloud = start().await;
    cloud.admin("/azure/graph-lag", json!({"millis": 400})).await;
    let creator = cloud.driver();
    let mut names: Vec<String> = (0..4).map(|i| format!("live-{i}")).collect();
    create_running(&cloud, &creator, &names).await;
    create_running(&cloud, &creator, &["ghost".to_string()]).await;
    tokio::time::sleep(Duration::from_millis(300)).await; // the graph shows every NIC now
    creator.delete_machine(&ctx("delete", 30), old_machine(&cloud, "ghost")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await; // gone from ARM; its NIC still in the graph
    // Last, so that it is read in the batch (the first poll goes alone), with a name never created.
    names.push("ghost".into());
    names.push("never".into());

    let driver = Arc::new(cloud.driver());
    cloud.admin.reset_calls().await.unwrap();
    for (n, answer) in poll_all(&cloud, &driver, &names).await {
        match n.as_str() {
            "ghost" | "never" => {
                let err = answer.unwrap_err();
                assert_eq!(err.kind(), ErrorKind::NotFound, "{n}: {err:?}");
            }
            _ => {
                let status = answer.unwrap();
                assert_eq!(status.vm_state, "running", "{n}");
                assert!(!status.addresses.is_empty(), "{n}");
            }
        }
    }
    let calls = cloud.calls().await;
    assert_eq!(calls.of("resources.listByResourceGroup"), 1, "{}", calls.breakdown());
}

#[tokio::test]
async fn a_throttled_graph_is_resent_once_and_leaves_only_the_addresses_empty() {
    let cloud = start().await;
    cloud.admin("/azure/graph-lag", json!({"millis": 0})).await;
    cloud.admin("/azure/graph-quota", json!({"queries": 0, "windowMillis": 60000})).await;
    let names: Vec<String> = (0..4).map(|i| format!("quota-{i}")).collect();
    create_running(&cloud, &cloud.driver(), &names).await;
    let driver = Arc::new(cloud.driver());
    cloud.admin.reset_calls().await.unwrap();
    let mut empty = 0;
    for (n, answer) in poll_all(&cloud, &driver, &names).await {
        let status = answer.unwrap();
        assert_eq!(status.vm_state, "running", "{n}: a refused graph query does not fail the poll");
        empty += usize::from(status.addresses.is_empty());
    }
    assert!(empty >= names.len() - 1, "{empty} without address");
    let calls = cloud.calls().await;
    // 429 with Retry-After / x-ms-user-quota-resets-after: resent once, like every throttled ARM call.
    assert_eq!(calls.of("resourceGraph.resources"), 2, "{}", calls.breakdown());

    // Quota back: the next poll after GRAPH_REQUERY fills the addresses.
    cloud.admin("/azure/graph-quota", json!({"queries": 15, "windowMillis": 5000})).await;
    tokio::time::sleep(machine_driver_azure::GRAPH_REQUERY).await;
    for (n, answer) in poll_all(&cloud, &driver, &names).await {
        assert!(!answer.unwrap().addresses.is_empty(), "{n}");
    }
}

#[tokio::test]
async fn a_list_older_than_this_process_s_delete_does_not_answer_for_the_deleted_vm() {
    let cloud = start().await;
    cloud.admin("/azure/graph-lag", json!({"millis": 0})).await;
    let names: Vec<String> = (0..4).map(|i| format!("gone-{i}")).collect();
    let driver = Arc::new(cloud.driver());
    create_running(&cloud, &driver, &names).await;
    // A batch lists the group (the first poll goes alone, the others together).
    for (n, answer) in poll_all(&cloud, &driver, &names).await {
        assert_eq!(answer.unwrap().vm_state, "running", "{n}");
    }
    let victim = names[3].clone();
    driver.delete_machine(&ctx("delete", 30), old_machine(&cloud, &victim)).await.unwrap();
    // Within LIST_REUSE of that list, which still shows the VM as it was.
    for (n, answer) in poll_all(&cloud, &driver, &names).await {
        match answer {
            Ok(status) if n == victim => assert_ne!(status.vm_state, "running", "{n}: answered from the older list"),
            Ok(status) => assert_eq!(status.vm_state, "running", "{n}"),
            Err(e) => assert!(n == victim && e.kind() == ErrorKind::NotFound, "{n}: {e:?}"),
        }
    }
}

#[tokio::test]
async fn vms_still_creating_take_no_address_from_the_graph() {
    let cloud = FakeCloud::start().await;
    cloud.admin("/timing", json!({"boot_ms": 60000, "stop_ms": 100})).await;
    cloud.admin("/azure/graph-lag", json!({"millis": 0})).await;
    let names: Vec<String> = (0..4).map(|i| format!("young-{i}")).collect();
    let creator = cloud.driver();
    for n in &names {
        creator.create_machine(&ctx("create", 30), cloud.create_request(n)).await.unwrap();
    }
    let driver = Arc::new(cloud.driver());
    // The graph (no lag here) shows every NIC, read alongside the batch's fresh list;
    // twice, so that the second round's answers come from what the first remembered.
    for round in 0..2 {
        for (n, answer) in poll_all(&cloud, &driver, &names).await {
            let status = answer.unwrap();
            assert_eq!(status.vm_state, "creating", "round {round}, {n}");
            if n != names[0] {
                // Read in the batch (the first poll goes alone and reads its NIC by name).
                assert!(status.addresses.is_empty(), "round {round}, {n}: a graph address for a VM not yet Succeeded");
            }
        }
    }
}
