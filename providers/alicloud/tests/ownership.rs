//! Ownership against the fake ECS: an instance this machine does not own
//! (another cluster's, one with the cluster tag alone, an earlier machine's of
//! the same name) is never answered for, deleted or listed; one the Go
//! provider made (the class's tags, no uid tag) is adopted and listed; a
//! class without both markers is refused before any call; and request data
//! that could steer a request (`../`, quotes) is refused before it is sent.

#![allow(clippy::unwrap_used)]

mod support;

use machine_driver_api::{Driver, DriverError, ErrorKind, MachineRef, OwnerSecret, RevokeImageShare, ShareImage};
use serde_json::json;
use support::{FakeCloud, ctx};

const CLUSTER: &str = "kubernetes.io/cluster/shoot--dev--conf";
const OTHER_CLUSTER: &str = "kubernetes.io/cluster/shoot--dev--other";
const ROLE: &str = "kubernetes.io/role/node";

async fn start() -> FakeCloud {
    let cloud = FakeCloud::start().await;
    cloud.admin("/timing", json!({"boot_ms": 20, "stop_ms": 20})).await;
    cloud
}

fn id_of(provider_id: &str) -> String {
    provider_id.strip_prefix("eu-central-1.").unwrap().to_string()
}

fn with_provider_id(mut req: MachineRef, provider_id: &str) -> MachineRef {
    req.machine.provider_id = Some(provider_id.to_string());
    req
}

/// DeleteMachine as MCM's orphan collection sends it: the providerID alone.
fn orphan_delete(cloud: &FakeCloud, provider_id: &str) -> MachineRef {
    let mut req = cloud.machine_ref("");
    req.machine.uid = String::new();
    with_provider_id(req, provider_id)
}

fn assert_not_found(answer: Result<impl std::fmt::Debug, DriverError>) {
    match answer {
        Err(e) => assert_eq!(e.kind(), ErrorKind::NotFound, "{e:?}"),
        Ok(found) => panic!("a foreign instance was answered for: {found:?}"),
    }
}

/// Deletes until ECS takes it (it refuses while the instance starts).
async fn delete_until_taken(driver: &impl Driver, req: MachineRef) -> bool {
    let started = std::time::Instant::now();
    loop {
        match driver.delete_machine(&ctx("delete", 10), req.clone()).await {
            Ok(d) => return d.already_gone,
            Err(e) => assert_eq!(e.kind(), ErrorKind::Unavailable, "{e:?}"),
        }
        assert!(started.elapsed().as_secs() < 10);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn another_clusters_instance_of_the_same_name_is_never_answered_deleted_or_listed() {
    let cloud = start().await;
    // Another cluster's sidecar makes "m-shared" with its own class and uid.
    let mut theirs = cloud.create_request("m-shared");
    theirs.class = cloud.class_with(|s| s["tags"] = json!({OTHER_CLUSTER: "1", ROLE: "1"}));
    theirs.machine.uid = "uid-of-the-other-cluster".into();
    let foreign = cloud.driver().create_machine(&ctx("create", 30), theirs).await.unwrap();
    let foreign_id = id_of(&foreign.provider_id);
    cloud.wait_running(&foreign_id).await;

    let driver = cloud.driver();
    let ours = cloud.machine_ref("m-shared");
    assert_not_found(driver.get_machine_status(&ctx("status", 10), ours.clone()).await);
    assert_not_found(
        driver.get_machine_status(&ctx("status", 10), with_provider_id(ours.clone(), &foreign.provider_id)).await,
    );

    cloud.admin.reset_calls().await.unwrap();
    assert!(driver.delete_machine(&ctx("delete", 10), ours.clone()).await.unwrap().already_gone);
    // By providerID with this cluster's class: with the record at hand (the
    // status above read it), on a fresh driver (one read), and as the orphan
    // collector sends it (no name, no uid).
    for req in [with_provider_id(ours.clone(), &foreign.provider_id), orphan_delete(&cloud, &foreign.provider_id)] {
        for d in [&driver, &cloud.driver()] {
            assert!(d.delete_machine(&ctx("delete", 10), req.clone()).await.unwrap().already_gone);
        }
    }
    let calls = cloud.calls().await;
    assert!(!calls.calls.contains_key("DeleteInstance"), "{}", calls.breakdown());
    assert!(cloud.alive(&foreign_id).await);

    let listed = driver.list_machines(&ctx("list", 10), cloud.list_request()).await.unwrap();
    assert!(listed.iter().all(|(pid, _)| *pid != foreign.provider_id), "{listed:?}");

    // ECS names are not unique: create launches this machine's own instance
    // beside the foreign one, which stays untouched, and status answers ours.
    let created = driver.create_machine(&ctx("create", 30), cloud.create_request("m-shared")).await.unwrap();
    assert_ne!(created.provider_id, foreign.provider_id);
    assert_eq!(cloud.live_named("m-shared").await.len(), 2);
    let status = driver.get_machine_status(&ctx("status", 10), ours).await.unwrap();
    assert_eq!(status.provider_id, created.provider_id);
    assert!(cloud.alive(&foreign_id).await);
}

#[tokio::test]
async fn an_instance_with_the_cluster_tag_alone_is_not_listed_adopted_or_deleted() {
    let cloud = start().await;
    let id = cloud.launch_as_others_do("m-cluster-tag-only", &[(CLUSTER, "1")]).await;
    let pid = format!("eu-central-1.{id}");
    let driver = cloud.driver();

    let listed = driver.list_machines(&ctx("list", 10), cloud.list_request()).await.unwrap();
    assert!(listed.is_empty(), "{listed:?}");
    let req = cloud.machine_ref("m-cluster-tag-only");
    assert_not_found(driver.get_machine_status(&ctx("status", 10), req.clone()).await);
    assert!(driver.delete_machine(&ctx("delete", 10), req).await.unwrap().already_gone);
    assert!(driver.delete_machine(&ctx("delete", 10), orphan_delete(&cloud, &pid)).await.unwrap().already_gone);
    assert!(cloud.alive(&id).await);
}

#[tokio::test]
async fn an_instance_the_go_provider_made_is_adopted_listed_and_deleted() {
    let cloud = start().await;
    // As the Go provider launches it: every providerSpec tag, the machine name, no uid tag.
    let id = cloud
        .launch_as_others_do("m-go", &[(CLUSTER, "1"), (ROLE, "1"), ("worker.gardener.cloud/pool", "worker-a")])
        .await;
    let pid = format!("eu-central-1.{id}");
    let driver = cloud.driver();

    let req = cloud.machine_ref("m-go");
    let status = driver.get_machine_status(&ctx("status", 10), req.clone()).await.unwrap();
    assert_eq!(status.provider_id, pid);
    let by_pid = with_provider_id(req, &pid);
    assert_eq!(driver.get_machine_status(&ctx("status", 10), by_pid.clone()).await.unwrap().provider_id, pid);
    let listed = driver.list_machines(&ctx("list", 10), cloud.list_request()).await.unwrap();
    assert_eq!(listed, vec![(pid.clone(), "m-go".to_string())]);

    assert!(!delete_until_taken(&driver, by_pid).await);
    assert!(!cloud.alive(&id).await);
}

#[tokio::test]
async fn an_earlier_machines_instance_of_the_same_name_is_listed_but_not_adopted() {
    let cloud = start().await;
    let mut earlier = cloud.create_request("m-again");
    earlier.machine.uid = "uid-of-an-earlier-machine".into();
    let driver = cloud.driver();
    let made = driver.create_machine(&ctx("create", 30), earlier).await.unwrap();
    let id = id_of(&made.provider_id);
    cloud.wait_running(&id).await;

    let ours = cloud.machine_ref("m-again");
    assert_not_found(driver.get_machine_status(&ctx("status", 10), ours.clone()).await);
    assert!(driver.delete_machine(&ctx("delete", 10), ours.clone()).await.unwrap().already_gone);
    let by_pid = with_provider_id(ours, &made.provider_id);
    assert!(driver.delete_machine(&ctx("delete", 10), by_pid).await.unwrap().already_gone);
    assert!(cloud.alive(&id).await);

    // It is this cluster's: listed, and the orphan collector's delete (no uid) takes it.
    let listed = driver.list_machines(&ctx("list", 10), cloud.list_request()).await.unwrap();
    assert_eq!(listed, vec![(made.provider_id.clone(), "m-again".to_string())]);
    assert!(!delete_until_taken(&driver, orphan_delete(&cloud, &made.provider_id)).await);
}

#[tokio::test]
async fn a_class_without_both_markers_is_refused_on_every_rpc_before_any_call() {
    let cloud = start().await;
    let made = cloud.driver().create_machine(&ctx("create", 30), cloud.create_request("m-1")).await.unwrap();
    let driver = cloud.driver();
    for class in [
        cloud.class_with(|s| s["tags"] = json!({CLUSTER: "1"})),
        cloud.class_with(|s| s["tags"] = json!({ROLE: "1"})),
        cloud.class_with(|s| s["tags"] = json!({CLUSTER: "1", OTHER_CLUSTER: "1", ROLE: "1"})),
    ] {
        cloud.admin.reset_calls().await.unwrap();
        let mut by_name = cloud.machine_ref("m-1");
        by_name.class = class.clone();
        let by_pid = with_provider_id(by_name.clone(), &made.provider_id);
        let mut create = cloud.create_request("m-2");
        create.class = class.clone();
        let mut list = cloud.list_request();
        list.class = class;
        let answers: Vec<DriverError> = vec![
            driver.create_machine(&ctx("create", 10), create).await.unwrap_err(),
            driver.get_machine_status(&ctx("status", 10), by_name.clone()).await.unwrap_err(),
            driver.get_machine_status(&ctx("status", 10), by_pid.clone()).await.unwrap_err(),
            driver.delete_machine(&ctx("delete", 10), by_name).await.unwrap_err(),
            driver.delete_machine(&ctx("delete", 10), by_pid).await.unwrap_err(),
            driver.list_machines(&ctx("list", 10), list).await.unwrap_err(),
        ];
        for e in answers {
            assert_eq!((e.kind(), e.field()), (ErrorKind::InvalidArgument, Some("providerSpec.tags")), "{e:?}");
        }
        assert_eq!(cloud.calls().await.total, 0);
    }
}

#[tokio::test]
async fn delete_by_provider_id_judges_the_record_at_hand_or_reads_it_once() {
    let cloud = start().await;
    let driver = cloud.driver();
    let made = driver.create_machine(&ctx("create", 30), cloud.create_request("m-1")).await.unwrap();
    cloud.wait_running(&id_of(&made.provider_id)).await;
    let req = with_provider_id(cloud.machine_ref("m-1"), &made.provider_id);
    driver.get_machine_status(&ctx("status", 10), req.clone()).await.unwrap();
    cloud.admin.reset_calls().await.unwrap();
    assert!(!driver.delete_machine(&ctx("delete", 10), req).await.unwrap().already_gone);
    assert_eq!(cloud.calls().await.breakdown(), "DeleteInstance×1", "the status read is at hand");

    let made = driver.create_machine(&ctx("create", 30), cloud.create_request("m-2")).await.unwrap();
    cloud.wait_running(&id_of(&made.provider_id)).await;
    cloud.admin.reset_calls().await.unwrap();
    let restarted = cloud.driver();
    let req = with_provider_id(cloud.machine_ref("m-2"), &made.provider_id);
    assert!(!restarted.delete_machine(&ctx("delete", 10), req).await.unwrap().already_gone);
    assert_eq!(cloud.calls().await.breakdown(), "DeleteInstance×1, DescribeInstances×1");
}

#[tokio::test]
async fn traversal_and_quoting_strings_reach_no_request() {
    let cloud = start().await;
    let driver = cloud.driver();
    let field_of = |e: DriverError| {
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e:?}");
        e.field().map(str::to_string)
    };
    for pid in [
        "eu-central-1/../../x.i-gw8abc",
        "../eu-central-1.i-gw8abc",
        "eu-central-1.i-gw8abc/../i-other",
        "eu-central-1.i-gw8abc\",\"i-other",
        "eu-central-1.evil.com/.i-gw8abc",
    ] {
        let req = with_provider_id(cloud.machine_ref("m-1"), pid);
        let e = driver.get_machine_status(&ctx("status", 10), req.clone()).await.unwrap_err();
        assert_eq!(field_of(e).as_deref(), Some("machine.providerID"), "{pid}");
        let e = driver.delete_machine(&ctx("delete", 10), req).await.unwrap_err();
        assert_eq!(field_of(e).as_deref(), Some("machine.providerID"), "{pid}");
    }
    let class = cloud.class_with(|s| {
        s["region"] = "../../evil.example".into();
        s["zoneID"] = "../../evil.examplea".into();
    });
    let mut create = cloud.create_request("m-1");
    create.class = class.clone();
    let e = driver.create_machine(&ctx("create", 10), create).await.unwrap_err();
    assert_eq!(field_of(e).as_deref(), Some("providerSpec.region"));
    let mut list = cloud.list_request();
    list.class = class;
    let e = driver.list_machines(&ctx("list", 10), list).await.unwrap_err();
    assert_eq!(field_of(e).as_deref(), Some("providerSpec.region"));

    let share = |image: &str, region: &str, account: Option<&str>| ShareImage {
        image: image.into(),
        region: Some(region.into()),
        owner_secret: OwnerSecret::new(cloud.owner_secret()),
        consumer_secret: cloud.secret.clone(),
        consumer_account: account.map(str::to_string),
    };
    for (req, field) in [
        (share("../../m-gw8fakeallowed000001", "eu-central-1", None), "image"),
        (share("m-gw8fakeallowed000001,m-gw8fakenotallowed001", "eu-central-1", None), "image"),
        (share(fake_ecs::ALLOWED_IMAGE, "eu-central-1/../x", None), "region"),
        (share(fake_ecs::ALLOWED_IMAGE, "eu-central-1", Some("5123456789012345/../1")), "consumerAccount"),
        (share(fake_ecs::ALLOWED_IMAGE, "eu-central-1", Some("5123456789012345&AddAccount.2=1")), "consumerAccount"),
    ] {
        let e = driver.share_image(&ctx("share", 10), req.clone()).await.unwrap_err();
        assert_eq!(field_of(e).as_deref(), Some(field));
        let revoke = RevokeImageShare {
            image: req.image,
            region: req.region,
            owner_secret: req.owner_secret.unwrap(),
            consumer_secret: req.consumer_secret,
            consumer_account: req.consumer_account,
        };
        let e = driver.revoke_image_share(&ctx("revoke", 10), revoke).await.unwrap_err();
        assert_eq!(field_of(e).as_deref(), Some(field));
    }
    assert_eq!(cloud.calls().await.total, 0);
    let refused = cloud.admin.get_json("/ecs/refused").await.unwrap();
    assert_eq!(refused["total"], 0, "{refused}");
    let image = cloud.inventory().await.images.into_iter().find(|i| i["id"] == fake_ecs::ALLOWED_IMAGE);
    assert!(image.is_some_and(|i| i["shared_with"].as_array().is_some_and(Vec::is_empty)));
}

#[tokio::test]
async fn create_adopts_no_foreign_instance_that_carries_the_machines_uid() {
    let cloud = start().await;
    let driver = cloud.driver();
    let first = driver.create_machine(&ctx("create", 30), cloud.create_request("m-r")).await.unwrap();
    cloud.admin.terminate(&id_of(&first.provider_id)).await.unwrap();
    // Another cluster's instance with a copy of this machine's uid tag.
    let uid = cloud.machine("m-r").uid;
    let foreign = cloud
        .launch_as_others_do("m-r", &[(OTHER_CLUSTER, "1"), (ROLE, "1"), ("mcm.gardener.cloud/machine-uid", &uid)])
        .await;
    // The relaunch after ECS ended the instance looks the uid up: the foreign one is not the answer.
    let mut relaunch = cloud.create_request("m-r");
    relaunch.machine.provider_id = Some(first.provider_id.clone());
    let second = driver.create_machine(&ctx("create", 30), relaunch).await.unwrap();
    assert_ne!(id_of(&second.provider_id), foreign);
    assert_ne!(second.provider_id, first.provider_id);
    assert!(cloud.alive(&foreign).await);
}
