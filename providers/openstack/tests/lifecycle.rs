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
    // The first create of a process also looks up the flavor and the security group;
    // `servers.get` is the read for the scheduler's verdict (Nova accepts the server first).
    for op in [
        "servers.list",
        "ports.list",
        "flavors.list",
        "security_groups.list",
        "ports.create",
        "servers.create",
        "servers.get",
    ] {
        assert_eq!(count(&calls, op), 1, "{op}: {}", calls.breakdown());
    }
    assert_eq!(calls.total, 7, "{}", calls.breakdown());

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
    // The lookups are shared: far fewer than one per machine (each is a servers.list
    // with a ports.list beside it).
    assert!(count(&calls, "ports.list") <= 4, "{}", calls.breakdown());
    // So are the reads for the scheduler's verdict (the other servers.list, or a
    // servers.get when one create reads alone).
    let verdict_reads = count(&calls, "servers.list") - count(&calls, "ports.list") + count(&calls, "servers.get");
    assert!((1..=4).contains(&verdict_reads), "{}", calls.breakdown());
    // The ports go out in bulk; the bulk holding the bad network is refused as
    // a whole and resent port by port, so at most 12 + 4 port creates.
    assert!(count(&calls, "ports.create") <= 16, "{}", calls.breakdown());
}

#[tokio::test]
async fn an_error_server_is_reported_with_its_fault() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    // The build fails on the host after the scheduler placed the server (and
    // after the create answered): GetMachineStatus reports it.
    cloud.admin("/timing", json!({"boot_ms": 2000, "stop_ms": 300})).await;
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

/// Live servers, ports and volumes the fake holds for machine `name`, once a
/// deleting server is gone (the fake's `stop_ms`).
async fn left_of(cloud: &FakeCloud, name: &str) -> Vec<Value> {
    let started = std::time::Instant::now();
    loop {
        let inventory = cloud.inventory().await;
        let left: Vec<Value> = inventory
            .instances
            .iter()
            .chain(&inventory.dependents)
            .filter(|i| i.live && i.name == name)
            .map(|i| serde_json::to_value(i).unwrap())
            .collect();
        if left.is_empty() || started.elapsed() > Duration::from_secs(5) {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Nova accepts a server its scheduler cannot place (202), then fails it
/// (ERROR, fault "No valid host was found"): the create waits for that
/// verdict, deletes the server and the machine's port and answers
/// RESOURCE_EXHAUSTED (the cluster autoscaler's signal to try another pool),
/// with a boot volume in the class too. A later create starts afresh.
#[tokio::test]
async fn a_server_the_scheduler_cannot_place_is_resource_exhausted_and_leaves_nothing() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    assert!(
        serde_json::from_slice::<Value>(&cloud.class.provider_spec).unwrap()["spec"]["rootDiskSize"].as_u64() > Some(0)
    );
    cloud.admin("/faults", json!({"operation": "create", "kind": "placement", "times": 1})).await;
    let err = driver.create_machine(&ctx("create", 30), cloud.create_request("m-7")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("No valid host was found"), "{}", err.message());
    assert_eq!(left_of(&cloud, "m-7").await, Vec::<Value>::new(), "no server, port or volume left");
    let calls = cloud.calls().await;
    assert_eq!((count(&calls, "servers.delete"), count(&calls, "ports.delete")), (1, 1), "{}", calls.breakdown());

    // The retry (MCM's, after its back-off) makes a new server, placed this time.
    let created = driver.create_machine(&ctx("create", 30), cloud.create_request("m-7")).await.unwrap();
    let live = cloud.live_named("m-7").await;
    assert_eq!(live.len(), 1, "{live:?}");
    assert!(created.provider_id.ends_with(&live[0]));
}

/// A create that finds the machine's server already failed (its earlier
/// attempt answered before the verdict, or another process made it) removes it
/// and answers its fault, as the Go provider's `deleteOnFail` does.
#[tokio::test]
async fn a_create_that_finds_the_machines_failed_server_removes_it() {
    let cloud = FakeCloud::start().await;
    // Failed on the host at 600 ms; the first create's call is too short to
    // wait for a verdict (half its time: less than the first read's 0.5 s),
    // so it answers as soon as Nova accepted the server.
    cloud.admin("/timing", json!({"boot_ms": 600, "stop_ms": 100})).await;
    cloud.admin("/openstack/server-failures", json!({"times": 1})).await;
    cloud.driver().create_machine(&ctx("create", 1), cloud.create_request("m-8")).await.unwrap();
    let started = std::time::Instant::now();
    while !cloud.inventory().await.instances.iter().any(|i| i.name == "m-8" && i.state == "ERROR") {
        assert!(started.elapsed() < Duration::from_secs(5), "the server never failed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let err = cloud.driver().create_machine(&ctx("create", 30), cloud.create_request("m-8")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err:?}");
    assert_eq!(left_of(&cloud, "m-8").await, Vec::<Value>::new());
}

/// A flavor the region does not offer is RESOURCE_EXHAUSTED naming the field
/// (the Go provider's `ErrFlavorNotFound`), and makes neither port nor server.
#[tokio::test]
async fn a_flavor_the_region_does_not_offer_is_resource_exhausted_and_makes_nothing() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    let mut req = cloud.create_request("m-9");
    req.class = cloud.class_with(json!({"flavorName": "g1.gpu-a100"}));
    let err = driver.create_machine(&ctx("create", 30), req).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("providerSpec.spec.flavorName"), "{}", err.message());
    let calls = cloud.calls().await;
    assert_eq!((count(&calls, "ports.create"), count(&calls, "servers.create")), (0, 0), "{}", calls.breakdown());
    assert!(left_of(&cloud, "m-9").await.is_empty());
}

/// A machine the Go provider made from a `rootDiskType` class, as it makes it
/// (gardener/machine-controller-manager-provider-openstack v0.27.1
/// `pkg/driver/executor/executor.go`: `ensureVolume` makes a volume named
/// after the machine with the class's tags as metadata, the server boots from
/// it with `delete_on_termination: false`, no uid metadata): the sidecar's
/// DeleteMachine leaves nothing, as the Go provider's `deleteVolume` does;
/// a CSI volume attached to the node (another name) is left alone.
#[tokio::test]
async fn deleting_a_go_made_machine_deletes_the_boot_volume_the_go_provider_made() {
    let cloud = FakeCloud::start().await;
    cloud.admin("/timing", json!({"boot_ms": 100, "stop_ms": 300})).await;
    let tags = json!({"kubernetes.io-cluster-shoot--dev--conf": "1", "kubernetes.io-role-node": "1"});
    let volumes = format!("/volume/v3/{}/volumes", fake_openstack::PROJECT_ID);
    let mut volume_ids = Vec::new();
    for name in ["m-go-vol", "pvc-0a1b"] {
        let volume = cloud
            .os(
                reqwest::Method::POST,
                &volumes,
                Some(json!({"volume": {"name": name, "size": 50, "volume_type": "standard",
                    "imageRef": fake_openstack::PUBLIC_IMAGE, "metadata": tags}})),
            )
            .await;
        volume_ids.push(volume["volume"]["id"].as_str().unwrap().to_string());
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // creating → available
    let made = cloud
        .os(
            reqwest::Method::POST,
            "/compute/v2.1/servers",
            Some(json!({"server": {
                "name": "m-go-vol", "flavorRef": "4", "imageRef": "",
                "networks": [{"uuid": fake_openstack::NETWORK_ID}], "availability_zone": "nova", "metadata": tags,
                "block_device_mapping_v2": [
                    {"boot_index": 0, "uuid": volume_ids[0], "source_type": "volume", "destination_type": "volume",
                     "delete_on_termination": false},
                    {"boot_index": null, "uuid": volume_ids[1], "source_type": "volume", "destination_type": "volume",
                     "delete_on_termination": false}]}})),
        )
        .await;
    let id = made["server"]["id"].as_str().unwrap().to_string();

    let driver = cloud.driver();
    let mut req = cloud.machine_ref("m-go-vol");
    req.machine.provider_id = Some(format!("openstack:///RegionOne/{id}"));
    let deleted = driver.delete_machine(&ctx("delete", 30), req.clone()).await.unwrap();
    assert!(!deleted.already_gone);
    assert_eq!(left_of(&cloud, "m-go-vol").await, Vec::<Value>::new(), "the Go provider's boot volume is deleted");
    let inventory = cloud.inventory().await;
    let live = |vid: &str| inventory.dependents.iter().any(|d| d.id == vid && d.live);
    assert!(live(&volume_ids[1]), "a volume of another name is not the machine's");
    assert!(inventory.instances.iter().all(|i| i.id != id || !i.live));
    // The sidecar's own machines have no such volume: their delete reads no volume.
    cloud.admin.reset_calls().await.unwrap();
    let created = driver.create_machine(&ctx("create", 30), cloud.create_request("m-own")).await.unwrap();
    let mut own = cloud.machine_ref("m-own");
    own.machine.provider_id = Some(created.provider_id);
    cloud.admin.reset_calls().await.unwrap();
    driver.delete_machine(&ctx("delete", 10), own).await.unwrap();
    assert_eq!(cloud.calls().await.breakdown(), "ports.delete×1, ports.list×1, servers.delete×1");
}
