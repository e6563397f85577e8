//! The shared admin API on OpenStack: classes, fault kinds per service, lost responses,
//! the rate limit, reset and the inventory.

#![allow(clippy::unwrap_used)]

mod common;

use common::Fake;
use fake_cloud_support::{Fault, FaultKind, OpClass, Timing};
use fake_openstack::{NETWORK_ID, PUBLIC_IMAGE};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn throttle_answers_429_with_retry_after_in_each_services_style() {
    let fake = Fake::start().await;
    fake.admin_client
        .add_fault(Fault { operation: "read", kind: "throttle", times: Some(4), phase: "before" })
        .await
        .expect("fault");
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
    let calls = fake.calls().await;
    assert_eq!(calls.of_class(OpClass::Read), 5);
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
        fake.admin_client.add_fault(Fault { operation, kind, times: Some(1), phase: "before" }).await.expect("fault");
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
    fake.admin_client
        .add_fault(Fault { operation: "ports.update", kind: "capacity", times: Some(1), phase: "before" })
        .await
        .expect("fault");
    let port = fake
        .call(Method::POST, "/network/v2.0/ports", Some(json!({"port": {"network_id": NETWORK_ID}})))
        .await
        .expect(201);
    let id = port["port"]["id"].as_str().unwrap();
    let answer =
        fake.call(Method::PUT, &format!("/network/v2.0/ports/{id}"), Some(json!({"port": {"name": "x"}}))).await;
    assert_eq!(answer.status, 409);
    fake.admin_client
        .add_fault(Fault { operation: "volumes.create", kind: "capacity", times: Some(1), phase: "before" })
        .await
        .expect("fault");
    let answer = fake.call(Method::POST, &fake.volumes_path(), Some(json!({"volume": {"size": 1}}))).await;
    assert_eq!((answer.status.as_u16(), answer.body["overLimit"]["code"].as_u64()), (413, Some(413)));
    fake.admin_client
        .add_fault(Fault { operation: "delete", kind: "auth", times: Some(1), phase: "before" })
        .await
        .expect("fault");
    let answer = fake.call(Method::DELETE, &format!("/network/v2.0/ports/{id}"), None).await;
    assert_eq!(answer.status, 401);
    assert!(answer.header("www-authenticate").starts_with("Keystone uri="));
    assert_eq!(fake.admin_get("openstack/refused").await["unauthorized"], 0, "an injected 401 is a counted call");
}

#[tokio::test]
async fn lost_responses_take_effect() {
    let fake = Fake::start().await;
    fake.admin_client
        .add_fault(Fault { operation: "create", kind: "internal", times: Some(1), phase: "after" })
        .await
        .expect("fault");
    let answer = fake
        .nova(Method::POST, "/servers", Some(json!({"server": {"name": "lost", "imageRef": PUBLIC_IMAGE, "flavorRef": "2", "networks": [{"uuid": NETWORK_ID}]}})))
        .await;
    assert_eq!(answer.status, 500);
    let list = fake.nova(Method::GET, "/servers/detail?name=lost", None).await.expect(200);
    assert_eq!(list["servers"].as_array().unwrap().len(), 1, "the server exists although the answer was lost");
    fake.admin_client
        .add_fault(Fault { operation: "ports.create", kind: "unavailable", times: Some(1), phase: "after" })
        .await
        .expect("fault");
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
    fake.admin_client.set_rate_limit(1, 1).await.expect("rate limit");
    fake.get("/compute/v2.1/flavors").await.expect(200);
    let answer = fake.get("/compute/v2.1/flavors").await;
    assert_eq!(answer.status, 429);
    assert_eq!(fake.calls().await.throttled, 1);
    fake.admin_client.reset().await.expect("reset");
    fake.get("/compute/v2.1/flavors").await.expect(200);
    let inventory = fake.inventory().await;
    assert!(inventory["instances"].as_array().unwrap().is_empty());
    assert_eq!(inventory["images"].as_array().unwrap().len(), 3);
    assert!(inventory["dependents"].as_array().unwrap().is_empty());
}

/// `placement` on `servers.create` is Nova's `NoValidHost`: never an error answer (the
/// API accepts the server with 202 before the scheduler runs), but a server that stays
/// BUILD (`scheduling`) and then goes to ERROR with its `fault` (code 500). Nothing was
/// set up on a host: the user's port stays unbound, no Nova port and no boot volume are
/// made, and its delete (Nova's local delete: no host took it) is done at once. Both
/// phases, and only the faulted server.
#[tokio::test]
async fn placement_on_servers_create_is_a_server_the_scheduler_fails() {
    let fake = Fake::start().await;
    fake.admin_client.set_timing(Timing { boot_ms: 200, stop_ms: 0, operation_ms: None }).await.expect("timing");
    for phase in ["before", "after"] {
        fake.admin_client
            .add_fault(Fault { operation: "create", kind: "placement", times: Some(1), phase })
            .await
            .expect("fault");
        let port = fake
            .call(Method::POST, "/network/v2.0/ports", Some(json!({"port": {"network_id": NETWORK_ID, "name": "p"}})))
            .await
            .expect(201);
        let port_id = port["port"]["id"].as_str().unwrap().to_owned();
        let id = fake
            .create_server(
                &format!("unplaceable-{phase}"),
                json!({"imageRef": "", "networks": [{"port": port_id}, {"uuid": NETWORK_ID}],
                       "block_device_mapping_v2": [{"boot_index": 0, "uuid": PUBLIC_IMAGE, "source_type": "image",
                           "destination_type": "volume", "volume_size": 10, "delete_on_termination": true}]}),
            )
            .await;
        let building = fake.server(&id).await;
        assert_eq!(
            (building["status"].as_str(), building["OS-EXT-STS:task_state"].as_str()),
            (Some("BUILD"), Some("scheduling"))
        );
        assert!(building.get("fault").is_none(), "{building}");
        assert_eq!(fake.wait_server(&id, "ERROR").await, vec!["BUILD", "ERROR"]);
        let failed = fake.server(&id).await;
        assert_eq!(failed["fault"]["code"], 500, "{failed}");
        assert!(failed["fault"]["message"].as_str().unwrap().starts_with("No valid host was found."), "{failed}");
        assert!(failed["fault"]["created"].is_string(), "{failed}");
        assert_eq!(
            (failed["OS-EXT-STS:vm_state"].as_str(), &failed["OS-EXT-STS:task_state"]),
            (Some("error"), &Value::Null)
        );
        assert_eq!(failed["addresses"], json!({}), "no port was bound: {failed}");
        assert_eq!(failed["os-extended-volumes:volumes_attached"], json!([]), "no volume was made: {failed}");
        let port = fake.get(&format!("/network/v2.0/ports/{port_id}")).await.expect(200);
        assert_eq!(port["port"]["device_id"], "", "the user's port stays unbound");
        let inventory = fake.inventory().await;
        let live_dependents: Vec<&Value> = inventory["dependents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["live"] == true && d["name"] == format!("unplaceable-{phase}").as_str())
            .collect();
        assert!(live_dependents.is_empty(), "{phase}: {live_dependents:?}");
        fake.nova(Method::DELETE, &format!("/servers/{id}"), None).await.expect(204);
        assert_eq!(fake.server(&id).await, Value::Null, "no host took it: Nova deletes it at once");
        fake.call(Method::DELETE, &format!("/network/v2.0/ports/{port_id}"), None).await.expect(204);
        // The fault was used up: the next server is placed.
        let next = fake.create_server(&format!("placed-{phase}"), json!({})).await;
        assert_eq!(fake.wait_server(&next, "ACTIVE").await.last().map(String::as_str), Some("ACTIVE"));
    }
    let inventory = fake.inventory().await;
    assert_eq!(
        inventory["dependents"].as_array().unwrap().iter().filter(|d| d["live"] == true).count(),
        2,
        "the two placed servers' Nova ports"
    );
    let calls = fake.calls().await;
    assert_eq!(calls.injected[&FaultKind::Placement], 2, "{calls:?}");
}
