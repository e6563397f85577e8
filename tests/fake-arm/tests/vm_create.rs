//! The driver's one-call VM create: a create-only PUT (`If-None-Match: *`) and a VM
//! PUT that makes its NIC from `networkProfile.networkInterfaceConfigurations`.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{Fake, NET_API, disk_path, nic_id, nic_path, subnet_id, vm_body, vm_path};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const USER_DATA: &str = "I2Nsb3VkLWNvbmZpZwpydW5jbWQ6IFtlY2hvLCBoaV0K";

/// `vm_body` with a network profile that makes NIC `nic` (deleteOption `delete_option`, if any).
fn vm_body_with_config(name: &str, nic: &str, delete_option: Option<&str>) -> Value {
    let mut body = vm_body(name, "unused", json!({"machine": name}), USER_DATA);
    let mut nic_props = json!({
        "primary": true,
        "enableIPForwarding": true,
        "enableAcceleratedNetworking": false,
        "ipConfigurations": [{
            "name": format!("{nic}-ipconfig"),
            "properties": {"subnet": {"id": subnet_id()}, "primary": true, "privateIPAddressVersion": "IPv4"}
        }]
    });
    if let Some(option) = delete_option {
        nic_props["deleteOption"] = json!(option);
    }
    body["properties"]["networkProfile"] = json!({
        "networkApiVersion": "2020-11-01",
        "networkInterfaceConfigurations": [{"name": nic, "properties": nic_props}]
    });
    body
}

/// The NIC ids the VM answer lists under `networkProfile.networkInterfaces`.
fn listed_nics(vm: &Value) -> Vec<(String, String)> {
    vm["properties"]["networkProfile"]["networkInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap().to_owned(), n["properties"]["deleteOption"].as_str().unwrap().to_owned()))
        .collect()
}

#[tokio::test]
async fn if_none_match_star_creates_once_then_412() {
    let fake = Fake::start().await;
    fake.put_nic("vm-1-nic", json!({})).await;

    // Absent VM: the create-only PUT creates it.
    let created =
        fake.put_vm_if_none_match("vm-1", "*", vm_body("vm-1", "vm-1-nic", json!({"a": "1"}), USER_DATA)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["properties"]["provisioningState"], "Creating");
    let vm_id = created.body["properties"]["vmId"].clone();
    let async_url = created.header("azure-asyncoperation").unwrap().to_owned();

    // While it is still provisioning: 412 with ARM's error body.
    let mut changed = vm_body("vm-1", "vm-1-nic", json!({"a": "2"}), USER_DATA);
    changed["properties"]["hardwareProfile"]["vmSize"] = json!("Standard_D4s_v3");
    let refused = fake.put_vm_if_none_match("vm-1", "*", changed.clone()).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::PRECONDITION_FAILED, "PreconditionFailed"));
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&vm_path("vm-1")), "{message}");
    assert!(refused.header("x-ms-request-id").is_some());
    assert!(refused.header("azure-asyncoperation").is_none(), "no operation for a refused PUT");
    assert_eq!(fake.wait_op(&async_url).await["status"], "Succeeded");

    // After it succeeded: 412 again, and nothing changed (size, tags, vmId, no new NIC or disk).
    let mut with_config = vm_body_with_config("vm-1", "vm-1-other-nic", Some("Delete"));
    with_config["properties"]["storageProfile"]["osDisk"]["name"] = json!("vm-1-other-os-disk");
    for body in [changed, with_config] {
        let refused = fake.put_vm_if_none_match("vm-1", "*", body).await;
        assert_eq!((refused.status, refused.code()), (StatusCode::PRECONDITION_FAILED, "PreconditionFailed"));
        assert_eq!(refused.body["error"]["details"], json!([]), "{}", refused.body);
    }
    let vm = fake.get(&vm_path("vm-1")).await;
    assert_eq!(vm.body["properties"]["vmId"], vm_id);
    assert_eq!(vm.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(vm.body["properties"]["hardwareProfile"]["vmSize"], "Standard_D2s_v3");
    assert_eq!(vm.body["tags"], json!({"a": "1"}));
    assert_eq!(listed_nics(&vm.body), vec![(nic_id("vm-1-nic"), "Delete".to_owned())]);
    assert_eq!(fake.get(&nic_path("vm-1-other-nic")).await.status, StatusCode::NOT_FOUND, "no NIC made");
    assert_eq!(fake.get(&disk_path("vm-1-other-os-disk")).await.status, StatusCode::NOT_FOUND, "no disk made");
    // Names are case-insensitive: an upper-cased name is the same VM.
    let upper = fake.put_vm_if_none_match("VM-1", "*", vm_body("VM-1", "vm-1-nic", json!({}), USER_DATA)).await;
    assert_eq!(upper.status, StatusCode::PRECONDITION_FAILED, "{}", upper.body);
    // Without the header the same PUT is an ordinary update.
    let update = fake.put_vm("vm-1", vm_body("vm-1", "vm-1-nic", json!({"a": "1"}), USER_DATA)).await;
    assert_eq!(update.status, StatusCode::OK, "{}", update.body);
    assert_eq!(update.body["properties"]["vmId"], vm_id);
    // Any other value is refused.
    let other = fake.put_vm_if_none_match("vm-1", "W/\"1\"", vm_body("vm-1", "vm-1-nic", json!({}), USER_DATA)).await;
    assert_eq!((other.status, other.code()), (StatusCode::BAD_REQUEST, "InvalidParameter"));

    // A VM being deleted still exists (412); once gone, the create-only PUT creates it anew.
    let deleted = fake.call(Method::DELETE, &vm_path("vm-1"), None).await;
    assert_eq!(deleted.status, StatusCode::ACCEPTED);
    let refused = fake.put_vm_if_none_match("vm-1", "*", vm_body("vm-1", "vm-1-nic", json!({}), USER_DATA)).await;
    assert_eq!(refused.status, StatusCode::PRECONDITION_FAILED, "{}", refused.body);
    fake.wait_op(deleted.header("azure-asyncoperation").unwrap()).await;
    fake.put_nic("vm-1-nic", json!({})).await;
    let again = fake.put_vm_if_none_match("vm-1", "*", vm_body("vm-1", "vm-1-nic", json!({}), USER_DATA)).await;
    assert_eq!(again.status, StatusCode::CREATED, "{}", again.body);
    assert_ne!(again.body["properties"]["vmId"], vm_id);
}

#[tokio::test]
async fn if_none_match_star_sees_a_vm_not_yet_visible() {
    let fake = Fake::start().await;
    fake.admin("consistency", json!({"invisible_ms": 500})).await;
    fake.put_nic("vm-i-nic", json!({})).await;
    let created = fake.put_vm_if_none_match("vm-i", "*", vm_body("vm-i", "vm-i-nic", json!({}), USER_DATA)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(fake.get(&vm_path("vm-i")).await.status, StatusCode::NOT_FOUND, "not yet visible to reads");
    let refused = fake.put_vm_if_none_match("vm-i", "*", vm_body("vm-i", "vm-i-nic", json!({}), USER_DATA)).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::PRECONDITION_FAILED, "PreconditionFailed"));
}

#[tokio::test]
async fn network_interface_configurations_make_the_nic_at_put_time() {
    let fake = Fake::start().await;
    let created = fake.put_vm("vm-n", vm_body_with_config("vm-n", "vm-n-nic", Some("Delete"))).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["properties"]["provisioningState"], "Creating");
    assert_eq!(listed_nics(&created.body), vec![(nic_id("vm-n-nic"), "Delete".to_owned())]);
    let network = &created.body["properties"]["networkProfile"];
    assert_eq!(network["networkApiVersion"], "2020-11-01");
    assert_eq!(network["networkInterfaceConfigurations"][0]["name"], "vm-n-nic");
    assert_eq!(network["networkInterfaces"][0]["properties"]["primary"], true);

    // The NIC exists while the VM is still being created.
    let nic = fake.get(&format!("{}?api-version={NET_API}", nic_path("vm-n-nic"))).await;
    assert_eq!(nic.status, StatusCode::OK, "{}", nic.body);
    assert_eq!(nic.body["id"], nic_id("vm-n-nic"));
    assert_eq!(nic.body["name"], "vm-n-nic");
    assert_eq!(nic.body["location"], fake_arm::LOCATION);
    assert!(nic.body.get("tags").is_none(), "the made NIC has no tags: {}", nic.body);
    assert_eq!(nic.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(nic.body["properties"]["enableIPForwarding"], true);
    assert_eq!(nic.body["properties"]["virtualMachine"]["id"], vm_path("vm-n"));
    let ip = &nic.body["properties"]["ipConfigurations"][0];
    assert_eq!(ip["name"], "vm-n-nic-ipconfig");
    assert_eq!(ip["properties"]["subnet"]["id"], subnet_id());
    assert_eq!(ip["properties"]["privateIPAllocationMethod"], "Dynamic");
    assert_eq!(ip["properties"]["privateIPAddress"], "10.250.0.4");
    assert_eq!(ip["properties"]["primary"], true);
    let listed = fake.get(&format!("{}/providers/Microsoft.Network/networkInterfaces", common::rg_path())).await;
    let names: Vec<&str> =
        listed.body["value"].as_array().unwrap().iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["vm-n-nic"]);
    let in_use = fake.call(Method::DELETE, &nic_path("vm-n-nic"), None).await;
    assert_eq!((in_use.status, in_use.code()), (StatusCode::BAD_REQUEST, "NicInUse"));

    fake.wait_op(created.header("azure-asyncoperation").unwrap()).await;
    let vm = fake.get(&format!("{}?$expand=instanceView", vm_path("vm-n"))).await;
    assert_eq!(vm.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(listed_nics(&vm.body), vec![(nic_id("vm-n-nic"), "Delete".to_owned())]);
    // An unchanged re-PUT keeps the NIC and its IP.
    let same = fake.put_vm("vm-n", vm_body_with_config("vm-n", "vm-n-nic", Some("Delete"))).await;
    assert_eq!(same.status, StatusCode::OK, "{}", same.body);
    let nic = fake.get(&nic_path("vm-n-nic")).await;
    assert_eq!(nic.body["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"], "10.250.0.4");

    // Another VM naming the same NIC: NicInUse, and no VM.
    let mut other = vm_body_with_config("vm-o", "vm-n-nic", Some("Delete"));
    other["properties"]["storageProfile"]["osDisk"]["name"] = json!("vm-o-os-disk");
    let refused = fake.put_vm("vm-o", other).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::BAD_REQUEST, "NicInUse"), "{}", refused.body);
    assert!(refused.body["error"]["message"].as_str().unwrap().contains(&vm_path("vm-n")), "{}", refused.body);
    assert_eq!(fake.get(&vm_path("vm-o")).await.status, StatusCode::NOT_FOUND);

    // deleteOption Delete: the NIC goes with the VM.
    let deleted = fake.call(Method::DELETE, &vm_path("vm-n"), None).await;
    assert_eq!(deleted.status, StatusCode::ACCEPTED);
    fake.wait_op(deleted.header("azure-asyncoperation").unwrap()).await;
    assert_eq!(fake.get(&vm_path("vm-n")).await.status, StatusCode::NOT_FOUND);
    let gone = fake.get(&nic_path("vm-n-nic")).await;
    assert_eq!((gone.status, gone.code()), (StatusCode::NOT_FOUND, "ResourceNotFound"), "NIC cascades");
    assert_eq!(fake.get(&disk_path("vm-n-os-disk")).await.status, StatusCode::NOT_FOUND);
    let inventory = fake.inventory().await;
    let dependents = inventory["dependents"].as_array().unwrap();
    assert!(!dependents.iter().any(|d| d["name"] == "vm-n-nic" && d["live"] == true), "{dependents:?}");
}

#[tokio::test]
async fn network_interface_configurations_detach_reserve_and_take_over() {
    let fake = Fake::start().await;
    // No deleteOption: Detach (the default).
    let created = fake.put_vm("vm-d", vm_body_with_config("vm-d", "vm-d-nic", None)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(listed_nics(&created.body), vec![(nic_id("vm-d-nic"), "Detach".to_owned())]);
    fake.wait_op(created.header("azure-asyncoperation").unwrap()).await;
    let deleted = fake.call(Method::DELETE, &vm_path("vm-d"), None).await;
    fake.wait_op(deleted.header("azure-asyncoperation").unwrap()).await;
    fake.wait_gone(&vm_path("vm-d")).await;

    // The NIC stays, detached and reserved: neither deletable nor usable by a new VM.
    let nic = fake.get(&nic_path("vm-d-nic")).await;
    assert_eq!(nic.status, StatusCode::OK, "Detach keeps the NIC");
    assert!(nic.body["properties"].get("virtualMachine").is_none(), "{}", nic.body);
    let delete = fake.call(Method::DELETE, &nic_path("vm-d-nic"), None).await;
    assert_eq!((delete.status, delete.code()), (StatusCode::BAD_REQUEST, "NicReservedForAnotherVm"));
    let mut next = vm_body_with_config("vm-e", "vm-d-nic", Some("Delete"));
    next["properties"]["storageProfile"]["osDisk"]["name"] = json!("vm-e-os-disk");
    let reserved = fake.put_vm("vm-e", next.clone()).await;
    assert_eq!((reserved.status, reserved.code()), (StatusCode::BAD_REQUEST, "NicReservedForAnotherVm"));
    let message = reserved.body["error"]["message"].as_str().unwrap();
    assert!(message.ends_with(&format!("Reserved VM: {}", vm_path("vm-d"))), "{message}");
    assert_eq!(fake.get(&vm_path("vm-e")).await.status, StatusCode::NOT_FOUND);

    // Once the window is over the free NIC is taken over (same id, same IP).
    fake.admin("azure/nic-reservation", json!({"ms": 50})).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let taken = fake.put_vm("vm-e", next).await;
    assert_eq!(taken.status, StatusCode::CREATED, "{}", taken.body);
    assert_eq!(listed_nics(&taken.body), vec![(nic_id("vm-d-nic"), "Delete".to_owned())]);
    let nic_after = fake.get(&nic_path("vm-d-nic")).await;
    assert_eq!(nic_after.body["properties"]["virtualMachine"]["id"], vm_path("vm-e"));
    assert_eq!(nic_after.body["properties"]["resourceGuid"], nic.body["properties"]["resourceGuid"]);
    assert_eq!(
        nic_after.body["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"],
        nic.body["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"]
    );
}

#[tokio::test]
async fn network_interface_configurations_validation() {
    let fake = Fake::start().await;
    let mut no_api_version = vm_body_with_config("vm-x", "vm-x-nic", Some("Delete"));
    no_api_version["properties"]["networkProfile"].as_object_mut().unwrap().remove("networkApiVersion");
    let refused = fake.put_vm("vm-x", no_api_version).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::BAD_REQUEST, "InvalidParameter"));
    assert_eq!(refused.body["error"]["target"], "networkProfile.networkApiVersion");

    fake.put_nic("vm-x-ref-nic", json!({})).await;
    let mut both = vm_body_with_config("vm-x", "vm-x-nic", Some("Delete"));
    both["properties"]["networkProfile"]["networkInterfaces"] = json!([{"id": nic_id("vm-x-ref-nic")}]);
    let refused = fake.put_vm("vm-x", both).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::BAD_REQUEST, "InvalidParameter"));
    assert_eq!(refused.body["error"]["target"], "networkProfile");

    let mut bad_subnet = vm_body_with_config("vm-x", "vm-x-nic", Some("Delete"));
    let missing = subnet_id().replace("-nodes", "-absent");
    bad_subnet["properties"]["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]["ipConfigurations"]
        [0]["properties"]["subnet"]["id"] = json!(missing);
    let refused = fake.put_vm("vm-x", bad_subnet).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::BAD_REQUEST, "InvalidResourceReference"));

    let mut twice = vm_body_with_config("vm-x", "vm-x-nic", Some("Delete"));
    let config = twice["properties"]["networkProfile"]["networkInterfaceConfigurations"][0].clone();
    twice["properties"]["networkProfile"]["networkInterfaceConfigurations"] = json!([config.clone(), config]);
    let refused = fake.put_vm("vm-x", twice).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::BAD_REQUEST, "InvalidParameter"));

    // None of the refused PUTs made a VM or a NIC.
    assert_eq!(fake.get(&vm_path("vm-x")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(fake.get(&nic_path("vm-x-nic")).await.status, StatusCode::NOT_FOUND);
}
