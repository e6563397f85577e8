//! AAD token endpoint, ARM authentication, api-version, cross-subscription access and
//! the common response headers — over plain HTTP.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Fake, rg_path, vm_path};
use fake_arm::{CLIENT_ID, FEDERATED_TOKEN, OWNER_CLIENT_ID, OWNER_CLIENT_SECRET, OWNER_SUBSCRIPTION_ID, TENANT_ID};
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn tokens_are_issued_refused_and_counted_outside_calls() {
    let fake = Fake::start().await;
    let (status, body) = fake.token_request(TENANT_ID, CLIENT_ID, Some("wrong"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"], "invalid_client");
    assert!(body["error_description"].as_str().unwrap().starts_with("AADSTS7000215: Invalid client secret provided."));
    assert_eq!(body["error_codes"], json!([7000215]));

    let (status, body) = fake.token_request("00000000-1111-2222-3333-444444444444", CLIENT_ID, Some("x"), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_request");
    assert!(body["error_description"].as_str().unwrap().starts_with("AADSTS90002"));

    let (status, body) = fake.token_request(TENANT_ID, OWNER_CLIENT_ID, None, Some(FEDERATED_TOKEN)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 3599);
    assert_eq!(body["ext_expires_in"], 3599);
    let (status, body) = fake.token_request(TENANT_ID, CLIENT_ID, None, Some("forged")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"], "invalid_client");

    // Start issued one, the federated one is the second.
    assert_eq!(fake.admin_get("azure/tokens").await["issued"], 2);
    let calls = fake.admin_get("calls").await;
    assert_eq!(calls["total"], 0, "token requests are not ARM calls: {calls}");
}

#[tokio::test]
async fn arm_requires_a_valid_token_and_api_version() {
    let fake = Fake::start().await;
    let url = fake.url(&format!("{}?api-version=2024-07-01", vm_path("vm-x")));
    let resp = fake.http.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert!(resp.headers().get("www-authenticate").unwrap().to_str().unwrap().starts_with("Bearer authorization_uri="));
    assert!(resp.headers().contains_key("x-ms-request-id"));
    assert!(resp.headers().contains_key("x-ms-correlation-request-id"));
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "InvalidAuthenticationToken");
    assert_eq!(body["error"]["details"], json!([]));

    let answer = fake.call_as("not-issued", Method::GET, &vm_path("vm-x"), None).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::UNAUTHORIZED, "InvalidAuthenticationToken"));

    let resp = fake.http.get(fake.url(&vm_path("vm-x"))).bearer_auth(&fake.token).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "MissingApiVersionParameter");

    let answer = fake.get(&vm_path("vm-x")).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::NOT_FOUND, "ResourceNotFound"));
    assert!(answer.body["error"]["message"].as_str().unwrap().starts_with(
        "The Resource 'Microsoft.Compute/virtualMachines/vm-x' under resource group 'shoot--dev--conf' was not found."
    ));
    let answer = fake
        .get(&format!(
            "/subscriptions/{}/resourceGroups/nope/providers/Microsoft.Compute/virtualMachines/x",
            fake_arm::SUBSCRIPTION_ID
        ))
        .await;
    assert_eq!((answer.status, answer.code()), (StatusCode::NOT_FOUND, "ResourceGroupNotFound"));
    let answer = fake.get(&format!("{}/providers/Microsoft.Compute/virtualMachinez/x", rg_path())).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::NOT_FOUND, "InvalidResourceType"));
    // Segment names are case-insensitive.
    let answer = fake.get(&rg_path().replace("resourceGroups", "RESOURCEGROUPS")).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["name"], fake_arm::RESOURCE_GROUP);
    assert_eq!(fake.call(Method::HEAD, &rg_path(), None).await.status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn each_client_may_access_only_its_own_subscription() {
    let fake = Fake::start().await;
    let owner = fake.token_for(OWNER_CLIENT_ID, OWNER_CLIENT_SECRET).await;
    let owner_gallery = format!(
        "/subscriptions/{OWNER_SUBSCRIPTION_ID}/resourceGroups/images/providers/Microsoft.Compute/galleries/gardenlinux"
    );
    let answer = fake.get(&owner_gallery).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::FORBIDDEN, "AuthorizationFailed"));
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("The client '{CLIENT_ID}'")) && message.contains("Microsoft.Compute/galleries/read"),
        "{message}"
    );
    assert_eq!(fake.call_as(&owner, Method::GET, &owner_gallery, None).await.status, StatusCode::OK);
    let answer = fake.call_as(&owner, Method::GET, &vm_path("vm-x"), None).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::FORBIDDEN, "AuthorizationFailed"));
}

#[tokio::test]
async fn expired_tokens_are_refused() {
    let fake = Fake::start().await;
    fake.admin("azure/token-lifetime", json!({"seconds": 1})).await;
    let (status, body) = fake.token_request(TENANT_ID, CLIENT_ID, Some(fake_arm::CLIENT_SECRET), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["expires_in"], 1);
    let short = body["access_token"].as_str().unwrap().to_owned();
    assert_eq!(fake.call_as(&short, Method::GET, &rg_path(), None).await.status, StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let answer = fake.call_as(&short, Method::GET, &rg_path(), None).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::UNAUTHORIZED, "ExpiredAuthenticationToken"));
    // The long-lived token of the start still works.
    assert_eq!(fake.get(&rg_path()).await.status, StatusCode::OK);
}

#[tokio::test]
async fn injected_faults_use_arm_errors() {
    let fake = Fake::start().await;
    fake.admin("faults", json!({"operation": "read", "kind": "throttle", "times": 1})).await;
    let answer = fake.get(&vm_path("vm-x")).await;
    assert_eq!((answer.status, answer.code()), (StatusCode::TOO_MANY_REQUESTS, "TooManyRequests"));
    assert_eq!(answer.header("retry-after"), Some("1"));
    for (kind, status, code) in [
        ("unavailable", StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable"),
        ("internal", StatusCode::INTERNAL_SERVER_ERROR, "InternalServerError"),
        ("auth", StatusCode::UNAUTHORIZED, "InvalidAuthenticationToken"),
        ("permission", StatusCode::FORBIDDEN, "AuthorizationFailed"),
        ("invalid", StatusCode::BAD_REQUEST, "InvalidParameter"),
        ("capacity", StatusCode::CONFLICT, "OperationNotAllowed"),
    ] {
        fake.admin("faults", json!({"operation": "virtualMachines.get", "kind": kind, "times": 1})).await;
        let answer = fake.get(&vm_path("vm-x")).await;
        assert_eq!((answer.status, answer.code()), (status, code), "{kind}");
    }
    let calls = fake.admin_get("calls").await;
    assert_eq!(calls["calls"]["virtualMachines.get"], 7);
    assert_eq!(calls["classes"]["read"], 7);
}

/// Entra ID issues ARM tokens for `/.default` of either of ARM's application ID URIs,
/// with or without the resource's trailing slash (azcore's `cloud.AzurePublic` asks for
/// `https://management.core.windows.net//.default`); other scopes are `invalid_scope`.
#[tokio::test]
async fn arm_tokens_for_both_arm_audiences_and_nothing_else() {
    let fake = Fake::start().await;
    let request = |scope: &'static str| {
        let form = format!(
            "grant_type=client_credentials&client_id={CLIENT_ID}&client_secret={}&scope={}",
            fake_arm::CLIENT_SECRET,
            scope.replace(':', "%3A").replace('/', "%2F").replace(' ', "+")
        );
        fake.http
            .post(format!("{}/{TENANT_ID}/oauth2/v2.0/token", fake.handle.url()))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
    };
    for scope in [
        "https://management.core.windows.net//.default",
        "https://management.azure.com/.default",
        // MSAL adds the OpenID scopes to every request; Entra ignores them here.
        "https://management.core.windows.net//.default openid offline_access profile",
    ] {
        let resp = request(scope).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{scope}");
        let token = resp.json::<serde_json::Value>().await.unwrap()["access_token"].as_str().unwrap().to_owned();
        let answer = fake.call_as(&token, Method::GET, &rg_path(), None).await;
        assert_eq!(answer.status, StatusCode::OK, "a token for {scope} is an ARM token: {}", answer.body);
    }
    for scope in [
        "https://graph.microsoft.com/.default",
        "https://management.core.windows.net/user_impersonation",
        "https://management.azure.com/.default https://graph.microsoft.com/.default",
        "openid profile",
    ] {
        let resp = request(scope).await.unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{scope}");
        assert_eq!(resp.json::<serde_json::Value>().await.unwrap()["error"], "invalid_scope", "{scope}");
    }
}

/// MSAL (azidentity) reads the tenant's OpenID discovery document for the token endpoint;
/// its URLs are on the authority the request came to (behind a TLS proxy: `https`).
#[tokio::test]
async fn the_tenant_discovery_document_names_the_token_endpoint() {
    let fake = Fake::start().await;
    let url = format!("{}/{TENANT_ID}/v2.0/.well-known/openid-configuration", fake.handle.url());
    let resp = fake
        .http
        .get(&url)
        .header("host", "login.microsoftonline.com")
        .header("x-forwarded-proto", "https")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let doc: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(doc["token_endpoint"], format!("https://login.microsoftonline.com/{TENANT_ID}/oauth2/v2.0/token"));
    assert_eq!(doc["issuer"], format!("https://login.microsoftonline.com/{TENANT_ID}/v2.0"));
    assert!(doc["authorization_endpoint"].as_str().unwrap().ends_with("/oauth2/v2.0/authorize"));
    let plain: serde_json::Value = fake.http.get(&url).send().await.unwrap().json().await.unwrap();
    assert_eq!(plain["token_endpoint"], format!("{}/{TENANT_ID}/oauth2/v2.0/token", fake.handle.url()));
    let unknown =
        format!("{}/00000000-1111-2222-3333-444444444444/v2.0/.well-known/openid-configuration", fake.handle.url());
    let resp = fake.http.get(&unknown).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    assert_eq!(resp.json::<serde_json::Value>().await.unwrap()["error"], "invalid_tenant");
}
