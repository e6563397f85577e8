//! VM, NIC and disk lifecycles through ARM's wire protocol: async operations, queued
//! allocation failures, NIC reservations, cascades, paging, tag filters, inventory.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{Fake, NET_API, disk_path, nic_id, nic_path, rg_path, vm_body, vm_path};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const USER_DATA: &str = "I2Nsb3VkLWNvbmZpZwpydW5jbWQ6IFtlY2hvLCBoaV0K";

fn tags(machine: &str) -> Value {
    json!({"kubernetes.io-cluster-shoot--dev--conf": "1", "kubernetes.io-role-node": "1", "machine": machine})
}

#[tokio::test]
async fn nic_then_vm_create_creating_then_succeeded() {
    let fake = Fake::start().await;
    let nic = fake.put_nic("vm-1-nic", tags("vm-1")).await;
    assert_eq!(nic.status, StatusCode::CREATED, "{}", nic.body);
    assert_eq!(nic.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(nic.body["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"], "10.250.0.4");
    assert!(nic.body["properties"]["resourceGuid"].is_string());
    let op_url = nic.header("azure-asyncoperation").unwrap().to_owned();
    assert!(op_url.contains("/providers/Microsoft.Network/locations/westeurope/operations/"), "{op_url}");
    assert_eq!(fake.get(&op_url).await.body["status"], "Succeeded");
    // Update keeps the IP.
    let again = fake.put_nic("VM-1-NIC", tags("vm-1")).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body["name"], "vm-1-nic", "names are returned as created");
    assert_eq!(again.body["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"], "10.250.0.4");

    let created = fake.put_vm("vm-1", vm_body("vm-1", "vm-1-nic", tags("vm-1"), USER_DATA)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["properties"]["provisioningState"], "Creating");
    assert!(created.body["properties"]["vmId"].as_str().unwrap().len() == 36);
    assert!(created.body["properties"]["timeCreated"].is_string());
    // Compute asks clients to wait before polling (azcore waits 30 s without it): the
    // seconds left of the 200 ms boot, rounded up.
    assert_eq!(created.header("retry-after"), Some("1"));
    assert!(created.body["properties"]["osProfile"].get("customData").is_none());
    let async_url = created.header("azure-asyncoperation").unwrap().to_owned();
    assert!(async_url.starts_with(&fake.handle.url()), "{async_url}");
    assert!(async_url.contains("/providers/Microsoft.Compute/locations/westeurope/operations/"), "{async_url}");
    let in_progress = fake.get(&async_url).await;
    assert_eq!(in_progress.body["status"], "InProgress");
    assert_eq!(in_progress.header("retry-after"), Some("1"), "while the operation runs");
    let done = fake.wait_op(&async_url).await;
    assert_eq!(done["status"], "Succeeded");
    assert!(fake.get(&async_url).await.header("retry-after").is_none(), "a finished operation asks no delay");
    assert!(done["endTime"].is_string());

    let vm = fake.get(&format!("{}?$expand=instanceView", vm_path("vm-1"))).await;
    assert_eq!(vm.status, StatusCode::OK);
    assert_eq!(vm.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(vm.body["properties"]["vmId"], created.body["properties"]["vmId"]);
    assert_eq!(vm.body["zones"], json!(["1"]));
    let statuses = vm.body["properties"]["instanceView"]["statuses"].as_array().unwrap();
    assert_eq!(statuses[0]["code"], "ProvisioningState/succeeded");
    assert_eq!(statuses[1]["code"], "PowerState/running");
    assert!(vm.body["properties"]["osProfile"].get("customData").is_none(), "customData is never returned");
    assert!(vm.body["properties"].get("timeCreated").is_some());
    assert_eq!(vm.body["properties"]["storageProfile"]["osDisk"]["managedDisk"]["id"], disk_path("vm-1-os-disk"));

    // Implicit disks and the NIC attachment.
    let os_disk = fake.get(&disk_path("vm-1-os-disk")).await;
    assert_eq!(os_disk.status, StatusCode::OK);
    assert_eq!(os_disk.body["managedBy"], vm_path("vm-1"));
    assert!(os_disk.body.get("tags").is_none());
    assert_eq!(os_disk.body["properties"]["diskSizeGB"], 50);
    let data = fake.get(&disk_path("vm-1-data-0-data-disk")).await;
    assert_eq!(data.body["properties"]["diskState"], "Attached");
    let nic = fake.get(&format!("{}?api-version={NET_API}", nic_path("vm-1-nic"))).await;
    assert_eq!(nic.body["properties"]["virtualMachine"]["id"], vm_path("vm-1"));
    let refused = fake.call(Method::DELETE, &nic_path("vm-1-nic"), None).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::BAD_REQUEST, "NicInUse"));
    let refused = fake.call(Method::DELETE, &disk_path("vm-1-os-disk"), None).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::CONFLICT, "OperationNotAllowed"));

    // Re-PUT: same body is an update (200, same vmId); changed customData is refused.
    let same = fake.put_vm("vm-1", vm_body("vm-1", "vm-1-nic", tags("vm-1"), USER_DATA)).await;
    assert_eq!(same.status, StatusCode::OK, "{}", same.body);
    assert_eq!(same.body["properties"]["vmId"], created.body["properties"]["vmId"]);
    let changed = fake.put_vm("vm-1", vm_body("vm-1", "vm-1-nic", tags("vm-1"), "b3RoZXI=")).await;
    assert_eq!((changed.status, changed.code()), (StatusCode::CONFLICT, "PropertyChangeNotAllowed"));
    assert_eq!(changed.body["error"]["message"], "Changing property 'customData' is not allowed.");
    // The inventory has the user data.
    let inventory = fake.inventory().await;
    let vm = inventory["instances"].as_array().unwrap().iter().find(|i| i["name"] == "vm-1").unwrap();
    assert_eq!(vm["user_data"], USER_DATA);
    assert_eq!(vm["state"], "succeeded");
    assert_eq!(vm["kind"], "virtualMachine");
}

#[tokio::test]
async fn validation_uses_real_codes() {
    let fake = Fake::start().await;
    let missing_nic = fake.put_vm("vm-v", vm_body("vm-v", "absent-nic", json!({}), USER_DATA)).await;
    assert_eq!((missing_nic.status, missing_nic.code()), (StatusCode::BAD_REQUEST, "InvalidResourceReference"));
    fake.put_nic("vm-v-nic", json!({})).await;
    let mut body = vm_body("vm-v", "vm-v-nic", json!({}), USER_DATA);
    body["properties"]["hardwareProfile"]["vmSize"] = json!("Standard_Nope");
    let bad = fake.put_vm("vm-v", body).await;
    assert_eq!((bad.status, bad.code()), (StatusCode::BAD_REQUEST, "InvalidParameter"));
    assert_eq!(bad.body["error"]["target"], "vmSize");
    let mut body = vm_body("vm-v", "vm-v-nic", json!({}), USER_DATA);
    body["properties"]["storageProfile"]["imageReference"] =
        json!({"publisher": "sap", "offer": "gardenlinux", "sku": "greatest", "version": "0.0.1"});
    let bad = fake.put_vm("vm-v", body).await;
    assert_eq!((bad.status, bad.code()), (StatusCode::NOT_FOUND, "PlatformImageNotFound"));
    let mut body = vm_body("vm-v", "vm-v-nic", json!({}), USER_DATA);
    body["properties"]["storageProfile"]["imageReference"] =
        json!({"publisher": "canonical", "offer": "UBUNTU-24_04-LTS", "sku": "server", "version": "latest"});
    body["properties"]["hardwareProfile"]["vmSize"] = json!("standard_b2s");
    let ok = fake.put_vm("vm-v", body).await;
    assert_eq!(ok.status, StatusCode::CREATED, "{}", ok.body);
    // A second VM cannot take the attached NIC.
    let taken = fake.put_vm("vm-w", vm_body("vm-w", "vm-v-nic", json!({}), USER_DATA)).await;
    assert_eq!((taken.status, taken.code()), (StatusCode::BAD_REQUEST, "NicInUse"));
    let bad_subnet = fake
        .call(
            Method::PUT,
            &nic_path("bad-nic"),
            Some(json!({"location": "westeurope", "properties": {"ipConfigurations": [{"name": "c", "properties": {"subnet": {"id": "/subscriptions/x/resourceGroups/y/providers/Microsoft.Network/virtualNetworks/v/subnets/s"}}}]}})),
        )
        .await;
    assert_eq!((bad_subnet.status, bad_subnet.code()), (StatusCode::BAD_REQUEST, "InvalidResourceReference"));
}

#[tokio::test]
async fn queued_allocation_failure_leaves_a_failed_vm() {
    let fake = Fake::start().await;
    fake.admin("azure/vm-failures", json!({"code": "AllocationFailed", "times": 1})).await;
    fake.put_nic("vm-f-nic", json!({})).await;
    let created = fake.put_vm("vm-f", vm_body("vm-f", "vm-f-nic", json!({}), USER_DATA)).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let done = fake.wait_op(created.header("azure-asyncoperation").unwrap()).await;
    assert_eq!(done["status"], "Failed");
    assert_eq!(done["error"]["code"], "AllocationFailed");
    assert!(done["error"]["message"].as_str().unwrap().starts_with("Allocation failed."));
    let vm = fake.get(&format!("{}?$expand=instanceView", vm_path("vm-f"))).await;
    assert_eq!(vm.body["properties"]["provisioningState"], "Failed");
    let status = &vm.body["properties"]["instanceView"]["statuses"][0];
    assert_eq!(status["code"], "ProvisioningState/failed/AllocationFailed");
    assert_eq!(status["level"], "Error");
    // NIC and disks stay attached to the Failed VM.
    let nic = fake.get(&nic_path("vm-f-nic")).await;
    assert_eq!(nic.body["properties"]["virtualMachine"]["id"], vm_path("vm-f"));
    assert_eq!(fake.get(&disk_path("vm-f-os-disk")).await.status, StatusCode::OK);
    // An unchanged re-PUT reports the failure again; a changed one re-provisions.
    let again = fake.put_vm("vm-f", vm_body("vm-f", "vm-f-nic", json!({}), USER_DATA)).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body["properties"]["provisioningState"], "Failed");
    let op = fake.wait_op(again.header("azure-asyncoperation").unwrap()).await;
    assert_eq!((op["status"].as_str(), op["error"]["code"].as_str()), (Some("Failed"), Some("AllocationFailed")));
    let changed = fake.put_vm("vm-f", vm_body("vm-f", "vm-f-nic", json!({"retry": "1"}), USER_DATA)).await;
    assert_eq!(changed.status, StatusCode::OK);
    assert_eq!(changed.body["properties"]["provisioningState"], "Updating");
    assert_eq!(fake.wait_op(changed.header("azure-asyncoperation").unwrap()).await["status"], "Succeeded");
    assert_eq!(fake.get(&vm_path("vm-f")).await.body["properties"]["provisioningState"], "Succeeded");
    fake.admin("azure/vm-failures", json!({"code": "AllocationFailed", "times": 1})).await;
    let broken = fake.put_vm("vm-f", vm_body("vm-f", "vm-f-nic", json!({"retry": "2"}), USER_DATA)).await;
    assert_eq!(fake.wait_op(broken.header("azure-asyncoperation").unwrap()).await["status"], "Failed");
    // The queue is consumed: the next VM succeeds.
    fake.put_nic("vm-g-nic", json!({})).await;
    let next = fake.put_vm("vm-g", vm_body("vm-g", "vm-g-nic", json!({}), USER_DATA)).await;
    assert_eq!(fake.wait_op(next.header("azure-asyncoperation").unwrap()).await["status"], "Succeeded");
    let inventory = fake.inventory().await;
    let failed = inventory["instances"].as_array().unwrap().iter().find(|i| i["name"] == "vm-f").unwrap().clone();
    assert_eq!(failed["state"], "failed");
    assert!(failed["live"].as_bool().unwrap());
}

#[tokio::test]
async fn capacity_refusal_reserves_the_nic() {
    let fake = Fake::start().await;
    fake.put_nic("vm-c-nic", json!({})).await;
    fake.admin("faults", json!({"operation": "virtualMachines.createOrUpdate", "kind": "capacity", "times": 1})).await;
    let refused = fake.put_vm("vm-c", vm_body("vm-c", "vm-c-nic", json!({}), USER_DATA)).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::CONFLICT, "OperationNotAllowed"));
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exceeding approved standardDSv3Family Cores quota")
    );
    assert_eq!(fake.get(&vm_path("vm-c")).await.status, StatusCode::NOT_FOUND, "no VM after a synchronous refusal");

    let retry = fake.put_vm("vm-c", vm_body("vm-c", "vm-c-nic", json!({}), USER_DATA)).await;
    assert_eq!((retry.status, retry.code()), (StatusCode::BAD_REQUEST, "NicReservedForAnotherVm"));
    let message = retry.body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("Nic(s) in request is reserved for another Virtual Machine for 180 seconds."),
        "{message}"
    );
    assert!(message.ends_with(&format!("Reserved VM: {}", vm_path("vm-c"))), "{message}");
    let delete = fake.call(Method::DELETE, &nic_path("vm-c-nic"), None).await;
    assert_eq!((delete.status, delete.code()), (StatusCode::BAD_REQUEST, "NicReservedForAnotherVm"));
    let inventory = fake.inventory().await;
    let nic = inventory["dependents"].as_array().unwrap().iter().find(|d| d["name"] == "vm-c-nic").unwrap().clone();
    assert!(nic["reserved_until_ms"].as_u64().is_some(), "{nic}");

    fake.admin("azure/nic-reservation", json!({"ms": 100})).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let retry = fake.put_vm("vm-c", vm_body("vm-c", "vm-c-nic", json!({}), USER_DATA)).await;
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.body);
    // And a free NIC can be deleted once its window is over.
    fake.put_nic("spare-nic", json!({})).await;
    fake.admin("faults", json!({"operation": "create", "kind": "capacity", "times": 1})).await;
    let refused = fake.put_vm("vm-d", vm_body("vm-d", "spare-nic", json!({}), USER_DATA)).await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    let delete = fake.call(Method::DELETE, &nic_path("spare-nic"), None).await;
    assert_eq!(delete.code(), "NicReservedForAnotherVm");
    tokio::time::sleep(Duration::from_millis(150)).await;
    let delete = fake.call(Method::DELETE, &nic_path("spare-nic"), None).await;
    assert_eq!(delete.status, StatusCode::ACCEPTED, "{}", delete.body);
    assert!(delete.header("location").is_some());
    fake.wait_op(delete.header("azure-asyncoperation").unwrap()).await;
    fake.wait_gone(&nic_path("spare-nic")).await;
}

#[tokio::test]
async fn delete_cascades_or_detaches_and_reserves() {
    let fake = Fake::start().await;
    fake.put_nic("vm-1-nic", json!({})).await;
    let created = fake.put_vm("vm-1", vm_body("vm-1", "vm-1-nic", json!({}), USER_DATA)).await;
    fake.wait_op(created.header("azure-asyncoperation").unwrap()).await;
    // A second VM whose NIC and OS disk are Detach.
    fake.put_nic("vm-2-nic", json!({})).await;
    let mut body = vm_body("vm-2", "vm-2-nic", json!({}), USER_DATA);
    body["properties"]["networkProfile"]["networkInterfaces"][0]["properties"]["deleteOption"] = json!("Detach");
    body["properties"]["storageProfile"]["osDisk"]["deleteOption"] = json!("Detach");
    let created = fake.put_vm("vm-2", body).await;
    fake.wait_op(created.header("azure-asyncoperation").unwrap()).await;

    let deleted = fake.call(Method::DELETE, &format!("{}?forceDeletion=false", vm_path("vm-1")), None).await;
    assert_eq!(deleted.status, StatusCode::ACCEPTED);
    let location = deleted.header("location").unwrap().to_owned();
    let async_url = deleted.header("azure-asyncoperation").unwrap().to_owned();
    assert_eq!(fake.get(&vm_path("vm-1")).await.body["properties"]["provisioningState"], "Deleting");
    assert_eq!(fake.get(&location).await.status, StatusCode::ACCEPTED);
    let put_while_deleting = fake.put_vm("vm-1", vm_body("vm-1", "vm-1-nic", json!({}), USER_DATA)).await;
    assert_eq!((put_while_deleting.status, put_while_deleting.code()), (StatusCode::CONFLICT, "OperationNotAllowed"));
    assert_eq!(fake.wait_op(&async_url).await["status"], "Succeeded");
    let after = fake.get(&location).await;
    assert!(after.status == StatusCode::OK || after.status == StatusCode::NO_CONTENT, "{}", after.status);
    assert_eq!(fake.get(&vm_path("vm-1")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(fake.get(&nic_path("vm-1-nic")).await.status, StatusCode::NOT_FOUND, "NIC cascades");
    assert_eq!(fake.get(&disk_path("vm-1-os-disk")).await.status, StatusCode::NOT_FOUND, "OS disk cascades");
    assert_eq!(fake.get(&disk_path("vm-1-data-0-data-disk")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(fake.call(Method::DELETE, &vm_path("vm-1"), None).await.status, StatusCode::NO_CONTENT);

    let deleted = fake.call(Method::DELETE, &vm_path("vm-2"), None).await;
    assert_eq!(deleted.header("retry-after"), Some("1"), "a running Compute delete asks for a poll delay");
    let monitor = fake.get(deleted.header("location").unwrap()).await;
    assert_eq!((monitor.status, monitor.header("retry-after")), (StatusCode::ACCEPTED, Some("1")));
    fake.wait_op(deleted.header("azure-asyncoperation").unwrap()).await;
    let nic = fake.get(&nic_path("vm-2-nic")).await;
    assert_eq!(nic.status, StatusCode::OK, "Detach keeps the NIC");
    assert!(nic.body["properties"].get("virtualMachine").is_none());
    let delete = fake.call(Method::DELETE, &nic_path("vm-2-nic"), None).await;
    assert_eq!(delete.code(), "NicReservedForAnotherVm", "a detached NIC is reserved after the VM delete");
    let os_disk = fake.get(&disk_path("vm-2-os-disk")).await;
    assert_eq!(os_disk.status, StatusCode::OK);
    assert!(os_disk.body.get("managedBy").is_none());
    assert_eq!(fake.get(&disk_path("vm-2-data-0-data-disk")).await.status, StatusCode::NOT_FOUND);

    let inventory = fake.inventory().await;
    let gone = inventory["instances"].as_array().unwrap().iter().find(|i| i["name"] == "vm-1").unwrap().clone();
    assert_eq!(gone["live"], false);
    let dependents = inventory["dependents"].as_array().unwrap();
    let names: Vec<&str> = dependents.iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"vm-2-nic") && names.contains(&"vm-2-os-disk"), "{names:?}");
    assert!(!names.contains(&"vm-1-nic"), "{names:?}");
    let disk = dependents.iter().find(|d| d["name"] == "vm-2-os-disk").unwrap();
    assert_eq!(disk["kind"], "disk");
    assert_eq!(disk["managed_by"], Value::Null);
}

#[tokio::test]
async fn lists_page_and_filter_by_tag() {
    let fake = Fake::start().await;
    fake.admin("azure/page-size", json!({"size": 2})).await;
    for i in 0..3 {
        let name = format!("vm-{i}");
        fake.put_nic(&format!("{name}-nic"), tags(&name)).await;
        let created = fake.put_vm(&name, vm_body(&name, &format!("{name}-nic"), tags(&name), USER_DATA)).await;
        assert_eq!(created.status, StatusCode::CREATED);
    }
    fake.put_nic("other-nic", json!({"team": "x"})).await;
    let mut names = Vec::new();
    let mut url = format!("{}/providers/Microsoft.Compute/virtualMachines", rg_path());
    let mut pages = 0;
    loop {
        let page = fake.get(&url).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        pages += 1;
        names.extend(page.body["value"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap().to_owned()));
        match page.body["nextLink"].as_str() {
            Some(next) => {
                assert!(next.starts_with("http://") && next.contains("%24skiptoken="), "{next}");
                url = next.to_owned();
            }
            None => break,
        }
    }
    assert_eq!((names, pages), (vec!["vm-0".to_owned(), "vm-1".into(), "vm-2".into()], 2));

    let filter = "tagName eq 'kubernetes.io-cluster-shoot--dev--conf' and tagValue eq '1'";
    let mut found = Vec::new();
    let mut url = fake.url(&format!(
        "{}/resources?api-version=2021-04-01&$filter={}",
        rg_path(),
        filter.replace(' ', "%20").replace('\'', "%27")
    ));
    loop {
        let page = fake.get(&url).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        for item in page.body["value"].as_array().unwrap() {
            found.push((item["type"].as_str().unwrap().to_owned(), item["name"].as_str().unwrap().to_owned()));
            // As ARM: a list filtered by tag answers without the tags.
            assert!(item.get("tags").is_none(), "{item}");
        }
        match page.body["nextLink"].as_str() {
            Some(next) => url = next.to_owned(),
            None => break,
        }
    }
    found.sort();
    assert_eq!(found.len(), 6, "{found:?}");
    assert!(found.contains(&("Microsoft.Network/networkInterfaces".into(), "vm-0-nic".into())));
    assert!(found.contains(&("Microsoft.Compute/virtualMachines".into(), "vm-2".into())));
    assert!(!found.iter().any(|(_, n)| n == "other-nic" || n.ends_with("os-disk")), "untagged disks are not listed");
    let by_type = fake
        .get(&format!(
            "{}/resources?$filter=resourceType%20eq%20%27Microsoft.Network%2FnetworkInterfaces%27",
            rg_path()
        ))
        .await;
    assert_eq!(by_type.status, StatusCode::OK, "{}", by_type.body);
    let nics = by_type.body["value"].as_array().unwrap();
    assert!(
        !nics.is_empty() && nics.iter().all(|n| n["type"] == "Microsoft.Network/networkInterfaces"),
        "{}",
        by_type.body
    );
    assert!(nics.iter().any(|n| n["tags"].is_object()), "a list filtered by type carries the tags: {}", by_type.body);
    let by_name = fake.get(&format!("{}/resources?$filter=tagName%20eq%20%27TEAM%27", rg_path())).await;
    assert_eq!(by_name.body["value"].as_array().unwrap().len(), 1, "tag names match case-insensitively");
    let wrong_value = fake
        .get(&format!("{}/resources?$filter=tagName%20eq%20%27team%27%20and%20tagValue%20eq%20%27X%27", rg_path()))
        .await;
    assert_eq!(wrong_value.body["value"].as_array().unwrap().len(), 0, "tag values are case-sensitive");
    let bad = fake.get(&format!("{}/resources?$filter=location%20eq%20%27x%27", rg_path())).await;
    assert_eq!((bad.status, bad.code()), (StatusCode::BAD_REQUEST, "InvalidFilterInQueryString"));
    let nics = fake.get(&format!("{}/providers/Microsoft.Network/networkInterfaces", rg_path())).await;
    assert_eq!(nics.body["value"].as_array().unwrap().len(), 2);
    assert!(nics.body["nextLink"].is_string());
}

#[tokio::test]
async fn new_vms_are_invisible_for_a_while() {
    let fake = Fake::start().await;
    fake.admin("consistency", json!({"invisible_ms": 300})).await;
    fake.put_nic("vm-i-nic", json!({"k": "v"})).await;
    let created = fake.put_vm("vm-i", vm_body("vm-i", "vm-i-nic", json!({"k": "v"}), USER_DATA)).await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(fake.get(&vm_path("vm-i")).await.status, StatusCode::NOT_FOUND);
    let listed = fake.get(&format!("{}/providers/Microsoft.Compute/virtualMachines", rg_path())).await;
    assert_eq!(listed.body["value"], json!([]));
    let by_tag = fake.get(&format!("{}/resources?$filter=tagName%20eq%20%27k%27", rg_path())).await;
    assert_eq!(by_tag.body["value"].as_array().unwrap().len(), 1, "only the NIC");
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(fake.get(&vm_path("vm-i")).await.status, StatusCode::OK);
}

#[tokio::test]
async fn disks_lifecycle_and_reset() {
    let fake = Fake::start().await;
    let body = json!({"location": "westeurope", "tags": {"a": "b"}, "sku": {"name": "Premium_LRS"},
        "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": 20, "timeCreated": null}});
    let created = fake.call(Method::PUT, &disk_path("d-1"), Some(body)).await;
    assert_eq!(created.status, StatusCode::ACCEPTED, "{}", created.body);
    assert!(created.header("location").is_some());
    assert_eq!(created.body["properties"]["provisioningState"], "Updating");
    assert_eq!(fake.wait_op(created.header("azure-asyncoperation").unwrap()).await["status"], "Succeeded");
    let disk = fake.get(&disk_path("D-1")).await;
    assert_eq!(disk.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(disk.body["sku"]["name"], "Premium_LRS");
    assert_eq!(disk.body["name"], "d-1");
    let listed = fake.get(&format!("{}/providers/Microsoft.Compute/disks", rg_path())).await;
    assert_eq!(listed.body["value"].as_array().unwrap().len(), 1);
    // Attach it to a VM: then it cannot be deleted.
    fake.put_nic("vm-a-nic", json!({})).await;
    let mut vm = vm_body("vm-a", "vm-a-nic", json!({}), USER_DATA);
    vm["properties"]["storageProfile"]["dataDisks"] =
        json!([{"lun": 1, "createOption": "Attach", "managedDisk": {"id": disk_path("d-1")}}]);
    let created = fake.put_vm("vm-a", vm).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let refused = fake.call(Method::DELETE, &disk_path("d-1"), None).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::CONFLICT, "OperationNotAllowed"));
    assert!(refused.body["error"]["message"].as_str().unwrap().starts_with("Disk d-1 is attached to VM"));
    let nic_id = nic_id("vm-a-nic");
    assert!(!nic_id.is_empty());

    fake.admin("reset", json!({})).await;
    assert_eq!(
        fake.get(&disk_path("d-1")).await.status,
        StatusCode::NOT_FOUND,
        "reset drops resources; tokens stay valid"
    );
    let gone = fake.call(Method::DELETE, &disk_path("d-1"), None).await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    assert_eq!(fake.inventory().await["dependents"], json!([]));
}

/// `POST /_admin/instances/{id}/terminate` with the ARM id percent-encoded (it holds `/`).
async fn terminate(fake: &Fake, id: &str) -> (StatusCode, Value) {
    let url = format!("{}/instances/{}/terminate", fake.handle.admin_url(), id.replace('/', "%2F"));
    let resp = fake.http.post(url).json(&json!({})).send().await.unwrap();
    (resp.status(), resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn admin_terminate_evicts_the_vm_at_once_and_frees_its_name() {
    let fake = Fake::start().await;
    fake.admin("azure/nic-reservation", json!({"ms": 0})).await;
    // NIC and OS disk Detach (they stay), the data disk Delete (it goes, as on eviction).
    fake.put_nic("vm-1-nic", json!({})).await;
    let mut body = vm_body("vm-1", "vm-1-nic", tags("vm-1"), USER_DATA);
    body["properties"]["networkProfile"]["networkInterfaces"][0]["properties"]["deleteOption"] = json!("Detach");
    body["properties"]["storageProfile"]["osDisk"]["deleteOption"] = json!("Detach");
    let created = fake.put_vm("vm-1", body.clone()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    fake.wait_op(created.header("azure-asyncoperation").unwrap()).await;
    let id = created.body["id"].as_str().unwrap().to_owned();
    let inventory = fake.inventory().await;
    let vm = inventory["instances"].as_array().unwrap().iter().find(|i| i["name"] == "vm-1").unwrap().clone();
    assert_eq!((vm["id"].as_str(), &vm["live"]), (Some(id.as_str()), &json!(true)));
    fake.admin("calls/reset", json!({})).await;

    let (status, answer) = terminate(&fake, &id).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(fake.admin_get("calls").await["total"], 0, "terminate is not a call");

    let gone = fake.get(&vm_path("vm-1")).await;
    assert_eq!((gone.status, gone.code()), (StatusCode::NOT_FOUND, "ResourceNotFound"), "{}", gone.body);
    let inventory = fake.inventory().await;
    let entries: Vec<&Value> =
        inventory["instances"].as_array().unwrap().iter().filter(|i| i["name"] == "vm-1").collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!((entries[0]["id"].as_str(), &entries[0]["live"]), (Some(id.as_str()), &json!(false)));
    assert_eq!(entries[0]["state"], "deleted");
    // Dependents: the Detach NIC and OS disk stay, detached; the Delete data disk went.
    let nic = fake.get(&nic_path("vm-1-nic")).await;
    assert_eq!(nic.status, StatusCode::OK, "{}", nic.body);
    assert!(nic.body["properties"].get("virtualMachine").is_none(), "{}", nic.body);
    let os_disk = fake.get(&disk_path("vm-1-os-disk")).await;
    assert_eq!(os_disk.status, StatusCode::OK);
    assert!(os_disk.body.get("managedBy").is_none(), "{}", os_disk.body);
    assert_eq!(fake.get(&disk_path("vm-1-data-0-data-disk")).await.status, StatusCode::NOT_FOUND);
    let dependents = inventory["dependents"].as_array().unwrap();
    let live: Vec<&str> =
        dependents.iter().filter(|d| d["live"] == true).map(|d| d["name"].as_str().unwrap()).collect();
    assert!(live.contains(&"vm-1-nic") && live.contains(&"vm-1-os-disk"), "{live:?}");

    // No live VM has the id any more (ids are case-insensitive; unknown ids too).
    let (status, answer) = terminate(&fake, &id).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert_eq!(answer["error"], format!("no live instance {id}"));
    assert_eq!(terminate(&fake, &vm_path("nope")).await.0, StatusCode::NOT_FOUND);

    // A new VM with the same name (and the kept NIC) is created anew.
    body["properties"]["storageProfile"]["osDisk"]["name"] = json!("vm-1-os-disk-2");
    let again = fake.put_vm("vm-1", body).await;
    assert_eq!(again.status, StatusCode::CREATED, "{}", again.body);
    assert_ne!(again.body["properties"]["vmId"], created.body["properties"]["vmId"]);
    fake.wait_op(again.header("azure-asyncoperation").unwrap()).await;
    assert_eq!(fake.get(&vm_path("vm-1")).await.status, StatusCode::OK);
    let inventory = fake.inventory().await;
    let live = inventory["instances"].as_array().unwrap().iter().filter(|i| i["name"] == "vm-1" && i["live"] == true);
    assert_eq!(live.count(), 1);

    // With deleteOption Delete (as the driver sets) the NIC goes with the VM; the
    // upper-cased id matches, and a VM being deleted is not live.
    fake.put_nic("vm-2-nic", json!({})).await;
    let created = fake.put_vm("vm-2", vm_body("vm-2", "vm-2-nic", json!({}), USER_DATA)).await;
    let id2 = created.body["id"].as_str().unwrap().to_owned();
    assert_eq!(terminate(&fake, &id2.to_ascii_uppercase()).await.0, StatusCode::OK);
    assert_eq!(fake.get(&vm_path("vm-2")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(fake.get(&nic_path("vm-2-nic")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(fake.get(&disk_path("vm-2-os-disk")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(fake.call(Method::DELETE, &vm_path("vm-1"), None).await.status, StatusCode::ACCEPTED);
    assert_eq!(terminate(&fake, &id).await.0, StatusCode::NOT_FOUND);
}
