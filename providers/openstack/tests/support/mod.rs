//! What the driver tests against `fake-openstack` share: the generic provider
//! fixture (`machine-driver-provider-fixture`) on `fake-openstack` with this
//! provider's examples, and OpenStack requests of the tests' own.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)] // each test binary uses a part of it

use machine_driver_api::{CreateMachine, MachineClass, SecretBytes, SecretData};
use machine_driver_openstack::OpenStackDriver;
use machine_driver_provider_fixture::Fixture;
pub use machine_driver_provider_fixture::ctx;
use serde_json::Value;

machine_driver_provider_fixture::fake_cloud! {
    /// A running fake OpenStack with the example class and secret; its
    /// drivers find Keystone at the fake's root.
    pub struct FakeCloud(OpenStackDriver);
}

impl FakeCloud {
    /// Starts the fake on a free port.
    pub async fn start() -> Self {
        Self(Fixture::start("OpenStack", concat!(env!("CARGO_MANIFEST_DIR"), "/examples"), fake_openstack::start).await)
    }

    /// Live dependents (ports, volumes) named after machine `name`, as JSON.
    pub async fn live_dependents(&self, name: &str) -> Vec<Value> {
        self.inventory()
            .await
            .dependents
            .into_iter()
            .filter(|d| d.live && d.name == name)
            .map(|d| serde_json::to_value(d).unwrap())
            .collect()
    }

    /// The image owner's secret.
    pub fn owner_secret(&self) -> SecretData {
        let mut s = self.secret.clone();
        s.insert("tenantName", fake_openstack::OWNER_PROJECT_NAME);
        s.insert("username", fake_openstack::OWNER_USERNAME);
        s.insert("password", fake_openstack::OWNER_PASSWORD);
        s
    }

    /// The class with `patch` merged into its `spec`.
    pub fn class_with(&self, patch: Value) -> MachineClass {
        self.0.class_with(|spec| {
            for (k, v) in patch.as_object().unwrap() {
                spec["spec"][k] = v.clone();
            }
        })
    }

    /// CreateMachine of machine `name`, with a `#cloud-config` user data.
    pub fn create_request(&self, name: &str) -> CreateMachine {
        CreateMachine { user_data: SecretBytes(b"#cloud-config\n".to_vec()), ..self.0.create_request(name) }
    }
}

impl FakeCloud {
    /// A Keystone token of the cluster project (for calls the driver does not make).
    pub async fn token(&self) -> String {
        let body = serde_json::json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": fake_openstack::USERNAME, "domain": {"name": fake_openstack::DOMAIN_NAME},
                "password": fake_openstack::PASSWORD}}},
            "scope": {"project": {"name": fake_openstack::PROJECT_NAME, "domain": {"name": fake_openstack::DOMAIN_NAME}}}}});
        let answer = reqwest::Client::new()
            .post(format!("{}/identity/v3/auth/tokens", self.fake.url()))
            .json(&body)
            .send()
            .await
            .unwrap()
            .error_for_status()
            .unwrap();
        answer.headers()["x-subject-token"].to_str().unwrap().to_string()
    }

    /// Sends `method` `path` (below the fake's root) with `body` and the cluster's token; the JSON answer.
    pub async fn os(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let token = self.token().await;
        let mut rb = reqwest::Client::new()
            .request(method, format!("{}{path}", self.fake.url()))
            .header("X-Auth-Token", token)
            .header("OpenStack-API-Version", "compute 2.67");
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let answer = rb.send().await.unwrap();
        let status = answer.status();
        let text = answer.text().await.unwrap();
        assert!(status.is_success(), "{path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }
}
