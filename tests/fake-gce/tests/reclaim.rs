//! Spot VM preemption through the admin reclaim (`POST /_admin/instances/{id}/reclaim`,
//! `AdminClient::reclaim`) and `instances.start` of the stopped VM, over plain HTTP.

mod common;

use common::{Fake, instance_body};
use fake_cloud_support::{AdminClient, Fault};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A Spot VM's insert body (`provisioningModel: SPOT`) with `extra` scheduling fields.
fn spot_body(name: &str, extra: Value) -> Value {
    let mut body = instance_body(name, json!({"role": "node"}));
    let mut scheduling =
        json!({"provisioningModel": "SPOT", "automaticRestart": false, "onHostMaintenance": "TERMINATE"});
    if let (Some(s), Some(e)) = (scheduling.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    body["scheduling"] = scheduling;
    body
}

/// Inserts `body`, waits for its operation and returns the instance's numeric id.
async fn launch(fake: &Fake, body: &Value) -> String {
    let (status, op) = fake.insert(body, None).await;
    assert_eq!(status, StatusCode::OK, "{op}");
    fake.wait_done(op["name"].as_str().expect("operation name")).await;
    op["targetId"].as_str().expect("targetId").to_string()
}

fn admin(fake: &Fake) -> AdminClient {
    AdminClient::for_cloud_url(&fake.handle.url()).expect("admin client")
}

/// The zone's operations of type `compute.instances.preempted`.
async fn preemptions(fake: &Fake) -> Vec<Value> {
    let (status, list) = fake.send(fake.http.get(fake.zonal("operations"))).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items.into_iter().filter(|op| op["operationType"] == "compute.instances.preempted").collect()
}

async fn start(fake: &Fake, name: &str) -> (StatusCode, Value) {
    fake.send(fake.http.post(fake.zonal(&format!("instances/{name}/start"))).json(&json!({}))).await
}

/// Polls instances.get until `name` has `status` (at most ~3 s).
async fn await_status(fake: &Fake, name: &str, status: &str) -> Value {
    for _ in 0..60 {
        let (code, instance) = fake.get_instance(name).await;
        assert_eq!(code, StatusCode::OK, "{instance}");
        if instance["status"] == status {
            return instance;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("instance {name} never reached {status}");
}

#[tokio::test]
async fn a_stop_spot_vm_is_terminated_keeps_its_disks_and_internal_ip_and_counts_no_call() {
    let fake = Fake::start().await;
    let admin = admin(&fake);
    let id = launch(&fake, &spot_body("spot-stop", json!({"instanceTerminationAction": "STOP"}))).await;
    let before = await_status(&fake, "spot-stop", "RUNNING").await;
    assert!(before["networkInterfaces"][0]["accessConfigs"][0]["natIP"].is_string(), "{before}");
    let calls = admin.calls().await.expect("calls");

    let shown = admin.reclaim(&id).await.expect("a Spot VM is reclaimed");
    assert!(shown.contains("TERMINATED") && shown.contains("compute.instances.preempted"), "{shown}");
    assert_eq!(admin.calls().await.expect("calls").breakdown(), calls.breakdown(), "the reclaim counts no call");

    let (status, after) = fake.get_instance("spot-stop").await;
    assert_eq!(status, StatusCode::OK, "a STOP reclaim leaves the instance");
    assert_eq!(after["status"], "TERMINATED");
    assert_eq!(after["scheduling"]["provisioningModel"], "SPOT");
    assert!(after["lastStopTimestamp"].is_string(), "{after}");
    let nic = &after["networkInterfaces"][0];
    assert_eq!(nic["networkIP"], before["networkInterfaces"][0]["networkIP"], "internal IP kept");
    assert!(nic["accessConfigs"][0].get("natIP").is_none(), "ephemeral external IP released: {nic}");
    assert_eq!(after["disks"], before["disks"], "disks kept");

    let ops = preemptions(&fake).await;
    assert_eq!(ops.len(), 1, "{ops:?}");
    assert_eq!(ops[0]["targetId"], id.as_str());
    assert_eq!(ops[0]["user"], "system");
    assert_eq!(ops[0]["status"], "DONE");
    assert_eq!(ops[0]["statusMessage"], "Instance was preempted.");

    let inventory = fake.inventory().await;
    let entry = inventory.iter().find(|i| i["id"] == id.as_str()).expect("in the inventory");
    assert_eq!((entry["state"].as_str(), entry["live"].as_bool()), (Some("TERMINATED"), Some(true)));
    let (status, listed) = fake.list(&[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed["items"][0]["status"], "TERMINATED", "listed while it exists");

    // Nothing runs any more: a second reclaim finds no live VM.
    let err = admin.reclaim(&id).await.expect_err("a TERMINATED VM cannot be reclaimed again");
    assert!(err.contains("404"), "{err}");
}

#[tokio::test]
async fn a_spot_vm_without_a_termination_action_and_a_preemptible_vm_are_stopped() {
    let fake = Fake::start().await;
    let admin = admin(&fake);
    let spot = launch(&fake, &spot_body("spot-default", json!({}))).await;
    let mut legacy = instance_body("legacy", json!({}));
    legacy["scheduling"] = json!({"preemptible": true, "automaticRestart": false, "onHostMaintenance": "TERMINATE"});
    let legacy = launch(&fake, &legacy).await;
    admin.reclaim(&spot).await.expect("Spot");
    let shown = admin.reclaim(&legacy).await.expect("preemptible");
    assert!(shown.contains("TERMINATED"), "{shown}");
    assert_eq!(fake.get_instance("spot-default").await.1["status"], "TERMINATED", "STOP is the default");
    assert_eq!(fake.get_instance("legacy").await.1["status"], "TERMINATED");
}

#[tokio::test]
async fn a_delete_spot_vm_is_gone_and_its_name_free() {
    let fake = Fake::start().await;
    let admin = admin(&fake);
    let id = launch(&fake, &spot_body("spot-del", json!({"instanceTerminationAction": "DELETE"}))).await;
    let shown = admin.reclaim(&id).await.expect("reclaimed");
    assert!(shown.starts_with("deleted"), "{shown}");
    let (status, err) = fake.get_instance("spot-del").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{err}");
    let inventory = fake.inventory().await;
    let entry = inventory.iter().find(|i| i["id"] == id.as_str()).expect("in the inventory");
    assert_eq!((entry["state"].as_str(), entry["live"].as_bool()), (Some("DELETED"), Some(false)));
    assert_eq!(preemptions(&fake).await.len(), 1);
    let (status, op) = fake.insert(&instance_body("spot-del", json!({})), None).await;
    assert_eq!(status, StatusCode::OK, "the name is free: {op}");
    assert!(admin.reclaim(&id).await.expect_err("gone").contains("404"));
}

#[tokio::test]
async fn an_on_demand_vm_is_not_reclaimed_and_an_unknown_id_is_not_found() {
    let fake = Fake::start().await;
    let admin = admin(&fake);
    let id = launch(&fake, &instance_body("standard", json!({}))).await;
    let err = admin.reclaim(&id).await.expect_err("a standard VM is never reclaimed");
    assert!(err.contains("409"), "{err}");
    // A run-time limit alone (STANDARD with maxRunDuration) is not a Spot VM either.
    let mut limited = instance_body("limited", json!({}));
    limited["scheduling"] = json!({"instanceTerminationAction": "STOP", "maxRunDuration": {"seconds": "3600"}});
    let limited = launch(&fake, &limited).await;
    assert!(admin.reclaim(&limited).await.expect_err("not Spot").contains("409"));
    assert_eq!(await_status(&fake, "standard", "RUNNING").await["status"], "RUNNING", "untouched");
    assert!(preemptions(&fake).await.is_empty());
    assert!(admin.reclaim("1234567890123456789").await.expect_err("unknown").contains("404"));
}

#[tokio::test]
async fn start_boots_a_stopped_spot_vm_again_with_a_new_external_ip() {
    let fake = Fake::start().await;
    let admin = admin(&fake);
    let id = launch(&fake, &spot_body("spot-start", json!({}))).await;
    admin.reclaim(&id).await.expect("reclaimed");
    let (status, op) = start(&fake, "spot-start").await;
    assert_eq!(status, StatusCode::OK, "{op}");
    assert_eq!(op["operationType"], "start");
    assert_eq!(op["targetId"], id.as_str());
    let done = fake.wait_done(op["name"].as_str().expect("name")).await;
    assert!(done.get("error").is_none(), "{done}");
    let running = await_status(&fake, "spot-start", "RUNNING").await;
    assert_eq!(running["id"], id.as_str(), "the same instance");
    assert!(running["lastStartTimestamp"].is_string());
    assert!(running["networkInterfaces"][0]["accessConfigs"][0]["natIP"].is_string(), "{running}");
    assert_eq!(admin.calls().await.expect("calls").of("instances.start"), 1);

    // Starting a running instance changes nothing: DONE at once.
    let (status, again) = start(&fake, "spot-start").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again["status"], "DONE", "{again}");
    assert_eq!(fake.get_instance("spot-start").await.1["status"], "RUNNING");

    // An unknown instance is 404; one being deleted is not ready.
    assert_eq!(start(&fake, "nobody").await.0, StatusCode::NOT_FOUND);
    fake.delete("spot-start", None).await;
    let (status, err) = start(&fake, "spot-start").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert_eq!(err["error"]["errors"][0]["reason"], "resourceNotReady");
}

#[tokio::test]
async fn a_start_without_capacity_fails_its_operation_and_the_vm_stays_terminated() {
    let fake = Fake::start().await;
    let admin = admin(&fake);
    let id = launch(&fake, &spot_body("spot-full", json!({}))).await;
    admin.reclaim(&id).await.expect("reclaimed");
    admin
        .add_fault(Fault { operation: "instances.start", kind: "capacity", times: Some(1), phase: "after" })
        .await
        .expect("fault");
    let (status, op) = start(&fake, "spot-full").await;
    assert_eq!(status, StatusCode::OK, "accepted: {op}");
    let done = fake.wait_done(op["name"].as_str().expect("name")).await;
    assert_eq!(done["error"]["errors"][0]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED", "{done}");
    let (_, instance) = fake.get_instance("spot-full").await;
    assert_eq!(instance["status"], "TERMINATED");
    assert!(instance["networkInterfaces"][0]["accessConfigs"][0].get("natIP").is_none());
}
