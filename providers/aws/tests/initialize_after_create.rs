//! InitializeMachine against `fake-ec2` right after CreateMachine, as the
//! machine-controller calls it: the instance is still `pending`, EC2 accepts
//! interface changes then, and the driver applies them from what RunInstances
//! answered, without a read; a repeat reads and converges.

#![allow(clippy::unwrap_used)]

mod support;

use std::ops::Deref;

use machine_driver_api::{Driver, ErrorKind, Machine, MachineRef};
use machine_driver_aws::AwsDriver;
use serde_json::{Value, json};
use support::{FakeCloud, ctx};

/// The fake (instances stop in 100 ms) and one driver on it.
struct Setup {
    cloud: FakeCloud,
    driver: AwsDriver,
}

impl Deref for Setup {
    type Target = FakeCloud;
    fn deref(&self) -> &FakeCloud {
        &self.cloud
    }
}

impl Setup {
    async fn start(boot_ms: u64) -> Self {
        Self::start_with(boot_ms, |_| {}).await
    }

    /// The example class with IPv6 addresses counted on its interface too, as
    /// Gardener's dual-stack classes are: EC2 takes no prefix count beside an
    /// address count at launch, so InitializeMachine assigns the prefix.
    async fn start_dual_stack(boot_ms: u64) -> Self {
        Self::start_with(boot_ms, |spec| spec["networkInterfaces"][0]["ipv6AddressCount"] = json!(1)).await
    }

    async fn start_with(boot_ms: u64, patch: impl FnOnce(&mut Value)) -> Self {
        let mut cloud = FakeCloud::start_timed(boot_ms, 100).await;
        cloud.class = cloud.class_with(patch);
        let driver = cloud.driver();
        Self { cloud, driver }
    }

    fn machine_ref(&self, machine: &Machine) -> MachineRef {
        MachineRef { machine: machine.clone(), class: self.class.clone(), secret: self.secret.clone() }
    }

    async fn create(&self, name: &str) -> Machine {
        let created = self.driver.create_machine(&ctx("test", 20), self.create_request(name)).await.unwrap();
        Machine { provider_id: Some(created.provider_id), ..self.machine(name) }
    }
}

#[tokio::test]
async fn initialize_right_after_create_needs_no_read_and_succeeds_while_pending() {
    let s = Setup::start(60_000).await;
    let m = s.create("init-pending").await;
    s.take_calls().await;

    let done = s.driver.initialize_machine(&ctx("test", 20), s.machine_ref(&m)).await.unwrap();
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
    let status = s.driver.get_machine_status(&ctx("test", 20), s.machine_ref(&m)).await.unwrap();
    assert_eq!(status.vm_state, "pending");
    assert!(status.pending_steps.is_empty(), "{:?}", status.pending_steps);
    s.take_calls().await;

    // A repeat reads once and writes nothing.
    let again = s.driver.initialize_machine(&ctx("test", 20), s.machine_ref(&m)).await.unwrap();
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
    let failed = s.driver.initialize_machine(&ctx("test", 20), s.machine_ref(&m)).await.unwrap_err();
    assert_eq!(failed.kind(), ErrorKind::Unavailable);
    s.take_calls().await;

    let retried = s.driver.initialize_machine(&ctx("test", 20), s.machine_ref(&m)).await.unwrap();
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

    let done = s.driver.initialize_machine(&ctx("test", 20), s.machine_ref(&m)).await.unwrap();
    assert_eq!(done.applied_steps, ["disable-source-dest-check", "assign-ipv6-prefixes"]);
    let calls = s.take_calls().await;
    assert_eq!(calls.get("ModifyNetworkInterfaceAttribute"), Some(&1), "{calls:?}");
    assert_eq!(calls.get("AssignIpv6Addresses"), Some(&1), "{calls:?}");
    assert_eq!(calls.values().sum::<u64>(), 2, "{calls:?}");
    let status = s.driver.get_machine_status(&ctx("test", 20), s.machine_ref(&m)).await.unwrap();
    assert!(status.pending_steps.is_empty(), "{:?}", status.pending_steps);
}

#[tokio::test]
async fn a_restarted_driver_reads_once_and_assigns_no_prefix_the_launch_gave() {
    let s = Setup::start(60_000).await;
    let m = s.create("init-restart").await;
    // A new driver: no memory of the launch.
    let fresh = s.cloud.driver();
    s.take_calls().await;

    let done = fresh.initialize_machine(&ctx("test", 20), s.machine_ref(&m)).await.unwrap();
    assert_eq!(done.applied_steps, ["disable-source-dest-check"]);
    let calls = s.take_calls().await;
    assert_eq!(calls.get("DescribeInstances"), Some(&1), "{calls:?}");
    assert_eq!(calls.get("ModifyNetworkInterfaceAttribute"), Some(&1), "{calls:?}");
    assert_eq!(calls.values().sum::<u64>(), 2, "{calls:?}");
    let inventory = s.admin.instances().await.unwrap();
    let prefixes = &inventory[0].extra["network_interfaces"][0]["ipv6_prefixes"];
    assert_eq!(prefixes.as_array().map(Vec::len), Some(1), "{prefixes}");
}
