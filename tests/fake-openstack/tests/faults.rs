//! The shared admin API on OpenStack: classes, fault kinds per service, lost responses,
//! the rate limit, reset and the inventory.

#![allow(clippy::unwrap_used)]

mod common;

use common::Fake;
use fake_openstack::{NETWORK_ID, PUBLIC_IMAGE};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn throttle_answers_429_with_retry_after_in_each_services_style() {
    let fake = Fake::start().await;
    fake.admin("faults", json!({"operation": "read", "kind": "throttle", "times": 4})).await;
    let nova = fake.nova(Method::GET, "/servers/detail", None).await;
    assert_eq!((nova.status.as_u16(), nova.header("retry-after")), (429, "1"));
    assert_eq!(nova.body["overLimit"]["retryAfter"], "1");
    assert_eq!(nova.header("openstack-api-version"), "compute 2.96");
    let neutron = fake.get("/network/v2.0/ports").await;
    assert_eq!(
        (neutron.status.as_u16(), neutron.body["NeutronError"]["type"].as_str()),
        (429, Some("TooManyRequests"))
    );
    let glance = fake.get("/image/v2/images").await;
    assert_eq!(glance.status, 429);
    assert!(glance.text.starts_with("429 Too Many Requests\n\n"));
    let cinder = fake.get(&format!("{}/detail", fake.volumes_path())).await;
    assert_eq!((cinder.status.as_u16(), cinder.header("retry-after")), (429, "1"));
    fake.get("/network/v2.0/ports").await.expect(200);
    let calls = fake.admin_get("calls").await;
    assert_eq!(calls["classes"]["read"], 5);
}

#[tokio::test]
async fn fault_kinds_map_to_real_errors() {
    let fake = Fake::start().await;
    let cases = [
        ("servers.create", "capacity", 403, "forbidden"),
        ("servers.create", "permission", 403, "forbidden"),
        ("servers.create", "invalid", 400, "badRequest"),
        ("servers.create", "internal", 500, "computeFault"),
        ("servers.create", "unavailable", 503, "serviceUnavailable"),
    ];
    for (operation, kind, status, key) in cases {
        fake.admin("faults", json!({"operation": operation, "kind": kind, "times": 1})).await;
        let answer = fake
            .nova(
                Method::POST,
                "/servers",
                Some(json!({"server": {"name": "x", "imageRef": PUBLIC_IMAGE, "flavorRef": "2", "networks": "none"}})),
            )
            .await;
        assert_eq!(answer.status.as_u16(), status, "{kind}: {}", answer.text);
        assert!(answer.body[key].is_object(), "{kind}: {}", answer.text);
    }
    fake.admin("faults", json!({"operation": "ports.update", "kind": "capacity", "times": 1})).await;
    let port = fake
        .call(Method::POST, "/network/v2.0/ports", Some(json!({"port": {"network_id": NETWORK_ID}})))
        .await
        .expect(201);
    let id = port["port"]["id"].as_str().unwrap();
    let answer =
        fake.call(Method::PUT, &format!("/network/v2.0/ports/{id}"), Some(json!({"port": {"name": "x"}}))).await;
    assert_eq!(answer.status, 409);
    fake.admin("faults", json!({"operation": "volumes.create", "kind": "capacity", "times": 1})).await;
    let answer = fake.call(Method::POST, &fake.volumes_path(), Some(json!({"volume": {"size": 1}}))).await;
    assert_eq!((answer.status.as_u16(), answer.body["overLimit"]["code"].as_u64()), (413, Some(413)));
    fake.admin("faults", json!({"operation": "delete", "kind": "auth", "times": 1})).await;
    let answer = fake.call(Method::DELETE, &format!("/network/v2.0/ports/{id}"), None).await;
    assert_eq!(answer.status, 401);
    assert!(answer.header("www-authenticate").starts_with("Keystone uri="));
    assert_eq!(fake.admin_get("openstack/refused").await["unauthorized"], 0, "an injected 401 is a counted call");
}

#[tokio::test]
async fn lost_responses_take_effect() {
    let fake = Fake::start().await;
    fake.admin("faults", json!({"operation": "create", "kind": "internal", "times": 1, "phase": "after"})).await;
    let answer = fake
        .nova(Method::POST, "/servers", Some(json!({"server": {"name": "lost", "imageRef": PUBLIC_IMAGE, "flavorRef": "2", "networks": [{"uuid": NETWORK_ID}]}})))
        .await;
    assert_eq!(answer.status, 500);
    let list = fake.nova(Method::GET, "/servers/detail?name=lost", None).await.expect(200);
    assert_eq!(list["servers"].as_array().unwrap().len(), 1, "the server exists although the answer was lost");
    fake.admin("faults", json!({"operation": "ports.create", "kind": "unavailable", "times": 1, "phase": "after"}))
        .await;
    let answer = fake
        .call(
            Method::POST,
            "/network/v2.0/ports",
            Some(json!({"port": {"network_id": NETWORK_ID, "name": "lost-port"}})),
        )
        .await;
    assert_eq!(answer.status, 503);
    let ports = fake.get("/network/v2.0/ports?name=lost-port").await.expect(200);
    assert_eq!(ports["ports"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn rate_limit_and_reset() {
    let fake = Fake::start().await;
    fake.create_server("before-reset", json!({})).await;
    fake.admin("rate-limit", json!({"per_second": 1, "burst": 1})).await;
    fake.get("/compute/v2.1/flavors").await.expect(200);
    let answer = fake.get("/compute/v2.1/flavors").await;
    assert_eq!(answer.status, 429);
    assert_eq!(fake.admin_get("calls").await["throttled"], 1);
    fake.admin("reset", json!({})).await;
    fake.get("/compute/v2.1/flavors").await.expect(200);
    let inventory = fake.inventory().await;
    assert!(inventory["instances"].as_array().unwrap().is_empty());
    assert_eq!(inventory["images"].as_array().unwrap().len(), 3);
    assert!(inventory["dependents"].as_array().unwrap().is_empty());
}
