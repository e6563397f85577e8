//! UpdateMachine (hot update) on Azure against fake-arm: the machine's tags
//! changed in place on the VM, its NIC and its disks through the Tags API;
//! a data disk grown and a Premium SSD v2's performance changed through
//! Disks - Update, what Azure does only with the VM deallocated (an OS disk's
//! growth, past 4 TiB, a shrink) reported as replacements with the reason;
//! VM size, image and zone reported as replacements; `validate_only`, repeats,
//! a lost answer and another cluster's VM.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use fake_cloud_support::{AttachedKind, Fault, OpClass, PlantAttached, PlantRequest};
use machine_driver_api::{
    ChangeOutcome, Driver, DriverError, ErrorKind, Machine, MachineClass, NEEDS_REPLACEMENT, UpdateMachine,
    UpdatedMachine,
};
use machine_driver_azure::AzureDriver;
use serde_json::{Value, json};
use support::{FakeCloud, class_with, ctx};

const TAGS: &str = "providerSpec.tags";
const VM_SIZE: &str = "providerSpec.properties.hardwareProfile.vmSize";
const UID_TAG: &str = "mcm.gardener.cloud-machine-uid";

async fn start() -> FakeCloud {
    let cloud = FakeCloud::start().await;
    cloud.admin("/timing", json!({"boot_ms": 100, "stop_ms": 100})).await;
    cloud
}

/// Creates machine `name` and waits until it runs; with `poll`, one status
/// poll tags its NIC and disks (as the first poll after a create does).
async fn running(cloud: &FakeCloud, driver: &AzureDriver, name: &str, poll: bool) {
    driver.create_machine(&ctx("create", 30), cloud.create_request(name)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    if poll {
        let status = driver.get_machine_status(&ctx("status", 10), cloud.machine_ref(name)).await.unwrap();
        assert_eq!(status.vm_state, "running");
    }
}

fn update(cloud: &FakeCloud, name: &str, class: &MachineClass, previous: Option<&MachineClass>) -> UpdateMachine {
    UpdateMachine {
        machine: Machine { provider_id: Some(format!("azure:///westeurope/{name}")), ..cloud.machine(name) },
        class: class.clone(),
        previous_class: previous.cloned(),
        secret: cloud.secret.clone(),
        validate_only: false,
    }
}

/// The example class with `team: b` added, `Name` changed and the pool tag removed.
fn retagged(cloud: &FakeCloud) -> MachineClass {
    class_with(&cloud.class, |spec| {
        let tags = spec["tags"].as_object_mut().unwrap();
        tags.insert("team".into(), "b".into());
        tags.insert("Name".into(), "renamed".into());
        tags.remove("worker.gardener.cloud_pool");
    })
}

/// The tags the fake's inventory shows on the VM and each of its NIC and disks, by name.
async fn tags_of(cloud: &FakeCloud, name: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let inv = cloud.inventory().await;
    inv.instances
        .into_iter()
        .chain(inv.dependents)
        .filter(|i| i.live && i.name.starts_with(name))
        .map(|i| (i.name, i.tags))
        .collect()
}

fn outcome(answer: &UpdatedMachine, field: &str) -> ChangeOutcome {
    answer.changes.iter().find(|c| c.field == field).unwrap_or_else(|| panic!("{field}: {answer:?}")).outcome
}

/// What the example class's machine `name` carries after the retag: exactly these.
fn expected_after_retag(name: &str) -> BTreeMap<String, String> {
    [
        ("Name", "renamed"),
        ("kubernetes.io-cluster-shoot--dev--conf", "1"),
        ("kubernetes.io-role-node", "1"),
        ("team", "b"),
        (UID_TAG, &format!("uid-{name}")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

const RESOURCES: [&str; 4] = ["", "-nic", "-os-disk", "-containerd-0-data-disk"];

#[tokio::test]
async fn tags_are_added_changed_and_removed_on_the_vm_nic_and_disks_then_a_repeat_writes_nothing() {
    let cloud = start().await;
    let driver = cloud.driver();
    running(&cloud, &driver, "up-1", true).await;
    let before = tags_of(&cloud, "up-1").await;
    assert_eq!(before.len(), 4, "{before:?}");
    assert!(before.values().all(|t| t.get("worker.gardener.cloud_pool").map(String::as_str) == Some("worker-a")));

    cloud.admin.reset_calls().await.unwrap();
    let new = retagged(&cloud);
    let answer =
        driver.update_machine(&ctx("update", 30), update(&cloud, "up-1", &new, Some(&cloud.class))).await.unwrap();
    assert_eq!(outcome(&answer, TAGS), ChangeOutcome::Applied);
    assert_eq!(outcome(&answer, VM_SIZE), ChangeOutcome::Unchanged);
    let detail = &answer.changes.iter().find(|c| c.field == TAGS).unwrap().detail;
    for what in ["the VM", "NIC up-1-nic", "disk up-1-os-disk", "disk up-1-containerd-0-data-disk"] {
        assert!(detail.contains(&format!("set Name, team; removed worker.gardener.cloud_pool on {what}")), "{detail}");
    }
    let after = tags_of(&cloud, "up-1").await;
    for suffix in RESOURCES {
        assert_eq!(after[&format!("up-1{suffix}")], expected_after_retag("up-1"), "up-1{suffix}");
    }
    // The calls one update costs: the VM GET, one tags read per dependent, one write per resource.
    let calls = cloud.calls().await;
    assert_eq!(calls.calls.get("virtualMachines.get"), Some(&1), "{:?}", calls.calls);
    // The NIC's tags through the Tags API; each disk's (with its size and performance) through disks.get.
    assert_eq!(calls.calls.get("tags.getAtScope"), Some(&1), "{:?}", calls.calls);
    assert_eq!(calls.calls.get("disks.get"), Some(&2), "{:?}", calls.calls);
    assert_eq!(calls.calls.get("tags.updateAtScope"), Some(&4), "{:?}", calls.calls);
    assert_eq!(calls.classes.get(&OpClass::Write), Some(&4));
    println!("one tag update: {} reads + {} writes", calls.classes[&OpClass::Read], calls.classes[&OpClass::Write]);

    // Through ARM's own API too.
    assert_eq!(cloud.vm_tags("up-1").await["team"], "b");

    // A repeat: every field UNCHANGED, reads only.
    cloud.admin.reset_calls().await.unwrap();
    let again =
        driver.update_machine(&ctx("update", 30), update(&cloud, "up-1", &new, Some(&cloud.class))).await.unwrap();
    assert!(again.changes.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "{again:?}");
    let calls = cloud.calls().await;
    assert_eq!(calls.classes.get(&OpClass::Write).copied().unwrap_or(0), 0, "{:?}", calls.calls);
    assert_eq!(calls.total, 4, "{:?}", calls.calls);
    assert_eq!(tags_of(&cloud, "up-1").await, after);
}

#[tokio::test]
async fn others_tags_stay_and_nothing_is_removed_without_the_previous_class() {
    let cloud = start().await;
    let driver = cloud.driver();
    running(&cloud, &driver, "up-2", true).await;
    // An operator's tag on the VM (the portal's tag blade uses the same API).
    let scope = format!(
        "{}/providers/Microsoft.Resources/tags/default",
        cloud.arm_path("Microsoft.Compute/virtualMachines", "up-2")
    );
    let (status, _) = cloud
        .arm(
            "PATCH",
            &scope,
            "2021-04-01",
            Some(json!({"operation": "Merge", "properties": {"tags": {"owner": "ops"}}})),
        )
        .await;
    assert_eq!(status, 200);
    let answer =
        driver.update_machine(&ctx("update", 30), update(&cloud, "up-2", &retagged(&cloud), None)).await.unwrap();
    assert_eq!(outcome(&answer, TAGS), ChangeOutcome::Applied);
    let vm = &tags_of(&cloud, "up-2").await["up-2"];
    assert_eq!(vm["owner"], "ops");
    assert_eq!(vm["worker.gardener.cloud_pool"], "worker-a", "not removed: the previous class is not known");
    assert_eq!(vm["team"], "b");
    assert_eq!(vm[UID_TAG], "uid-up-2");

    // Removal with the previous class and a change at once (one Replace each) keeps the operator's tag.
    let next = class_with(&retagged(&cloud), |spec| spec["tags"]["team"] = "c".into());
    driver.update_machine(&ctx("update", 30), update(&cloud, "up-2", &next, Some(&cloud.class))).await.unwrap();
    let all = tags_of(&cloud, "up-2").await;
    assert_eq!(all["up-2"]["owner"], "ops");
    for suffix in RESOURCES {
        let tags = &all[&format!("up-2{suffix}")];
        assert_eq!(tags["team"], "c", "up-2{suffix}");
        assert!(!tags.contains_key("worker.gardener.cloud_pool"), "up-2{suffix}: {tags:?}");
    }
}

#[tokio::test]
async fn validate_only_answers_the_same_and_makes_reads_only() {
    let cloud = start().await;
    let driver = cloud.driver();
    running(&cloud, &driver, "up-3", true).await;
    let before = tags_of(&cloud, "up-3").await;
    cloud.admin.reset_calls().await.unwrap();
    let mut req = update(&cloud, "up-3", &retagged(&cloud), Some(&cloud.class));
    req.validate_only = true;
    let answer = driver.update_machine(&ctx("update", 30), req).await.unwrap();
    assert_eq!(outcome(&answer, TAGS), ChangeOutcome::Applied);
    let calls = cloud.calls().await;
    assert_eq!(calls.classes.get(&OpClass::Write).copied().unwrap_or(0), 0, "{:?}", calls.calls);
    assert!(calls.classes.get(&OpClass::Read).copied().unwrap_or(0) > 0);
    assert_eq!(tags_of(&cloud, "up-3").await, before);
}

#[tokio::test]
async fn a_replacement_only_change_is_refused_naming_the_field_and_one_with_tags_applies_the_tags() {
    let cloud = start().await;
    let driver = cloud.driver();
    running(&cloud, &driver, "up-4", true).await;
    let before = tags_of(&cloud, "up-4").await;
    let bigger = |class: &MachineClass| {
        class_with(class, |spec| spec["properties"]["hardwareProfile"]["vmSize"] = "Standard_D4s_v3".into())
    };
    cloud.admin.reset_calls().await.unwrap();
    let err: DriverError = driver
        .update_machine(&ctx("update", 30), update(&cloud, "up-4", &bigger(&cloud.class), Some(&cloud.class)))
        .await
        .unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::FailedPrecondition, NEEDS_REPLACEMENT), "{err:?}");
    assert!(err.message().contains(VM_SIZE), "{}", err.message());
    assert_eq!(cloud.calls().await.classes.get(&OpClass::Write).copied().unwrap_or(0), 0);
    assert_eq!(tags_of(&cloud, "up-4").await, before);

    // Zone and image too, each named.
    let moved = class_with(&cloud.class, |spec| {
        spec["properties"]["zone"] = 2.into();
        spec["properties"]["storageProfile"]["imageReference"]["urn"] =
            "Canonical:ubuntu-24_04-lts:server:24.04.202501140".into();
    });
    let err = driver.update_machine(&ctx("update", 30), update(&cloud, "up-4", &moved, None)).await.unwrap_err();
    assert!(
        err.message().contains("providerSpec.properties.zone")
            && err.message().contains("providerSpec.properties.storageProfile.imageReference"),
        "{}",
        err.message()
    );
    // The same size in another casing is the same size (ARM compares them so).
    let cased =
        class_with(&cloud.class, |spec| spec["properties"]["hardwareProfile"]["vmSize"] = "standard_d2s_v3".into());
    let same = driver.update_machine(&ctx("update", 30), update(&cloud, "up-4", &cased, None)).await.unwrap();
    assert!(same.changes.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "{same:?}");

    let both = bigger(&retagged(&cloud));
    let answer =
        driver.update_machine(&ctx("update", 30), update(&cloud, "up-4", &both, Some(&cloud.class))).await.unwrap();
    assert_eq!(outcome(&answer, TAGS), ChangeOutcome::Applied);
    assert_eq!(outcome(&answer, VM_SIZE), ChangeOutcome::NeedsReplacement);
    let size = answer.changes.iter().find(|c| c.field == VM_SIZE).unwrap();
    assert!(size.detail.contains("Standard_D2s_v3") && size.detail.contains("Standard_D4s_v3"), "{}", size.detail);
    assert_eq!(tags_of(&cloud, "up-4").await["up-4"], expected_after_retag("up-4"));
}

#[tokio::test]
async fn another_clusters_vm_is_not_found_and_untouched_and_an_absent_one_is_not_found() {
    let cloud = start().await;
    let driver = cloud.driver();
    let theirs: BTreeMap<String, String> =
        [("kubernetes.io-cluster-shoot--dev--other", "1"), ("kubernetes.io-role-node", "1"), ("Name", "theirs")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    let nic = PlantAttached { tags: theirs.clone(), ..PlantAttached::new(AttachedKind::Nic, "their-1-nic") };
    let disk =
        PlantAttached { tags: theirs.clone(), boot: true, ..PlantAttached::new(AttachedKind::Disk, "their-1-os-disk") };
    cloud
        .admin
        .plant(&PlantRequest {
            name: "their-1".into(),
            tags: theirs.clone(),
            attached: vec![nic, disk],
            ..Default::default()
        })
        .await
        .unwrap();
    let before = tags_of(&cloud, "their-1").await;
    cloud.admin.reset_calls().await.unwrap();
    let err = driver
        .update_machine(&ctx("update", 30), update(&cloud, "their-1", &retagged(&cloud), None))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err:?}");
    assert_eq!(cloud.calls().await.classes.get(&OpClass::Write).copied().unwrap_or(0), 0);
    assert_eq!(tags_of(&cloud, "their-1").await, before);

    let err =
        driver.update_machine(&ctx("update", 30), update(&cloud, "nobody", &retagged(&cloud), None)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err:?}");
}

#[tokio::test]
async fn a_lost_answer_then_the_retry_converges() {
    let cloud = start().await;
    let driver = cloud.driver();
    running(&cloud, &driver, "up-5", true).await;
    cloud
        .admin
        .add_fault(Fault { operation: "tags.updateAtScope", kind: "unavailable", times: Some(1), phase: "after" })
        .await
        .unwrap();
    let new = retagged(&cloud);
    let lost = driver.update_machine(&ctx("update", 30), update(&cloud, "up-5", &new, Some(&cloud.class))).await;
    assert_eq!(lost.unwrap_err().kind(), ErrorKind::Unavailable);
    // Every write took effect (one answer was lost): the retry reads that and writes nothing.
    cloud.admin.reset_calls().await.unwrap();
    let retry =
        driver.update_machine(&ctx("update", 30), update(&cloud, "up-5", &new, Some(&cloud.class))).await.unwrap();
    assert!(retry.changes.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "{retry:?}");
    assert_eq!(cloud.calls().await.classes.get(&OpClass::Write).copied().unwrap_or(0), 0);
    let after = tags_of(&cloud, "up-5").await;
    for suffix in RESOURCES {
        assert_eq!(after[&format!("up-5{suffix}")], expected_after_retag("up-5"), "up-5{suffix}");
    }

    // A write refused before it took effect: the retry writes that one.
    cloud
        .admin
        .add_fault(Fault { operation: "tags.updateAtScope", kind: "unavailable", times: Some(1), phase: "before" })
        .await
        .unwrap();
    let next = class_with(&new, |spec| spec["tags"]["team"] = "d".into());
    assert!(driver.update_machine(&ctx("update", 30), update(&cloud, "up-5", &next, Some(&new))).await.is_err());
    cloud.admin.reset_calls().await.unwrap();
    let retry = driver.update_machine(&ctx("update", 30), update(&cloud, "up-5", &next, Some(&new))).await.unwrap();
    assert_eq!(outcome(&retry, TAGS), ChangeOutcome::Applied);
    assert_eq!(cloud.calls().await.calls.get("tags.updateAtScope"), Some(&1), "only the one refused write again");
    assert!(tags_of(&cloud, "up-5").await.values().all(|t| t["team"] == "d"));
}

#[tokio::test]
async fn an_update_before_the_first_poll_tags_the_nic_and_disks_and_the_poll_keeps_the_new_tags() {
    let cloud = start().await;
    let driver = cloud.driver();
    running(&cloud, &driver, "up-6", false).await;
    assert!(tags_of(&cloud, "up-6").await["up-6-nic"].is_empty(), "ARM makes the NIC untagged");
    driver
        .update_machine(&ctx("update", 30), update(&cloud, "up-6", &retagged(&cloud), Some(&cloud.class)))
        .await
        .unwrap();
    // The create's pending tagging runs on this poll: with the class's tags of now.
    driver.get_machine_status(&ctx("status", 10), cloud.machine_ref("up-6")).await.unwrap();
    let after = tags_of(&cloud, "up-6").await;
    for suffix in RESOURCES {
        assert_eq!(after[&format!("up-6{suffix}")], expected_after_retag("up-6"), "up-6{suffix}");
    }
}

#[tokio::test]
async fn classes_are_checked_as_create_checks_them_and_the_capability_is_on() {
    let cloud = start().await;
    let driver = cloud.driver();
    assert!(driver.info().capabilities.update_machine);
    let too_long = class_with(&cloud.class, |spec| spec["tags"]["team"] = Value::String("v".repeat(257)));
    let err = driver.update_machine(&ctx("update", 30), update(&cloud, "x-1", &too_long, None)).await.unwrap_err();
    assert_eq!(err.field(), Some(TAGS), "{err:?}");
    let bad_previous = class_with(&cloud.class, |spec| spec["location"] = "".into());
    let err = driver
        .update_machine(&ctx("update", 30), update(&cloud, "x-1", &cloud.class, Some(&bad_previous)))
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("previous_machine_class.providerSpec.location"), "{err:?}");
    assert_eq!(cloud.calls().await.total, 0, "refused before any call");
}

const DATA_SIZE: &str = "providerSpec.properties.storageProfile.dataDisks[0].diskSizeGB";
const DATA_IOPS: &str = "providerSpec.properties.storageProfile.dataDisks[0].diskIOPSReadWrite";
const DATA_MBPS: &str = "providerSpec.properties.storageProfile.dataDisks[0].diskMBpsReadWrite";
const OS_SIZE: &str = "providerSpec.properties.storageProfile.osDisk.diskSizeGB";

/// The class with its data disk `containerd` (lun 0) replaced by `disk` (merged into the example's).
fn with_data_disk(class: &MachineClass, disk: Value) -> MachineClass {
    class_with(class, |spec| {
        let data = &mut spec["properties"]["storageProfile"]["dataDisks"][0];
        for (k, v) in disk.as_object().unwrap() {
            data[k] = v.clone();
        }
    })
}

/// Disk `name` as ARM's Disks - Get shows it.
async fn disk(cloud: &FakeCloud, name: &str) -> Value {
    let (status, disk) = cloud.arm("GET", &cloud.arm_path("Microsoft.Compute/disks", name), "2024-03-02", None).await;
    assert_eq!(status, 200, "disk {name}: {disk}");
    disk
}

fn writes(calls: &fake_cloud_support::CallCounts) -> u64 {
    calls.classes.get(&OpClass::Write).copied().unwrap_or(0)
}

#[tokio::test]
async fn a_data_disk_grows_in_place_then_a_repeat_validate_only_and_a_lost_answer_write_nothing_more() {
    let cloud = start().await;
    let driver = cloud.driver();
    running(&cloud, &driver, "dk-1", true).await;
    let bigger = with_data_disk(&cloud.class, json!({"diskSizeGB": 128}));

    // validate_only: the same answer, nothing written.
    cloud.admin.reset_calls().await.unwrap();
    let mut req = update(&cloud, "dk-1", &bigger, Some(&cloud.class));
    req.validate_only = true;
    let answer = driver.update_machine(&ctx("update", 30), req).await.unwrap();
    assert_eq!(outcome(&answer, DATA_SIZE), ChangeOutcome::Applied);
    assert_eq!(writes(&cloud.calls().await), 0);
    assert_eq!(disk(&cloud, "dk-1-containerd-0-data-disk").await["properties"]["diskSizeGB"], 64);

    cloud.admin.reset_calls().await.unwrap();
    let answer =
        driver.update_machine(&ctx("update", 30), update(&cloud, "dk-1", &bigger, Some(&cloud.class))).await.unwrap();
    assert_eq!(outcome(&answer, DATA_SIZE), ChangeOutcome::Applied);
    assert_eq!(outcome(&answer, OS_SIZE), ChangeOutcome::Unchanged);
    assert_eq!(outcome(&answer, TAGS), ChangeOutcome::Unchanged);
    let detail = &answer.changes.iter().find(|c| c.field == DATA_SIZE).unwrap().detail;
    assert!(detail.contains("64 -> 128 GB on disk dk-1-containerd-0-data-disk"), "{detail}");
    assert_eq!(disk(&cloud, "dk-1-containerd-0-data-disk").await["properties"]["diskSizeGB"], 128);
    let calls = cloud.calls().await;
    assert_eq!(calls.calls.get("disks.update"), Some(&1), "{:?}", calls.calls);
    assert_eq!(writes(&calls), 1, "{:?}", calls.calls);
    assert!(calls.calls.get("operations.get").copied().unwrap_or(0) >= 1, "the operation is waited for");

    // A repeat reads what is and writes nothing.
    cloud.admin.reset_calls().await.unwrap();
    let again =
        driver.update_machine(&ctx("update", 30), update(&cloud, "dk-1", &bigger, Some(&cloud.class))).await.unwrap();
    assert!(again.changes.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "{again:?}");
    assert_eq!(writes(&cloud.calls().await), 0);

    // The write done, its answer lost: the retry finds the size and writes nothing.
    cloud
        .admin
        .add_fault(Fault { operation: "disks.update", kind: "unavailable", times: Some(1), phase: "after" })
        .await
        .unwrap();
    let biggest = with_data_disk(&cloud.class, json!({"diskSizeGB": 256}));
    let lost = driver.update_machine(&ctx("update", 30), update(&cloud, "dk-1", &biggest, Some(&bigger))).await;
    assert_eq!(lost.unwrap_err().kind(), ErrorKind::Unavailable);
    tokio::time::sleep(Duration::from_millis(100)).await;
    cloud.admin.reset_calls().await.unwrap();
    let retry =
        driver.update_machine(&ctx("update", 30), update(&cloud, "dk-1", &biggest, Some(&bigger))).await.unwrap();
    assert_eq!(outcome(&retry, DATA_SIZE), ChangeOutcome::Unchanged, "{retry:?}");
    assert_eq!(writes(&cloud.calls().await), 0);
    assert_eq!(disk(&cloud, "dk-1-containerd-0-data-disk").await["properties"]["diskSizeGB"], 256);
}

#[tokio::test]
async fn what_azure_grows_only_with_the_vm_deallocated_and_a_shrink_are_replacements_with_the_reason() {
    let cloud = start().await;
    let driver = cloud.driver();
    running(&cloud, &driver, "dk-2", true).await;
    cloud.admin.reset_calls().await.unwrap();
    let cases = [
        (
            OS_SIZE,
            class_with(&cloud.class, |spec| spec["properties"]["storageProfile"]["osDisk"]["diskSizeGB"] = 80.into()),
            "an OS disk grows only with its VM deallocated",
        ),
        (DATA_SIZE, with_data_disk(&cloud.class, json!({"diskSizeGB": 32})), "a managed disk cannot shrink"),
        (
            DATA_SIZE,
            with_data_disk(&cloud.class, json!({"diskSizeGB": 5000})),
            "a StandardSSD_LRS disk of 4 TiB or less grows past 4 TiB only with its VM deallocated",
        ),
    ];
    for (field, class, why) in cases {
        let err = driver
            .update_machine(&ctx("update", 30), update(&cloud, "dk-2", &class, Some(&cloud.class)))
            .await
            .unwrap_err();
        assert_eq!((err.kind(), err.reason()), (ErrorKind::FailedPrecondition, NEEDS_REPLACEMENT), "{err:?}");
        assert!(err.message().contains(field) && err.message().contains(why), "{}", err.message());
    }
    // With a tag change, the tag is applied and the growth reported with its reason.
    let both = class_with(&retagged(&cloud), |spec| {
        spec["properties"]["storageProfile"]["osDisk"]["diskSizeGB"] = 80.into();
    });
    cloud.admin.reset_calls().await.unwrap();
    let answer =
        driver.update_machine(&ctx("update", 30), update(&cloud, "dk-2", &both, Some(&cloud.class))).await.unwrap();
    assert_eq!(outcome(&answer, TAGS), ChangeOutcome::Applied);
    assert_eq!(outcome(&answer, OS_SIZE), ChangeOutcome::NeedsReplacement);
    let detail = &answer.changes.iter().find(|c| c.field == OS_SIZE).unwrap().detail;
    assert!(detail.contains("\"50\" -> \"80\"") && detail.contains("never stops a VM"), "{detail}");
    assert_eq!(cloud.calls().await.calls.get("disks.update"), None, "no disk write");
    assert_eq!(disk(&cloud, "dk-2-os-disk").await["properties"]["diskSizeGB"], 50);
    assert_eq!(disk(&cloud, "dk-2-containerd-0-data-disk").await["properties"]["diskSizeGB"], 64);
}

#[tokio::test]
async fn a_premium_v2_disks_performance_changes_in_place_within_azures_limits_and_cooldown() {
    let cloud = start().await;
    let driver = cloud.driver();
    let v2 = |iops: i64, mbps: i64| {
        with_data_disk(
            &cloud.class,
            json!({"storageAccountType": "PremiumV2_LRS", "diskIOPSReadWrite": iops, "diskMBpsReadWrite": mbps}),
        )
    };
    let base = v2(4000, 150);
    let create = machine_driver_api::CreateMachine { class: base.clone(), ..cloud.create_request("dk-3") };
    driver.create_machine(&ctx("create", 30), create).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let name = "dk-3-containerd-0-data-disk";
    let made = disk(&cloud, name).await;
    assert_eq!(made["sku"]["name"], "PremiumV2_LRS");
    assert_eq!(
        (made["properties"]["diskIOPSReadWrite"].clone(), made["properties"]["diskMBpsReadWrite"].clone()),
        (json!(4000), json!(150)),
        "made with its performance before the VM: {made}"
    );

    cloud.admin.reset_calls().await.unwrap();
    let faster = v2(6000, 200);
    let answer = driver.update_machine(&ctx("update", 30), update(&cloud, "dk-3", &faster, Some(&base))).await.unwrap();
    assert_eq!(outcome(&answer, DATA_IOPS), ChangeOutcome::Applied);
    assert_eq!(outcome(&answer, DATA_MBPS), ChangeOutcome::Applied);
    assert_eq!(outcome(&answer, DATA_SIZE), ChangeOutcome::Unchanged);
    let shown = disk(&cloud, name).await;
    assert_eq!(
        (shown["properties"]["diskIOPSReadWrite"].clone(), shown["properties"]["diskMBpsReadWrite"].clone()),
        (json!(6000), json!(200))
    );
    assert_eq!(cloud.calls().await.calls.get("disks.update"), Some(&1), "size and performance in one call");
    let again = driver.update_machine(&ctx("update", 30), update(&cloud, "dk-3", &faster, Some(&base))).await.unwrap();
    assert!(again.changes.iter().all(|c| c.outcome == ChangeOutcome::Unchanged), "{again:?}");

    // Out of Premium SSD v2's bounds: refused before any call, the field named.
    cloud.admin.reset_calls().await.unwrap();
    let err = driver
        .update_machine(&ctx("update", 30), update(&cloud, "dk-3", &v2(90_000, 200), Some(&base)))
        .await
        .unwrap_err();
    assert_eq!((err.kind(), err.field()), (ErrorKind::InvalidArgument, Some(DATA_IOPS)), "{err:?}");
    let err = driver
        .update_machine(&ctx("update", 30), update(&cloud, "dk-3", &v2(6000, 1600), Some(&base)))
        .await
        .unwrap_err();
    assert_eq!((err.kind(), err.field()), (ErrorKind::InvalidArgument, Some(DATA_MBPS)), "{err:?}");
    assert_eq!(cloud.calls().await.total, 0);

    // Four changes a day: the fifth is refused by ARM (409 OperationNotAllowed), the field named.
    for (i, iops) in [7000, 8000, 9000].into_iter().enumerate() {
        let answer = driver
            .update_machine(&ctx("update", 30), update(&cloud, "dk-3", &v2(iops, 200), Some(&base)))
            .await
            .unwrap_or_else(|e| panic!("change {}: {e:?}", i + 2));
        assert_eq!(outcome(&answer, DATA_IOPS), ChangeOutcome::Applied);
    }
    let err = driver
        .update_machine(&ctx("update", 30), update(&cloud, "dk-3", &v2(10_000, 200), Some(&base)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FailedPrecondition, "{err:?}");
    assert!(err.message().contains(DATA_IOPS) && err.message().contains("24 hours"), "{}", err.message());
    assert_eq!(disk(&cloud, name).await["properties"]["diskIOPSReadWrite"], 9000);
}

#[tokio::test]
async fn performance_on_a_disk_type_without_it_is_refused_naming_the_field() {
    let cloud = start().await;
    let driver = cloud.driver();
    let class = with_data_disk(&cloud.class, json!({"diskIOPSReadWrite": 4000}));
    let err = driver.update_machine(&ctx("update", 30), update(&cloud, "x-2", &class, None)).await.unwrap_err();
    assert_eq!((err.kind(), err.field()), (ErrorKind::InvalidArgument, Some(DATA_IOPS)), "{err:?}");
    assert!(err.message().contains("StandardSSD_LRS"), "{}", err.message());
}
