//! InitializeMachine against `fake-ec2` right after CreateMachine: while the
//! instance was just seen `pending`, the driver refuses without reading EC2;
//! once it runs, one read and the missing writes initialize it.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use machine_driver_api::{
    CallContext, CreateMachine, Driver, ErrorKind, Machine, MachineClass, MachineRef, SecretData,
};
use machine_driver_aws::{AwsConfig, AwsDriver};
use serde_json::{Value, json};

struct Setup {
    fake: fake_ec2::FakeHandle,
    http: reqwest::Client,
    driver: AwsDriver,
    class: MachineClass,
    secret: SecretData,
}

impl Setup {
    async fn start(boot_ms: u64) -> Self {
        let fake = fake_ec2::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let config = AwsConfig::default().with_endpoints(Some(fake.url().to_string()), |_| None);
        let driver = AwsDriver::new(config).unwrap();
        let secret: BTreeMap<String, String> = serde_json::from_str(include_str!("../examples/secret.json")).unwrap();
        let class = MachineClass {
            name: "class".into(),
            provider: "AWS".into(),
            provider_spec: include_bytes!("../examples/machine-class.json").to_vec(),
            node_template: None,
        };
        let setup = Self { fake, http: reqwest::Client::new(), driver, class, secret: secret.into_iter().collect() };
        setup.admin("timing", json!({"boot_ms": boot_ms, "stop_ms": 100})).await;
        setup
    }

    async fn admin(&self, path: &str, body: Value) {
        let resp = self.http.post(format!("{}/{path}", self.fake.admin_url())).json(&body).send().await.unwrap();
        assert!(resp.status().is_success(), "admin {path}");
    }

    /// EC2 requests by operation since the last reset, then resets the counters.
    async fn take_calls(&self) -> BTreeMap<String, u64> {
        let url = format!("{}/calls", self.fake.admin_url());
        let calls: Value = self.http.get(&url).send().await.unwrap().json().await.unwrap();
        let reset = self.http.post(format!("{url}/reset")).send().await.unwrap();
        assert!(reset.status().is_success());
        serde_json::from_value(calls["calls"].clone()).unwrap()
    }

    fn machine_ref(&self, machine: &Machine) -> MachineRef {
        MachineRef { machine: machine.clone(), class: self.class.clone(), secret: self.secret.clone() }
    }

    async fn create(&self, name: &str) -> Machine {
        let mut machine = Machine { name: name.into(), uid: format!("uid-{name}"), ..Default::default() };
        let req = CreateMachine {
            machine: machine.clone(),
            class: self.class.clone(),
            secret: self.secret.clone(),
            user_data: Default::default(),
        };
        let created = self.driver.create_machine(&ctx(), req).await.unwrap();
        machine.provider_id = Some(created.provider_id);
        machine
    }
}

fn ctx() -> CallContext {
    CallContext::with_timeout("test", Duration::from_secs(20))
}

#[tokio::test]
async fn initialize_right_after_create_refuses_without_a_read_then_applies_both_steps() {
    let s = Setup::start(1_500).await;
    let m = s.create("init-pending").await;
    s.take_calls().await;

    let refused = s.driver.initialize_machine(&ctx(), s.machine_ref(&m)).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Unavailable);
    assert_eq!(refused.reason(), "INSTANCE_NOT_RUNNING");
    assert!(refused.retry_after().is_some());
    assert_eq!(s.take_calls().await, BTreeMap::new(), "a fresh `pending` sighting needs no EC2 read");

    // Past the sighting's freshness and the fake's boot time: one read, then the two writes.
    tokio::time::sleep(Duration::from_millis(1_700)).await;
    let done = s.driver.initialize_machine(&ctx(), s.machine_ref(&m)).await.unwrap();
    assert_eq!(done.applied_steps, ["disable-source-dest-check", "assign-ipv6-prefixes"]);
    let calls = s.take_calls().await;
    assert_eq!(calls.get("DescribeInstances"), Some(&1), "{calls:?}");
    assert_eq!(calls.get("ModifyNetworkInterfaceAttribute"), Some(&1), "{calls:?}");
    assert_eq!(calls.get("AssignIpv6Addresses"), Some(&1), "{calls:?}");
    assert_eq!(calls.values().sum::<u64>(), 3, "{calls:?}");
}

#[tokio::test]
async fn a_stale_pending_sighting_is_checked_with_a_read() {
    let s = Setup::start(60_000).await;
    let m = s.create("init-slow-boot").await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    s.take_calls().await;

    // The sighting is older than a second: the driver reads, sees `pending` again and refuses.
    let refused = s.driver.initialize_machine(&ctx(), s.machine_ref(&m)).await.unwrap_err();
    assert_eq!(refused.reason(), "INSTANCE_NOT_RUNNING");
    assert_eq!(s.take_calls().await.get("DescribeInstances"), Some(&1));
    // That read is a fresh sighting again: the next attempt makes no call.
    let again = s.driver.initialize_machine(&ctx(), s.machine_ref(&m)).await.unwrap_err();
    assert_eq!(again.reason(), "INSTANCE_NOT_RUNNING");
    assert_eq!(s.take_calls().await, BTreeMap::new());
}
