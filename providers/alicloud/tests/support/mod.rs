//! What the driver tests against `fake-ecs` share: the fake, the example
//! machine class and secret, drivers on the fake, and the fake's admin API.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)] // each test binary uses a part of it

use std::collections::BTreeMap;

use fake_cloud_support::{AdminClient, CallCounts, Inventory};
use machine_driver_alicloud::{AlicloudConfig, AlicloudDriver};
use machine_driver_api::{
    CallContext, CloudOptions, CreateMachine, ListMachines, Machine, MachineClass, MachineRef, SecretData,
};
use serde_json::Value;

/// A running fake ECS with the example class and secret.
pub struct FakeCloud {
    pub fake: fake_ecs::FakeHandle,
    pub admin: AdminClient,
    pub class: MachineClass,
    pub secret: SecretData,
}

impl FakeCloud {
    /// Starts the fake on a free port.
    pub async fn start() -> Self {
        let fake = fake_ecs::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let secret: BTreeMap<String, String> =
            serde_json::from_str(include_str!("../../examples/secret.json")).unwrap();
        let class = MachineClass {
            name: "class".into(),
            provider: "Alicloud".into(),
            provider_spec: include_bytes!("../../examples/machine-class.json").to_vec(),
            node_template: None,
        };
        let admin = AdminClient::for_cloud_url(&fake.url()).unwrap();
        Self { fake, admin, class, secret: secret.into_iter().collect() }
    }

    /// A driver on this fake, without a client-side rate limit.
    pub fn driver(&self) -> AlicloudDriver {
        let options = CloudOptions { endpoint: Some(self.fake.url()), rate_limit: 0.0, burst: 0 };
        AlicloudDriver::new(AlicloudConfig::from_options(&options))
    }

    /// `POST /_admin<path>`; fails the test unless it succeeds.
    pub async fn admin(&self, path: &str, body: Value) {
        self.admin.post(path, body).await.unwrap();
    }

    /// ECS calls since the last reset.
    pub async fn calls(&self) -> CallCounts {
        self.admin.calls().await.unwrap()
    }

    /// The fake's inventory: instances and images.
    pub async fn inventory(&self) -> Inventory {
        self.admin.inventory().await.unwrap()
    }

    /// Ids of the live instances named `name`.
    pub async fn live_named(&self, name: &str) -> Vec<String> {
        self.admin.live_named(name).await.unwrap().into_iter().map(|i| i.id).collect()
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
            user_data: Default::default(),
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
