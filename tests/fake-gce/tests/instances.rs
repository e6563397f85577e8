//! Instance lifecycle, requestId deduplication, conflicts, validation, list
//! filters and pagination, eventual consistency — over plain HTTP.

mod common;

use std::time::Duration;

use common::{Fake, PROJECT, ZONE, instance_body, uuid};
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn insert_boots_then_delete_removes() {
    let fake = Fake::start().await;
    let (status, op) = fake.insert(&instance_body("vm-1", json!({"role": "node"})), Some(&uuid())).await;
    assert_eq!(status, StatusCode::OK, "{op}");
    assert_eq!(op["kind"], "compute#operation");
    assert_eq!(op["operationType"], "insert");
    assert_eq!(op["status"], "RUNNING");
    assert_eq!(
        op["targetLink"],
        format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE}/instances/vm-1")
    );
    assert!(op["name"].as_str().is_some_and(|n| n.starts_with("operation-")));

    let (status, vm) = fake.get_instance("vm-1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(vm["status"], "PROVISIONING");
    assert_eq!(vm["kind"], "compute#instance");
    assert_eq!(vm["id"], op["targetId"]);
    assert!(vm["id"].as_str().is_some_and(|id| id.len() == 19 && id.bytes().all(|b| b.is_ascii_digit())));
    assert_eq!(
        vm["machineType"],
        format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE}/machineTypes/e2-small")
    );
    assert_eq!(vm["labels"]["role"], "node");
    assert_eq!(vm["canIpForward"], true);
    assert_eq!(vm["deletionProtection"], false);
    assert_eq!(vm["tags"]["items"][0], "node");
    assert_eq!(vm["metadata"]["items"][0]["key"], "user-data");
    assert!(vm["metadata"]["fingerprint"].is_string());
    let nic = &vm["networkInterfaces"][0];
    assert_eq!(nic["name"], "nic0");
    assert!(nic["networkIP"].as_str().is_some_and(|ip| ip.starts_with("10.")));
    assert!(nic["accessConfigs"][0]["natIP"].is_string());
    assert_eq!(
        nic["subnetwork"],
        format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/regions/us-central1/subnetworks/nodes")
    );
    let disk = &vm["disks"][0];
    assert_eq!(disk["boot"], true);
    assert_eq!(disk["autoDelete"], true);
    assert_eq!(disk["diskSizeGb"], "20");
    assert_eq!(
        disk["source"],
        format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE}/disks/vm-1")
    );
    assert_eq!(vm["scheduling"]["onHostMaintenance"], "MIGRATE");
    assert!(vm["creationTimestamp"].as_str().is_some_and(|t| t.len() == 29 && t.contains('T')));

    let done = fake.wait_done(op["name"].as_str().expect("op name")).await;
    assert_eq!(done["progress"], 100);
    assert!(done["endTime"].is_string());
    assert!(done.get("error").is_none());
    // DONE at STAGING; RUNNING after the whole boot time.
    let (_, vm) = fake.get_instance("vm-1").await;
    assert!(vm["status"] == "STAGING" || vm["status"] == "RUNNING", "{}", vm["status"]);
    tokio::time::sleep(Duration::from_millis(220)).await;
    assert_eq!(fake.get_instance("vm-1").await.1["status"], "RUNNING");

    let (status, del) = fake.delete("vm-1", Some(&uuid())).await;
    assert_eq!(status, StatusCode::OK, "{del}");
    assert_eq!(del["operationType"], "delete");
    assert_eq!(del["status"], "RUNNING");
    assert_eq!(fake.get_instance("vm-1").await.1["status"], "STOPPING");
    let (status, op) = fake.operation(del["name"].as_str().expect("name")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(op["status"], "RUNNING");
    fake.wait_done(del["name"].as_str().expect("name")).await;
    let (status, err) = fake.get_instance("vm-1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(err["error"]["code"], 404);
    assert_eq!(
        err["error"]["message"],
        format!("The resource 'projects/{PROJECT}/zones/{ZONE}/instances/vm-1' was not found")
    );
    assert_eq!(err["error"]["errors"][0]["reason"], "notFound");

    let inventory = fake.inventory().await;
    assert_eq!(inventory.len(), 1);
    assert_eq!(inventory[0]["name"], "vm-1");
    assert_eq!(inventory[0]["live"], false);
    assert_eq!(inventory[0]["tags"]["role"], "node");
    assert_eq!(inventory[0]["metadata"]["user-data"], "#cloud-config\n");
}

#[tokio::test]
async fn request_id_deduplicates_and_names_conflict() {
    let fake = Fake::start().await;
    let body = instance_body("vm-dup", json!({}));
    let id = uuid();
    let (s1, op1) = fake.insert(&body, Some(&id)).await;
    let (s2, op2) = fake.insert(&body, Some(&id)).await;
    assert_eq!((s1, s2), (StatusCode::OK, StatusCode::OK));
    assert_eq!(op1["name"], op2["name"]);
    assert_eq!(op1["targetId"], op2["targetId"]);
    let (status, list) = fake.list(&[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));

    let (status, err) = fake.insert(&body, Some(&uuid())).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(err["error"]["errors"][0]["reason"], "alreadyExists");
    assert_eq!(
        err["error"]["message"],
        format!("The resource 'projects/{PROJECT}/zones/{ZONE}/instances/vm-dup' already exists")
    );

    // The same requestId keeps answering with the first operation, also once DONE.
    fake.wait_done(op1["name"].as_str().expect("name")).await;
    let (_, op3) = fake.insert(&body, Some(&id)).await;
    assert_eq!(op3["name"], op1["name"]);
    assert_eq!(op3["status"], "DONE");

    // A malformed requestId is refused.
    let (status, err) = fake.insert(&body, Some("not-a-uuid")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err["error"]["errors"][0]["reason"], "invalid");

    // Delete deduplicates too.
    let del_id = uuid();
    let (_, d1) = fake.delete("vm-dup", Some(&del_id)).await;
    let (_, d2) = fake.delete("vm-dup", Some(&del_id)).await;
    assert_eq!(d1["name"], d2["name"]);
}

#[tokio::test]
async fn validation_errors_match_gce() {
    let fake = Fake::start().await;
    let mut body = instance_body("x", json!({}));
    body.as_object_mut().expect("object").remove("name");
    let (status, err) = fake.insert(&body, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err["error"]["errors"][0]["reason"], "required");
    assert_eq!(err["error"]["message"], "Required field 'resource.name' not specified");

    let mut body = instance_body("vm-mt", json!({}));
    body["machineType"] = json!("zones/europe-west1-b/machineTypes/e2-small");
    let (status, err) = fake.insert(&body, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err["error"]["errors"][0]["reason"], "invalid");
    body["machineType"] = json!("e2-small");
    assert_eq!(fake.insert(&body, None).await.0, StatusCode::BAD_REQUEST);

    let body = instance_body("Bad_Name", json!({}));
    assert_eq!(fake.insert(&body, None).await.1["error"]["errors"][0]["reason"], "invalid");

    let body = instance_body("vm-labels", json!({"Role": "x"}));
    assert_eq!(fake.insert(&body, None).await.0, StatusCode::BAD_REQUEST);

    let mut body = instance_body("vm-img", json!({}));
    body["disks"][0]["initializeParams"]["sourceImage"] = json!("projects/debian-cloud/global/images/nope");
    let (status, err) = fake.insert(&body, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(err["error"]["message"], "The resource 'projects/debian-cloud/global/images/nope' was not found");

    let (status, err) = fake.send(fake.http.post(fake.zonal("instances")).body("{not json")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err["error"]["errors"][0]["reason"], "parseError");

    let (status, _) = fake.get(fake.api(&format!("projects/{PROJECT}/zones/nowhere/instances/x"))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(fake.inventory().await.is_empty(), "no invalid insert created anything");
}

#[tokio::test]
async fn deletion_protection_refuses_delete() {
    let fake = Fake::start().await;
    let mut body = instance_body("vm-prot", json!({}));
    body["deletionProtection"] = json!(true);
    assert_eq!(fake.insert(&body, None).await.0, StatusCode::OK);
    let (status, err) = fake.delete("vm-prot", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err["error"]["errors"][0]["reason"], "invalidResourceUsage");
    assert_eq!(fake.get_instance("vm-prot").await.0, StatusCode::OK);
    let (status, err) = fake.delete("vm-missing", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(err["error"]["errors"][0]["reason"], "notFound");
}

#[tokio::test]
async fn list_filters_and_pages() {
    let fake = Fake::start().await;
    for i in 0..5 {
        let role = if i % 2 == 0 { "node" } else { "bastion" };
        let body = instance_body(&format!("vm-{i}"), json!({"role": role, "cluster": "c-1"}));
        assert_eq!(fake.insert(&body, Some(&uuid())).await.0, StatusCode::OK);
    }
    let names = |list: &serde_json::Value| -> Vec<String> {
        list["items"]
            .as_array()
            .map(|items| items.iter().map(|i| i["name"].as_str().unwrap_or_default().to_string()).collect())
            .unwrap_or_default()
    };
    let (status, list) = fake.list(&[("filter", "labels.role=node"), ("pageToken", "")]).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["kind"], "compute#instanceList");
    assert_eq!(names(&list), ["vm-0", "vm-2", "vm-4"]);
    let (_, list) =
        fake.list(&[("filter", "labels.role = \"node\" AND labels.cluster = \"c-1\" AND name != \"vm-2\"")]).await;
    assert_eq!(names(&list), ["vm-0", "vm-4"]);
    let (_, list) = fake.list(&[("filter", "(labels.role = \"bastion\") (name = \"vm-3\")")]).await;
    assert_eq!(names(&list), ["vm-3"]);
    let (_, list) = fake.list(&[("filter", "labels.role = \"none\"")]).await;
    assert!(list.get("items").is_none(), "empty lists omit items: {list}");
    let (status, err) = fake.list(&[("filter", "labels.role = node OR labels.role = bastion")]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err["error"]["errors"][0]["reason"], "invalid");

    // Pagination: 2 + 2 + 1, then no token.
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let (status, page) = fake.list(&[("maxResults", "2"), ("pageToken", &token)]).await;
        assert_eq!(status, StatusCode::OK);
        pages += 1;
        let got = names(&page);
        assert!(got.len() <= 2);
        seen.extend(got);
        match page["nextPageToken"].as_str() {
            Some(next) => token = next.to_string(),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ["vm-0", "vm-1", "vm-2", "vm-3", "vm-4"]);
    assert_eq!(fake.list(&[("maxResults", "501")]).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(fake.list(&[("pageToken", "garbage!")]).await.0, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn regex_filters_select_names_across_pages() {
    let fake = Fake::start().await;
    for name in ["node-a1", "node-a2", "node-b1", "node-b22", "other-a1"] {
        assert_eq!(fake.insert(&instance_body(name, json!({"role": "node"})), Some(&uuid())).await.0, StatusCode::OK);
    }
    let names = |list: &serde_json::Value| -> Vec<String> {
        list["items"]
            .as_array()
            .map(|items| items.iter().map(|i| i["name"].as_str().unwrap_or_default().to_string()).collect())
            .unwrap_or_default()
    };
    let (status, list) = fake.list(&[("filter", "name eq \"node-(?:a1|b22|zz)\"")]).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(names(&list), ["node-a1", "node-b22"]);
    let (_, list) = fake.list(&[("filter", "(name eq 'node-.*') (labels.role ne node)")]).await;
    assert!(list.get("items").is_none(), "{list}");
    let (_, list) = fake.list(&[("filter", "name ne node-.*")]).await;
    assert_eq!(names(&list), ["other-a1"]);

    // Pages of 1 over a regex filter: every match once, in name order.
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let (status, page) =
            fake.list(&[("filter", "name eq node-(?:a2|b1|b22)"), ("maxResults", "1"), ("pageToken", &token)]).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        seen.extend(names(&page));
        match page["nextPageToken"].as_str() {
            Some(next) => token = next.to_string(),
            None => break,
        }
    }
    assert_eq!(seen, ["node-a2", "node-b1", "node-b22"]);

    for bad in ["name eq \"node-(\"", "name = node-a1 AND name eq node-.*", "(name eq a) AND (name eq b)"] {
        let (status, err) = fake.list(&[("filter", bad)]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(err["error"]["errors"][0]["reason"], "invalid", "{bad}");
    }
}

#[tokio::test]
async fn new_instances_are_invisible_for_a_while() {
    let fake = Fake::start().await;
    fake.admin_client.set_invisible_ms(400).await.expect("consistency");
    let (status, op) = fake.insert(&instance_body("vm-late", json!({"k": "v"})), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(fake.get_instance("vm-late").await.0, StatusCode::NOT_FOUND);
    assert!(fake.list(&[]).await.1.get("items").is_none());
    // The operation itself is visible at once, and the name is taken.
    assert_eq!(fake.operation(op["name"].as_str().expect("name")).await.0, StatusCode::OK);
    assert_eq!(fake.insert(&instance_body("vm-late", json!({})), None).await.0, StatusCode::CONFLICT);
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert_eq!(fake.get_instance("vm-late").await.0, StatusCode::OK);
    assert_eq!(fake.list(&[("filter", "labels.k=v")]).await.1["items"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn admin_terminate_deletes_at_once_and_frees_the_name() {
    let fake = Fake::start().await;
    let (status, op) = fake.insert(&instance_body("vm-spot", json!({"role": "node"})), Some(&uuid())).await;
    assert_eq!(status, StatusCode::OK, "{op}");
    let id = op["targetId"].as_str().expect("target id").to_string();
    let inventory = fake.inventory().await;
    assert_eq!(inventory.len(), 1);
    assert_eq!(inventory[0]["id"], id.as_str());
    assert_eq!(inventory[0]["live"], true);
    fake.admin_client.reset_calls().await.expect("reset calls");

    let terminate =
        |id: String| fake.send(fake.http.post(format!("{}/instances/{id}/terminate", fake.handle.admin_url())));
    let (status, body) = terminate(id.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(fake.calls().await.total, 0, "terminate is not a call");

    // Gone at once, as a spot VM with instanceTerminationAction=DELETE.
    let (status, err) = fake.get_instance("vm-spot").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{err}");
    assert_eq!(err["error"]["errors"][0]["reason"], "notFound");
    let (status, list) = fake.list(&[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(list.get("items").is_none_or(|items| items.as_array().is_some_and(Vec::is_empty)), "{list}");
    let inventory = fake.inventory().await;
    assert_eq!(inventory.len(), 1);
    assert_eq!(inventory[0]["id"], id.as_str());
    assert_eq!(inventory[0]["name"], "vm-spot");
    assert_eq!(inventory[0]["state"], "DELETED");
    assert_eq!(inventory[0]["live"], false);
    assert_eq!(fake.delete("vm-spot", Some(&uuid())).await.0, StatusCode::NOT_FOUND);

    // Not live any more: a second terminate, and unknown ids, answer 404.
    let (status, body) = terminate(id.clone()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"], format!("no live instance {id}"));
    assert_eq!(terminate("1234".to_string()).await.0, StatusCode::NOT_FOUND);

    // The name is free for a new instance (with a new id).
    let (status, op) = fake.insert(&instance_body("vm-spot", json!({})), Some(&uuid())).await;
    assert_eq!(status, StatusCode::OK, "{op}");
    let (status, vm) = fake.get_instance("vm-spot").await;
    assert_eq!(status, StatusCode::OK, "{vm}");
    assert_ne!(vm["id"], id.as_str());
    let inventory = fake.inventory().await;
    assert_eq!(inventory.iter().filter(|i| i["live"] == true).count(), 1);

    // An instance being deleted is not live: terminate refuses it.
    let new_id = vm["id"].as_str().expect("id").to_string();
    assert_eq!(fake.delete("vm-spot", Some(&uuid())).await.0, StatusCode::OK);
    assert_eq!(terminate(new_id).await.0, StatusCode::NOT_FOUND);
}
