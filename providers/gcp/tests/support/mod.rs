//! What the driver tests against `fake-gce` share: the fake, the example
//! machine class and secret, drivers on the fake, and the fake's admin API.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)] // each test binary uses a part of it

use std::collections::BTreeMap;

use fake_cloud_support::{AdminClient, CallCounts, InventoryInstance};
use machine_driver_api::CloudOptions;
use machine_driver_api::{CreateMachine, Machine, MachineClass, MachineRef, SecretData};
use machine_driver_gcp::{GcpConfig, GcpDriver};
use serde_json::Value;

/// A running fake Compute Engine with the example class and secret.
pub struct FakeCloud {
    pub fake: fake_gce::FakeHandle,
    /// The fake's admin API, through the shared typed client.
    pub admin: AdminClient,
    pub class: MachineClass,
    pub secret: SecretData,
}

impl FakeCloud {
    /// Starts the fake on a free port.
    pub async fn start() -> Self {
        let fake = fake_gce::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let secret: BTreeMap<String, String> =
            serde_json::from_str(include_str!("../../examples/secret.json")).unwrap();
        let class = MachineClass {
            name: "class".into(),
            provider: "GCP".into(),
            provider_spec: include_bytes!("../../examples/machine-class.json").to_vec(),
            node_template: None,
        };
        let admin = AdminClient::for_cloud_url(&fake.url()).unwrap();
        Self { fake, admin, class, secret: secret.into_iter().collect() }
    }

    /// A driver on this fake with a client-side limit of `rate_limit`/s (0 = off) and `burst`.
    pub async fn driver(&self, rate_limit: f64, burst: u32) -> GcpDriver {
        GcpDriver::new(GcpConfig::from_options(&CloudOptions { endpoint: Some(self.fake.url()), rate_limit, burst }))
    }

    /// `POST /_admin/<path>`; fails the test unless it succeeds.
    pub async fn admin(&self, path: &str, body: Value) {
        self.admin.post(path, body).await.unwrap();
    }

    /// Cloud API calls since the last reset, by operation and class.
    pub async fn calls(&self) -> CallCounts {
        self.admin.calls().await.unwrap()
    }

    /// Every instance the fake holds, live or not.
    pub async fn inventory(&self) -> Vec<InventoryInstance> {
        self.admin.instances().await.unwrap()
    }

    /// A machine named `name` with uid `uid-<name>`.
    pub fn machine(&self, name: &str) -> Machine {
        Machine { name: name.into(), uid: format!("uid-{name}"), ..Default::default() }
    }

    /// The request addressing machine `name` with the example class and secret.
    pub fn machine_ref(&self, name: &str) -> MachineRef {
        MachineRef { machine: self.machine(name), class: self.class.clone(), secret: self.secret.clone() }
    }

    /// CreateMachine of machine `name` with the example class and secret.
    pub fn create_request(&self, name: &str) -> CreateMachine {
        CreateMachine {
            machine: self.machine(name),
            class: self.class.clone(),
            secret: self.secret.clone(),
            user_data: Default::default(),
        }
    }
}
