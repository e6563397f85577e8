//! What the driver tests against `fake-ecs` share: the generic provider
//! fixture (`machine-driver-provider-fixture`) on `fake-ecs` with this
//! provider's examples, and ECS requests of the tests' own (instances made as
//! the Go provider or a hand would make them, through ECS's API, not the
//! driver).

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)] // each test binary uses a part of it

use machine_driver_alicloud::AlicloudDriver;
use machine_driver_api::SecretData;
use machine_driver_provider_fixture::Fixture;
pub use machine_driver_provider_fixture::ctx;
use serde_json::Value;

machine_driver_provider_fixture::fake_cloud! {
    /// A running fake ECS with the example class and secret.
    pub struct FakeCloud(AlicloudDriver);
}

impl FakeCloud {
    /// Starts the fake on a free port.
    pub async fn start() -> Self {
        Self(Fixture::start("Alicloud", concat!(env!("CARGO_MANIFEST_DIR"), "/examples"), fake_ecs::start).await)
    }

    /// The owner's secret of the fake's image owner account.
    pub fn owner_secret(&self) -> SecretData {
        SecretData::new(
            [
                ("alicloudAccessKeyID", fake_ecs::OWNER_ACCESS_KEY_ID),
                ("alicloudAccessKeySecret", fake_ecs::OWNER_ACCESS_KEY_SECRET),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect(),
        )
    }
}

impl FakeCloud {
    /// One ECS action signed by the tests' own ACS3-HMAC-SHA256 code with the
    /// cluster account's key; the answer's JSON, or the HTTP status and body.
    pub async fn ecs(&self, action: &str, params: &[(&str, &str)]) -> Result<Value, String> {
        raw::call(&self.fake.url(), action, params).await
    }

    /// Launches instance `name` with exactly `tags` through ECS's API (no uid
    /// tag, no ClientToken: as the Go provider or a hand would), waits until
    /// it runs, and answers its id.
    pub async fn launch_as_others_do(&self, name: &str, tags: &[(&str, &str)]) -> String {
        let keys: Vec<(String, String)> = tags
            .iter()
            .enumerate()
            .flat_map(|(i, (k, v))| {
                [(format!("Tag.{}.Key", i + 1), (*k).to_string()), (format!("Tag.{}.Value", i + 1), (*v).to_string())]
            })
            .collect();
        let mut params: Vec<(&str, &str)> = vec![
            ("RegionId", fake_ecs::REGION),
            ("ImageId", fake_ecs::PUBLIC_IMAGE),
            ("InstanceType", "ecs.g7.large"),
            ("ZoneId", fake_ecs::ZONE_A),
            ("SecurityGroupId", fake_ecs::SECURITY_GROUP),
            ("VSwitchId", fake_ecs::VSWITCH),
            ("InstanceName", name),
            ("Amount", "1"),
        ];
        params.extend(keys.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let answer = self.ecs("RunInstances", &params).await.unwrap();
        let id = answer["InstanceIdSets"]["InstanceIdSet"][0].as_str().unwrap().to_string();
        self.wait_running(&id).await;
        id
    }

    /// Waits until instance `id` is `Running` in the inventory.
    pub async fn wait_running(&self, id: &str) {
        let started = std::time::Instant::now();
        loop {
            let inventory = self.inventory().await;
            if inventory.instances.iter().any(|i| i.id == id && i.state == "Running") {
                return;
            }
            assert!(started.elapsed().as_secs() < 20, "instance {id} never ran");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// True while instance `id` is live (not released, not stopping on its way out).
    pub async fn alive(&self, id: &str) -> bool {
        self.inventory().await.instances.iter().any(|i| i.id == id && i.live && i.state != "Stopping")
    }
}

/// The tests' own ECS requests (ACS3-HMAC-SHA256, parameters in a form body),
/// written from Alibaba's description of the signature, like the driver's.
mod raw {
    use sha2::{Digest, Sha256};

    fn encode(s: &str) -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect()
    }

    fn hmac(key: &[u8], message: &[u8]) -> Vec<u8> {
        let mut block = [0u8; 64];
        block[..key.len()].copy_from_slice(key);
        let inner = Sha256::new().chain_update(block.map(|b| b ^ 0x36)).chain_update(message).finalize();
        Sha256::new().chain_update(block.map(|b| b ^ 0x5c)).chain_update(inner).finalize().to_vec()
    }

    pub(super) async fn call(url: &str, action: &str, params: &[(&str, &str)]) -> Result<serde_json::Value, String> {
        let mut pairs: Vec<(String, String)> = params.iter().map(|(k, v)| (encode(k), encode(v))).collect();
        pairs.sort();
        let body = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&");
        let parsed = reqwest::Url::parse(url).unwrap();
        let host = format!("{}:{}", parsed.host_str().unwrap(), parsed.port().unwrap());
        let t = time::OffsetDateTime::now_utc();
        let date = format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        );
        let hash = hex::encode(Sha256::digest(body.as_bytes()));
        let headers = [
            ("content-type", "application/x-www-form-urlencoded".to_string()),
            ("host", host),
            ("x-acs-action", action.to_string()),
            ("x-acs-content-sha256", hash.clone()),
            ("x-acs-date", date),
            ("x-acs-signature-nonce", uuid::Uuid::new_v4().simple().to_string()),
            ("x-acs-version", fake_ecs::ECS_VERSION.to_string()),
        ];
        let names = headers.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(";");
        let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
        let canonical = format!("POST\n/\n\n{canonical_headers}\n{names}\n{hash}");
        let to_sign = format!("ACS3-HMAC-SHA256\n{}", hex::encode(Sha256::digest(canonical.as_bytes())));
        let signature = hex::encode(hmac(fake_ecs::ACCESS_KEY_SECRET.as_bytes(), to_sign.as_bytes()));
        let mut request = reqwest::Client::new().post(url).body(body);
        for (k, v) in headers.iter().filter(|(k, _)| *k != "host") {
            request = request.header(*k, v.as_str());
        }
        let authorization = format!(
            "ACS3-HMAC-SHA256 Credential={},SignedHeaders={names},Signature={signature}",
            fake_ecs::ACCESS_KEY_ID
        );
        let response = request.header("authorization", authorization).send().await.map_err(|e| e.to_string())?;
        let status = response.status();
        let text = response.text().await.map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!("{status}: {text}"));
        }
        serde_json::from_str(&text).map_err(|e| e.to_string())
    }
}
