//! Issue 26 on Azure: a VM (or a NIC or disk named after one) that is not this
//! machine's is never answered for, adopted, listed or deleted, and no
//! path-building field reaches a URL unchecked.
//!
//! "Another cluster" shares the seeded resource group (VM names are unique in
//! it): its VMs are made by a driver with the other cluster's class, as its
//! own sidecar would make them.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use machine_driver_api::{Driver, DriverError, ErrorKind, ListMachines, Machine, MachineClass, MachineRef, ShareImage};
use machine_driver_azure::AzureDriver;
use serde_json::{Value, json};
use support::{FakeCloud, class_with, ctx};

const VMS: &str = "Microsoft.Compute/virtualMachines";

async fn start() -> FakeCloud {
    let cloud = FakeCloud::start().await;
    cloud.admin("/timing", json!({"boot_ms": 100, "stop_ms": 100})).await;
    cloud
}

fn request(cloud: &FakeCloud, class: &MachineClass, name: &str, uid: &str, provider_id: Option<&str>) -> MachineRef {
    MachineRef {
        machine: Machine {
            name: name.into(),
            uid: uid.into(),
            provider_id: provider_id.map(str::to_string),
            ..Machine::default()
        },
        class: class.clone(),
        secret: cloud.secret.clone(),
    }
}

/// Creates `name` with `driver` and `class` (uid `uid`, empty: none, as the Go provider) and waits until it runs.
async fn create_running(cloud: &FakeCloud, driver: &AzureDriver, class: &MachineClass, name: &str, uid: &str) {
    let mut create = cloud.create_request(name);
    create.class = class.clone();
    create.machine.uid = uid.into();
    driver.create_machine(&ctx("create", 30), create).await.unwrap();
    let started = std::time::Instant::now();
    loop {
        match driver.get_machine_status(&ctx("status", 10), request(cloud, class, name, uid, None)).await {
            Ok(s) if s.vm_state == "running" => return,
            _ => {}
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{name} never runs");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn list_request(cloud: &FakeCloud, class: &MachineClass) -> ListMachines {
    ListMachines { class: class.clone(), secret: cloud.secret.clone() }
}

async fn listed_names(cloud: &FakeCloud, driver: &AzureDriver, class: &MachineClass) -> Vec<String> {
    let listed = driver.list_machines(&ctx("list", 10), list_request(cloud, class)).await.unwrap();
    listed.into_iter().map(|(_, name)| name).collect()
}

async fn alive(cloud: &FakeCloud, name: &str) -> bool {
    cloud.arm("GET", &cloud.arm_path(VMS, name), "2024-07-01", None).await.0 == 200
}

#[tokio::test]
async fn another_clusters_vm_of_the_same_name_is_not_found_untouched_and_unlisted() {
    let cloud = start().await;
    let other = cloud.other_cluster_class();
    create_running(&cloud, &cloud.driver(), &other, "m-shared", "uid-other").await;
    let ours = cloud.driver();
    let pid = "azure:///westeurope/m-shared";

    // Status, by name and by providerID: NOT_FOUND (MCM would adopt anything answered OK).
    for provider_id in [None, Some(pid)] {
        let err = ours
            .get_machine_status(&ctx("status", 10), request(&cloud, &cloud.class, "m-shared", "uid-mine", provider_id))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{provider_id:?}: {err:?}");
    }

    // Create: the name is taken (names are unique per group): ALREADY_EXISTS, the VM untouched.
    let tags_before = cloud.vm_tags("m-shared").await;
    cloud.admin.reset_calls().await.unwrap();
    let mut create = cloud.create_request("m-shared");
    create.machine.uid = "uid-mine".into();
    let err = ours.create_machine(&ctx("create", 30), create).await.unwrap_err();
    assert_eq!((err.kind(), err.reason()), (ErrorKind::AlreadyExists, "NAME_TAKEN_BY_FOREIGN_VM"), "{err:?}");
    // The create-only PUT is refused by ARM (412) and changes nothing; no other write (this
    // driver's first create of the example's plan image reads its plan and finds its terms
    // accepted already, by the other cluster's driver).
    assert_eq!(
        cloud.calls().await.breakdown(),
        "marketplaceAgreements.get×1, virtualMachineImages.get×1, virtualMachines.createOrUpdate×1, virtualMachines.get×1"
    );
    assert_eq!(cloud.vm_tags("m-shared").await, tags_before);

    // Delete by name, by its providerID with MCM's uid, and as the orphan collector sends it (no uid).
    for (uid, provider_id) in [("uid-mine", None), ("uid-mine", Some(pid)), ("", Some(pid))] {
        cloud.admin.reset_calls().await.unwrap();
        let deleted = ours
            .delete_machine(&ctx("delete", 10), request(&cloud, &cloud.class, "m-shared", uid, provider_id))
            .await
            .unwrap();
        assert!(deleted.already_gone, "{provider_id:?}");
        let calls = cloud.calls().await;
        assert_eq!(calls.of_class(fake_cloud_support::OpClass::Delete), 0, "{}", calls.breakdown());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(alive(&cloud, "m-shared").await, "another cluster's VM was deleted");
    let mut live = cloud.live_resources("m-shared").await;
    live.sort();
    assert_eq!(live, vec!["m-shared", "m-shared-containerd-0-data-disk", "m-shared-nic", "m-shared-os-disk"]);

    // List: not this cluster's; the other cluster lists it.
    assert!(listed_names(&cloud, &ours, &cloud.class).await.is_empty());
    assert_eq!(listed_names(&cloud, &ours, &other).await, vec!["m-shared"]);
}

#[tokio::test]
async fn batched_status_reads_judge_the_tags_of_the_listed_vms() {
    let cloud = start().await;
    let creator = cloud.driver();
    let names: Vec<String> = (0..4).map(|i| format!("batch-{i}")).collect();
    for n in &names {
        create_running(&cloud, &creator, &cloud.class, n, &format!("uid-{n}")).await;
    }
    create_running(&cloud, &cloud.driver(), &cloud.other_cluster_class(), "batch-foreign", "uid-other").await;
    let mut all = names.clone();
    all.push("batch-foreign".into());

    // A fresh driver: the first poll goes alone, the others are read together from the group's list.
    let driver = std::sync::Arc::new(cloud.driver());
    cloud.admin.reset_calls().await.unwrap();
    let polls = all.iter().map(|n| {
        let driver = std::sync::Arc::clone(&driver);
        let req = request(&cloud, &cloud.class, n, &format!("uid-{n}"), None);
        let n = n.clone();
        async move { (n, driver.get_machine_status(&ctx("status", 10), req).await) }
    });
    for (n, answer) in futures::future::join_all(polls).await {
        match n.as_str() {
            "batch-foreign" => assert_eq!(answer.unwrap_err().kind(), ErrorKind::NotFound, "{n}"),
            _ => assert_eq!(answer.unwrap().vm_state, "running", "{n}"),
        }
    }
    let calls = cloud.calls().await;
    assert!(calls.of("resources.listByResourceGroup") >= 1, "{}", calls.breakdown());
    // And the same from the list the batch keeps (LIST_REUSE), for a lone poll of the foreign VM.
    let err = driver
        .get_machine_status(&ctx("status", 10), request(&cloud, &cloud.class, "batch-foreign", "uid-x", None))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

#[tokio::test]
async fn a_vm_with_the_cluster_tag_but_no_role_tag_is_neither_listed_nor_adopted() {
    let cloud = start().await;
    let driver = cloud.driver();
    create_running(&cloud, &driver, &cloud.class, "m-norole", "uid-m-norole").await;
    assert_eq!(listed_names(&cloud, &driver, &cloud.class).await, vec!["m-norole"]);
    // As a resource shared with the cluster is tagged: the cluster tag alone.
    let patch = json!({"tags": {"kubernetes.io-cluster-shoot--dev--conf": "1"}});
    let (status, _) = cloud.arm("PATCH", &cloud.arm_path(VMS, "m-norole"), "2024-07-01", Some(patch)).await;
    assert_eq!(status, 200);
    assert!(listed_names(&cloud, &driver, &cloud.class).await.is_empty());
    let err = driver.get_machine_status(&ctx("status", 10), cloud.machine_ref("m-norole")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err:?}");
    let deleted = driver.delete_machine(&ctx("delete", 10), cloud.machine_ref("m-norole")).await.unwrap();
    assert!(deleted.already_gone);
    assert!(alive(&cloud, "m-norole").await);
}

#[tokio::test]
async fn vms_the_go_provider_made_are_adopted_and_listed_when_they_carry_this_clusters_tags() {
    let cloud = start().await;
    // The Go provider tags a VM with the class's tags and no uid.
    create_running(&cloud, &cloud.driver(), &cloud.class, "go-mine", "").await;
    create_running(&cloud, &cloud.driver(), &cloud.other_cluster_class(), "go-other", "").await;
    assert!(cloud.vm_tags("go-mine").await.get("mcm.gardener.cloud-machine-uid").is_none());

    let driver = cloud.driver();
    let status = driver.get_machine_status(&ctx("status", 10), cloud.machine_ref("go-mine")).await.unwrap();
    assert_eq!((status.vm_state.as_str(), status.provider_id.as_str()), ("running", "azure:///westeurope/go-mine"));
    let err = driver.get_machine_status(&ctx("status", 10), cloud.machine_ref("go-other")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(listed_names(&cloud, &driver, &cloud.class).await, vec!["go-mine"]);
    // Create adopts it (no PUT takes effect), and delete deletes it; the other cluster's stays.
    let adopted = driver.create_machine(&ctx("create", 30), cloud.create_request("go-mine")).await.unwrap();
    assert_eq!(adopted.provider_id, "azure:///westeurope/go-mine");
    for name in ["go-mine", "go-other"] {
        driver.delete_machine(&ctx("delete", 10), cloud.machine_ref(name)).await.unwrap();
    }
    let started = std::time::Instant::now();
    while alive(&cloud, "go-mine").await {
        assert!(started.elapsed() < Duration::from_secs(10), "go-mine was not deleted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(alive(&cloud, "go-other").await);
}

#[tokio::test]
async fn leftovers_without_a_vm_are_deleted_and_listed_only_when_their_tags_are_this_clusters() {
    let cloud = start().await;
    let driver = cloud.driver();
    let other_tags = json!({"kubernetes.io-cluster-shoot--dev--other": "1", "kubernetes.io-role-node": "1"});
    let our_tags = json!({"kubernetes.io-cluster-shoot--dev--conf": "1", "kubernetes.io-role-node": "1"});
    // Another cluster's NIC and a hand-made tagged disk named after a machine of ours, no VM.
    cloud.put_nic("m-left-nic", other_tags).await;
    cloud.put_disk("m-left-os-disk", json!({"owner": "someone"})).await;
    // An untagged disk of the name (as the driver's own disks are): taken as the machine's.
    cloud.put_disk("m-left-containerd-0-data-disk", Value::Null).await;
    // A NIC this cluster's machine left (tagged as the Go provider tags NICs).
    cloud.put_nic("m-gone-nic", our_tags).await;
    tokio::time::sleep(Duration::from_millis(200)).await; // disks settle

    let listed = driver.list_machines(&ctx("list", 10), cloud.list_request()).await.unwrap();
    assert_eq!(listed, vec![("azure:///westeurope/m-gone".to_string(), "m-gone".to_string())]);

    let deleted = driver.delete_machine(&ctx("delete", 10), cloud.machine_ref("m-left")).await.unwrap();
    assert!(deleted.already_gone);
    // The orphan collector's delete of the listed pseudo-machine: by providerID, no uid.
    let orphan = request(&cloud, &cloud.class, "m-gone", "", Some("azure:///westeurope/m-gone"));
    driver.delete_machine(&ctx("delete", 10), orphan).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut live = cloud.live_resources("m-").await;
    live.sort();
    assert_eq!(live, vec!["m-left-nic", "m-left-os-disk"], "the foreign leftovers stay, this machine's go");
}

/// The ARM tags of the disk `name` (`null` when it has none; panics when it is absent).
async fn disk_tags(cloud: &FakeCloud, name: &str) -> Value {
    let (status, disk) = cloud.arm("GET", &cloud.arm_path("Microsoft.Compute/disks", name), "2024-03-02", None).await;
    assert_eq!(status, 200, "disk {name}: {disk}");
    disk["tags"].clone()
}

#[tokio::test]
async fn an_existing_image_disk_is_re_put_and_attached_only_when_its_tags_are_the_machines() {
    let cloud = start().await;
    let driver = cloud.driver();
    // The example's data disk `containerd` (lun 0), made from an image before the VM.
    let class = class_with(&cloud.class, |s| {
        s["properties"]["storageProfile"]["dataDisks"][0]["imageRef"] =
            json!({"urn": "sap:gardenlinux:greatest:1443.3.0"})
    });
    let class_tags: Value = serde_json::from_slice::<Value>(&cloud.class.provider_spec).unwrap()["tags"].clone();
    let tagged = |uid: &str| {
        let mut tags = class_tags.clone();
        tags["mcm.gardener.cloud-machine-uid"] = json!(uid);
        tags
    };
    // Made by hand without tags (the driver tags every image disk it makes), another
    // cluster's, and this cluster's for another machine of the name.
    let foreign = [
        ("img-bare", Value::Null),
        ("img-other", json!({"kubernetes.io-cluster-shoot--dev--other": "1", "kubernetes.io-role-node": "1"})),
        ("img-uid", tagged("uid-earlier")),
    ];
    for (vm, tags) in &foreign {
        cloud.put_disk(&format!("{vm}-containerd-0-data-disk"), tags.clone()).await;
    }
    // An earlier attempt of this machine left its disk.
    cloud.put_disk("img-mine-containerd-0-data-disk", tagged("uid-img-mine")).await;
    tokio::time::sleep(Duration::from_millis(200)).await; // disks settle

    for (vm, tags) in &foreign {
        cloud.admin.reset_calls().await.unwrap();
        let mut create = cloud.create_request(vm);
        create.class = class.clone();
        let err = driver.create_machine(&ctx("create", 30), create).await.unwrap_err();
        assert_eq!((err.kind(), err.reason()), (ErrorKind::AlreadyExists, "NAME_TAKEN_BY_FOREIGN_VM"), "{vm}: {err:?}");
        // Read, never written: no disk PUT (it would take this machine's tags), no VM PUT attaching it.
        assert_eq!(cloud.calls().await.breakdown(), "disks.get×1, virtualMachines.get×1", "{vm}");
        assert_eq!(&disk_tags(&cloud, &format!("{vm}-containerd-0-data-disk")).await, tags, "{vm}");
        assert!(!alive(&cloud, vm).await, "{vm}");
    }

    cloud.admin.reset_calls().await.unwrap();
    let mut create = cloud.create_request("img-mine");
    create.class = class.clone();
    driver.create_machine(&ctx("create", 30), create).await.unwrap();
    let calls = cloud.calls().await;
    assert_eq!(calls.of("disks.createOrUpdate"), 1, "{}", calls.breakdown());
    assert!(alive(&cloud, "img-mine").await);
}

#[tokio::test]
async fn an_untagged_leftover_is_deleted_only_by_a_delete_carrying_the_machines_uid() {
    let cloud = start().await;
    let driver = cloud.driver();
    // A NIC this cluster's machine left (tagged: listed), and an untagged OS disk of the name,
    // which in a shared resource group may be anyone's.
    cloud
        .put_nic("m-orph-nic", json!({"kubernetes.io-cluster-shoot--dev--conf": "1", "kubernetes.io-role-node": "1"}))
        .await;
    cloud.put_disk("m-orph-os-disk", Value::Null).await;
    tokio::time::sleep(Duration::from_millis(200)).await; // disks settle
    assert_eq!(listed_names(&cloud, &driver, &cloud.class).await, vec!["m-orph"]);

    // The orphan collector deletes the listed name by providerID, without a uid: the tagged NIC only.
    let orphan = request(&cloud, &cloud.class, "m-orph", "", Some("azure:///westeurope/m-orph"));
    assert!(driver.delete_machine(&ctx("delete", 10), orphan).await.unwrap().already_gone);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(cloud.live_resources("m-orph").await, vec!["m-orph-os-disk"], "an untagged disk deleted by name alone");

    // A delete of the Machine MCM still has (its uid): the untagged leftover is taken as the machine's.
    driver.delete_machine(&ctx("delete", 10), cloud.machine_ref("m-orph")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(cloud.live_resources("m-orph").await.is_empty());
}

#[tokio::test]
async fn a_delete_judges_the_vm_as_it_is_now_not_as_a_recent_group_list_shows_it() {
    let cloud = start().await;
    let names: Vec<String> = (0..4).map(|i| format!("fresh-{i}")).collect();
    let creator = cloud.driver();
    for n in &names {
        create_running(&cloud, &creator, &cloud.class, n, &format!("uid-{n}")).await;
    }
    // A fresh driver polls them together: the first goes alone, the others are read from the group's list,
    // which then answers this driver's VM reads for LIST_REUSE.
    let driver = std::sync::Arc::new(cloud.driver());
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
    assert_eq!(calls.of("resources.listByResourceGroup"), 1, "{}", calls.breakdown());

    // Meanwhile the VM of the name becomes another cluster's (retagged here; made anew by it alike).
    let victim = &names[3];
    let patch = json!({"tags": {"kubernetes.io-cluster-shoot--dev--other": "1", "kubernetes.io-role-node": "1"}});
    let (status, _) = cloud.arm("PATCH", &cloud.arm_path(VMS, victim), "2024-07-01", Some(patch)).await;
    assert_eq!(status, 200);
    cloud.admin.reset_calls().await.unwrap();
    let deleted = driver.delete_machine(&ctx("delete", 10), cloud.machine_ref(victim)).await.unwrap();
    assert!(deleted.already_gone);
    // One lone read of the VM as it is now, and no DELETE.
    assert_eq!(cloud.calls().await.breakdown(), "virtualMachines.get×1");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(alive(&cloud, victim).await, "another cluster's VM was deleted on a stale verdict");
}

/// Every RPC of `class` (and of `machine_ref`) is INVALID_ARGUMENT naming `field`, and no ARM call is made.
async fn refused_everywhere(cloud: &FakeCloud, driver: &AzureDriver, req: MachineRef, field: &str) {
    cloud.admin.reset_calls().await.unwrap();
    let check = |what: &str, e: DriverError| {
        assert_eq!((e.kind(), e.field()), (ErrorKind::InvalidArgument, Some(field)), "{what}: {e:?}");
    };
    check("status", driver.get_machine_status(&ctx("status", 10), req.clone()).await.unwrap_err());
    check("delete", driver.delete_machine(&ctx("delete", 10), req.clone()).await.unwrap_err());
    let create = machine_driver_api::CreateMachine {
        machine: req.machine.clone(),
        class: req.class.clone(),
        secret: req.secret.clone(),
        user_data: Default::default(),
    };
    check("create", driver.create_machine(&ctx("create", 10), create).await.unwrap_err());
    if req.machine.provider_id.is_none() && !field.starts_with("machine.") {
        check("list", driver.list_machines(&ctx("list", 10), list_request(cloud, &req.class)).await.unwrap_err());
    }
    assert_eq!(cloud.calls().await.total, 0, "{field}: {}", cloud.calls().await.breakdown());
}

#[tokio::test]
async fn traversal_in_a_path_building_field_reaches_no_url() {
    let cloud = start().await;
    let driver = cloud.driver();
    // A VM of the seeded group: `other/../shoot--dev--conf` would resolve to it if it reached a path.
    create_running(&cloud, &driver, &cloud.class, "m-trav", "uid-m-trav").await;

    let group = class_with(&cloud.class, |s| s["resourceGroup"] = json!("other/../shoot--dev--conf"));
    refused_everywhere(
        &cloud,
        &driver,
        request(&cloud, &group, "m-trav", "uid-m-trav", None),
        "providerSpec.resourceGroup",
    )
    .await;
    let vnet_group =
        class_with(&cloud.class, |s| s["subnetInfo"]["vnetResourceGroup"] = json!("x/../shoot--dev--conf"));
    refused_everywhere(
        &cloud,
        &driver,
        request(&cloud, &vnet_group, "m-trav", "uid-m-trav", None),
        "providerSpec.subnetInfo.vnetResourceGroup",
    )
    .await;
    let subnet = class_with(&cloud.class, |s| s["subnetInfo"]["subnetName"] = json!("../../../x"));
    refused_everywhere(
        &cloud,
        &driver,
        request(&cloud, &subnet, "m-trav", "uid-m-trav", None),
        "providerSpec.subnetInfo.subnetName",
    )
    .await;
    // providerID parts and the machine name go into the VM's path.
    let pid = request(&cloud, &cloud.class, "m-trav", "uid-m-trav", Some("azure:///westeurope/.."));
    cloud.admin.reset_calls().await.unwrap();
    for err in [
        driver.get_machine_status(&ctx("status", 10), pid.clone()).await.unwrap_err(),
        driver.delete_machine(&ctx("delete", 10), pid).await.unwrap_err(),
    ] {
        assert_eq!(err.field(), Some("machine.providerID"), "{err:?}");
    }
    refused_everywhere(&cloud, &driver, request(&cloud, &cloud.class, "..", "u", None), "machine.name").await;
    assert!(alive(&cloud, "m-trav").await);

    // ShareImage: the consumer account and the image id's parts go into paths.
    let share = |image: &str, account: Option<&str>| ShareImage {
        image: image.into(),
        region: Some("westeurope".into()),
        owner_secret: None,
        consumer_secret: cloud.secret.clone(),
        consumer_account: account.map(str::to_string),
    };
    cloud.admin.reset_calls().await.unwrap();
    let err = driver
        .share_image(&ctx("share", 10), share(fake_arm::VISIBLE_IMAGE, Some("../../../subscriptions/x")))
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("consumerAccount"), "{err:?}");
    let err = driver
        .revoke_image_share(
            &ctx("revoke", 10),
            machine_driver_api::RevokeImageShare {
                image: fake_arm::VISIBLE_IMAGE.into(),
                region: Some("westeurope".into()),
                owner_secret: machine_driver_api::OwnerSecret::new(cloud.secret.clone()).unwrap(),
                consumer_secret: cloud.secret.clone(),
                consumer_account: Some("x/../../y".into()),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("consumerAccount"), "{err:?}");
    let image = fake_arm::VISIBLE_IMAGE.replace("/galleries/shared/", "/galleries/../");
    let err = driver.share_image(&ctx("share", 10), share(&image, None)).await.unwrap_err();
    assert_eq!(err.field(), Some("image"), "{err:?}");
    assert_eq!(cloud.calls().await.total, 0, "{}", cloud.calls().await.breakdown());
}
