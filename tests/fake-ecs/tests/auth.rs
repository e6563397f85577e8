//! Request authentication and routing: V3 and V1 signatures, unknown AccessKeys, nonce
//! replay, the clock window, the body hash, action/version routing, refusal counting and
//! STS GetCallerIdentity.

#![allow(clippy::unwrap_used)]

mod common;

use fake_cloud_support::{Fault, OpClass};
use std::time::{Duration, SystemTime};

use common::{CLUSTER, Fake, OWNER, V3, nonce, timestamp};
use fake_ecs::{ACCOUNT_ID, ECS_VERSION, OWNER_ACCOUNT_ID, REGION, STS_VERSION};

const DESCRIBE: (&str, &[(&str, &str)]) = ("DescribeInstances", &[("RegionId", REGION)]);

#[tokio::test]
async fn v3_signatures_are_verified() {
    let fake = Fake::start().await;
    let answer = fake.call(DESCRIBE.0, DESCRIBE.1).await;
    let body = answer.ok();
    assert_eq!(body["TotalCount"], 0);

    let wrong = fake.send_v3(V3::new(DESCRIBE.0, DESCRIBE.1).signed_by((CLUSTER.0, "not-the-secret"))).await;
    wrong.expect(400, "SignatureDoesNotMatch");
    let message = wrong.body["Message"].as_str().unwrap();
    assert!(message.starts_with("Specified signature is not matched with our calculation."), "{message}");
    assert!(message.contains("server string to sign is:ACS3-HMAC-SHA256\n"), "{message}");
    assert!(!message.contains(fake_ecs::ACCESS_KEY_SECRET), "the secret must never be echoed");
    assert_eq!(wrong.body["HostId"], "ecs.eu-central-1.aliyuncs.com");

    let unknown = fake.send_v3(V3::new(DESCRIBE.0, DESCRIBE.1).signed_by(("LTAI5tNobody", "x"))).await;
    unknown.expect(404, "InvalidAccessKeyId.NotFound");

    // An x-acs-content-sha256 that is not the hash of the (empty) body.
    let mut tampered = V3::new(DESCRIBE.0, DESCRIBE.1);
    tampered.content_sha256 = Some("00".repeat(32));
    fake.send_v3(tampered).await.expect(400, "SignatureDoesNotMatch");

    let mut partial = V3::new(DESCRIBE.0, DESCRIBE.1);
    partial.unsigned = vec!["x-acs-signature-nonce"];
    let answer = fake.send_v3(partial).await;
    answer.expect(400, "IncompleteSignature");
    assert!(answer.body["Message"].as_str().unwrap().contains("x-acs-signature-nonce"));

    // Parameters in a form body (signed through the body hash) work like query parameters.
    let mut form = V3::new("DescribeInstances", &[]);
    form.form = Some(vec![("RegionId".into(), REGION.into()), ("PageSize".into(), "7".into())]);
    assert_eq!(fake.send_v3(form).await.ok()["PageSize"], 7);

    // GET works too.
    let mut get = V3::new(DESCRIBE.0, DESCRIBE.1);
    get.method = "GET";
    fake.send_v3(get).await.ok();
}

#[tokio::test]
async fn nonces_cannot_be_replayed_and_dates_must_be_current() {
    let fake = Fake::start().await;
    let first = V3::new(DESCRIBE.0, DESCRIBE.1);
    let mut replay = first.clone();
    fake.send_v3(first).await.ok();
    replay.date = timestamp(SystemTime::now());
    fake.send_v3(replay.clone()).await.expect(400, "SignatureNonceUsed");
    // The same nonce with another AccessKey is fine (nonces are per key).
    fake.send_v3(replay.signed_by(OWNER)).await.ok();

    let mut old = V3::new(DESCRIBE.0, DESCRIBE.1);
    old.date = timestamp(SystemTime::now() - Duration::from_secs(16 * 60));
    fake.send_v3(old).await.expect(400, "InvalidTimeStamp.Expired");
    let mut future = V3::new(DESCRIBE.0, DESCRIBE.1);
    future.date = timestamp(SystemTime::now() + Duration::from_secs(16 * 60));
    fake.send_v3(future).await.expect(400, "InvalidTimeStamp.Expired");
    let mut skewed = V3::new(DESCRIBE.0, DESCRIBE.1);
    skewed.date = timestamp(SystemTime::now() - Duration::from_secs(10 * 60));
    fake.send_v3(skewed).await.ok();
    let mut garbage = V3::new(DESCRIBE.0, DESCRIBE.1);
    garbage.date = "Tue, 01 Jan 2025 00:00:00 GMT".into();
    fake.send_v3(garbage).await.expect(400, "InvalidTimeStamp.Format");

    // A refused request does not burn its nonce: the same nonce signed correctly passes.
    let mut bad = V3::new(DESCRIBE.0, DESCRIBE.1).signed_by((CLUSTER.0, "wrong"));
    bad.nonce = "nonce-reuse-after-refusal".into();
    let mut good = V3::new(DESCRIBE.0, DESCRIBE.1);
    good.nonce = "nonce-reuse-after-refusal".into();
    fake.send_v3(bad).await.expect(400, "SignatureDoesNotMatch");
    fake.send_v3(good).await.ok();
}

#[tokio::test]
async fn v1_signatures_are_verified() {
    let fake = Fake::start().await;
    let body = fake.call_v1(OWNER, "DescribeImages", ECS_VERSION, &[("RegionId", REGION)], &nonce()).await.ok();
    assert_eq!(body["TotalCount"], 3, "{body}");
    let answer =
        fake.call_v1((OWNER.0, "wrong"), "DescribeImages", ECS_VERSION, &[("RegionId", REGION)], &nonce()).await;
    answer.expect(400, "SignatureDoesNotMatch");
    assert!(answer.body["Message"].as_str().unwrap().contains("server string to sign is:POST&%2F&AccessKeyId%3D"));
    let n = nonce();
    fake.call_v1(CLUSTER, "DescribeImages", ECS_VERSION, &[("RegionId", REGION)], &n).await.ok();
    fake.call_v1(CLUSTER, "DescribeImages", ECS_VERSION, &[("RegionId", REGION)], &n)
        .await
        .expect(400, "SignatureNonceUsed");
    let body = fake.call_v1(OWNER, "GetCallerIdentity", STS_VERSION, &[], &nonce()).await.ok();
    assert_eq!(body["AccountId"], OWNER_ACCOUNT_ID);
}

#[tokio::test]
async fn routing_errors_and_refusal_counting() {
    let fake = Fake::start().await;
    fake.call("StopInstance", &[("RegionId", REGION)]).await.expect(404, "InvalidAction.NotFound");
    let mut sts_as_ecs = V3::new("GetCallerIdentity", &[]);
    sts_as_ecs.version = ECS_VERSION.into();
    fake.send_v3(sts_as_ecs).await.expect(400, "InvalidVersion");
    let mut old = V3::new(DESCRIBE.0, DESCRIBE.1);
    old.version = "2013-01-10".into();
    fake.send_v3(old).await.expect(400, "InvalidVersion");
    let resp = fake.http.post(format!("{}/?RegionId={REGION}", fake.handle.url())).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["Code"], "MissingParameter");
    fake.send_v3(V3::new(DESCRIBE.0, DESCRIBE.1).signed_by((CLUSTER.0, "wrong"))).await;
    fake.call(DESCRIBE.0, DESCRIBE.1).await.ok();

    let calls = fake.calls().await;
    assert_eq!(calls.total, 1, "refused requests are not calls: {calls:?}");
    assert_eq!(calls.of("DescribeInstances"), 1);
    let refused = fake.admin_get("ecs/refused").await;
    assert_eq!(refused["total"], 5, "{refused}");
    assert_eq!(refused["refused"]["InvalidVersion"], 2);
    assert_eq!(refused["refused"]["SignatureDoesNotMatch"], 1);
    assert_eq!(refused["refused"]["InvalidAction.NotFound"], 1);
    assert_eq!(refused["refused"]["MissingParameter"], 1);
}

#[tokio::test]
async fn get_caller_identity_names_the_account() {
    let fake = Fake::start().await;
    for ((ak, secret), account) in [(CLUSTER, ACCOUNT_ID), (OWNER, OWNER_ACCOUNT_ID)] {
        let mut req = V3::new("GetCallerIdentity", &[]).signed_by((ak, secret));
        req.version = STS_VERSION.into();
        let body = fake.send_v3(req).await.ok();
        assert_eq!(body["AccountId"], account);
        assert_eq!(body["Arn"], format!("acs:ram::{account}:root"));
        assert_eq!(body["IdentityType"], "Account");
        assert_eq!(body["PrincipalId"], account);
        assert_eq!(body["UserId"], account);
    }
    fake.admin_client
        .add_fault(Fault { operation: "GetCallerIdentity", kind: "throttle", times: Some(1), phase: "before" })
        .await
        .expect("fault");
    let mut req = V3::new("GetCallerIdentity", &[]);
    req.version = STS_VERSION.into();
    let answer = fake.send_v3(req).await;
    answer.expect(400, "Throttling.User");
    assert_eq!(answer.body["HostId"], "sts.aliyuncs.com");
    assert_eq!(fake.calls().await.of_class(OpClass::Read), 3);
}
