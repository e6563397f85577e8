//! The driver's lifecycle against the fake OpenStack, with the calls each step
//! costs, and the create's idempotency without a client token.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use machine_driver_api::{Driver, ErrorKind};
use serde_json::{Value, json};
use support::{FakeCloud, ctx};

fn count(calls: &fake_cloud_support::CallCounts, op: &str) -> u64 {
    calls.calls.get(op).copied().unwrap_or(0)
}

fn pairs(port: &Value) -> Vec<String> {
    port["allowed_address_pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["ip_address"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn create_status_initialize_list_delete_with_their_call_counts() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();

    let created = driver.create_machine(&ctx("create", 30), cloud.create_request("m-1")).await.unwrap();
    let id = created.provider_id.strip_prefix("openstack:///RegionOne/").unwrap().to_string();
    assert_eq!(created.node_name, "m-1");
    let calls = cloud.calls().await;
    // The first create of a process also looks up the flavor and the security group.
    for op in ["servers.list", "ports.list", "flavors.list", "security_groups.list", "ports.create", "servers.create"] {
        assert_eq!(count(&calls, op), 1, "{op}: {}", calls.breakdown());
    }
    assert_eq!(calls.total, 6, "{}", calls.breakdown());

    // The port: named after the machine, tagged, both pod CIDRs (dual stack) from the start.
    let ports = cloud.live_dependents("m-1").await;
    let port = ports.iter().find(|d| d["kind"] == "port").unwrap();
    assert_eq!(pairs(port), vec!["100.96.0.0/11", "fd00:100:96::/48"]);
    let server = cloud.inventory().await.instances.into_iter().find(|i| i.id == id).unwrap();
    assert_eq!(server.tags.get("mcm.gardener.cloud-machine-uid").map(String::as_str), Some("uid-m-1"));
    assert!(server.extra["user_data"].is_string(), "{:?}", server.extra);

    // A second create of the machine (lost answer, restart) adopts the server: no second server or port.
    cloud.admin.reset_calls().await.unwrap();
    let restarted = cloud.driver();
    let again = restarted.create_machine(&ctx("create", 30), cloud.create_request("m-1")).await.unwrap();
    assert_eq!(again.provider_id, created.provider_id);
    assert_eq!(cloud.live_named("m-1").await, vec![id.clone()]);
    assert_eq!(cloud.live_dependents("m-1").await.iter().filter(|d| d["kind"] == "port").count(), 1);
    assert_eq!(cloud.calls().await.total, 2, "{}", cloud.calls().await.breakdown());

    // Right after its own create the driver knows the ports are complete: no call.
    cloud.admin.reset_calls().await.unwrap();
    let mut req = cloud.machine_ref("m-1");
    req.machine.provider_id = Some(created.provider_id.clone());
    let init = driver.initialize_machine(&ctx("init", 10), req.clone()).await.unwrap();
    assert!(init.applied_steps.is_empty());
    assert_eq!(cloud.calls().await.total, 0);

    let status = driver.get_machine_status(&ctx("status", 10), req.clone()).await.unwrap();
    assert!(status.addresses.iter().any(|a| a.address.starts_with("10.250.")), "{:?}", status.addresses);
    assert!(status.pending_steps.is_empty());
    assert_eq!(cloud.calls().await.breakdown(), "servers.get×1");

    let listed = driver.list_machines(&ctx("list", 10), cloud.list_request()).await.unwrap();
    assert_eq!(listed, vec![(created.provider_id.clone(), "m-1".to_string())]);

    cloud.admin.reset_calls().await.unwrap();
    let deleted = driver.delete_machine(&ctx("delete", 10), req.clone()).await.unwrap();
    assert!(!deleted.already_gone);
    let calls = cloud.calls().await;
    assert_eq!(calls.breakdown(), "ports.delete×1, ports.list×1, servers.delete×1");
    assert!(cloud.live_dependents("m-1").await.iter().all(|d| d["kind"] != "port"));
    let gone = std::time::Instant::now();
    loop {
        match driver.get_machine_status(&ctx("status", 10), req.clone()).await {
            Err(e) if e.kind() == ErrorKind::NotFound => break,
            other => assert!(gone.elapsed().as_secs() < 10, "{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(driver.delete_machine(&ctx("delete", 10), req).await.unwrap().already_gone);
    assert!(cloud.live_dependents("m-1").await.is_empty(), "{:?}", cloud.live_dependents("m-1").await);
}

#[tokio::test]
async fn a_refused_create_leaves_no_port_and_a_retryable_one_keeps_it_for_the_retry() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    cloud.admin("/faults", json!({"operation": "create", "kind": "capacity", "times": 1})).await;
    let err = driver.create_machine(&ctx("create", 30), cloud.create_request("m-2")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err:?}");
    assert!(cloud.live_named("m-2").await.is_empty());
    assert!(cloud.live_dependents("m-2").await.is_empty(), "{:?}", cloud.live_dependents("m-2").await);

    // Throttled twice (the kit resends once): UNAVAILABLE, the port stays and is reused.
    cloud.admin("/faults", json!({"operation": "create", "kind": "throttle", "times": 2})).await;
    let err = driver.create_machine(&ctx("create", 30), cloud.create_request("m-2")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err:?}");
    let kept: Vec<String> =
        cloud.live_dependents("m-2").await.iter().map(|d| d["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(kept.len(), 1);
    driver.create_machine(&ctx("create", 30), cloud.create_request("m-2")).await.unwrap();
    let now: Vec<String> = cloud
        .live_dependents("m-2")
        .await
        .iter()
        .filter(|d| d["kind"] == "port")
        .map(|d| d["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(now, kept, "the retry reuses the port");
}

#[tokio::test]
async fn a_lost_create_answer_is_adopted_through_the_port_while_nova_lists_nothing() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    cloud.admin("/consistency", json!({"invisible_ms": 5000})).await;
    cloud
        .admin("/faults", json!({"operation": "servers.create", "kind": "internal", "times": 1, "phase": "after"}))
        .await;
    let err = driver.create_machine(&ctx("create", 30), cloud.create_request("m-3")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err:?}");
    let created = cloud.driver().create_machine(&ctx("create", 30), cloud.create_request("m-3")).await.unwrap();
    let live = cloud.live_named("m-3").await;
    assert_eq!(live.len(), 1, "exactly one server: {live:?}");
    assert!(created.provider_id.ends_with(&live[0]));
}

#[tokio::test]
async fn concurrent_creates_of_one_machine_make_one_server() {
    let cloud = FakeCloud::start().await;
    let driver = std::sync::Arc::new(cloud.driver());
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let driver = std::sync::Arc::clone(&driver);
            let req = cloud.create_request("m-4");
            tokio::spawn(async move { driver.create_machine(&ctx("create", 30), req).await.unwrap().provider_id })
        })
        .collect();
    let mut ids = Vec::new();
    for t in tasks {
        ids.push(t.await.unwrap());
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(cloud.live_named("m-4").await.len(), 1);
}

#[tokio::test]
async fn concurrent_creates_share_their_lookups_and_ports_and_a_bad_class_fails_only_its_machine() {
    let cloud = FakeCloud::start().await;
    let driver = std::sync::Arc::new(cloud.driver());
    // Warm the process's caches (flavor, security groups) with one machine.
    driver.create_machine(&ctx("create", 30), cloud.create_request("w-0")).await.unwrap();
    cloud.admin.reset_calls().await.unwrap();
    let bad_network = "00000000-0000-4000-8000-000000000000";
    let tasks: Vec<_> = (1..=12)
        .map(|i| {
            let driver = std::sync::Arc::clone(&driver);
            let mut req = cloud.create_request(&format!("w-{i}"));
            if i == 7 {
                req.class = cloud.class_with(json!({"networkID": bad_network}));
            }
            tokio::spawn(async move { (i, driver.create_machine(&ctx("create", 30), req).await) })
        })
        .collect();
    for t in tasks {
        let (i, answer) = t.await.unwrap();
        let name = format!("w-{i}");
        if i == 7 {
            let err = answer.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err:?}");
            assert_eq!(err.field(), Some("providerSpec.spec.networkID"), "{err:?}");
            assert!(cloud.live_named(&name).await.is_empty());
            assert!(cloud.live_dependents(&name).await.is_empty());
        } else {
            answer.unwrap();
            assert_eq!(cloud.live_named(&name).await.len(), 1, "{name}");
            let ports = cloud.live_dependents(&name).await;
            assert_eq!(ports.iter().filter(|d| d["kind"] == "port").count(), 1, "{name}: {ports:?}");
        }
    }
    let calls = cloud.calls().await;
    assert_eq!(count(&calls, "servers.create"), 11, "{}", calls.breakdown());
    // The lookups are shared: far fewer than one per machine.
    assert!(count(&calls, "servers.list") <= 4, "{}", calls.breakdown());
    assert_eq!(count(&calls, "servers.list"), count(&calls, "ports.list"), "{}", calls.breakdown());
    // The ports go out in bulk; the bulk holding the bad network is refused as
    // a whole and resent port by port, so at most 12 + 4 port creates.
    assert!(count(&calls, "ports.create") <= 16, "{}", calls.breakdown());
}

#[tokio::test]
async fn an_error_server_is_reported_with_its_fault() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    cloud.admin("/openstack/server-failures", json!({"times": 1})).await;
    let created = driver.create_machine(&ctx("create", 30), cloud.create_request("m-5")).await.unwrap();
    let mut req = cloud.machine_ref("m-5");
    req.machine.provider_id = Some(created.provider_id);
    let started = std::time::Instant::now();
    let err = loop {
        match driver.get_machine_status(&ctx("status", 10), req.clone()).await {
            Err(e) => break e,
            Ok(s) => assert!(started.elapsed().as_secs() < 10, "{s:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("No valid host was found"), "{}", err.message());
    driver.delete_machine(&ctx("delete", 10), req).await.unwrap();
    assert!(cloud.live_dependents("m-5").await.iter().all(|d| d["kind"] != "port"));
}

#[tokio::test]
async fn one_token_serves_every_call_and_a_revoked_one_is_replaced_once() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    let issued = || async {
        let body: Value = reqwest_get(&format!("{}/_admin/openstack/tokens", cloud.fake.url())).await;
        body["issued"].as_u64().unwrap()
    };
    for _ in 0..3 {
        let _ = driver.get_machine_status(&ctx("status", 10), cloud.machine_ref("absent")).await;
    }
    assert_eq!(issued().await, 1);
    cloud.admin("/openstack/revoke-tokens", json!({})).await;
    let e = driver.get_machine_status(&ctx("status", 10), cloud.machine_ref("absent")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e:?}");
    assert_eq!(issued().await, 2);

    let mut bad = cloud.machine_ref("absent");
    bad.secret.insert("password", "wrong");
    let e = driver.get_machine_status(&ctx("status", 10), bad).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unauthenticated, "{e:?}");
    assert!(!e.message().contains("wrong"));
}

async fn reqwest_get(url: &str) -> Value {
    reqwest::get(url).await.unwrap().error_for_status().unwrap().json().await.unwrap()
}

#[tokio::test]
async fn a_server_made_by_the_go_provider_gets_every_pod_cidr_from_initialize() {
    let cloud = FakeCloud::start().await;
    // As the Go provider makes it: no uid metadata, a port Nova makes on the network.
    let made = cloud
        .os(
            reqwest::Method::POST,
            "/compute/v2.1/servers",
            Some(json!({"server": {
                "name": "m-go", "flavorRef": "4", "imageRef": fake_openstack::PUBLIC_IMAGE,
                "networks": [{"uuid": fake_openstack::NETWORK_ID}], "availability_zone": "nova",
                "metadata": {"kubernetes.io-cluster-shoot--dev--conf": "1", "kubernetes.io-role-node": "1"}}})),
        )
        .await;
    let id = made["server"]["id"].as_str().unwrap().to_string();
    // The Go provider's bug: one PUT per CIDR, so only the last survives.
    let ports = cloud.os(reqwest::Method::GET, &format!("/network/v2.0/ports?device_id={id}"), None).await;
    let port_id = ports["ports"][0]["id"].as_str().unwrap().to_string();
    cloud
        .os(
            reqwest::Method::PUT,
            &format!("/network/v2.0/ports/{port_id}"),
            Some(json!({"port": {"allowed_address_pairs": [{"ip_address": "fd00:100:96::/48"}]}})),
        )
        .await;

    let driver = cloud.driver();
    let mut req = cloud.machine_ref("m-go");
    req.machine.provider_id = Some(format!("openstack:///RegionOne/{id}"));
    let status = driver.get_machine_status(&ctx("status", 10), req.clone()).await.unwrap();
    assert_eq!(status.pending_steps, vec!["allowed-address-pairs"]);
    let init = driver.initialize_machine(&ctx("init", 10), req.clone()).await.unwrap();
    assert_eq!(init.applied_steps, vec!["allowed-address-pairs"]);
    let port = cloud.os(reqwest::Method::GET, &format!("/network/v2.0/ports/{port_id}"), None).await;
    assert_eq!(pairs(&port["port"]), vec!["fd00:100:96::/48", "100.96.0.0/11"], "the pair it had is kept");

    // Initialized: a repeat writes nothing, and status reads no ports any more.
    assert!(driver.initialize_machine(&ctx("init", 10), req.clone()).await.unwrap().applied_steps.is_empty());
    cloud.admin.reset_calls().await.unwrap();
    let status = driver.get_machine_status(&ctx("status", 10), req).await.unwrap();
    assert!(status.pending_steps.is_empty());
    assert_eq!(cloud.calls().await.breakdown(), "servers.get×1");
}
