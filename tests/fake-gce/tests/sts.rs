//! Workload identity over plain HTTP: STS `POST /v1/token` (RFC 8693 form),
//! IAM Credentials `generateAccessToken`, the tokens' expiry
//! (`POST /_admin/gce/sts`), and Compute refusing unknown or expired bearer
//! tokens with 401.

mod common;

use std::time::Duration;

use common::Fake;
use reqwest::StatusCode;
use serde_json::{Value, json};

const AUDIENCE: &str =
    "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/gardener/providers/shoot";

/// `application/x-www-form-urlencoded` of `pairs`.
fn form(pairs: &[(&str, &str)]) -> String {
    let encode = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    pairs.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect::<Vec<_>>().join("&")
}

async fn exchange(fake: &Fake, subject_token: &str) -> (StatusCode, Value) {
    let body = form(&[
        ("grant_type", fake_gce::TOKEN_EXCHANGE_GRANT),
        ("audience", AUDIENCE),
        ("scope", "https://www.googleapis.com/auth/cloud-platform"),
        ("requested_token_type", "urn:ietf:params:oauth:token-type:access_token"),
        ("subject_token", subject_token),
        ("subject_token_type", "urn:ietf:params:oauth:token-type:jwt"),
    ]);
    let req = fake
        .http
        .post(format!("{}/v1/token", fake.handle.url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    fake.send(req).await
}

async fn get_image(fake: &Fake, token: &str) -> (StatusCode, Value) {
    let url = fake.api("projects/debian-cloud/global/images/debian-12");
    fake.send(fake.http.get(url).bearer_auth(token)).await
}

#[tokio::test]
async fn the_token_endpoint_exchanges_a_jwt_and_compute_accepts_the_token_until_it_expires() {
    let fake = Fake::start().await;
    let settings = fake.admin("gce/sts", json!({"tokenSeconds": 1})).await;
    assert_eq!(settings["tokenSeconds"], 1);

    let (status, body) = exchange(&fake, &fake_gce::subject_token("system:serviceaccount:ns:mcm", 600)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["issued_token_type"], "urn:ietf:params:oauth:token-type:access_token");
    assert_eq!(body["expires_in"], 1);
    let token = body["access_token"].as_str().unwrap().to_string();

    let (status, image) = get_image(&fake, &token).await;
    assert_eq!(status, StatusCode::OK, "{image}");

    let (status, err) = get_image(&fake, "ya29.never-issued").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(err["error"]["errors"][0]["reason"], "authError");

    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, _) = get_image(&fake, &token).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "expired");
    // Anonymous requests and the test principals still pass.
    let (status, _) = fake.get(fake.api("projects/debian-cloud/global/images/debian-12")).await;
    assert_eq!(status, StatusCode::OK);

    let sts = fake.admin_get("gce/sts").await;
    assert_eq!((sts["exchanges"].as_u64(), sts["refused"].as_u64()), (Some(1), Some(0)));
}

#[tokio::test]
async fn refusals_are_google_sts_errors() {
    let fake = Fake::start().await;
    let expired = fake_gce::subject_token("s", -5);
    let (status, body) = exchange(&fake, &expired).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_grant");
    assert!(!body["error_description"].as_str().unwrap().contains(&expired));
    let (status, body) = exchange(&fake, "not-a-jwt").await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_grant")));
    let req = fake.http.post(format!("{}/v1/token", fake.handle.url())).form_body_missing();
    let (status, body) = fake.send(req).await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_request")));
    assert_eq!(fake.admin_get("gce/sts").await["refused"], 3);
}

#[tokio::test]
async fn generate_access_token_needs_a_federated_token_and_acts_as_the_service_account() {
    let fake = Fake::start().await;
    let (_, body) = exchange(&fake, &fake_gce::subject_token("s", 600)).await;
    let federated = body["access_token"].as_str().unwrap().to_string();
    let owner = fake_gce::IMAGE_OWNER.trim_start_matches("serviceAccount:");
    let url = format!("{}/v1/projects/-/serviceAccounts/{owner}:generateAccessToken", fake.handle.url());
    let request = json!({"scope": ["https://www.googleapis.com/auth/cloud-platform"], "lifetime": "3600s"});

    let (status, _) = fake.send(fake.http.post(&url).bearer_auth("ya29.unknown").json(&request)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = fake.send(fake.http.post(&url).bearer_auth(&federated).json(&request)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["expireTime"].as_str().is_some_and(|t| t.ends_with("+00:00")));
    let impersonated = body["accessToken"].as_str().unwrap().to_string();

    // Only the image owner reads the private image's policy.
    let policy = fake.api("projects/image-owner/global/images/custom-gardenlinux/getIamPolicy");
    let (status, _) = fake.send(fake.http.get(&policy).bearer_auth(&federated)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "the federated principal is not the owner");
    let (status, body) = fake.send(fake.http.get(&policy).bearer_auth(&impersonated)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(fake.admin_get("gce/sts").await["impersonations"], 1);
}

/// A token request without any parameter.
trait FormBodyMissing {
    fn form_body_missing(self) -> Self;
}

impl FormBodyMissing for reqwest::RequestBuilder {
    fn form_body_missing(self) -> Self {
        self.header("content-type", "application/x-www-form-urlencoded").body("")
    }
}
