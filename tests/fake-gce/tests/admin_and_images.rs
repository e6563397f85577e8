//! Image visibility and IAM (etag conflicts), and the shared admin API mapped
//! onto GCE: faults, counters, rate limit, reset — over plain HTTP.

mod common;

use common::{Fake, instance_body, uuid};
use fake_cloud_support::Fault;
use reqwest::StatusCode;
use serde_json::{Value, json};

const OWNER_TOKEN: &str = "Bearer sa:owner@image-owner.iam.gserviceaccount.com";
const NODE_SA: &str = "nodes@proj.iam.gserviceaccount.com";

async fn image_call(
    fake: &Fake,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req =
        fake.http.request(method, fake.api(&format!("projects/image-owner/global/images/custom-gardenlinux{path}")));
    if let Some(token) = token {
        req = req.header("authorization", token);
    }
    if let Some(body) = body {
        req = req.json(&body);
    }
    fake.send(req).await
}

#[tokio::test]
async fn image_visibility_follows_iam_policy() {
    let fake = Fake::start().await;
    let (status, image) = fake.get(fake.api("projects/debian-cloud/global/images/debian-12")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(image["kind"], "compute#image");
    assert_eq!(image["family"], "debian-12");

    let (status, err) = image_call(&fake, reqwest::Method::GET, "", None, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(err["error"]["errors"][0]["reason"], "forbidden");
    let node = format!("Bearer sa:{NODE_SA}");
    assert_eq!(image_call(&fake, reqwest::Method::GET, "", Some(&node), None).await.0, StatusCode::FORBIDDEN);
    assert_eq!(image_call(&fake, reqwest::Method::GET, "", Some(OWNER_TOKEN), None).await.0, StatusCode::OK);

    // The node SA cannot boot from the private image yet.
    let mut body = instance_body("vm-private", json!({}));
    body["disks"][0]["initializeParams"]["sourceImage"] = json!(fake_gce::PRIVATE_IMAGE);
    let (status, err) =
        fake.send(fake.http.post(fake.zonal("instances")).header("authorization", &node).json(&body)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{err}");

    // The owner shares it: read-modify-write with the etag.
    let (status, policy) = image_call(&fake, reqwest::Method::GET, "/getIamPolicy", Some(OWNER_TOKEN), None).await;
    assert_eq!(status, StatusCode::OK);
    let etag = policy["etag"].as_str().expect("etag").to_string();
    let mut bindings = policy["bindings"].as_array().cloned().expect("bindings");
    bindings.push(json!({"role": "roles/compute.imageUser", "members": [format!("serviceAccount:{NODE_SA}")]}));
    let new_policy = json!({"policy": {"bindings": bindings, "etag": etag}});
    let (status, updated) =
        image_call(&fake, reqwest::Method::POST, "/setIamPolicy", Some(OWNER_TOKEN), Some(new_policy.clone())).await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_ne!(updated["etag"], etag.as_str(), "etag bumps on change");

    // Re-sending the stale etag is refused like GCE does.
    let (status, err) =
        image_call(&fake, reqwest::Method::POST, "/setIamPolicy", Some(OWNER_TOKEN), Some(new_policy)).await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED);
    assert_eq!(err["error"]["errors"][0]["reason"], "conditionNotMet");

    // Now the node SA can see and use it; the anonymous caller still cannot.
    assert_eq!(image_call(&fake, reqwest::Method::GET, "", Some(&node), None).await.0, StatusCode::OK);
    assert_eq!(image_call(&fake, reqwest::Method::GET, "", None, None).await.0, StatusCode::FORBIDDEN);
    assert_eq!(
        image_call(&fake, reqwest::Method::GET, "/getIamPolicy", Some(&node), None).await.0,
        StatusCode::FORBIDDEN
    );
    let (status, op) =
        fake.send(fake.http.post(fake.zonal("instances")).header("authorization", &node).json(&body)).await;
    assert_eq!(status, StatusCode::OK, "{op}");
    assert_eq!(op["user"], NODE_SA);

    // The default caller makes anonymous requests act as the owner.
    fake.admin("gce/caller", json!({"principal": "serviceAccount:owner@image-owner.iam.gserviceaccount.com"})).await;
    assert_eq!(image_call(&fake, reqwest::Method::GET, "/getIamPolicy", None, None).await.0, StatusCode::OK);
}

#[tokio::test]
async fn faults_map_to_gce_errors() {
    let fake = Fake::start().await;
    let cases = [
        ("throttle", StatusCode::TOO_MANY_REQUESTS, "rateLimitExceeded"),
        ("unavailable", StatusCode::SERVICE_UNAVAILABLE, "backendError"),
        ("internal", StatusCode::INTERNAL_SERVER_ERROR, "internalError"),
        ("auth", StatusCode::UNAUTHORIZED, "authError"),
        ("permission", StatusCode::FORBIDDEN, "forbidden"),
        ("capacity", StatusCode::FORBIDDEN, "quotaExceeded"),
    ];
    for (kind, status, reason) in cases {
        fake.admin_client
            .add_fault(Fault { operation: "read", kind, times: Some(1), phase: "before" })
            .await
            .expect("fault");
        let (got, err) = fake.get_instance("anything").await;
        assert_eq!(got, status, "{kind}");
        assert_eq!(err["error"]["errors"][0]["reason"], reason, "{kind}");
        assert_eq!(err["error"]["code"], status.as_u16(), "{kind}");
    }
    // times: 1 is used up.
    assert_eq!(fake.get_instance("anything").await.0, StatusCode::NOT_FOUND);

    // Before-phase create fault: no effect.
    fake.admin_client
        .add_fault(Fault { operation: "create", kind: "unavailable", times: Some(1), phase: "before" })
        .await
        .expect("fault");
    assert_eq!(fake.insert(&instance_body("vm-a", json!({})), Some(&uuid())).await.0, StatusCode::SERVICE_UNAVAILABLE);
    assert!(fake.inventory().await.is_empty());

    // After-phase: the instance exists although the answer was an error; a retry with
    // the same requestId returns the operation instead of a second instance or a 409.
    let id = uuid();
    fake.admin_client
        .add_fault(Fault { operation: "instances.insert", kind: "internal", times: Some(1), phase: "after" })
        .await
        .expect("fault");
    assert_eq!(fake.insert(&instance_body("vm-b", json!({})), Some(&id)).await.0, StatusCode::INTERNAL_SERVER_ERROR);
    let (status, op) = fake.insert(&instance_body("vm-b", json!({})), Some(&id)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(op["operationType"], "insert");
    assert_eq!(fake.inventory().await.len(), 1);

    // Capacity after: the insert operation fails with ZONE_RESOURCE_POOL_EXHAUSTED and the instance vanishes.
    fake.admin_client
        .add_fault(Fault { operation: "create", kind: "capacity", times: Some(1), phase: "after" })
        .await
        .expect("fault");
    let (status, op) = fake.insert(&instance_body("vm-c", json!({})), Some(&uuid())).await;
    assert_eq!(status, StatusCode::OK);
    let done = fake.wait_done(op["name"].as_str().expect("name")).await;
    assert_eq!(done["error"]["errors"][0]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED");
    assert_eq!(done["httpErrorStatusCode"], 503);
    assert_eq!(fake.get_instance("vm-c").await.0, StatusCode::NOT_FOUND);
    let inventory = fake.inventory().await;
    let vm_c = inventory.iter().find(|i| i["name"] == "vm-c").expect("vm-c in inventory");
    assert_eq!(vm_c["live"], false);

    fake.admin_client
        .add_fault(Fault { operation: "*", kind: "internal", times: None, phase: "before" })
        .await
        .expect("fault");
    assert_eq!(fake.list(&[]).await.0, StatusCode::INTERNAL_SERVER_ERROR);
    let resp = fake.http.delete(format!("{}/faults", fake.handle.admin_url())).send().await.expect("clear");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(fake.list(&[]).await.0, StatusCode::OK);
}

#[tokio::test]
async fn counters_rate_limit_and_reset() {
    let fake = Fake::start().await;
    fake.admin_client.reset_calls().await.expect("reset calls");
    let (_, op) = fake.insert(&instance_body("vm-1", json!({})), Some(&uuid())).await;
    let op_name = op["name"].as_str().expect("name").to_string();
    fake.get_instance("vm-1").await;
    fake.list(&[]).await;
    fake.operation(&op_name).await;
    fake.wait(&op_name).await;
    fake.get(fake.api("projects/debian-cloud/global/images/debian-12")).await;
    fake.get(fake.api("projects/debian-cloud/global/images/debian-12/getIamPolicy")).await;
    fake.send(
        fake.http
            .post(fake.api("projects/debian-cloud/global/images/debian-12/setIamPolicy"))
            .json(&json!({"policy": {}})),
    )
    .await;
    fake.delete("vm-1", None).await;
    let calls = fake.calls().await;
    for name in [
        "instances.insert",
        "instances.get",
        "instances.list",
        "zoneOperations.get",
        "zoneOperations.wait",
        "images.get",
        "images.getIamPolicy",
        "images.setIamPolicy",
        "instances.delete",
    ] {
        assert_eq!(calls.of(name), 1, "{name}: {calls:?}");
    }
    assert_eq!(calls.total, 9);

    fake.admin_client.set_rate_limit(1, 2).await.expect("rate limit");
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(fake.list(&[]).await.0);
    }
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count(), 2, "{statuses:?}");
    let calls = fake.calls().await;
    assert_eq!(calls.throttled, 2);

    fake.admin_client.reset().await.expect("reset");
    assert!(fake.inventory().await.is_empty());
    assert_eq!(fake.list(&[]).await.0, StatusCode::OK);
    assert_eq!(fake.calls().await.total, 1);
}
