//! Workload identity as Gardener provides it: the secret names a projected
//! token file and a role; the driver exchanges the token with STS
//! AssumeRoleWithWebIdentity (against fake-ec2's STS), uses the temporary
//! keys until shortly before they expire, re-reads the (rotated) token file
//! for the next exchange, and makes one exchange for concurrent calls.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use fake_cloud_support::{AdminClient, Fault};
use machine_driver_api::{CreateMachine, Driver, ErrorKind, MachineRef, SecretData};
use support::{FakeCloud, ctx};

/// A projected service account token whose `exp` is `valid_for` from now (negative: expired).
fn write_token(path: &Path, valid_for_secs: i64) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let claims = serde_json::json!({"iss": "https://issuer.example", "sub": "system:serviceaccount:shoot--x:machine-controller-manager", "aud": ["gardener"], "exp": now + valid_for_secs});
    let token = format!("eyJhbGciOiJSUzI1NiJ9.{}.c2lnbmF0dXJl", URL_SAFE_NO_PAD.encode(claims.to_string()));
    std::fs::write(path, token).unwrap();
}

async fn sessions_issued(admin: &AdminClient) -> u64 {
    let settings: serde_json::Value = admin.get_json("sts").await.unwrap();
    settings["sessionsIssued"].as_u64().unwrap()
}

#[tokio::test]
async fn the_token_is_exchanged_once_renewed_before_expiry_and_reread_from_its_file() {
    let cloud = FakeCloud::start().await;
    let admin = &cloud.admin;
    // Sessions of 2 s: the driver renews after half of that.
    admin.post("sts", serde_json::json!({"sessionSeconds": 2})).await.unwrap();
    let dir = std::env::temp_dir().join(format!("aws-wi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token_file = dir.join("token");
    write_token(&token_file, 3600);

    let driver = cloud.driver();
    let secret: SecretData = BTreeMap::from([
        ("workloadIdentityTokenFile".to_string(), token_file.display().to_string()),
        ("roleARN".to_string(), format!("arn:aws:iam::{}:role/machine-controller", fake_ec2::CLUSTER_ACCOUNT)),
    ])
    .into_iter()
    .collect();
    let class = cloud.class.clone();
    let machine = cloud.machine("wi-1");
    let reference = || MachineRef { machine: machine.clone(), class: class.clone(), secret: secret.clone() };

    let created = driver
        .create_machine(
            &ctx("test", 20),
            CreateMachine {
                machine: machine.clone(),
                class: class.clone(),
                secret: secret.clone(),
                user_data: Default::default(),
            },
        )
        .await
        .unwrap();
    assert_eq!(sessions_issued(admin).await, 1);

    // Concurrent calls within the session's first half share its keys.
    let call = ctx("test", 20);
    let polls = (0..8).map(|_| driver.get_machine_status(&call, reference()));
    for status in futures::future::join_all(polls).await {
        assert_eq!(status.unwrap().provider_id, created.provider_id);
    }
    assert_eq!(sessions_issued(admin).await, 1, "no exchange while the keys are fresh");

    // Renewal time, but STS is down: the keys still work and are used.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    admin
        .add_fault(Fault { operation: "AssumeRoleWithWebIdentity", kind: "unavailable", times: None, phase: "before" })
        .await
        .unwrap();
    let status = driver.get_machine_status(&ctx("test", 20), reference()).await.unwrap();
    assert_eq!(status.provider_id, created.provider_id, "a failed renewal falls back on keys that still work");
    assert_eq!(sessions_issued(admin).await, 1);
    admin.clear_faults().await.unwrap();

    // The keys expired meanwhile; the kubelet rotated the token and the old
    // one expired too: the next exchange reads the new one.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    write_token(&token_file, -10);
    let err = driver.get_machine_status(&ctx("test", 20), reference()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unauthenticated, "an expired token is refused by STS: {err:?}");
    write_token(&token_file, 3600);
    let call = ctx("test", 20);
    let polls = (0..8).map(|_| driver.get_machine_status(&call, reference()));
    for status in futures::future::join_all(polls).await {
        assert_eq!(status.unwrap().provider_id, created.provider_id);
    }
    assert_eq!(sessions_issued(admin).await, 2, "one renewal for the concurrent calls, before the keys expired");

    // EC2 no longer knows the session's keys: it refuses them once, and the
    // next call exchanges the token again instead of using them until they expire.
    admin.post("sts", serde_json::json!({"sessionSeconds": 2, "forgetSessions": true})).await.unwrap();
    let err = driver.get_machine_status(&ctx("test", 20), reference()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unauthenticated, "unknown keys are refused: {err:?}");
    // STS down now: the call gets its failure, not the refused keys again.
    admin
        .add_fault(Fault { operation: "AssumeRoleWithWebIdentity", kind: "unavailable", times: None, phase: "before" })
        .await
        .unwrap();
    let err = driver.get_machine_status(&ctx("test", 20), reference()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "STS's failure, not EC2's refusal: {err:?}");
    admin.clear_faults().await.unwrap();
    let status = driver.get_machine_status(&ctx("test", 20), reference()).await.unwrap();
    assert_eq!(status.provider_id, created.provider_id, "new keys after the refusal");
    assert_eq!(sessions_issued(admin).await, 3, "one exchange after the refusal");

    driver.delete_machine(&ctx("test", 20), reference()).await.unwrap();

    // A token file that is not there: UNAUTHENTICATED naming the path.
    std::fs::remove_file(&token_file).unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let err = driver.get_machine_status(&ctx("test", 20), reference()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unauthenticated);
    assert!(err.message().contains(&token_file.display().to_string()), "{}", err.message());
    std::fs::remove_dir_all(&dir).unwrap();
}
