//! UpdateMachine against the fake ECS: tags set, changed and removed with
//! TagResources/UntagResources (read back from the fake's inventory and from
//! DescribeInstances), what each update costs, validate_only, replacement-only
//! fields, a repeat, a foreign instance and a lost answer.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;

use fake_cloud_support::{Fault, PlantRequest};
use machine_driver_api::{
    ChangeOutcome, Driver, ErrorKind, MachineClass, NEEDS_REPLACEMENT, UpdateMachine, UpdatedMachine,
};
use serde_json::{Value, json};
use support::{FakeCloud, ctx};

const CLUSTER: &str = "kubernetes.io/cluster/shoot--dev--conf";
const ROLE: &str = "kubernetes.io/role/node";
const POOL: &str = "worker.gardener.cloud/pool";
const UID_TAG: &str = "mcm.gardener.cloud/machine-uid";

/// Creates machine `name` and waits until it runs; its providerID.
async fn launch(cloud: &FakeCloud, name: &str) -> String {
    let driver = cloud.driver();
    let created = driver.create_machine(&ctx("create", 30), cloud.create_request(name)).await.unwrap();
    cloud.wait_running(id_of(&created.provider_id)).await;
    created.provider_id
}

fn id_of(pid: &str) -> &str {
    pid.strip_prefix("eu-central-1.").unwrap()
}

fn request(
    cloud: &FakeCloud,
    name: &str,
    pid: &str,
    class: MachineClass,
    previous: Option<MachineClass>,
    validate_only: bool,
) -> UpdateMachine {
    let mut machine = cloud.machine(name);
    machine.provider_id = Some(pid.to_string());
    UpdateMachine { machine, class, previous_class: previous, secret: cloud.secret.clone(), validate_only }
}

/// The class with its tags merged with `patch` (null removes a key).
fn retagged(cloud: &FakeCloud, patch: Value) -> MachineClass {
    cloud.class_with(|spec| {
        for (k, v) in patch.as_object().unwrap() {
            if v.is_null() {
                spec["tags"].as_object_mut().unwrap().remove(k);
            } else {
                spec["tags"][k] = v.clone();
            }
        }
    })
}

/// The instance's tags as the inventory shows them.
async fn inventory_tags(cloud: &FakeCloud, id: &str) -> BTreeMap<String, String> {
    cloud.inventory().await.instances.into_iter().find(|i| i.id == id).unwrap().tags
}

/// The instance's tags as DescribeInstances answers them.
async fn described_tags(cloud: &FakeCloud, id: &str) -> BTreeMap<String, String> {
    let ids = serde_json::to_string(&[id]).unwrap();
    let answer = cloud.ecs("DescribeInstances", &[("RegionId", "eu-central-1"), ("InstanceIds", &ids)]).await.unwrap();
    answer["Instances"]["Instance"][0]["Tags"]["Tag"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["TagKey"].as_str().unwrap().to_string(), t["TagValue"].as_str().unwrap().to_string()))
        .collect()
}

fn outcome(done: &UpdatedMachine, field: &str) -> ChangeOutcome {
    done.changes.iter().find(|c| c.field == field).unwrap_or_else(|| panic!("{field} not in {done:?}")).outcome
}

fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect()
}

#[tokio::test]
async fn tags_are_set_changed_and_removed_in_two_writes_and_a_repeat_writes_nothing() {
    let cloud = FakeCloud::start().await;
    let pid = launch(&cloud, "m-1").await;
    let id = id_of(&pid).to_string();
    // A tag someone else put on the instance: never touched by the driver.
    cloud
        .ecs(
            "TagResources",
            &[
                ("RegionId", "eu-central-1"),
                ("ResourceType", "instance"),
                ("ResourceId.1", &id),
                ("Tag.1.Key", "ops"),
                ("Tag.1.Value", "keep"),
            ],
        )
        .await
        .unwrap();
    let driver = cloud.driver();
    let new_class = retagged(&cloud, json!({POOL: null, ROLE: "2", "team": "a"}));
    cloud.admin.reset_calls().await.unwrap();
    let req = request(&cloud, "m-1", &pid, new_class.clone(), Some(cloud.class.clone()), false);
    let done = driver.update_machine(&ctx("update", 10), req.clone()).await.unwrap();
    assert_eq!(outcome(&done, "providerSpec.tags"), ChangeOutcome::Applied, "{done:?}");
    assert_eq!(outcome(&done, "providerSpec.instanceType"), ChangeOutcome::Unchanged);
    let detail = &done.changes.iter().find(|c| c.field == "providerSpec.tags").unwrap().detail;
    assert!(detail.contains("set kubernetes.io/role/node, team; removed worker.gardener.cloud/pool"), "{detail}");
    let calls = cloud.calls().await;
    assert_eq!(calls.breakdown(), "DescribeInstances×1, TagResources×1, UntagResources×1", "one tag update's cost");
    let want = tags(&[(CLUSTER, "1"), (ROLE, "2"), ("team", "a"), ("ops", "keep"), (UID_TAG, "uid-m-1")]);
    assert_eq!(inventory_tags(&cloud, &id).await, want);
    assert_eq!(described_tags(&cloud, &id).await, want);

    // The repeat: all UNCHANGED, one read, no write.
    cloud.admin.reset_calls().await.unwrap();
    let again = driver.update_machine(&ctx("update", 10), req).await.unwrap();
    assert!(again.changes.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "{again:?}");
    assert_eq!(cloud.calls().await.breakdown(), "DescribeInstances×1");

    // Without the previous class nothing is removed: a tag the driver did not set stays.
    let back = request(&cloud, "m-1", &pid, cloud.class.clone(), None, false);
    driver.update_machine(&ctx("update", 10), back).await.unwrap();
    let tags_now = inventory_tags(&cloud, &id).await;
    assert_eq!(tags_now.get(POOL).map(String::as_str), Some("worker-a"));
    assert_eq!(tags_now.get(ROLE).map(String::as_str), Some("1"));
    assert!(tags_now.contains_key("team") && tags_now.contains_key("ops"), "{tags_now:?}");
}

#[tokio::test]
async fn validate_only_reads_and_answers_what_it_would_do() {
    let cloud = FakeCloud::start().await;
    let pid = launch(&cloud, "m-1").await;
    let before = inventory_tags(&cloud, id_of(&pid)).await;
    let class = retagged(&cloud, json!({POOL: null, "team": "a"}));
    cloud.admin.reset_calls().await.unwrap();
    let req = request(&cloud, "m-1", &pid, class, Some(cloud.class.clone()), true);
    let done = cloud.driver().update_machine(&ctx("update", 10), req).await.unwrap();
    assert_eq!(outcome(&done, "providerSpec.tags"), ChangeOutcome::Applied);
    let calls = cloud.calls().await;
    assert_eq!(calls.breakdown(), "DescribeInstances×1");
    assert_eq!(calls.classes.get(&fake_cloud_support::OpClass::Write).copied().unwrap_or(0), 0);
    assert_eq!(inventory_tags(&cloud, id_of(&pid)).await, before);
}

#[tokio::test]
async fn replacement_fields_are_reported_never_applied() {
    let cloud = FakeCloud::start().await;
    let pid = launch(&cloud, "m-1").await;
    let driver = cloud.driver();
    let bigger = cloud.class_with(|s| s["instanceType"] = "ecs.g7.xlarge".into());
    cloud.admin.reset_calls().await.unwrap();
    let err =
        driver.update_machine(&ctx("update", 10), request(&cloud, "m-1", &pid, bigger, None, false)).await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::FailedPrecondition, NEEDS_REPLACEMENT), "{err:?}");
    assert!(err.message().contains("providerSpec.instanceType"), "{}", err.message());
    assert!(!err.message().contains("providerSpec.imageID"), "{}", err.message());
    assert_eq!(cloud.calls().await.breakdown(), "DescribeInstances×1");

    // A replacement beside a tag change: the tags are applied, the replacement reported.
    let both = cloud.class_with(|s| {
        s["imageID"] = fake_ecs::ALLOWED_IMAGE.into();
        s["zoneID"] = fake_ecs::ZONE_B.into();
        s["tags"]["team"] = "b".into();
    });
    let done =
        driver.update_machine(&ctx("update", 10), request(&cloud, "m-1", &pid, both, None, false)).await.unwrap();
    assert_eq!(outcome(&done, "providerSpec.tags"), ChangeOutcome::Applied);
    assert_eq!(outcome(&done, "providerSpec.imageID"), ChangeOutcome::NeedsReplacement);
    assert_eq!(outcome(&done, "providerSpec.zoneID"), ChangeOutcome::NeedsReplacement);
    assert_eq!(outcome(&done, "providerSpec.instanceType"), ChangeOutcome::Unchanged);
    let id = id_of(&pid);
    assert_eq!(inventory_tags(&cloud, id).await.get("team").map(String::as_str), Some("b"));
    let vm = cloud.inventory().await.instances.into_iter().find(|i| i.id == id).unwrap();
    assert_eq!(vm.extra["image_id"], fake_ecs::PUBLIC_IMAGE, "never applied");
    assert_eq!(vm.extra["zone"], fake_ecs::ZONE_A);
}

#[tokio::test]
async fn another_clusters_instance_is_not_found_and_untouched() {
    let cloud = FakeCloud::start().await;
    let foreign = tags(&[("kubernetes.io/cluster/shoot--dev--other", "1"), (ROLE, "1"), (POOL, "worker-a")]);
    let planted = cloud
        .admin
        .plant(&PlantRequest { name: "m-1".into(), tags: foreign.clone(), ..PlantRequest::default() })
        .await
        .unwrap();
    let pid = format!("eu-central-1.{}", planted.id);
    let class = retagged(&cloud, json!({POOL: null, "team": "a"}));
    cloud.admin.reset_calls().await.unwrap();
    let err = cloud
        .driver()
        .update_machine(&ctx("update", 10), request(&cloud, "m-1", &pid, class, Some(cloud.class.clone()), false))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err:?}");
    assert_eq!(cloud.calls().await.breakdown(), "DescribeInstances×1");
    assert_eq!(inventory_tags(&cloud, &planted.id).await, foreign);

    // Another machine's instance of this cluster (another uid) is NOT_FOUND too.
    let theirs = launch(&cloud, "m-2").await;
    let err = cloud
        .driver()
        .update_machine(&ctx("update", 10), request(&cloud, "m-1", &theirs, cloud.class.clone(), None, false))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err:?}");
    assert_eq!(inventory_tags(&cloud, id_of(&theirs)).await.get(UID_TAG).map(String::as_str), Some("uid-m-2"));
}

#[tokio::test]
async fn a_lost_answer_then_a_retry_converges() {
    let cloud = FakeCloud::start().await;
    let pid = launch(&cloud, "m-1").await;
    let class = retagged(&cloud, json!({POOL: null, "team": "a"}));
    let req = request(&cloud, "m-1", &pid, class, Some(cloud.class.clone()), false);
    cloud
        .admin
        .add_fault(Fault { operation: "TagResources", kind: "unavailable", times: Some(1), phase: "after" })
        .await
        .unwrap();
    let driver = cloud.driver();
    let err = driver.update_machine(&ctx("update", 10), req.clone()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err:?}");
    assert_eq!(cloud.calls().await.lost_answers, 1);
    cloud.admin.reset_calls().await.unwrap();
    let done = driver.update_machine(&ctx("update", 10), req).await.unwrap();
    assert!(done.changes.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "the lost write took effect: {done:?}");
    assert_eq!(cloud.calls().await.breakdown(), "DescribeInstances×1");
    let want = tags(&[(CLUSTER, "1"), (ROLE, "1"), ("team", "a"), (UID_TAG, "uid-m-1")]);
    assert_eq!(inventory_tags(&cloud, id_of(&pid)).await, want);
}

#[tokio::test]
async fn more_than_twenty_tags_on_the_instance_is_refused_before_any_write() {
    let cloud = FakeCloud::start().await;
    let pid = launch(&cloud, "m-1").await;
    let id = id_of(&pid).to_string();
    let others = cloud
        .ecs(
            "TagResources",
            &[
                ("RegionId", "eu-central-1"),
                ("ResourceType", "instance"),
                ("ResourceId.1", &id),
                ("Tag.1.Key", "ops"),
                ("Tag.1.Value", "keep"),
            ],
        )
        .await;
    others.unwrap();
    // 19 class tags + the uid tag + the operator's = 21.
    let class = cloud.class_with(|s| {
        for n in 0..16 {
            s["tags"][format!("extra-{n}")] = "x".into();
        }
    });
    cloud.admin.reset_calls().await.unwrap();
    let err = cloud
        .driver()
        .update_machine(&ctx("update", 10), request(&cloud, "m-1", &pid, class, None, false))
        .await
        .unwrap_err();
    assert_eq!((err.kind(), err.field()), (ErrorKind::InvalidArgument, Some("providerSpec.tags")), "{err:?}");
    assert!(err.message().contains("21 tags"), "{}", err.message());
    assert_eq!(cloud.calls().await.breakdown(), "DescribeInstances×1");
    assert_eq!(inventory_tags(&cloud, &id).await.len(), 5);
}

#[tokio::test]
async fn the_class_is_validated_as_create_validates_it() {
    let cloud = FakeCloud::start().await;
    let pid = "eu-central-1.i-gw8aaaaaaaaaaaaaaaaaaa";
    let bad = cloud.class_with(|s| s["tags"]["acs:reserved"] = "1".into());
    let err = cloud
        .driver()
        .update_machine(&ctx("update", 10), request(&cloud, "m-1", pid, bad.clone(), None, false))
        .await
        .unwrap_err();
    assert_eq!((err.kind(), err.field()), (ErrorKind::InvalidArgument, Some("providerSpec.tags")), "{err:?}");
    let err = cloud
        .driver()
        .update_machine(&ctx("update", 10), request(&cloud, "m-1", pid, cloud.class.clone(), Some(bad), false))
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("previous_machine_class.providerSpec.tags"), "{err:?}");
    let err = cloud
        .driver()
        .update_machine(&ctx("update", 10), request(&cloud, "m-1", pid, cloud.class.clone(), None, false))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "an absent instance: {err:?}");
    assert_eq!(cloud.calls().await.calls.keys().collect::<Vec<_>>(), ["DescribeInstances"]);
}
