//! Keystone: the authentication variants, token lifetime and revocation, the 401s of the
//! other services, `tokens.create` faults and version discovery.

#![allow(clippy::unwrap_used)]

mod common;

use fake_cloud_support::{Fault, FaultKind, FaultSpec, Phase};
use std::time::Duration;

use common::{Fake, password_body};
use fake_openstack::{
    APP_CREDENTIAL_ID, APP_CREDENTIAL_NAME, APP_CREDENTIAL_SECRET, DOMAIN_ID, OWNER_PROJECT_ID, OWNER_PROJECT_NAME,
    PASSWORD, PROJECT_ID, PROJECT_NAME, USER_ID, USERNAME,
};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn password_by_name_answers_a_token_with_the_catalog() {
    let fake = Fake::start().await;
    let answer = fake.auth(password_body(USERNAME, PASSWORD, PROJECT_NAME)).await;
    assert_eq!(answer.status, 201);
    assert!(answer.header("x-subject-token").starts_with("gAAAAA"));
    let token = &answer.body["token"];
    assert_eq!(token["project"]["id"], PROJECT_ID);
    assert_eq!(token["user"]["id"], USER_ID);
    assert_eq!(token["methods"], json!(["password"]));
    assert!(token["expires_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(token["issued_at"].as_str().unwrap().len(), "2026-12-01T10:00:00.000000Z".len());
    let catalog = token["catalog"].as_array().unwrap();
    let url = |kind: &str| {
        let entry = catalog.iter().find(|e| e["type"] == kind).unwrap_or_else(|| panic!("{kind} missing"));
        let endpoints = entry["endpoints"].as_array().unwrap();
        assert_eq!(endpoints.len(), 2);
        assert!(endpoints.iter().all(|e| e["region"] == "RegionOne"));
        endpoints[0]["url"].as_str().unwrap().to_owned()
    };
    let base = fake.handle.url();
    assert_eq!(url("compute"), format!("{base}/compute/v2.1"));
    assert_eq!(url("network"), format!("{base}/network"));
    assert_eq!(url("image"), format!("{base}/image"));
    assert_eq!(url("volumev3"), format!("{base}/volume/v3/{PROJECT_ID}"));
    assert_eq!(url("block-storage"), url("volumev3"));
    assert_eq!(fake.admin_get("openstack/tokens").await["issued"], 3);
    assert_eq!(fake.calls().await.total, 0, "token requests are not counted calls");
}

#[tokio::test]
async fn password_by_ids_and_domain_id() {
    let fake = Fake::start().await;
    let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {"id": USER_ID, "password": PASSWORD}}},
        "scope": {"project": {"id": PROJECT_ID}}}});
    fake.auth(body).await.expect(201);
    let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": USERNAME, "domain": {"id": DOMAIN_ID}, "password": PASSWORD}}},
        "scope": {"project": {"name": PROJECT_NAME, "domain": {"id": DOMAIN_ID}}}}});
    fake.auth(body).await.expect(201);
    let wrong_domain = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": USERNAME, "domain": {"id": "other"}, "password": PASSWORD}}}}});
    fake.auth(wrong_domain).await.expect(401);
}

#[tokio::test]
async fn application_credentials_by_id_and_by_name() {
    let fake = Fake::start().await;
    let by_id = json!({"auth": {"identity": {"methods": ["application_credential"],
        "application_credential": {"id": APP_CREDENTIAL_ID, "secret": APP_CREDENTIAL_SECRET}}}});
    let body = fake.auth(by_id).await.expect(201);
    assert_eq!(body["token"]["project"]["id"], PROJECT_ID);
    assert_eq!(body["token"]["application_credential"]["id"], APP_CREDENTIAL_ID);
    let by_name = json!({"auth": {"identity": {"methods": ["application_credential"],
        "application_credential": {"name": APP_CREDENTIAL_NAME, "secret": APP_CREDENTIAL_SECRET, "user": {"name": USERNAME, "domain": {"name": "Default"}}}}}});
    fake.auth(by_name).await.expect(201);
    let by_user_id = json!({"auth": {"identity": {"methods": ["application_credential"],
        "application_credential": {"name": APP_CREDENTIAL_NAME, "secret": APP_CREDENTIAL_SECRET, "user": {"id": USER_ID}}}}});
    fake.auth(by_user_id).await.expect(201);
    let bad_secret = json!({"auth": {"identity": {"methods": ["application_credential"],
        "application_credential": {"id": APP_CREDENTIAL_ID, "secret": "nope"}}}});
    fake.auth(bad_secret).await.expect(401);
    let scoped = json!({"auth": {"identity": {"methods": ["application_credential"],
        "application_credential": {"id": APP_CREDENTIAL_ID, "secret": APP_CREDENTIAL_SECRET}}, "scope": {"project": {"id": PROJECT_ID}}}});
    fake.auth(scoped).await.expect(401);
}

#[tokio::test]
async fn bad_credentials_are_401_and_malformed_bodies_400() {
    let fake = Fake::start().await;
    let answer = fake.auth(password_body(USERNAME, "wrong", PROJECT_NAME)).await;
    assert_eq!(answer.status, 401);
    assert_eq!(answer.body["error"]["title"], "Unauthorized");
    assert_eq!(answer.body["error"]["message"], "The request you have made requires authentication.");
    fake.auth(password_body("nobody", PASSWORD, PROJECT_NAME)).await.expect(401);
    fake.auth(password_body(USERNAME, PASSWORD, OWNER_PROJECT_NAME)).await.expect(401);
    let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {"id": USER_ID, "password": PASSWORD}}},
        "scope": {"project": {"id": OWNER_PROJECT_ID}}}});
    fake.auth(body).await.expect(401);
    let answer = fake.auth(json!({"nope": 1})).await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.body["error"]["code"], 400);
    let raw = fake.send(Method::POST, "/identity/v3/auth/tokens", None, None, &[]).await;
    assert_eq!(raw.status, 400);
}

#[tokio::test]
async fn services_refuse_missing_expired_and_revoked_tokens_before_the_gate() {
    let fake = Fake::start().await;
    let answer = fake.send(Method::GET, "/compute/v2.1/servers", None, None, &[]).await;
    assert_eq!(answer.status, 401);
    assert_eq!(answer.body["error"]["code"], 401);
    assert_eq!(answer.header("www-authenticate"), format!("Keystone uri=\"{}/identity\"", fake.handle.url()));
    let answer = fake.send(Method::GET, "/network/v2.0/ports", Some("gAAAAAbogus"), None, &[]).await;
    assert_eq!(answer.status, 401);

    fake.admin("openstack/token-lifetime", json!({"seconds": 1})).await;
    let short = fake.token(password_body(USERNAME, PASSWORD, PROJECT_NAME)).await;
    fake.send(Method::GET, "/compute/v2.1/flavors", Some(&short), None, &[]).await.expect(200);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    fake.send(Method::GET, "/compute/v2.1/flavors", Some(&short), None, &[]).await.expect(401);
    fake.get("/compute/v2.1/flavors").await.expect(200);

    fake.admin("openstack/revoke-tokens", json!({})).await;
    fake.get("/compute/v2.1/flavors").await.expect(401);
    assert_eq!(fake.admin_get("openstack/refused").await["unauthorized"], 4);
    let calls = fake.calls().await;
    assert_eq!(calls.of("flavors.list"), 2, "only the authenticated requests are calls: {calls:?}");
}

#[tokio::test]
async fn token_faults_hit_only_the_exact_operation() {
    let fake = Fake::start().await;
    fake.admin_client
        .add_fault(Fault { operation: "*", kind: "internal", times: None, phase: "before" })
        .await
        .expect("fault");
    fake.auth(password_body(USERNAME, PASSWORD, PROJECT_NAME)).await.expect(201);
    fake.admin_client.clear_faults().await.expect("clear faults");
    let spec = FaultSpec {
        operation: "tokens.create".into(),
        kind: FaultKind::Unavailable,
        times: Some(1),
        probability: None,
        phase: Phase::Before,
    };
    let id = fake.admin_client.add_fault_spec(&spec).await.expect("fault");
    assert!(!id.is_empty());
    let answer = fake.auth(password_body(USERNAME, PASSWORD, PROJECT_NAME)).await;
    assert_eq!(answer.status, 503);
    assert_eq!(answer.body["error"]["code"], 503);
    fake.auth(password_body(USERNAME, PASSWORD, PROJECT_NAME)).await.expect(201);
    fake.admin_client
        .add_fault(Fault { operation: "tokens.create", kind: "auth", times: Some(1), phase: "after" })
        .await
        .expect("fault");
    let issued = fake.admin_get("openstack/tokens").await["issued"].as_u64().unwrap();
    fake.auth(password_body(USERNAME, PASSWORD, PROJECT_NAME)).await.expect(401);
    assert_eq!(fake.admin_get("openstack/tokens").await["issued"].as_u64().unwrap(), issued + 1);
}

#[tokio::test]
async fn version_discovery_is_free() {
    let fake = Fake::start().await;
    let base = fake.handle.url();
    let root = fake.send(Method::GET, "/identity", None, None, &[]).await;
    assert_eq!(root.status, 300);
    assert_eq!(root.body["versions"]["values"][0]["links"][0]["href"], format!("{base}/identity/v3/"));
    let v3 = fake.send(Method::GET, "/identity/v3/", None, None, &[]).await.expect(200);
    assert_eq!(v3["version"]["id"], "v3.14");
    let compute = fake.send(Method::GET, "/compute/v2.1", None, None, &[]).await.expect(200);
    assert_eq!(
        (compute["version"]["version"].as_str(), compute["version"]["min_version"].as_str()),
        (Some("2.96"), Some("2.1"))
    );
    fake.send(Method::GET, "/network", None, None, &[]).await.expect(200);
    fake.send(Method::GET, "/network/v2.0/", None, None, &[]).await.expect(200);
    assert_eq!(fake.send(Method::GET, "/image", None, None, &[]).await.status, 300);
    assert_eq!(fake.send(Method::GET, "/volume", None, None, &[]).await.status, 300);
    let volume = fake.send(Method::GET, &format!("/volume/v3/{PROJECT_ID}"), None, None, &[]).await.expect(200);
    assert_eq!(volume["version"]["version"], "3.70");
    assert_eq!(fake.calls().await.total, 0);
}
