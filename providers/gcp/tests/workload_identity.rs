//! Workload identity as Gardener provides it: the secret holds an external
//! account configuration (`credentialsConfig`, its subject token a projected
//! token file) and `projectID`. The driver's google-cloud-auth credentials
//! exchange the token at fake-gce's STS (`POST /v1/token`, the token URL
//! moved from sts.googleapis.com to the plain-HTTP fake), optionally
//! impersonate a service account (`generateAccessToken`), and send the
//! access token to Compute, which refuses unknown and expired tokens (401).
//! Checked: one exchange for concurrent calls, renewal, the token file
//! re-read at each exchange, a refused exchange followed by a fresh one, and
//! an unreadable token file reported as UNAUTHENTICATED naming the path.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use machine_driver_api::{
    CallContext, CreateMachine, Driver, DriverError, ErrorKind, ListImageShares, MachineRef, OwnerSecret, SecretData,
};
use machine_driver_gcp::GcpDriver;
use serde_json::{Value, json};
use support::FakeCloud;

const AUDIENCE: &str =
    "//iam.googleapis.com/projects/123456789/locations/global/workloadIdentityPools/gardener/providers/shoot--demo";
const SUBJECT: &str = "system:serviceaccount:shoot--demo:machine-controller-manager";

fn ctx() -> CallContext {
    CallContext::with_timeout("test", Duration::from_secs(30))
}

/// A temporary directory for one test's token file.
struct TokenDir(PathBuf);

impl TokenDir {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("gcp-wi-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn file(&self) -> PathBuf {
        self.0.join("token")
    }

    /// Writes a projected token valid for `secs` (negative: expired).
    fn write(&self, secs: i64) {
        std::fs::write(self.file(), fake_gce::subject_token(SUBJECT, secs)).unwrap();
    }
}

impl Drop for TokenDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The secret Gardener writes: Google's own token URL (the driver moves it to the fake).
fn secret(token_file: &Path, impersonate: Option<&str>) -> SecretData {
    let mut config = json!({
        "type": "external_account",
        "audience": AUDIENCE,
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
        "token_url": "https://sts.googleapis.com/v1/token",
        "credential_source": {"file": token_file.display().to_string(), "format": {"type": "text"}},
    });
    if let Some(email) = impersonate {
        config["service_account_impersonation_url"] = Value::String(format!(
            "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/{email}:generateAccessToken"
        ));
    }
    [("credentialsConfig", config.to_string()), ("projectID", "demo-project".to_string())].into_iter().collect()
}

async fn sts(cloud: &FakeCloud) -> Value {
    cloud.admin.get_json("gce/sts").await.unwrap()
}

async fn exchanges(cloud: &FakeCloud) -> u64 {
    sts(cloud).await["exchanges"].as_u64().unwrap()
}

/// `n` concurrent status polls of `machine`; every answer.
async fn concurrent_polls(driver: &Arc<GcpDriver>, req: &MachineRef, n: usize) -> Vec<Result<String, DriverError>> {
    let mut polls = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (driver, req) = (Arc::clone(driver), req.clone());
        polls.spawn(async move { driver.get_machine_status(&ctx(), req).await.map(|s| s.provider_id) });
    }
    polls.join_all().await
}

#[tokio::test]
async fn the_token_is_exchanged_once_reexchanged_after_expiry_and_reread_from_its_file() {
    let cloud = FakeCloud::start().await;
    cloud.admin("timing", json!({"boot_ms": 20, "stop_ms": 20})).await;
    // Access tokens of 3 s. google-cloud-auth renews a token that short 10 s
    // after it got it (4 minutes before expiry for longer ones): calls
    // after expiry wait for the renewal instead of sending an expired token.
    cloud.admin("gce/sts", json!({"tokenSeconds": 3})).await;
    let dir = TokenDir::new("lifecycle");
    dir.write(3600);
    let driver = Arc::new(cloud.driver(0.0, 0).await);
    let secret = secret(&dir.file(), None);
    let reference = MachineRef { machine: cloud.machine("wi-1"), class: cloud.class.clone(), secret: secret.clone() };

    let created = driver
        .create_machine(
            &ctx(),
            CreateMachine {
                machine: cloud.machine("wi-1"),
                class: cloud.class.clone(),
                secret: secret.clone(),
                user_data: Default::default(),
            },
        )
        .await
        .unwrap();
    assert_eq!(created.provider_id, "gce:///demo-project/europe-west1-b/wi-1", "the secret's projectID");
    for status in concurrent_polls(&driver, &reference, 8).await {
        assert_eq!(status.unwrap(), created.provider_id);
    }
    assert_eq!(exchanges(&cloud).await, 1, "one exchange for the create and the concurrent polls");

    // The kubelet rotated the token, and the new one is already expired: the
    // renewal reads the file again, STS refuses it, and the call says why
    // (without the token).
    let expired = fake_gce::subject_token(SUBJECT, -10);
    std::fs::write(dir.file(), &expired).unwrap();
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let err = driver.get_machine_status(&ctx(), reference.clone()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unauthenticated, "{err:?}");
    assert_eq!(err.reason(), "WORKLOAD_IDENTITY_EXCHANGE_FAILED");
    assert!(err.message().contains("invalid_grant"), "{}", err.message());
    assert!(err.message().contains(&dir.file().display().to_string()), "{}", err.message());
    assert!(!err.message().contains(&expired));
    assert_eq!(sts(&cloud).await["refused"], 1);

    // A valid token again: the concurrent calls make one new exchange (the
    // SDK keeps a refused exchange for good; the driver builds new credentials).
    dir.write(3600);
    for status in concurrent_polls(&driver, &reference, 8).await {
        assert_eq!(status.unwrap(), created.provider_id);
    }
    assert_eq!(exchanges(&cloud).await, 2, "one exchange for the concurrent calls");

    // The access token expires (Compute would refuse it with 401): the next
    // call waits for the renewal and succeeds.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(driver.get_machine_status(&ctx(), reference.clone()).await.unwrap().provider_id, created.provider_id);
    assert_eq!(exchanges(&cloud).await, 3, "renewed once");

    driver.delete_machine(&ctx(), reference).await.unwrap();
}

#[tokio::test]
async fn tokens_are_renewed_before_they_expire_and_impersonation_acts_as_the_service_account() {
    let cloud = FakeCloud::start().await;
    // Tokens of 241 s: renewed 240 s before they expire, i.e. after 1 s.
    cloud.admin("gce/sts", json!({"tokenSeconds": 241})).await;
    let dir = TokenDir::new("impersonation");
    dir.write(3600);
    let driver = cloud.driver(0.0, 0).await;
    let owner = fake_gce::IMAGE_OWNER.trim_start_matches("serviceAccount:");
    let owner_secret = secret(&dir.file(), Some(owner));
    let list = || ListImageShares {
        image: fake_gce::PRIVATE_IMAGE.into(),
        region: None,
        owner_secret: OwnerSecret::new(owner_secret.clone()).unwrap(),
    };

    // Only the image owner may read the private image's policy: the token
    // from generateAccessToken acts as the impersonated service account.
    let shares = driver.list_image_shares(&ctx(), list()).await.unwrap();
    assert!(!shares.public);
    let settings = sts(&cloud).await;
    assert_eq!((settings["exchanges"].as_u64(), settings["impersonations"].as_u64()), (Some(1), Some(1)));

    tokio::time::sleep(Duration::from_millis(2000)).await;
    let settings = sts(&cloud).await;
    assert_eq!(
        (settings["exchanges"].as_u64(), settings["impersonations"].as_u64()),
        (Some(2), Some(2)),
        "renewed in the background, before expiry"
    );
    driver.list_image_shares(&ctx(), list()).await.unwrap();
    assert_eq!(exchanges(&cloud).await, 2, "no exchange while the token is fresh");

    // A federated identity without impersonation may not read it.
    let federated = secret(&dir.file(), None);
    let err = driver
        .list_image_shares(&ctx(), ListImageShares { owner_secret: OwnerSecret::new(federated).unwrap(), ..list() })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err:?}");
}

#[tokio::test]
async fn an_unreadable_or_refused_token_is_unauthenticated_naming_the_file_not_the_token() {
    let cloud = FakeCloud::start().await;
    let dir = TokenDir::new("unreadable");
    let driver = cloud.driver(0.0, 0).await;
    let reference = MachineRef {
        machine: cloud.machine("wi-missing"),
        class: cloud.class.clone(),
        secret: secret(&dir.file(), None),
    };

    let err = driver.get_machine_status(&ctx(), reference.clone()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unauthenticated, "{err:?}");
    assert_eq!(err.reason(), "WORKLOAD_IDENTITY_TOKEN_UNREADABLE");
    assert!(err.message().contains(&dir.file().display().to_string()), "{}", err.message());

    std::fs::write(dir.file(), "CANARY-not-a-jwt").unwrap();
    let err = driver.get_machine_status(&ctx(), reference.clone()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unauthenticated, "{err:?}");
    assert_eq!(err.reason(), "WORKLOAD_IDENTITY_EXCHANGE_FAILED");
    assert!(!err.message().contains("CANARY"), "{}", err.message());
    assert!(!format!("{err:?}").contains("CANARY"));

    // The file fixed: the next call exchanges and reaches Compute.
    dir.write(3600);
    let err = driver.get_machine_status(&ctx(), reference).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "authenticated now: {err:?}");
    assert_eq!(exchanges(&cloud).await, 1);
}
