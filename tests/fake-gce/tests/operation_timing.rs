//! Operations as long as GCE's (`operation_ms` of `POST /_admin/timing`), the
//! best-effort `zoneOperations.wait` (`POST /_admin/gce/wait`), and the
//! `placement` fault answered with GCE's "cannot place it here" errors.

mod common;

use fake_cloud_support::{Fault, Timing};
use std::time::{Duration, Instant};

use common::{Fake, ZONE, instance_body, uuid};
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn operation_ms_makes_inserts_and_deletes_last_that_long() {
    let fake = Fake::start().await;
    fake.admin_client
        .set_timing(Timing { boot_ms: 200, stop_ms: 200, operation_ms: Some(1500) })
        .await
        .expect("timing");
    let started = Instant::now();
    let (status, op) = fake.insert(&instance_body("slow-1", json!({})), Some(&uuid())).await;
    assert_eq!(status, StatusCode::OK, "{op}");
    let name = op["name"].as_str().expect("operation name").to_string();
    // Well past boot_ms: still running, the instance still provisioning.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let (_, running) = fake.operation(&name).await;
    assert_eq!(running["status"], "RUNNING", "{running}");
    assert!(running["progress"].as_i64().is_some_and(|p| (1..100).contains(&p)), "{running}");
    assert_eq!(fake.get_instance("slow-1").await.1["status"], "PROVISIONING");
    let done = fake.wait_done(&name).await;
    assert!(started.elapsed() >= Duration::from_millis(1500), "done after {:?}", started.elapsed());
    assert!(done.get("error").is_none(), "{done}");
    assert_eq!(fake.get_instance("slow-1").await.1["status"], "STAGING", "STAGING when the insert is done");
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(fake.get_instance("slow-1").await.1["status"], "RUNNING");

    let started = Instant::now();
    let (status, del) = fake.delete("slow-1", Some(&uuid())).await;
    assert_eq!(status, StatusCode::OK, "{del}");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(fake.get_instance("slow-1").await.1["status"], "STOPPING", "stop_ms is overridden");
    fake.wait_done(del["name"].as_str().expect("name")).await;
    assert!(started.elapsed() >= Duration::from_millis(1500));
    assert_eq!(fake.get_instance("slow-1").await.0, StatusCode::NOT_FOUND);

    // Without operation_ms, the operations follow the instance again.
    fake.admin_client.set_timing(Timing { boot_ms: 200, stop_ms: 200, operation_ms: None }).await.expect("timing");
    let (_, op) = fake.insert(&instance_body("fast-1", json!({})), Some(&uuid())).await;
    let started = Instant::now();
    fake.wait_done(op["name"].as_str().expect("name")).await;
    assert!(started.elapsed() < Duration::from_millis(1000), "{:?}", started.elapsed());
}

#[tokio::test]
async fn wait_answers_a_running_operation_at_its_limit() {
    let fake = Fake::start().await;
    fake.admin_client
        .set_timing(Timing { boot_ms: 200, stop_ms: 200, operation_ms: Some(20_000) })
        .await
        .expect("timing");
    let (_, op) = fake.insert(&instance_body("slow-2", json!({})), Some(&uuid())).await;
    let name = op["name"].as_str().expect("name").to_string();

    // Default: about 2 s, then the running operation.
    let started = Instant::now();
    let (status, answer) = fake.wait(&name).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["status"], "RUNNING");
    let took = started.elapsed();
    assert!((Duration::from_millis(1900)..Duration::from_secs(4)).contains(&took), "{took:?}");

    // Limit 0: at once, as GCE's best-effort wait may answer.
    fake.admin("gce/wait", json!({"limit_ms": 0})).await;
    let started = Instant::now();
    let (_, answer) = fake.wait(&name).await;
    assert_eq!(answer["status"], "RUNNING");
    assert!(started.elapsed() < Duration::from_millis(500), "{:?}", started.elapsed());

    // Reset restores the default limit.
    fake.admin_client.reset().await.expect("reset");
    fake.admin_client
        .set_timing(Timing { boot_ms: 200, stop_ms: 200, operation_ms: Some(20_000) })
        .await
        .expect("timing");
    let (_, op) = fake.insert(&instance_body("slow-3", json!({})), Some(&uuid())).await;
    let started = Instant::now();
    fake.wait(op["name"].as_str().expect("name")).await;
    assert!(started.elapsed() >= Duration::from_millis(1900), "{:?}", started.elapsed());
}

#[tokio::test]
async fn placement_is_gces_machine_type_or_zone_resource_pool_error() {
    let fake = Fake::start().await;
    // Before: refused at once, naming the request's machine type and the zone; nothing made.
    fake.admin_client
        .add_fault(Fault { operation: "instances.insert", kind: "placement", times: Some(1), phase: "before" })
        .await
        .expect("fault");
    let (status, err) = fake.insert(&instance_body("vm-p", json!({})), Some(&uuid())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert_eq!(err["error"]["errors"][0]["reason"], "invalid");
    assert_eq!(
        err["error"]["message"],
        format!(
            "Invalid value for field 'resource.machineType': 'zones/{ZONE}/machineTypes/e2-small'. \
             Machine type with name 'e2-small' does not exist in zone '{ZONE}'."
        )
    );
    assert!(fake.inventory().await.is_empty());

    // After: accepted, then the operation fails with the zone's resource pool
    // error naming the hardware configuration; the instance vanishes.
    fake.admin_client
        .add_fault(Fault { operation: "create", kind: "placement", times: Some(1), phase: "after" })
        .await
        .expect("fault");
    let mut body = instance_body("vm-q", json!({}));
    body["guestAccelerators"] = json!([{"acceleratorType": format!("zones/{ZONE}/acceleratorTypes/nvidia-l4"),
        "acceleratorCount": 2}]);
    let (status, op) = fake.insert(&body, Some(&uuid())).await;
    assert_eq!(status, StatusCode::OK, "{op}");
    let done = fake.wait_done(op["name"].as_str().expect("name")).await;
    let error = &done["error"]["errors"][0];
    assert_eq!(error["code"], "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "{done}");
    let message = error["message"].as_str().expect("message");
    assert!(
        message.starts_with(&format!(
            "A e2-small VM instance with 2 nvidia-l4 accelerator(s) is currently unavailable in the {ZONE} zone."
        )),
        "{message}"
    );
    assert_eq!(done["httpErrorStatusCode"], 503);
    assert_eq!(fake.get_instance("vm-q").await.0, StatusCode::NOT_FOUND);

    // Another call hit by it: the same kind of answer, without a request to name.
    fake.admin_client
        .add_fault(Fault { operation: "read", kind: "placement", times: Some(1), phase: "before" })
        .await
        .expect("fault");
    let (status, err) = fake.get_instance("vm-q").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(err["error"]["message"].as_str().is_some_and(|m| m.contains("does not exist in zone")), "{err}");
}

#[tokio::test]
async fn spot_and_confidential_combinations_are_refused_as_gce_refuses_them() {
    let fake = Fake::start().await;
    let with = |name: &str, machine: &str, extra: serde_json::Value| {
        let mut body = instance_body(name, json!({}));
        body["machineType"] = json!(format!("zones/{ZONE}/machineTypes/{machine}"));
        for (k, v) in extra.as_object().expect("object") {
            body[k] = v.clone();
        }
        body
    };
    // Accepted: a Spot VM deleted when reclaimed or after an hour; a SEV VM on N2D; TDX on C3.
    let spot = json!({"scheduling": {"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE",
        "maxRunDuration": {"seconds": "3600"}}});
    let (status, op) = fake.insert(&with("spot-1", "e2-small", spot), Some(&uuid())).await;
    assert_eq!(status, StatusCode::OK, "{op}");
    let (_, vm) = fake.get_instance("spot-1").await;
    assert_eq!(vm["scheduling"]["provisioningModel"], "SPOT");
    assert_eq!(vm["scheduling"]["automaticRestart"], false, "GCE's Spot defaults");
    assert_eq!(vm["scheduling"]["onHostMaintenance"], "TERMINATE");
    assert_eq!(vm["scheduling"]["instanceTerminationAction"], "DELETE");
    let inventory = fake.inventory().await;
    let entry = inventory.iter().find(|i| i["name"] == "spot-1").expect("in the inventory");
    assert_eq!(entry["network_tags"], json!(["node"]), "the inventory shows the network tags: {entry}");
    for (name, machine, cc, ohm) in [
        ("cvm-1", "n2d-standard-2", json!({"confidentialInstanceType": "SEV"}), "MIGRATE"),
        ("cvm-2", "c3-standard-4", json!({"confidentialInstanceType": "TDX"}), "TERMINATE"),
        ("cvm-3", "n2d-standard-2", json!({"enableConfidentialCompute": true}), "MIGRATE"),
    ] {
        let body =
            with(name, machine, json!({"confidentialInstanceConfig": cc, "scheduling": {"onHostMaintenance": ohm}}));
        let (status, op) = fake.insert(&body, Some(&uuid())).await;
        assert_eq!(status, StatusCode::OK, "{name}: {op}");
        assert_eq!(fake.get_instance(name).await.1["confidentialInstanceConfig"], body["confidentialInstanceConfig"]);
    }
    // Refused, naming the field.
    let cases = [
        (json!({"scheduling": {"provisioningModel": "CHEAP"}}), "e2-small", "resource.scheduling.provisioningModel"),
        (
            json!({"scheduling": {"provisioningModel": "SPOT", "automaticRestart": true}}),
            "e2-small",
            "resource.scheduling.automaticRestart",
        ),
        (
            json!({"scheduling": {"provisioningModel": "SPOT", "onHostMaintenance": "MIGRATE"}}),
            "e2-small",
            "resource.scheduling.onHostMaintenance",
        ),
        (
            json!({"scheduling": {"instanceTerminationAction": "DELETE"}}),
            "e2-small",
            "resource.scheduling.instanceTerminationAction",
        ),
        (
            json!({"scheduling": {"instanceTerminationAction": "DELETE", "maxRunDuration": {"seconds": "10"}}}),
            "e2-small",
            "resource.scheduling.maxRunDuration",
        ),
        (
            json!({"confidentialInstanceConfig": {"confidentialInstanceType": "SEV"}}),
            "e2-small",
            "resource.machineType",
        ),
        (
            json!({"confidentialInstanceConfig": {"confidentialInstanceType": "SEV_SNP"},
                "scheduling": {"onHostMaintenance": "TERMINATE"}}),
            "c3-standard-4",
            "resource.machineType",
        ),
        (
            json!({"confidentialInstanceConfig": {"confidentialInstanceType": "SEV_SNP"}}),
            "n2d-standard-2",
            "resource.scheduling.onHostMaintenance",
        ),
        (
            json!({"confidentialInstanceConfig": {"confidentialInstanceType": "SGX"}}),
            "n2d-standard-2",
            "resource.confidentialInstanceConfig.confidentialInstanceType",
        ),
    ];
    for (i, (extra, machine, field)) in cases.into_iter().enumerate() {
        let (status, err) = fake.insert(&with(&format!("bad-{i}"), machine, extra.clone()), Some(&uuid())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{extra}: {err}");
        let message = err["error"]["message"].as_str().expect("message");
        assert!(message.starts_with(&format!("Invalid value for field '{field}'")), "{extra}: {message}");
    }
    let (status, err) = fake
        .insert(
            &with("bad-x", "e2-small", json!({"scheduling": {"maxRunDuration": {"seconds": "3600"}}})),
            Some(&uuid()),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err["error"]["errors"][0]["reason"], "required", "{err}");
    let names: Vec<_> =
        fake.inventory().await.iter().map(|i| i["name"].as_str().unwrap_or_default().to_string()).collect();
    assert!(names.iter().all(|n| !n.starts_with("bad-")), "{names:?}");
}
