//! The driver's lifecycle against the fake ECS, with the ECS calls each step costs.

#![allow(clippy::unwrap_used)]

mod support;

use machine_driver_api::{Driver, ErrorKind};
use support::{FakeCloud, ctx};

#[tokio::test]
async fn create_status_list_delete_with_their_call_counts() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();

    let created = driver.create_machine(&ctx("create", 30), cloud.create_request("m-1")).await.unwrap();
    let id = created.provider_id.strip_prefix("eu-central-1.").unwrap().to_string();
    assert!(id.starts_with("i-"), "{}", created.provider_id);
    assert_eq!(created.node_name, format!("{}z", id.replacen('-', "z", 1)));
    assert_eq!(cloud.calls().await.breakdown(), "RunInstances×1");

    // A retry (lost answer, restart, another replica) gets the same instance: the ClientToken.
    let restarted = cloud.driver();
    let again = restarted.create_machine(&ctx("create", 30), cloud.create_request("m-1")).await.unwrap();
    assert_eq!(again.provider_id, created.provider_id);
    assert_eq!(cloud.live_named("m-1").await, vec![id.clone()]);

    cloud.admin.reset_calls().await.unwrap();
    let mut req = cloud.machine_ref("m-1");
    req.machine.provider_id = Some(created.provider_id.clone());
    let status = driver.get_machine_status(&ctx("status", 10), req.clone()).await.unwrap();
    assert!(status.addresses.iter().any(|a| a.address.starts_with("10.250.")), "{:?}", status.addresses);
    assert_eq!(cloud.calls().await.breakdown(), "DescribeInstances×1");

    let listed = driver.list_machines(&ctx("list", 10), cloud.list_request()).await.unwrap();
    assert_eq!(listed, vec![(created.provider_id.clone(), "m-1".to_string())]);

    // Deleting an instance ECS will not delete yet (still starting) is UNAVAILABLE, then OK.
    let started = std::time::Instant::now();
    loop {
        match driver.delete_machine(&ctx("delete", 10), req.clone()).await {
            Ok(d) => {
                assert!(!d.already_gone);
                break;
            }
            Err(e) => assert_eq!(e.kind(), ErrorKind::Unavailable, "{e:?}"),
        }
        assert!(started.elapsed().as_secs() < 10);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let gone = std::time::Instant::now();
    loop {
        match driver.get_machine_status(&ctx("status", 10), req.clone()).await {
            Err(e) if e.kind() == ErrorKind::NotFound => break,
            other => assert!(gone.elapsed().as_secs() < 10, "{other:?}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(driver.delete_machine(&ctx("delete", 10), req).await.unwrap().already_gone);
}

#[tokio::test]
async fn concurrent_status_polls_share_one_describe() {
    let cloud = FakeCloud::start().await;
    let driver = std::sync::Arc::new(cloud.driver());
    let mut reqs = Vec::new();
    for i in 0..6 {
        let name = format!("poll-{i}");
        let created = driver.create_machine(&ctx("create", 30), cloud.create_request(&name)).await.unwrap();
        let mut req = cloud.machine_ref(&name);
        req.machine.provider_id = Some(created.provider_id);
        reqs.push(req);
    }
    cloud.admin.reset_calls().await.unwrap();
    let polls = reqs.into_iter().map(|req| {
        let driver = std::sync::Arc::clone(&driver);
        async move { driver.get_machine_status(&ctx("status", 10), req).await }
    });
    for answer in futures::future::join_all(polls).await {
        answer.unwrap();
    }
    let calls = cloud.calls().await;
    assert!(calls.total < 6, "6 polls should share reads: {}", calls.breakdown());
}

#[tokio::test]
async fn a_changed_class_after_the_first_instance_is_gone_gets_a_new_token() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    let first = driver.create_machine(&ctx("create", 30), cloud.create_request("g-1")).await.unwrap();
    let mut req = cloud.machine_ref("g-1");
    req.machine.provider_id = Some(first.provider_id.clone());
    let started = std::time::Instant::now();
    while driver.delete_machine(&ctx("delete", 10), req.clone()).await.is_err() {
        assert!(started.elapsed().as_secs() < 10);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    while !cloud.live_named("g-1").await.is_empty() {
        assert!(started.elapsed().as_secs() < 20);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Same machine uid, other parameters: ECS refuses the first token; the driver
    // finds no instance with the uid and launches with a second-generation token.
    let mut create = cloud.create_request("g-1");
    let mut spec: serde_json::Value = serde_json::from_slice(&create.class.provider_spec).unwrap();
    spec["instanceType"] = "ecs.g7.xlarge".into();
    create.class.provider_spec = serde_json::to_vec(&spec).unwrap();
    cloud.admin.reset_calls().await.unwrap();
    let second = driver.create_machine(&ctx("create", 30), create).await.unwrap();
    assert_ne!(second.provider_id, first.provider_id);
    assert_eq!(cloud.calls().await.breakdown(), "DescribeInstances×1, RunInstances×2");
}
