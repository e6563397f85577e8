//! The driver's lifecycle against the fake ARM, with the ARM calls each step costs.

#![allow(clippy::unwrap_used)]

mod support;

use fake_cloud_support::Fault;
use machine_driver_api::{Driver, ErrorKind};
use support::{FakeCloud, ctx};

#[tokio::test]
async fn create_status_list_delete_with_their_call_counts() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();

    let created = driver.create_machine(&ctx("create", 30), cloud.create_request("m-1")).await.unwrap();
    assert_eq!(created.provider_id, "azure:///westeurope/m-1");
    assert_eq!(created.node_name, "m-1");
    // One create-only VM PUT that makes the NIC too; answered once ARM accepts it. The
    // example's Garden Linux image has a purchase plan: this process's first create of it
    // reads the image's plan and accepts its terms first (remembered: see tests/images.rs).
    assert_eq!(
        cloud.calls().await.breakdown(),
        "marketplaceAgreements.create×1, marketplaceAgreements.get×1, virtualMachineImages.get×1, virtualMachines.createOrUpdate×1"
    );
    let mut live = cloud.live_resources("m-1").await;
    live.sort();
    assert_eq!(live, vec!["m-1", "m-1-containerd-0-data-disk", "m-1-nic", "m-1-os-disk"]);

    // The first status poll reads the NIC made with the VM once for the address.
    let mut req = cloud.machine_ref("m-1");
    req.machine.provider_id = Some(created.provider_id.clone());
    let started = std::time::Instant::now();
    let status = loop {
        cloud.admin.reset_calls().await.unwrap();
        let status = driver.get_machine_status(&ctx("status", 10), req.clone()).await.unwrap();
        if status.vm_state == "running" {
            break status;
        }
        assert!(started.elapsed().as_secs() < 10, "never running: {status:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(status.addresses.iter().any(|a| a.address.starts_with("10.250.")), "{:?}", status.addresses);
    cloud.admin.reset_calls().await.unwrap();
    let again = driver.get_machine_status(&ctx("status", 10), req.clone()).await.unwrap();
    assert_eq!(again.addresses, status.addresses, "the address is remembered");
    assert_eq!(cloud.calls().await.breakdown(), "virtualMachines.get×1");
    let created = machine_driver_api::CreatedMachine { addresses: status.addresses.clone(), ..created };

    // A driver that did not create the VM (a restart) reads the NIC once for the address.
    let restarted = cloud.driver();
    cloud.admin.reset_calls().await.unwrap();
    for _ in 0..2 {
        let status = restarted.get_machine_status(&ctx("status", 10), req.clone()).await.unwrap();
        assert_eq!(status.addresses, created.addresses);
    }
    assert_eq!(cloud.calls().await.breakdown(), "networkInterfaces.get×1, virtualMachines.get×2");

    let listed = driver.list_machines(&ctx("list", 10), cloud.list_request()).await.unwrap();
    assert_eq!(listed, vec![(created.provider_id.clone(), "m-1".to_string())]);

    // A second create of the same machine adopts the VM: the create-only PUT is refused (412),
    // one read (the address is remembered), the VM is not changed.
    cloud.admin.reset_calls().await.unwrap();
    let again = driver.create_machine(&ctx("create", 30), cloud.create_request("m-1")).await.unwrap();
    assert_eq!(again.provider_id, created.provider_id);
    assert_eq!(again.addresses, created.addresses);
    assert_eq!(cloud.calls().await.breakdown(), "virtualMachines.createOrUpdate×1, virtualMachines.get×1");

    cloud.admin.reset_calls().await.unwrap();
    let deleted = driver.delete_machine(&ctx("delete", 10), req.clone()).await.unwrap();
    assert!(!deleted.already_gone);
    // One read first: a VM of the name is deleted only when it is this machine's.
    assert_eq!(cloud.calls().await.breakdown(), "virtualMachines.delete×1, virtualMachines.get×1");
    // The NIC and disks go with the VM (deleteOption Delete).
    let started = std::time::Instant::now();
    while !cloud.live_resources("m-1").await.is_empty() {
        assert!(started.elapsed().as_secs() < 10, "left behind: {:?}", cloud.live_resources("m-1").await);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let gone = driver.get_machine_status(&ctx("status", 10), req.clone()).await.unwrap_err();
    assert_eq!(gone.kind(), ErrorKind::NotFound);
    let twice = driver.delete_machine(&ctx("delete", 10), req).await.unwrap();
    assert!(twice.already_gone);
}

#[tokio::test]
async fn one_token_serves_every_call_of_the_credentials() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    for _ in 0..3 {
        let _ = driver.get_machine_status(&ctx("status", 10), cloud.machine_ref("absent")).await;
    }
    let tokens: serde_json::Value = reqwest_free_get(&format!("{}/azure/tokens", cloud.admin.url())).await;
    assert_eq!(tokens["issued"], 1, "{tokens}");
}

/// GET of an admin URL without a dev-dependency on an HTTP client: through tokio.
async fn reqwest_free_get(url: &str) -> serde_json::Value {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut conn = tokio::net::TcpStream::connect(host).await.unwrap();
    conn.write_all(format!("GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes()).await.unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).await.unwrap();
    let body = raw.split_once("\r\n\r\n").unwrap().1;
    serde_json::from_str(body).unwrap()
}

#[tokio::test]
async fn concurrent_status_polls_share_one_list() {
    let cloud = FakeCloud::start().await;
    let driver = std::sync::Arc::new(cloud.driver());
    let names: Vec<String> = (0..6).map(|i| format!("poll-{i}")).collect();
    for n in &names {
        driver.create_machine(&ctx("create", 30), cloud.create_request(n)).await.unwrap();
    }
    // Until every VM runs (the first poll of each also learns its address).
    for n in &names {
        let started = std::time::Instant::now();
        while driver.get_machine_status(&ctx("status", 10), cloud.machine_ref(n)).await.unwrap().vm_state != "running" {
            assert!(started.elapsed().as_secs() < 10, "{n} never runs");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    cloud.admin.reset_calls().await.unwrap();
    let polls = names.iter().map(|n| {
        let driver = std::sync::Arc::clone(&driver);
        let req = cloud.machine_ref(n);
        async move { driver.get_machine_status(&ctx("status", 10), req).await }
    });
    for answer in futures::future::join_all(polls).await {
        assert_eq!(answer.unwrap().vm_state, "running");
    }
    let calls = cloud.calls().await;
    assert!(calls.total < names.len() as u64, "6 polls should share reads: {}", calls.breakdown());
    assert!(calls.of("resources.listByResourceGroup") >= 1, "{}", calls.breakdown());
    assert_eq!(calls.of("virtualMachines.list"), 0, "{}", calls.breakdown());
}

/// The NIC and disks the VM PUT makes (untagged by ARM) get the VM's tags from the
/// first status poll, once: what the Go provider's orphan collector lists them by.
#[tokio::test]
async fn the_first_status_poll_tags_the_nic_and_disks_the_vm_put_made() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    driver.create_machine(&ctx("create", 30), cloud.create_request("tg-1")).await.unwrap();
    let untagged = |inv: &fake_cloud_support::Inventory| -> Vec<String> {
        inv.dependents
            .iter()
            .filter(|d| d.name.starts_with("tg-1") && d.tags.is_empty())
            .map(|d| d.name.clone())
            .collect()
    };
    let mut before = untagged(&cloud.inventory().await);
    before.sort();
    assert_eq!(before, vec!["tg-1-containerd-0-data-disk", "tg-1-nic", "tg-1-os-disk"], "ARM makes them untagged");

    cloud.admin.reset_calls().await.unwrap();
    driver.get_machine_status(&ctx("status", 10), cloud.machine_ref("tg-1")).await.unwrap();
    assert_eq!(cloud.calls().await.breakdown(), "networkInterfaces.get×1, tags.updateAtScope×3, virtualMachines.get×1");
    let inventory = cloud.inventory().await;
    let vm_tags = &inventory.instances.iter().find(|i| i.name == "tg-1" && i.live).unwrap().tags;
    for dependent in inventory.dependents.iter().filter(|d| d.name.starts_with("tg-1")) {
        assert_eq!(&dependent.tags, vm_tags, "{} carries the VM's tags", dependent.name);
    }
    assert_eq!(vm_tags.get("mcm.gardener.cloud-machine-uid").map(String::as_str), Some("uid-tg-1"));
    assert!(
        vm_tags.contains_key("kubernetes.io-cluster-shoot--dev--conf")
            && vm_tags.contains_key("kubernetes.io-role-node")
    );

    // Once: the next poll is the one read.
    cloud.admin.reset_calls().await.unwrap();
    driver.get_machine_status(&ctx("status", 10), cloud.machine_ref("tg-1")).await.unwrap();
    assert_eq!(cloud.calls().await.breakdown(), "virtualMachines.get×1");
    // Listed with them by this driver's ListMachines only while the VM lives (the leftovers rule).
    let listed = driver.list_machines(&ctx("list", 10), cloud.list_request()).await.unwrap();
    assert_eq!(listed, vec![("azure:///westeurope/tg-1".to_string(), "tg-1".to_string())]);
}

/// A tagging refusal that every poll would meet again (403: the identity lacks
/// Microsoft.Resources/tags/write; a 400) costs one PATCH, not one per poll for the
/// machine's life; ARM being unavailable keeps the rest for the next poll.
#[tokio::test]
async fn a_refused_tagging_is_tried_once_and_an_unavailable_one_again() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    for (name, kind) in [("tr-1", "permission"), ("tr-2", "invalid")] {
        driver.create_machine(&ctx("create", 30), cloud.create_request(name)).await.unwrap();
        cloud.admin.clear_faults().await.unwrap();
        cloud
            .admin
            .add_fault(Fault { operation: "tags.updateAtScope", kind, times: None, phase: "before" })
            .await
            .unwrap();
        for poll in 0..3 {
            cloud.admin.reset_calls().await.unwrap();
            // The status answer goes on without the tags.
            driver.get_machine_status(&ctx("status", 10), cloud.machine_ref(name)).await.unwrap();
            let expected = if poll == 0 { 1 } else { 0 };
            assert_eq!(cloud.calls().await.of("tags.updateAtScope"), expected, "{kind}, poll {poll}");
        }
    }
    cloud.admin.clear_faults().await.unwrap();
    driver.create_machine(&ctx("create", 30), cloud.create_request("tr-3")).await.unwrap();
    cloud
        .admin
        .add_fault(Fault { operation: "tags.updateAtScope", kind: "unavailable", times: Some(1), phase: "before" })
        .await
        .unwrap();
    cloud.admin.reset_calls().await.unwrap();
    driver.get_machine_status(&ctx("status", 10), cloud.machine_ref("tr-3")).await.unwrap();
    assert_eq!(cloud.calls().await.of("tags.updateAtScope"), 1, "stops at the first failure");
    cloud.admin.reset_calls().await.unwrap();
    driver.get_machine_status(&ctx("status", 10), cloud.machine_ref("tr-3")).await.unwrap();
    assert_eq!(cloud.calls().await.of("tags.updateAtScope"), 3, "the next poll tags all three");
    let inventory = cloud.inventory().await;
    for dependent in inventory.dependents.iter().filter(|d| d.name.starts_with("tr-3")) {
        assert_eq!(dependent.tags.get("mcm.gardener.cloud-machine-uid").map(String::as_str), Some("uid-tr-3"));
    }
}

/// A name this process created a VM for, made again since for another Machine (by
/// another process, after a delete): this process's poll for the new Machine never
/// puts the earlier machine's uid on the new VM's NIC and disks.
#[tokio::test]
async fn a_name_made_again_for_another_machine_is_not_tagged_with_the_earlier_uid() {
    let cloud = FakeCloud::start().await;
    let first = cloud.driver();
    first.create_machine(&ctx("create", 30), cloud.create_request("rn-1")).await.unwrap();
    // Another process deletes the VM and makes it again for a new Machine of the name.
    let second = cloud.driver();
    let mut old = cloud.machine_ref("rn-1");
    old.machine.provider_id = Some("azure:///westeurope/rn-1".into());
    second.delete_machine(&ctx("delete", 10), old).await.unwrap();
    let started = std::time::Instant::now();
    while !cloud.live_resources("rn-1").await.is_empty() {
        assert!(started.elapsed().as_secs() < 20, "left behind: {:?}", cloud.live_resources("rn-1").await);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let mut again = cloud.create_request("rn-1");
    again.machine.uid = "uid-rn-1-again".into();
    second.create_machine(&ctx("create", 30), again).await.unwrap();

    let mut poll = cloud.machine_ref("rn-1");
    poll.machine.uid = "uid-rn-1-again".into();
    cloud.admin.reset_calls().await.unwrap();
    first.get_machine_status(&ctx("status", 10), poll.clone()).await.unwrap();
    assert_eq!(cloud.calls().await.of("tags.updateAtScope"), 0, "{}", cloud.calls().await.breakdown());
    // The process that made it tags them, with its uid.
    second.get_machine_status(&ctx("status", 10), poll).await.unwrap();
    let inventory = cloud.inventory().await;
    let dependents: Vec<_> = inventory.dependents.iter().filter(|d| d.name.starts_with("rn-1") && d.live).collect();
    assert!(dependents.len() >= 3, "{dependents:?}");
    for dependent in dependents {
        assert_eq!(
            dependent.tags.get("mcm.gardener.cloud-machine-uid").map(String::as_str),
            Some("uid-rn-1-again"),
            "{}",
            dependent.name
        );
    }
}
