//! What the driver tests against `fake-openstack` share: the fake, the example
//! machine class and secret, drivers on the fake, and the fake's admin API.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)] // each test binary uses a part of it

use std::collections::BTreeMap;

use fake_cloud_support::{AdminClient, CallCounts, Inventory};
use machine_driver_api::{
    CallContext, CloudOptions, CreateMachine, ListMachines, Machine, MachineClass, MachineRef, SecretData,
};
use machine_driver_openstack::{OpenStackConfig, OpenStackDriver};
use serde_json::Value;

/// A running fake OpenStack with the example class and secret.
pub struct FakeCloud {
    pub fake: fake_openstack::FakeHandle,
    pub admin: AdminClient,
    pub class: MachineClass,
    pub secret: SecretData,
}

impl FakeCloud {
    /// Starts the fake on a free port.
    pub async fn start() -> Self {
        let fake = fake_openstack::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let secret: BTreeMap<String, String> =
            serde_json::from_str(include_str!("../../examples/secret.json")).unwrap();
        let class = MachineClass {
            name: "class".into(),
            provider: "OpenStack".into(),
            provider_spec: include_bytes!("../../examples/machine-class.json").to_vec(),
            node_template: None,
        };
        let admin = AdminClient::for_cloud_url(&fake.url()).unwrap();
        Self { fake, admin, class, secret: secret.into_iter().collect() }
    }

    /// A driver on this fake (Keystone at the fake's root), without a client-side rate limit.
    pub fn driver(&self) -> OpenStackDriver {
        let options = CloudOptions { endpoint: Some(self.fake.url()), rate_limit: 0.0, burst: 0 };
        OpenStackDriver::new(OpenStackConfig::from_options(&options))
    }

    /// `POST /_admin<path>`; fails the test unless it succeeds.
    pub async fn admin(&self, path: &str, body: Value) {
        self.admin.post(path, body).await.unwrap();
    }

    /// Cloud calls since the last reset.
    pub async fn calls(&self) -> CallCounts {
        self.admin.calls().await.unwrap()
    }

    /// The fake's inventory.
    pub async fn inventory(&self) -> Inventory {
        self.admin.inventory().await.unwrap()
    }

    /// Ids of the live servers named `name`.
    pub async fn live_named(&self, name: &str) -> Vec<String> {
        self.admin.live_named(name).await.unwrap().into_iter().map(|i| i.id).collect()
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
        let mut spec: Value = serde_json::from_slice(&self.class.provider_spec).unwrap();
        for (k, v) in patch.as_object().unwrap() {
            spec["spec"][k] = v.clone();
        }
        MachineClass { provider_spec: serde_json::to_vec(&spec).unwrap(), ..self.class.clone() }
    }

    /// A machine named `name` with uid `uid-<name>`.
    pub fn machine(&self, name: &str) -> Machine {
        Machine { name: name.into(), uid: format!("uid-{name}"), ..Default::default() }
    }

    /// The request addressing machine `name`.
    pub fn machine_ref(&self, name: &str) -> MachineRef {
        MachineRef { machine: self.machine(name), class: self.class.clone(), secret: self.secret.clone() }
    }

    /// CreateMachine of machine `name`.
    pub fn create_request(&self, name: &str) -> CreateMachine {
        CreateMachine {
            machine: self.machine(name),
            class: self.class.clone(),
            secret: self.secret.clone(),
            user_data: machine_driver_api::SecretBytes(b"#cloud-config\n".to_vec()),
        }
    }

    /// ListMachines of the example class.
    pub fn list_request(&self) -> ListMachines {
        ListMachines { class: self.class.clone(), secret: self.secret.clone() }
    }
}

/// A context of `secs` seconds for `rpc`.
pub fn ctx(rpc: &'static str, secs: u64) -> CallContext {
    CallContext::with_timeout(rpc, std::time::Duration::from_secs(secs))
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
