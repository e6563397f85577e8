//! DeleteMachine of Spot machines against fake-ec2, which models Spot
//! requests as EC2 does (terminating the instance of a persistent request
//! re-opens it and EC2 launches another instance after a delay): the request
//! is cancelled before the instance is terminated, so nothing is relaunched
//! once the Machine is gone; by providerID and by name; a repeated delete and
//! a request already cancelled are fine; a failed cancel terminates nothing.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use fake_cloud_support::{AdminClient, Fault};
use machine_driver_api::{CallContext, CreateMachine, Driver, Machine, MachineClass, MachineRef, SecretData};
use machine_driver_aws::{AwsConfig, AwsDriver};
use serde_json::{Value, json};

/// boot_ms and stop_ms of the fake: EC2's relaunch of an open persistent
/// request comes boot_ms after its instance is terminated.
const STEP_MS: u64 = 50;

fn ctx() -> CallContext {
    CallContext::with_timeout("test", Duration::from_secs(20))
}

fn secret() -> SecretData {
    let secret: BTreeMap<String, String> = serde_json::from_str(include_str!("../examples/secret.json")).unwrap();
    secret.into_iter().collect()
}

fn class(patch: Value) -> MachineClass {
    let mut spec: Value = serde_json::from_str(include_str!("../examples/machine-class.json")).unwrap();
    for (k, v) in patch.as_object().unwrap() {
        spec[k] = v.clone();
    }
    MachineClass {
        name: "class".into(),
        provider: "AWS".into(),
        provider_spec: serde_json::to_vec(&spec).unwrap(),
        node_template: None,
    }
}

/// Spot instances of a persistent request (EC2 requires stop or hibernate with it).
fn persistent_spot() -> MachineClass {
    class(json!({"instanceMarketOptions": {"marketType": "spot", "spotOptions": {
        "spotInstanceType": "persistent", "instanceInterruptionBehavior": "stop"}}}))
}

fn machine(name: &str) -> Machine {
    Machine { name: name.into(), uid: format!("uid-{name}"), ..Default::default() }
}

struct Setup {
    fake: fake_ec2::FakeHandle,
    admin: AdminClient,
    driver: AwsDriver,
}

impl Setup {
    async fn start() -> Self {
        let fake = fake_ec2::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let admin = AdminClient::for_cloud_url(&fake.url()).unwrap();
        admin.post("timing", json!({"boot_ms": STEP_MS, "stop_ms": STEP_MS})).await.unwrap();
        let driver =
            AwsDriver::new(AwsConfig::default().with_endpoints(Some(fake.url().to_string()), |_| None)).unwrap();
        Self { fake, admin, driver }
    }

    async fn create(&self, m: &Machine, class: &MachineClass) -> String {
        let req =
            CreateMachine { machine: m.clone(), class: class.clone(), secret: secret(), user_data: Default::default() };
        self.driver.create_machine(&ctx(), req).await.unwrap().provider_id
    }

    fn at(m: &Machine, provider_id: Option<&str>, class: &MachineClass) -> MachineRef {
        let machine = Machine { provider_id: provider_id.map(str::to_string), ..m.clone() };
        MachineRef { machine, class: class.clone(), secret: secret() }
    }

    /// An EC2 client of the example secret's account against the fake (what
    /// someone else does to the machine's instance).
    fn ec2(&self) -> aws_sdk_ec2::Client {
        support::ec2_client(&self.fake.url(), &secret())
    }

    /// The EC2 calls made since the last time, reset.
    async fn take_calls(&self) -> BTreeMap<String, u64> {
        let calls = self.admin.calls().await.unwrap();
        self.admin.reset_calls().await.unwrap();
        calls.calls
    }

    /// The instance's `spot_instance_request_id` in the fake's inventory.
    async fn request_of(&self, instance_id: &str) -> String {
        let all = self.admin.instances().await.unwrap();
        let entry = all.iter().find(|i| i.id == instance_id).unwrap();
        entry.extra["spot_instance_request_id"].as_str().unwrap().to_string()
    }

    /// Waits past the instance's termination and the relaunch delay, then
    /// the live instances named `name`.
    async fn live_after_relaunch_delay(&self, name: &str) -> Vec<String> {
        tokio::time::sleep(Duration::from_millis(STEP_MS * 5)).await;
        self.admin.live_named(name).await.unwrap().into_iter().map(|i| i.id).collect()
    }
}

fn instance_id(provider_id: &str) -> &str {
    provider_id.rsplit('/').next().unwrap()
}

#[tokio::test]
async fn a_deleted_persistent_spot_machine_leaves_no_instance_behind() {
    let s = Setup::start().await;
    let spot = persistent_spot();
    let m = machine("persistent-spot");
    let pid = s.create(&m, &spot).await;
    let id = instance_id(&pid).to_string();
    let sir = s.request_of(&id).await;
    assert!(sir.starts_with("sir-"), "{sir}");
    s.take_calls().await;

    let deleted = s.driver.delete_machine(&ctx(), Setup::at(&m, Some(&pid), &spot)).await.unwrap();
    assert!(!deleted.already_gone);
    let calls = s.take_calls().await;
    assert_eq!(
        calls,
        BTreeMap::from([
            ("DescribeInstances".to_string(), 1),
            ("CancelSpotInstanceRequests".to_string(), 1),
            ("TerminateInstances".to_string(), 1),
        ]),
        "one cancel, no extra read: {calls:?}"
    );
    assert!(
        s.live_after_relaunch_delay(&m.name).await.is_empty(),
        "EC2 launched no new instance for the request: {:?}",
        s.admin.instances().await.unwrap()
    );

    // A repeated delete: the instance is shutting down or terminated; the one
    // idempotent cancel is sent again (the read cannot tell a request closed
    // from one re-opened by someone else's termination), nothing is terminated.
    let again = s.driver.delete_machine(&ctx(), Setup::at(&m, Some(&pid), &spot)).await.unwrap();
    assert!(again.already_gone);
    let calls = s.take_calls().await;
    assert_eq!(calls.get("CancelSpotInstanceRequests"), Some(&1), "{calls:?}");
    assert_eq!(calls.get("TerminateInstances"), None, "{calls:?}");
}

#[tokio::test]
async fn an_instance_terminated_by_someone_else_has_its_persistent_request_cancelled() {
    let s = Setup::start().await;
    let spot = persistent_spot();
    let m = machine("terminated-elsewhere");
    let pid = s.create(&m, &spot).await;
    let id = instance_id(&pid).to_string();
    // EC2 relaunches an open persistent request boot_ms after its instance is
    // terminated: long enough here for the delete to come first.
    s.admin.post("timing", json!({"boot_ms": 2000, "stop_ms": STEP_MS})).await.unwrap();
    s.ec2().terminate_instances().instance_ids(&id).send().await.unwrap();
    s.take_calls().await;

    let deleted = s.driver.delete_machine(&ctx(), Setup::at(&m, Some(&pid), &spot)).await.unwrap();
    assert!(deleted.already_gone);
    let calls = s.take_calls().await;
    assert_eq!(
        calls,
        BTreeMap::from([("DescribeInstances".to_string(), 1), ("CancelSpotInstanceRequests".to_string(), 1)]),
        "{calls:?}"
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let live: Vec<String> = s.admin.live_named(&m.name).await.unwrap().into_iter().map(|i| i.id).collect();
    assert!(live.is_empty(), "EC2 relaunched {live:?} for the re-opened request");
}

#[tokio::test]
async fn a_persistent_spot_machine_deleted_by_name_is_not_relaunched_either() {
    let s = Setup::start().await;
    let spot = persistent_spot();
    let m = machine("persistent-by-name");
    s.create(&m, &spot).await;
    s.take_calls().await;
    s.driver.delete_machine(&ctx(), Setup::at(&m, None, &spot)).await.unwrap();
    let calls = s.take_calls().await;
    assert_eq!(calls.get("CancelSpotInstanceRequests"), Some(&1), "{calls:?}");
    assert!(s.live_after_relaunch_delay(&m.name).await.is_empty());
}

#[tokio::test]
async fn a_stopped_reclaimed_persistent_instance_is_deleted_without_relaunch() {
    let s = Setup::start().await;
    let spot = persistent_spot();
    let m = machine("persistent-stopped");
    let pid = s.create(&m, &spot).await;
    s.admin.reclaim(instance_id(&pid)).await.unwrap();
    s.driver.delete_machine(&ctx(), Setup::at(&m, Some(&pid), &spot)).await.unwrap();
    assert!(s.live_after_relaunch_delay(&m.name).await.is_empty());
}

#[tokio::test]
async fn an_already_cancelled_request_is_fine_and_a_failed_cancel_terminates_nothing() {
    let s = Setup::start().await;
    let spot = persistent_spot();
    let m = machine("persistent-retry");
    let pid = s.create(&m, &spot).await;
    let id = instance_id(&pid).to_string();

    // The cancel is refused (the credentials lack ec2:CancelSpotInstanceRequests): nothing is terminated.
    let fault = Fault { operation: "CancelSpotInstanceRequests", kind: "permission", times: None, phase: "before" };
    s.admin.add_fault(fault).await.unwrap();
    let err = s.driver.delete_machine(&ctx(), Setup::at(&m, Some(&pid), &spot)).await.unwrap_err();
    assert!(err.message().contains("CancelSpotInstanceRequests"), "{err}");
    assert_eq!(s.take_calls().await.get("TerminateInstances"), None, "no termination before the cancel succeeded");
    assert_eq!(s.admin.live_named(&m.name).await.unwrap().len(), 1);
    s.admin.clear_faults().await.unwrap();

    // Someone cancelled the request already: the retry cancels again (EC2 answers
    // `cancelled`) and terminates.
    let sir = s.request_of(&id).await;
    s.ec2().cancel_spot_instance_requests().spot_instance_request_ids(&sir).send().await.unwrap();
    let deleted = s.driver.delete_machine(&ctx(), Setup::at(&m, Some(&pid), &spot)).await.unwrap();
    assert!(!deleted.already_gone);
    assert!(s.live_after_relaunch_delay(&m.name).await.is_empty());
}

#[tokio::test]
async fn credentials_that_may_not_cancel_still_delete_a_one_time_spot_machine() {
    let s = Setup::start().await;
    let one_time = class(json!({"instanceMarketOptions": {"marketType": "spot", "spotOptions": {
        "spotInstanceType": "one-time"}}}));
    let m = machine("one-time-no-permission");
    let pid = s.create(&m, &one_time).await;
    let fault = Fault { operation: "CancelSpotInstanceRequests", kind: "permission", times: None, phase: "before" };
    s.admin.add_fault(fault).await.unwrap();
    s.take_calls().await;
    let deleted = s.driver.delete_machine(&ctx(), Setup::at(&m, Some(&pid), &one_time)).await.unwrap();
    assert!(!deleted.already_gone);
    let calls = s.take_calls().await;
    assert_eq!(calls.get("TerminateInstances"), Some(&1), "{calls:?}");
    assert!(s.live_after_relaunch_delay(&m.name).await.is_empty(), "a one-time request closes with its instance");
}
