//! The disks and primary ENI RunInstances makes, as ECS keeps them: DescribeDisks
//! and DescribeNetworkInterfaces show them with RunInstances' tags,
//! TagResources/UntagResources `disk` and `eni` change them, ResizeDisk grows a
//! disk (online only for the categories the reference names), ModifyInstanceAttribute
//! `SecurityGroupIds.N` replaces the security groups, each reflected in the
//! Describe* answers and the inventory; errors with the reference's codes.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use common::Fake;
use fake_ecs::{REGION, SECURITY_GROUP, SECURITY_GROUP_B};
use serde_json::{Value, json};

fn tags_of(resource: &Value) -> BTreeMap<String, String> {
    resource["Tags"]["Tag"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["TagKey"].as_str().unwrap().to_owned(), t["TagValue"].as_str().unwrap().to_owned()))
        .collect()
}

async fn disks(fake: &Fake, instance: &str) -> Vec<Value> {
    let body = fake.call("DescribeDisks", &[("RegionId", REGION), ("InstanceId", instance)]).await.ok();
    body["Disks"]["Disk"].as_array().unwrap().clone()
}

async fn eni(fake: &Fake, instance: &str) -> Value {
    let body = fake.call("DescribeNetworkInterfaces", &[("RegionId", REGION), ("InstanceId", instance)]).await.ok();
    let sets = body["NetworkInterfaceSets"]["NetworkInterfaceSet"].as_array().unwrap();
    assert_eq!(sets.len(), 1, "{body}");
    sets[0].clone()
}

const LAUNCH: &[(&str, &str)] = &[
    ("Tag.1.Key", "team"),
    ("Tag.1.Value", "a"),
    ("SystemDisk.Category", "cloud_essd"),
    ("SystemDisk.Size", "50"),
    ("DataDisk.1.Category", "cloud_essd"),
    ("DataDisk.1.Size", "64"),
    ("DataDisk.1.DiskName", "m-1-containerd-data-disk"),
    ("DataDisk.2.Category", "ephemeral_ssd"),
    ("DataDisk.2.Size", "100"),
    ("DataDisk.2.DeleteWithInstance", "false"),
];

#[tokio::test]
async fn run_instances_makes_tagged_disks_and_a_primary_eni_that_describe_shows() {
    let fake = Fake::start().await;
    let id = fake.run(LAUNCH).await.remove(0);
    let other = fake.run(&[]).await.remove(0);
    let found = disks(&fake, &id).await;
    let summary: Vec<(&str, &str, u64, &str)> = found
        .iter()
        .map(|d| {
            (
                d["Type"].as_str().unwrap(),
                d["Category"].as_str().unwrap(),
                d["Size"].as_u64().unwrap(),
                d["DiskName"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("system", "cloud_essd", 50, ""),
            ("data", "cloud_essd", 64, "m-1-containerd-data-disk"),
            ("data", "ephemeral_ssd", 100, "")
        ]
    );
    assert!(found.iter().all(|d| d["DiskId"].as_str().unwrap().starts_with("d-") && d["InstanceId"] == id.as_str()));
    assert!(found.iter().all(|d| d["Status"] == "In_use"));
    assert_eq!(found[0]["PerformanceLevel"], "PL1", "RunInstances' default for an ESSD");
    let team = BTreeMap::from([("team".to_owned(), "a".to_owned())]);
    assert!(found.iter().all(|d| tags_of(d) == team), "RunInstances tags the disks too");

    let instance = fake.describe_one(&id).await;
    let primary = &instance["NetworkInterfaces"]["NetworkInterface"][0];
    assert_eq!(primary["Type"], "Primary");
    let eni_id = primary["NetworkInterfaceId"].as_str().unwrap();
    let described = eni(&fake, &id).await;
    assert_eq!(described["NetworkInterfaceId"], eni_id);
    assert_eq!(described["SecurityGroupIds"]["SecurityGroupId"], json!([SECURITY_GROUP]));
    assert_eq!(tags_of(&described), team, "and the primary ENI");

    // DiskIds and DiskType filters; another instance's disks are not listed by InstanceId.
    let ids = json!([found[1]["DiskId"]]).to_string();
    let one = fake.call("DescribeDisks", &[("RegionId", REGION), ("DiskIds", &ids)]).await.ok();
    assert_eq!(one["TotalCount"], 1);
    let system = fake.call("DescribeDisks", &[("RegionId", REGION), ("DiskType", "system")]).await.ok();
    assert_eq!(system["TotalCount"], 2);
    assert_eq!(disks(&fake, &other).await.len(), 1);
    fake.call("DescribeDisks", &[("InstanceId", &id)]).await.expect(400, "MissingParameter");

    // The inventory lists them as dependents the instance refers to.
    let inventory = fake.inventory().await;
    let deps: Vec<&Value> =
        inventory["dependents"].as_array().unwrap().iter().filter(|d| d["instance_id"] == id.as_str()).collect();
    assert_eq!(deps.len(), 4, "{deps:?}");
    let vm = inventory["instances"].as_array().unwrap().iter().find(|i| i["id"] == id.as_str()).unwrap().clone();
    let text = vm.to_string();
    assert!(deps.iter().all(|d| text.contains(d["id"].as_str().unwrap())), "the instance names each: {vm}");

    // Released: the ENI and the disks with DeleteWithInstance go, the others stay Available.
    fake.wait_status(&id, "Running").await;
    fake.call("DeleteInstance", &[("InstanceId", &id), ("Force", "true")]).await.ok();
    fake.wait_status(&id, "gone").await;
    let kept = json!([found[2]["DiskId"]]).to_string();
    let left = fake.call("DescribeDisks", &[("RegionId", REGION), ("DiskIds", &kept)]).await.ok();
    assert_eq!(left["Disks"]["Disk"][0]["Status"], "Available");
    assert_eq!(left["Disks"]["Disk"][0]["InstanceId"], "");
    assert!(disks(&fake, &id).await.is_empty());
}

#[tokio::test]
async fn disk_and_eni_tags_are_set_and_removed_and_shown() {
    let fake = Fake::start().await;
    let id = fake.run(LAUNCH).await.remove(0);
    let found = disks(&fake, &id).await;
    let (system, data) = (found[0]["DiskId"].as_str().unwrap(), found[1]["DiskId"].as_str().unwrap());
    let eni_id = eni(&fake, &id).await["NetworkInterfaceId"].as_str().unwrap().to_owned();
    let set = [
        ("RegionId", REGION),
        ("ResourceType", "disk"),
        ("ResourceId.1", system),
        ("ResourceId.2", data),
        ("Tag.1.Key", "team"),
        ("Tag.1.Value", "b"),
    ];
    fake.call("TagResources", &set).await.ok();
    let now = disks(&fake, &id).await;
    assert_eq!(tags_of(&now[0])["team"], "b");
    assert_eq!(tags_of(&now[1])["team"], "b");
    assert_eq!(tags_of(&now[2])["team"], "a", "a disk not named is untouched");
    assert_eq!(tags_of(&fake.describe_one(&id).await)["team"], "a", "and the instance");

    let untag = [("RegionId", REGION), ("ResourceType", "eni"), ("ResourceId.1", &eni_id), ("TagKey.1", "team")];
    fake.call("UntagResources", &untag).await.ok();
    assert!(tags_of(&eni(&fake, &id).await).is_empty());

    // A disk id as an eni, or an unknown one: nothing changes.
    let wrong = [("RegionId", REGION), ("ResourceType", "eni"), ("ResourceId.1", system), ("Tag.1.Key", "x")];
    fake.call("TagResources", &wrong).await.expect(404, "InvalidResourceId.NotFound");
    let mixed = [
        ("RegionId", REGION),
        ("ResourceType", "disk"),
        ("ResourceId.1", system),
        ("ResourceId.2", "d-gw8unknown000000000"),
        ("Tag.1.Key", "x"),
    ];
    fake.call("TagResources", &mixed).await.expect(404, "InvalidResourceId.NotFound");
    assert!(!tags_of(&disks(&fake, &id).await[0]).contains_key("x"), "all or nothing");
}

#[tokio::test]
async fn resize_disk_grows_online_where_the_reference_allows_it() {
    let fake = Fake::start().await;
    let id = fake.run(LAUNCH).await.remove(0);
    let found = disks(&fake, &id).await;
    let (system, data, local) = (
        found[0]["DiskId"].as_str().unwrap().to_owned(),
        found[1]["DiskId"].as_str().unwrap().to_owned(),
        found[2]["DiskId"].as_str().unwrap().to_owned(),
    );
    let resize = |disk: String, size: &'static str| {
        let fake = &fake;
        async move { fake.call("ResizeDisk", &[("DiskId", &disk), ("NewSize", size), ("Type", "online")]).await }
    };
    resize(system.clone(), "60").await.expect(403, "IncorrectInstanceStatus");
    fake.wait_status(&id, "Running").await;
    resize(system.clone(), "60").await.ok();
    resize(data.clone(), "128").await.ok();
    let now = disks(&fake, &id).await;
    assert_eq!((now[0]["Size"].as_u64(), now[1]["Size"].as_u64()), (Some(60), Some(128)));
    let vm = fake.inventory().await["instances"].as_array().unwrap().iter().find(|i| i["id"] == id.as_str()).cloned();
    assert_eq!(vm.unwrap()["system_disk"]["size"], 60, "the inventory shows it");

    resize(system.clone(), "60").await.expect(403, "InvalidDiskSize.TooSmall");
    resize(system.clone(), "40").await.expect(403, "InvalidDiskSize.TooSmall");
    resize(system.clone(), "4096").await.expect(403, "InvalidParameter");
    resize(local, "200").await.expect(403, "OperationDenied");
    resize("d-gw8unknown000000000".to_owned(), "100").await.expect(404, "InvalidDiskId.NotFound");
    fake.call("ResizeDisk", &[("DiskId", &data), ("NewSize", "200"), ("Type", "later")])
        .await
        .expect(400, "InvalidParameter");
    fake.call("ResizeDisk", &[("DiskId", &data)]).await.expect(400, "MissingParameter");

    // A basic disk resizes offline only.
    let basic = fake.run(&[("SystemDisk.Category", "cloud")]).await.remove(0);
    fake.wait_status(&basic, "Running").await;
    let basic_disk = disks(&fake, &basic).await[0]["DiskId"].as_str().unwrap().to_owned();
    resize(basic_disk.clone(), "80").await.expect(403, "OperationDenied");
    fake.call("ResizeDisk", &[("DiskId", &basic_disk), ("NewSize", "80")]).await.ok();

    // Counted: ResizeDisk is a write, DescribeDisks a read.
    let calls = fake.calls().await;
    assert!(calls.of("ResizeDisk") >= 3, "{calls:?}");
}

#[tokio::test]
async fn modify_instance_attribute_replaces_the_security_groups() {
    let fake = Fake::start().await;
    let id = fake.run(&[]).await.remove(0);
    async fn groups(fake: &Fake, id: String) -> Value {
        fake.describe_one(&id).await["SecurityGroupIds"]["SecurityGroupId"].clone()
    }
    let modify = [("InstanceId", id.as_str()), ("SecurityGroupIds.1", SECURITY_GROUP_B)];
    fake.call("ModifyInstanceAttribute", &modify).await.ok();
    assert_eq!(groups(&fake, id.clone()).await, json!([SECURITY_GROUP_B]));
    assert_eq!(eni(&fake, &id).await["SecurityGroupIds"]["SecurityGroupId"], json!([SECURITY_GROUP_B]));
    let both =
        [("InstanceId", id.as_str()), ("SecurityGroupIds.1", SECURITY_GROUP), ("SecurityGroupIds.2", SECURITY_GROUP_B)];
    fake.call("ModifyInstanceAttribute", &both).await.ok();
    assert_eq!(groups(&fake, id.clone()).await, json!([SECURITY_GROUP, SECURITY_GROUP_B]));

    let unknown = [("InstanceId", id.as_str()), ("SecurityGroupIds.1", "sg-gw8nope00000000000")];
    fake.call("ModifyInstanceAttribute", &unknown).await.expect(404, "InvalidSecurityGroupId.NotFound");
    let twice =
        [("InstanceId", id.as_str()), ("SecurityGroupIds.1", SECURITY_GROUP), ("SecurityGroupIds.2", SECURITY_GROUP)];
    fake.call("ModifyInstanceAttribute", &twice).await.expect(400, "InvalidParameter.Duplicated");
    let renamed = [("InstanceId", id.as_str()), ("InstanceName", "other")];
    fake.call("ModifyInstanceAttribute", &renamed).await.expect(400, "InvalidParameter");
    let nobody = [("InstanceId", "i-gw8doesnotexist00000"), ("SecurityGroupIds.1", SECURITY_GROUP)];
    fake.call("ModifyInstanceAttribute", &nobody).await.expect(404, "InvalidInstanceId.NotFound");
    assert_eq!(groups(&fake, id).await, json!([SECURITY_GROUP, SECURITY_GROUP_B]), "refusals change nothing");
}
