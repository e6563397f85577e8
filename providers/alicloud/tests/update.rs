//! UpdateMachine against the fake ECS: tags set, changed and removed with
//! TagResources/UntagResources on the instance, its disks and its primary ENI
//! (read back from the fake's inventory and from DescribeInstances), disks
//! grown with ResizeDisk online and the security group replaced with
//! ModifyInstanceAttribute (read back from DescribeDisks and DescribeInstances),
//! what each update costs, validate_only, replacement-only fields, a repeat, a
//! foreign instance and lost answers.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;

use fake_cloud_support::{Fault, PlantRequest};
use machine_driver_api::{
    ChangeOutcome, CreateMachine, Driver, ErrorKind, MachineClass, NEEDS_REPLACEMENT, UpdateMachine, UpdatedMachine,
};
use serde_json::{Value, json};
use support::{FakeCloud, ctx};

const CLUSTER: &str = "kubernetes.io/cluster/shoot--dev--conf";
const ROLE: &str = "kubernetes.io/role/node";
const POOL: &str = "worker.gardener.cloud/pool";
const UID_TAG: &str = "mcm.gardener.cloud/machine-uid";
/// What every update of an instance of this cluster reads: the instance, its disks, its primary ENI.
const READS: &str = "DescribeDisks×1, DescribeInstances×1, DescribeNetworkInterfaces×1";

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

/// The tags of the instance's disks and primary ENI as the inventory shows them, by `kind id`.
async fn dependent_tags(cloud: &FakeCloud, id: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let inventory = cloud.inventory().await;
    let of_vm = inventory.dependents.into_iter().filter(|d| d.live && d.extra["instance_id"] == id);
    of_vm.map(|d| (format!("{} {}", d.extra["kind"].as_str().unwrap(), d.id), d.tags)).collect()
}

/// The instance's disks as DescribeDisks answers them: `(Type, DiskName, Size)`.
async fn described_disks(cloud: &FakeCloud, id: &str) -> Vec<(String, String, u64)> {
    let answer = cloud.ecs("DescribeDisks", &[("RegionId", "eu-central-1"), ("InstanceId", id)]).await.unwrap();
    answer["Disks"]["Disk"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let text = |k: &str| d[k].as_str().unwrap().to_string();
            (text("Type"), text("DiskName"), d["Size"].as_u64().unwrap())
        })
        .collect()
}

/// The instance's security groups as DescribeInstances answers them.
async fn described_groups(cloud: &FakeCloud, id: &str) -> Vec<String> {
    let ids = serde_json::to_string(&[id]).unwrap();
    let answer = cloud.ecs("DescribeInstances", &[("RegionId", "eu-central-1"), ("InstanceIds", &ids)]).await.unwrap();
    serde_json::from_value(answer["Instances"]["Instance"][0]["SecurityGroupIds"]["SecurityGroupId"].clone()).unwrap()
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
    assert!(detail.contains(" on system disk d-") && detail.contains(" on data disk d-"), "{detail}");
    assert!(detail.contains(" on ENI eni-"), "{detail}");
    let calls = cloud.calls().await;
    assert_eq!(
        calls.breakdown(),
        format!("{READS}, TagResources×3, UntagResources×3"),
        "one tag update's cost: one removal and one set per resource type (the two disks share theirs)"
    );
    let want = tags(&[(CLUSTER, "1"), (ROLE, "2"), ("team", "a"), ("ops", "keep"), (UID_TAG, "uid-m-1")]);
    assert_eq!(inventory_tags(&cloud, &id).await, want);
    assert_eq!(described_tags(&cloud, &id).await, want);
    // RunInstances tagged the disks and the ENI as the instance: they follow the class too.
    let dependents = dependent_tags(&cloud, &id).await;
    assert_eq!(dependents.len(), 3, "system disk, data disk, primary ENI: {dependents:?}");
    let without_ops = tags(&[(CLUSTER, "1"), (ROLE, "2"), ("team", "a"), (UID_TAG, "uid-m-1")]);
    for (what, have) in &dependents {
        assert_eq!(have, &without_ops, "{what}");
    }

    // The repeat: all UNCHANGED, the reads, no write.
    cloud.admin.reset_calls().await.unwrap();
    let again = driver.update_machine(&ctx("update", 10), req).await.unwrap();
    assert!(again.changes.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "{again:?}");
    assert_eq!(cloud.calls().await.breakdown(), READS);

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
    assert_eq!(calls.breakdown(), READS);
    assert_eq!(calls.classes.get(&fake_cloud_support::OpClass::Write).copied().unwrap_or(0), 0);
    assert_eq!(inventory_tags(&cloud, id_of(&pid)).await, before);
    assert!(dependent_tags(&cloud, id_of(&pid)).await.values().all(|t| t.contains_key(POOL)), "nothing removed");
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
    assert_eq!(cloud.calls().await.breakdown(), READS);

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
    // The retry writes what the first attempt did not reach; the lost write (the
    // disks', the first TagResources) took effect and is not repeated.
    let done = driver.update_machine(&ctx("update", 10), req.clone()).await.unwrap();
    assert_eq!(outcome(&done, "providerSpec.tags"), ChangeOutcome::Applied, "{done:?}");
    let detail = &done.changes.iter().find(|c| c.field == "providerSpec.tags").unwrap().detail;
    assert!(!detail.contains("disk"), "the disks' tags were set by the lost write: {detail}");
    let want = tags(&[(CLUSTER, "1"), (ROLE, "1"), ("team", "a"), (UID_TAG, "uid-m-1")]);
    assert_eq!(inventory_tags(&cloud, id_of(&pid)).await, want);
    for (what, have) in dependent_tags(&cloud, id_of(&pid)).await {
        assert_eq!(have, want, "{what}");
    }
    cloud.admin.reset_calls().await.unwrap();
    let again = driver.update_machine(&ctx("update", 10), req).await.unwrap();
    assert!(again.changes.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "converged: {again:?}");
    assert_eq!(cloud.calls().await.breakdown(), READS);
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
    assert_eq!(cloud.calls().await.breakdown(), READS);
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

/// The base class with the system disk at 60 GiB, the data disk at 80 GiB and
/// the second security group.
fn grown(cloud: &FakeCloud) -> MachineClass {
    cloud.class_with(|s| {
        s["systemDisk"]["size"] = 60.into();
        s["dataDisks"][0]["size"] = 80.into();
        s["securityGroupID"] = fake_ecs::SECURITY_GROUP_B.into();
    })
}

#[tokio::test]
async fn disks_grow_online_and_the_security_group_is_replaced() {
    let cloud = FakeCloud::start().await;
    let pid = launch(&cloud, "m-1").await;
    let id = id_of(&pid).to_string();
    let driver = cloud.driver();
    let before = described_disks(&cloud, &id).await;
    let disk = |kind: &str, name: &str, size: u64| (kind.to_string(), name.to_string(), size);
    assert_eq!(before, [disk("system", "", 50), disk("data", "m-1-containerd-data-disk", 64)]);

    // validate_only: the same answer, nothing written.
    cloud.admin.reset_calls().await.unwrap();
    let dry = request(&cloud, "m-1", &pid, grown(&cloud), Some(cloud.class.clone()), true);
    let answer = driver.update_machine(&ctx("update", 10), dry).await.unwrap();
    for field in ["providerSpec.systemDisk.size", "providerSpec.dataDisks[0].size", "providerSpec.securityGroupID"] {
        assert_eq!(outcome(&answer, field), ChangeOutcome::Applied, "{field}: {answer:?}");
    }
    assert_eq!(outcome(&answer, "providerSpec.tags"), ChangeOutcome::Unchanged);
    assert_eq!(outcome(&answer, "providerSpec.systemDisk.category"), ChangeOutcome::Unchanged);
    assert_eq!(cloud.calls().await.breakdown(), READS);
    assert_eq!(described_disks(&cloud, &id).await, before);
    assert_eq!(described_groups(&cloud, &id).await, [fake_ecs::SECURITY_GROUP]);

    let req = request(&cloud, "m-1", &pid, grown(&cloud), Some(cloud.class.clone()), false);
    cloud.admin.reset_calls().await.unwrap();
    let done = driver.update_machine(&ctx("update", 10), req.clone()).await.unwrap();
    assert_eq!(done.changes.iter().filter(|c| c.outcome == ChangeOutcome::Applied).count(), 3, "{done:?}");
    let detail = &done.changes.iter().find(|c| c.field == "providerSpec.systemDisk.size").unwrap().detail;
    assert!(detail.starts_with("50 -> 60 GiB on disk d-"), "{detail}");
    assert_eq!(cloud.calls().await.breakdown(), format!("{READS}, ModifyInstanceAttribute×1, ResizeDisk×2"));
    assert_eq!(
        described_disks(&cloud, &id).await,
        [disk("system", "", 60), disk("data", "m-1-containerd-data-disk", 80)]
    );
    assert_eq!(described_groups(&cloud, &id).await, [fake_ecs::SECURITY_GROUP_B], "the previous class's group left");

    // The repeat writes nothing.
    cloud.admin.reset_calls().await.unwrap();
    let again = driver.update_machine(&ctx("update", 10), req).await.unwrap();
    assert!(again.changes.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "{again:?}");
    assert_eq!(cloud.calls().await.breakdown(), READS);

    // Without the previous class the class's group is added, none removed.
    let smaller_ok = cloud.class_with(|s| {
        s["systemDisk"]["size"] = 60.into();
        s["dataDisks"][0]["size"] = 80.into();
    });
    let done = driver.update_machine(&ctx("update", 10), request(&cloud, "m-1", &pid, smaller_ok, None, false)).await;
    assert_eq!(outcome(&done.unwrap(), "providerSpec.securityGroupID"), ChangeOutcome::Applied);
    assert_eq!(described_groups(&cloud, &id).await, [fake_ecs::SECURITY_GROUP_B, fake_ecs::SECURITY_GROUP]);
}

/// An edit of the class's providerSpec.
type Patch = fn(&mut Value);

#[tokio::test]
async fn what_ecs_cannot_change_online_is_reported_never_applied() {
    let cloud = FakeCloud::start().await;
    let pid = launch(&cloud, "m-1").await;
    let id = id_of(&pid).to_string();
    let driver = cloud.driver();
    let cases: [(&str, Patch); 3] = [
        ("providerSpec.systemDisk.size", |s| s["systemDisk"]["size"] = 40.into()),
        ("providerSpec.dataDisks[0].category", |s| s["dataDisks"][0]["category"] = "cloud_ssd".into()),
        ("providerSpec.dataDisks[1]", |s| {
            let disks = s["dataDisks"].as_array_mut().unwrap();
            disks.push(json!({"name": "logs", "size": 40, "category": "cloud_essd"}));
        }),
    ];
    for (field, patch) in cases {
        cloud.admin.reset_calls().await.unwrap();
        let class = cloud.class_with(patch);
        let err = driver
            .update_machine(&ctx("update", 10), request(&cloud, "m-1", &pid, class, None, false))
            .await
            .unwrap_err();
        assert_eq!((err.kind(), err.reason()), (ErrorKind::FailedPrecondition, NEEDS_REPLACEMENT), "{field}: {err:?}");
        assert!(err.message().contains(field), "{field}: {}", err.message());
        assert_eq!(cloud.calls().await.breakdown(), READS, "{field}");
    }
    let disk = |kind: &str, name: &str, size: u64| (kind.to_string(), name.to_string(), size);
    assert_eq!(
        described_disks(&cloud, &id).await,
        [disk("system", "", 50), disk("data", "m-1-containerd-data-disk", 64)]
    );

    // A basic disk resizes offline only (a restart): not in place.
    let basic = cloud.class_with(|s| s["systemDisk"]["category"] = "cloud".into());
    let create = CreateMachine { class: basic.clone(), ..cloud.create_request("m-2") };
    let created = driver.create_machine(&ctx("create", 30), create).await.unwrap();
    cloud.wait_running(id_of(&created.provider_id)).await;
    let bigger = cloud.class_with(|s| {
        s["systemDisk"]["category"] = "cloud".into();
        s["systemDisk"]["size"] = 80.into();
        s["tags"]["team"] = "b".into();
    });
    let done = driver
        .update_machine(&ctx("update", 10), request(&cloud, "m-2", &created.provider_id, bigger, Some(basic), false))
        .await
        .unwrap();
    assert_eq!(outcome(&done, "providerSpec.systemDisk.size"), ChangeOutcome::NeedsReplacement, "{done:?}");
    let detail = &done.changes.iter().find(|c| c.field == "providerSpec.systemDisk.size").unwrap().detail;
    assert!(detail.contains("cloud disks resize offline only"), "{detail}");
    assert_eq!(outcome(&done, "providerSpec.tags"), ChangeOutcome::Applied);
    assert_eq!(described_disks(&cloud, id_of(&created.provider_id)).await[0].2, 50);
}

#[tokio::test]
async fn a_lost_resize_answer_then_a_retry_converges() {
    let cloud = FakeCloud::start().await;
    let pid = launch(&cloud, "m-1").await;
    let id = id_of(&pid).to_string();
    cloud
        .admin
        .add_fault(Fault { operation: "ResizeDisk", kind: "unavailable", times: Some(1), phase: "after" })
        .await
        .unwrap();
    let driver = cloud.driver();
    let req = request(&cloud, "m-1", &pid, grown(&cloud), Some(cloud.class.clone()), false);
    let err = driver.update_machine(&ctx("update", 10), req.clone()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err:?}");
    cloud.admin.reset_calls().await.unwrap();
    let done = driver.update_machine(&ctx("update", 10), req.clone()).await.unwrap();
    assert_eq!(outcome(&done, "providerSpec.securityGroupID"), ChangeOutcome::Unchanged, "{done:?}");
    assert_eq!(outcome(&done, "providerSpec.systemDisk.size"), ChangeOutcome::Unchanged, "the lost resize took effect");
    assert_eq!(outcome(&done, "providerSpec.dataDisks[0].size"), ChangeOutcome::Applied);
    assert_eq!(cloud.calls().await.breakdown(), format!("{READS}, ResizeDisk×1"));
    let sizes: Vec<u64> = described_disks(&cloud, &id).await.into_iter().map(|d| d.2).collect();
    assert_eq!(sizes, [60, 80]);
}

#[tokio::test]
async fn a_class_change_this_driver_cannot_apply_is_reported_never_dropped() {
    // ECS changes neither the key pair nor the bandwidth of a running instance
    // through this driver: an edit of either, with the class it replaces,
    // is NEEDS_REPLACEMENT naming the field, and nothing is written.
    let cloud = FakeCloud::start().await;
    let pid = launch(&cloud, "m-1").await;
    let driver = cloud.driver();
    let previous = cloud.class_with(|_| {});
    let edited = cloud.class_with(|s| {
        s["keyPairName"] = "another-key".into();
        s["internetMaxBandwidthOut"] = 42.into();
    });
    cloud.admin.reset_calls().await.unwrap();
    let err = driver
        .update_machine(&ctx("update", 10), request(&cloud, "m-1", &pid, edited.clone(), Some(previous.clone()), false))
        .await
        .unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::FailedPrecondition, NEEDS_REPLACEMENT), "{err:?}");
    for field in ["providerSpec.keyPairName", "providerSpec.internetMaxBandwidthOut"] {
        assert!(err.message().contains(field), "{field} named: {}", err.message());
    }
    assert!(!err.message().contains("another-key"), "no value echoed: {}", err.message());
    assert_eq!(cloud.calls().await.breakdown(), READS, "nothing written");

    // Beside a tag edit: the tags are applied, the two fields reported.
    let with_tags = cloud.class_with(|s| {
        s["keyPairName"] = "another-key".into();
        s["internetMaxBandwidthOut"] = 42.into();
        s["tags"]["team"] = "c".into();
    });
    let done = driver
        .update_machine(&ctx("update", 10), request(&cloud, "m-1", &pid, with_tags, Some(previous), false))
        .await
        .unwrap();
    assert_eq!(outcome(&done, "providerSpec.tags"), ChangeOutcome::Applied);
    assert_eq!(outcome(&done, "providerSpec.keyPairName"), ChangeOutcome::NeedsReplacement);
    assert_eq!(outcome(&done, "providerSpec.internetMaxBandwidthOut"), ChangeOutcome::NeedsReplacement);
}
