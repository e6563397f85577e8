//! Spot evictions (`POST /_admin/instances/{id}/reclaim`) as Azure makes them: a
//! `Deallocate` Spot VM stays, deallocated, with its NIC and disks; a `Delete` one goes
//! with what its delete options take; a regular VM is never evicted (409); an id of no
//! running VM is 404. None counts a call.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Fake, NET_API, disk_path, nic_path, vm_body, vm_path};
use fake_cloud_support::AdminClient;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const USER_DATA: &str = "I2Nsb3VkLWNvbmZpZwpydW5jbWQ6IFtlY2hvLCBoaV0K";

/// `POST /_admin/instances/{id}/reclaim` with the ARM id percent-encoded (it holds `/`).
async fn reclaim(fake: &Fake, id: &str) -> (StatusCode, Value) {
    let url = format!("{}/instances/{}/reclaim", fake.handle.admin_url(), id.replace('/', "%2F"));
    let resp = fake.http.post(url).json(&json!({})).send().await.unwrap();
    (resp.status(), resp.json().await.unwrap_or(Value::Null))
}

/// A VM body of `name` on NIC `<name>-nic` with `spot` merged into its properties.
fn spot_body(name: &str, spot: Value) -> Value {
    let mut body = vm_body(name, &format!("{name}-nic"), json!({"machine": name}), USER_DATA);
    for (k, v) in spot.as_object().unwrap() {
        body["properties"][k] = v.clone();
    }
    body
}

/// Creates VM `name` (and its NIC) and waits until it is provisioned; its ARM id.
async fn create(fake: &Fake, name: &str, spot: Value) -> String {
    fake.put_nic(&format!("{name}-nic"), json!({})).await;
    let created = fake.put_vm(name, spot_body(name, spot)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    fake.wait_op(created.header("azure-asyncoperation").unwrap()).await;
    created.body["id"].as_str().unwrap().to_owned()
}

fn power_states(vm: &Value) -> Vec<String> {
    vm["properties"]["instanceView"]["statuses"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["code"].as_str())
        .filter(|c| c.starts_with("PowerState/"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_deallocate_spot_vm_is_deallocated_and_keeps_its_nic_and_disks() {
    let fake = Fake::start().await;
    let id = create(
        &fake,
        "spot-1",
        json!({"priority": "Spot", "evictionPolicy": "Deallocate", "billingProfile": {"maxPrice": -1}}),
    )
    .await;
    let before = fake.get(&format!("{}?$expand=instanceView", vm_path("spot-1"))).await;
    assert_eq!(power_states(&before.body), vec!["PowerState/running"]);
    fake.admin("calls/reset", json!({})).await;

    let admin = AdminClient::for_cloud_url(&fake.handle.url()).unwrap();
    let shown = admin.reclaim(&id).await.unwrap();
    assert!(shown.contains("PowerState/deallocated"), "{shown}");
    assert_eq!(fake.admin_get("calls").await["total"], 0, "a reclaim is not a call");

    // Compute's record: still there, provisioning Succeeded, the instance view deallocated.
    let vm = fake.get(&format!("{}?$expand=instanceView", vm_path("spot-1"))).await;
    assert_eq!(vm.status, StatusCode::OK, "{}", vm.body);
    assert_eq!(vm.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(vm.body["properties"]["priority"], "Spot");
    assert_eq!(vm.body["properties"]["evictionPolicy"], "Deallocate");
    assert_eq!(power_states(&vm.body), vec!["PowerState/deallocated"]);
    let statuses = vm.body["properties"]["instanceView"]["statuses"].as_array().unwrap();
    assert_eq!(statuses[0]["code"], "ProvisioningState/succeeded");
    // The model view (no instance view) looks as before; the generic list too.
    let plain = fake.get(&vm_path("spot-1")).await;
    assert_eq!(plain.body["properties"]["provisioningState"], "Succeeded");
    assert!(plain.body["properties"].get("instanceView").is_none());
    // The NIC stays attached with its private IP; the disks stay, managed by the VM.
    let nic = fake.get(&format!("{}?api-version={NET_API}", nic_path("spot-1-nic"))).await;
    assert_eq!(nic.body["properties"]["virtualMachine"]["id"], vm_path("spot-1"));
    assert!(nic.body["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"].is_string());
    for disk in ["spot-1-os-disk", "spot-1-data-0-data-disk"] {
        let disk = fake.get(&disk_path(disk)).await;
        assert_eq!(disk.status, StatusCode::OK);
        assert_eq!(disk.body["managedBy"], vm_path("spot-1"));
    }
    let inventory = fake.inventory().await;
    let entry = inventory["instances"].as_array().unwrap().iter().find(|i| i["name"] == "spot-1").unwrap().clone();
    assert_eq!((&entry["live"], &entry["power_state"]), (&json!(true), &json!("deallocated")));

    // Not running any more: nothing to reclaim (404), and the VM is deleted as any other.
    let (status, answer) = reclaim(&fake, &id).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert_eq!(fake.call(Method::DELETE, &vm_path("spot-1"), None).await.status, StatusCode::ACCEPTED);
    fake.wait_gone(&vm_path("spot-1")).await;
    assert_eq!(fake.get(&disk_path("spot-1-os-disk")).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_eviction_policy_defaults_to_deallocate_and_low_is_spot() {
    let fake = Fake::start().await;
    let id = create(&fake, "low-1", json!({"priority": "Low"})).await;
    let (status, answer) = reclaim(&fake, &id.to_ascii_uppercase()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["reclaimed"], id.to_ascii_uppercase());
    let vm = fake.get(&format!("{}?$expand=instanceView", vm_path("low-1"))).await;
    assert_eq!(power_states(&vm.body), vec!["PowerState/deallocated"]);
}

#[tokio::test]
async fn a_spot_vm_still_being_created_is_evicted_and_its_create_ends() {
    let fake = Fake::start().await;
    fake.admin("timing", json!({"boot_ms": 60_000, "stop_ms": 200})).await;
    fake.put_nic("young-1-nic", json!({})).await;
    let created = fake.put_vm("young-1", spot_body("young-1", json!({"priority": "Spot"}))).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let op = created.header("azure-asyncoperation").unwrap().to_owned();
    assert_eq!(fake.get(&op).await.body["status"], "InProgress");
    let (status, answer) = reclaim(&fake, created.body["id"].as_str().unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(fake.get(&op).await.body["status"], "Succeeded");
    let vm = fake.get(&format!("{}?$expand=instanceView", vm_path("young-1"))).await;
    assert_eq!(vm.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(power_states(&vm.body), vec!["PowerState/deallocated"]);
}

#[tokio::test]
async fn a_delete_spot_vm_goes_with_its_nic_and_disks() {
    let fake = Fake::start().await;
    let id = create(&fake, "spot-2", json!({"priority": "Spot", "evictionPolicy": "Delete"})).await;
    let (status, answer) = reclaim(&fake, &id).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(answer["shown"].as_str().unwrap().contains("evictionPolicy Delete"), "{answer}");
    let gone = fake.get(&vm_path("spot-2")).await;
    assert_eq!((gone.status, gone.code()), (StatusCode::NOT_FOUND, "ResourceNotFound"));
    // The body's NIC and disks have deleteOption Delete: they went with it.
    assert_eq!(fake.get(&nic_path("spot-2-nic")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(fake.get(&disk_path("spot-2-os-disk")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(fake.get(&disk_path("spot-2-data-0-data-disk")).await.status, StatusCode::NOT_FOUND);
    let inventory = fake.inventory().await;
    let entry = inventory["instances"].as_array().unwrap().iter().find(|i| i["name"] == "spot-2").unwrap().clone();
    assert_eq!((&entry["live"], &entry["state"]), (&json!(false), &json!("deleted")));
    assert_eq!(reclaim(&fake, &id).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_regular_vm_is_never_evicted_and_unknown_ids_are_not_found() {
    let fake = Fake::start().await;
    let plain = create(&fake, "plain-1", json!({})).await;
    let regular = create(&fake, "regular-1", json!({"priority": "Regular"})).await;
    for id in [&plain, &regular] {
        let (status, answer) = reclaim(&fake, id).await;
        assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    }
    let vm = fake.get(&format!("{}?$expand=instanceView", vm_path("plain-1"))).await;
    assert_eq!(power_states(&vm.body), vec!["PowerState/running"], "untouched");
    assert_eq!(reclaim(&fake, &vm_path("nope")).await.0, StatusCode::NOT_FOUND);
    // A VM being deleted is not running.
    let spot = create(&fake, "spot-3", json!({"priority": "Spot"})).await;
    assert_eq!(fake.call(Method::DELETE, &vm_path("spot-3"), None).await.status, StatusCode::ACCEPTED);
    assert_eq!(reclaim(&fake, &spot).await.0, StatusCode::NOT_FOUND);
}
