//! InitializeMachine against `fake-ec2` right after CreateMachine, as the
//! machine-controller calls it: the instance is still `pending`, EC2 accepts
//! interface changes then, and the driver applies them from what RunInstances
//! answered, without a read; a repeat reads and converges.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use fake_cloud_support::AdminClient;
use machine_driver_api::{
    CallContext, CreateMachine, Driver, ErrorKind, Machine, MachineClass, MachineRef, SecretData,
};
use machine_driver_aws::{AwsConfig, AwsDriver};
use serde_json::{Value, json};

struct Setup {
    fake: fake_ec2::FakeHandle,
    admin: AdminClient,
    driver: AwsDriver,
    class: MachineClass,
    secret: SecretData,
}

impl Setup {
    async fn start(boot_ms: u64) -> Self {
        Self::start_with(boot_ms, include_bytes!("../examples/machine-class.json").to_vec()).await
    }

    /// The example class with IPv6 addresses counted on its interface too, as
    /// Gardener's dual-stack classes are: EC2 takes no prefix count beside an
    /// address count at launch, so InitializeMachine assigns the prefix.
    async fn start_dual_stack(boot_ms: u64) -> Self {
        let mut spec: Value = serde_json::from_slice(include_bytes!("../examples/machine-class.json")).unwrap();
        spec["networkInterfaces"][0]["ipv6AddressCount"] = json!(1);
        Self::start_with(boot_ms, serde_json::to_vec(&spec).unwrap()).await
    }

    async fn start_with(boot_ms: u64, provider_spec: Vec<u8>) -> Self {
        let fake = fake_ec2::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let driver = driver_for(&fake);
        let secret: BTreeMap<String, String> = serde_json::from_str(include_str!("../examples/secret.json")).unwrap();
        let class = MachineClass { name: "class".into(), provider: "AWS".into(), provider_spec, node_template: None };
        let admin = AdminClient::for_cloud_url(&fake.url()).unwrap();
        let setup = Self { fake, admin, driver, class, secret: secret.into_iter().collect() };
        setup.admin("timing", json!({"boot_ms": boot_ms, "stop_ms": 100})).await;
        setup
    }

    async fn admin(&self, path: &str, body: Value) {
        self.admin.post(path, body).await.unwrap();
    }

    /// EC2 requests by operation since the last reset, then resets the counters.
    async fn take_calls(&self) -> BTreeMap<String, u64> {
        let calls = self.admin.calls().await.unwrap();
        self.admin.reset_calls().await.unwrap();
        calls.calls
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

/// A driver on `fake`, with no memory of earlier launches (as after a restart).
fn driver_for(fake: &fake_ec2::FakeHandle) -> AwsDriver {
    let config = AwsConfig::default().with_endpoints(Some(fake.url().to_string()), |_| None);
    AwsDriver::new(config).unwrap()
}

fn ctx() -> CallContext {
    CallContext::with_timeout("test", Duration::from_secs(20))
}

#[tokio::test]
async fn initialize_right_after_create_needs_no_read_and_succeeds_while_pending() {
    let s = Setup::start(60_000).await;
    let m = s.create("init-pending").await;
    s.take_calls().await;

    let done = s.driver.initialize_machine(&ctx(), s.machine_ref(&m)).await.unwrap();
    // The class's IPv6 prefix was requested by RunInstances: only the check is left.
    assert_eq!(done.applied_steps, ["disable-source-dest-check"]);
    assert_eq!(Some(done.provider_id.clone()), m.provider_id);
    let calls = s.take_calls().await;
    assert_eq!(calls.get("DescribeInstances"), None, "the interfaces came with RunInstances: {calls:?}");
    assert_eq!(calls.get("ModifyNetworkInterfaceAttribute"), Some(&1), "{calls:?}");
    assert_eq!(calls.values().sum::<u64>(), 1, "{calls:?}");
    let inventory = s.admin.instances().await.unwrap();
    let prefixes = &inventory[0].extra["network_interfaces"][0]["ipv6_prefixes"];
    assert_eq!(prefixes.as_array().map(Vec::len), Some(1), "{prefixes}");

    // Still pending, and initialized.
    let status = s.driver.get_machine_status(&ctx(), s.machine_ref(&m)).await.unwrap();
    assert_eq!(status.vm_state, "pending");
    assert!(status.pending_steps.is_empty(), "{:?}", status.pending_steps);
    s.take_calls().await;

    // A repeat reads once and writes nothing.
    let again = s.driver.initialize_machine(&ctx(), s.machine_ref(&m)).await.unwrap();
    assert!(again.applied_steps.is_empty());
    let calls = s.take_calls().await;
    assert_eq!((calls.get("DescribeInstances"), calls.values().sum::<u64>()), (Some(&1), 1), "{calls:?}");
}

#[tokio::test]
async fn a_retry_after_a_lost_answer_reads_and_never_assigns_twice() {
    let s = Setup::start_dual_stack(60_000).await;
    let m = s.create("init-lost").await;
    // The prefixes are assigned, but the answer is lost.
    s.admin("faults", json!({"operation": "AssignIpv6Addresses", "kind": "unavailable", "times": 1, "phase": "after"}))
        .await;
    let failed = s.driver.initialize_machine(&ctx(), s.machine_ref(&m)).await.unwrap_err();
    assert_eq!(failed.kind(), ErrorKind::Unavailable);
    s.take_calls().await;

    let retried = s.driver.initialize_machine(&ctx(), s.machine_ref(&m)).await.unwrap();
    assert!(retried.applied_steps.is_empty(), "{:?}", retried.applied_steps);
    let calls = s.take_calls().await;
    assert_eq!((calls.get("DescribeInstances"), calls.values().sum::<u64>()), (Some(&1), 1), "{calls:?}");
    let inventory = s.admin.instances().await.unwrap();
    let prefixes = &inventory[0].extra["network_interfaces"][0]["ipv6_prefixes"];
    assert_eq!(prefixes.as_array().map(Vec::len), Some(1), "{prefixes}");
}

#[tokio::test]
async fn dual_stack_interfaces_get_their_prefixes_from_initialize_without_a_read() {
    let s = Setup::start_dual_stack(60_000).await;
    let m = s.create("init-dual").await;
    s.take_calls().await;

    let done = s.driver.initialize_machine(&ctx(), s.machine_ref(&m)).await.unwrap();
    assert_eq!(done.applied_steps, ["disable-source-dest-check", "assign-ipv6-prefixes"]);
    let calls = s.take_calls().await;
    assert_eq!(calls.get("ModifyNetworkInterfaceAttribute"), Some(&1), "{calls:?}");
    assert_eq!(calls.get("AssignIpv6Addresses"), Some(&1), "{calls:?}");
    assert_eq!(calls.values().sum::<u64>(), 2, "{calls:?}");
    let status = s.driver.get_machine_status(&ctx(), s.machine_ref(&m)).await.unwrap();
    assert!(status.pending_steps.is_empty(), "{:?}", status.pending_steps);
}

#[tokio::test]
async fn a_restarted_driver_reads_once_and_assigns_no_prefix_the_launch_gave() {
    let s = Setup::start(60_000).await;
    let m = s.create("init-restart").await;
    // A new driver: no memory of the launch.
    let fresh = driver_for(&s.fake);
    s.take_calls().await;

    let done = fresh.initialize_machine(&ctx(), s.machine_ref(&m)).await.unwrap();
    assert_eq!(done.applied_steps, ["disable-source-dest-check"]);
    let calls = s.take_calls().await;
    assert_eq!(calls.get("DescribeInstances"), Some(&1), "{calls:?}");
    assert_eq!(calls.get("ModifyNetworkInterfaceAttribute"), Some(&1), "{calls:?}");
    assert_eq!(calls.values().sum::<u64>(), 2, "{calls:?}");
    let inventory = s.admin.instances().await.unwrap();
    let prefixes = &inventory[0].extra["network_interfaces"][0]["ipv6_prefixes"];
    assert_eq!(prefixes.as_array().map(Vec::len), Some(1), "{prefixes}");
}
