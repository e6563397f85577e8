//! Spot instances EC2 takes back, against fake-ec2 (`AdminClient::reclaim`):
//! GetMachineStatus and InitializeMachine answer NOT_FOUND `SPOT_RECLAIMED`
//! naming the instance and EC2's state reason, at the cost of an ordinary
//! status; DeleteMachine leaves nothing; CreateMachine relaunches a
//! terminated Spot instance and refuses (naming it) one EC2 stopped; an
//! on-demand instance cannot be reclaimed and reads as before; another
//! machine's reclaimed instance is never reported as this one's.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::ops::Deref;
use std::time::Duration;

use machine_driver_api::{
    CreateMachine, Driver, DriverError, ErrorKind, ListMachines, Machine, MachineClass, MachineRef, SPOT_RECLAIMED,
};
use machine_driver_aws::AwsDriver;
use serde_json::json;
use support::{FakeCloud, class, ctx, examples, instance_id, machine, secret};

/// The Spot patch of `examples/conformance.json` (what the conformance scenario launches).
fn conformance_spot_class() -> MachineClass {
    class(examples().json("conformance.json")["spot"]["patch"].clone())
}

/// A Spot class whose instances EC2 stops on interruption (a persistent request).
fn stopping_spot_class() -> MachineClass {
    class(json!({"instanceMarketOptions": {"marketType": "spot", "spotOptions": {
        "spotInstanceType": "persistent", "instanceInterruptionBehavior": "stop"}}}))
}

/// The fake and one driver on it.
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
    async fn start() -> Self {
        let cloud = FakeCloud::start_timed(50, 50).await;
        let driver = cloud.driver();
        Self { cloud, driver }
    }

    async fn create(&self, m: &Machine, class: &MachineClass) -> Result<String, DriverError> {
        let req =
            CreateMachine { machine: m.clone(), class: class.clone(), secret: secret(), user_data: Default::default() };
        self.driver.create_machine(&ctx("test", 20), req).await.map(|c| c.provider_id)
    }

    fn at(&self, m: &Machine, provider_id: &str, class: &MachineClass) -> MachineRef {
        let machine = Machine { provider_id: Some(provider_id.into()), ..m.clone() };
        MachineRef { machine, class: class.clone(), secret: secret() }
    }

    async fn listed(&self, class: &MachineClass) -> Vec<String> {
        let req = ListMachines { class: class.clone(), secret: secret() };
        self.driver.list_machines(&ctx("test", 20), req).await.unwrap().into_iter().map(|(id, _)| id).collect()
    }
}

fn assert_reclaimed(err: &DriverError, id: &str, code: &str) {
    assert_eq!((err.kind(), err.reason()), (ErrorKind::NotFound, SPOT_RECLAIMED), "{err}");
    assert!(err.message().contains(id), "names the instance: {}", err.message());
    assert!(err.message().contains(code), "shows EC2's state reason: {}", err.message());
}

#[tokio::test]
async fn a_reclaimed_spot_instance_is_answered_spot_reclaimed_and_deleted_without_a_trace() {
    let s = Setup::start().await;
    let spot = conformance_spot_class();
    let m = machine("spot-1");
    let pid = s.create(&m, &spot).await.unwrap();
    let id = instance_id(&pid).to_string();
    let inventory = s.admin.instances().await.unwrap();
    let entry = inventory.iter().find(|i| i.id == id).unwrap();
    assert_eq!(entry.extra["instance_lifecycle"], json!("spot"), "the conformance patch launches a Spot instance");
    // As the controller does: InitializeMachine right after the create.
    s.driver.initialize_machine(&ctx("test", 20), s.at(&m, &pid, &spot)).await.unwrap();
    let running = s.driver.get_machine_status(&ctx("test", 20), s.at(&m, &pid, &spot)).await.unwrap();
    assert_eq!(running.provider_id, pid, "a Spot instance that runs reads as any other");
    s.take_calls().await;

    let shown = s.admin.reclaim(&id).await.unwrap();
    assert!(shown.contains("Server.SpotInstanceTermination"), "{shown}");
    assert!(s.take_calls().await.is_empty(), "the reclaim is out of band");

    let err = s.driver.get_machine_status(&ctx("test", 20), s.at(&m, &pid, &spot)).await.unwrap_err();
    assert_reclaimed(&err, &id, "Server.SpotInstanceTermination");
    assert!(err.message().contains("terminated"), "{}", err.message());
    let calls = s.take_calls().await;
    assert_eq!(calls, BTreeMap::from([("DescribeInstances".to_string(), 2)]), "as for any ended instance: {calls:?}");

    let err = s.driver.initialize_machine(&ctx("test", 20), s.at(&m, &pid, &spot)).await.unwrap_err();
    assert_reclaimed(&err, &id, "Server.SpotInstanceTermination");
    assert!(s.listed(&spot).await.is_empty(), "a terminated instance is no VM to list");

    s.take_calls().await;
    let deleted = s.driver.delete_machine(&ctx("test", 20), s.at(&m, &pid, &spot)).await.unwrap();
    assert!(deleted.already_gone);
    assert_eq!(s.take_calls().await.get("TerminateInstances"), None, "nothing left to terminate");
    assert!(s.admin.live_named(&m.name).await.unwrap().is_empty());
    let after = s.admin.instances().await.unwrap();
    assert!(after.iter().all(|i| !i.live), "no live instance is left: {after:?}");
    let entry = after.iter().find(|i| i.id == id).unwrap();
    // Its interfaces and volumes went with it (DeleteOnTermination), as EC2 shows.
    let parts = |key: &str| entry.extra[key].as_array().unwrap().clone();
    assert!(parts("block_devices").iter().all(|v| v["delete_on_termination"] == json!(true)), "{entry:?}");
    for eni in parts("network_interfaces") {
        let read =
            s.ec2().describe_network_interfaces().network_interface_ids(eni["id"].as_str().unwrap()).send().await;
        let err = read.expect_err("the interface went with the instance");
        assert_eq!(err.as_service_error().and_then(|e| e.meta().code()), Some("InvalidNetworkInterfaceID.NotFound"));
    }

    let err = s.driver.get_machine_status(&ctx("test", 20), s.at(&m, &pid, &spot)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
}

#[tokio::test]
async fn create_after_a_reclaim_relaunches_once_and_never_answers_the_reclaimed_instance() {
    let s = Setup::start().await;
    let spot = conformance_spot_class();
    let m = machine("spot-relaunch");
    let first = s.create(&m, &spot).await.unwrap();
    s.admin.reclaim(instance_id(&first)).await.unwrap();
    assert_reclaimed(
        &s.driver.get_machine_status(&ctx("test", 20), s.at(&m, &first, &spot)).await.unwrap_err(),
        instance_id(&first),
        "Server.SpotInstanceTermination",
    );

    // The controller creates again: the token answers the terminated instance,
    // which is replaced by one new Spot instance; a repeat returns that one.
    let second = s.create(&m, &spot).await.unwrap();
    assert_ne!(second, first, "the reclaimed instance is never answered");
    let third = s.create(&m, &spot).await.unwrap();
    assert_eq!(third, second, "a repeated create returns the relaunched instance");
    let live = s.admin.live_named(&m.name).await.unwrap();
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(live[0].id, instance_id(&second));
    assert_eq!(live[0].extra["instance_lifecycle"], json!("spot"));
    let status = s.driver.get_machine_status(&ctx("test", 20), s.at(&m, &second, &spot)).await.unwrap();
    assert_eq!(status.provider_id, second);
    // The old providerID: the relaunched instance is this machine's live one.
    let by_old = s.driver.get_machine_status(&ctx("test", 20), s.at(&m, &first, &spot)).await.unwrap();
    assert_eq!(by_old.provider_id, second);
}

#[tokio::test]
async fn a_spot_instance_ec2_stopped_is_reclaimed_listed_never_answered_by_create_and_deleted() {
    let s = Setup::start().await;
    let spot = stopping_spot_class();
    let m = machine("spot-stop");
    let pid = s.create(&m, &spot).await.unwrap();
    let id = instance_id(&pid).to_string();
    s.driver.initialize_machine(&ctx("test", 20), s.at(&m, &pid, &spot)).await.unwrap();
    s.admin.reclaim(&id).await.unwrap();
    s.take_calls().await;

    let err = s.driver.get_machine_status(&ctx("test", 20), s.at(&m, &pid, &spot)).await.unwrap_err();
    assert_reclaimed(&err, &id, "Server.SpotInstanceShutdown");
    assert!(err.message().contains("stopped"), "{}", err.message());
    let calls = s.take_calls().await;
    assert_eq!(calls, BTreeMap::from([("DescribeInstances".to_string(), 1)]), "one read decides: {calls:?}");
    assert_reclaimed(
        &s.driver.initialize_machine(&ctx("test", 20), s.at(&m, &pid, &spot)).await.unwrap_err(),
        &id,
        "Server.SpotInstanceShutdown",
    );
    assert_eq!(s.listed(&spot).await, vec![pid.clone()], "a stopped instance still exists: orphan collection sees it");

    // CreateMachine neither answers it OK nor launches a second instance beside it.
    let err = s.create(&m, &spot).await.unwrap_err();
    assert_reclaimed(&err, &id, "Server.SpotInstanceShutdown");
    assert!(err.message().contains("delete the machine"), "{}", err.message());
    assert_eq!(s.admin.live_named(&m.name).await.unwrap().len(), 1, "no duplicate");

    s.take_calls().await;
    let deleted = s.driver.delete_machine(&ctx("test", 20), s.at(&m, &pid, &spot)).await.unwrap();
    assert!(!deleted.already_gone);
    assert_eq!(s.take_calls().await.get("TerminateInstances"), Some(&1));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(s.admin.instances().await.unwrap().iter().all(|i| !i.live), "nothing is left");
    let err = s.driver.get_machine_status(&ctx("test", 20), s.at(&m, &pid, &spot)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert_ne!(err.reason(), SPOT_RECLAIMED, "terminated by its user now, not by EC2: {err}");
}

#[tokio::test]
async fn an_on_demand_instance_is_not_reclaimed_and_reads_as_before() {
    let s = Setup::start().await;
    let on_demand = class(json!({}));
    let m = machine("on-demand-1");
    let pid = s.create(&m, &on_demand).await.unwrap();
    let before = s.driver.get_machine_status(&ctx("test", 20), s.at(&m, &pid, &on_demand)).await.unwrap();
    let err = s.admin.reclaim(instance_id(&pid)).await.unwrap_err();
    assert!(err.contains("HTTP 409"), "{err}");
    let after = s.driver.get_machine_status(&ctx("test", 20), s.at(&m, &pid, &on_demand)).await.unwrap();
    assert_eq!((after.provider_id, after.node_name), (before.provider_id, before.node_name));
    assert_eq!(s.listed(&on_demand).await, vec![pid.clone()]);

    // Ended by its user (not EC2): plain NOT_FOUND, as before.
    s.driver.delete_machine(&ctx("test", 20), s.at(&m, &pid, &on_demand)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let err = s.driver.get_machine_status(&ctx("test", 20), s.at(&m, &pid, &on_demand)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_ne!(err.reason(), SPOT_RECLAIMED, "{err}");
}

#[tokio::test]
async fn another_machines_reclaimed_instance_is_never_reported_as_this_ones() {
    let s = Setup::start().await;
    let spot = conformance_spot_class();
    let theirs = machine("spot-theirs");
    let pid = s.create(&theirs, &spot).await.unwrap();
    s.admin.reclaim(instance_id(&pid)).await.unwrap();
    let stopping = stopping_spot_class();
    let stopped_pid = s.create(&machine("spot-theirs-stopped"), &stopping).await.unwrap();
    s.admin.reclaim(instance_id(&stopped_pid)).await.unwrap();

    // Another machine (another uid) whose providerID names their instances.
    let mine = machine("spot-mine");
    for (pid, class) in [(&pid, &spot), (&stopped_pid, &stopping)] {
        let err = s.driver.get_machine_status(&ctx("test", 20), s.at(&mine, pid, class)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
        assert_ne!(err.reason(), SPOT_RECLAIMED, "not this machine's: {err}");
        let err = s.driver.initialize_machine(&ctx("test", 20), s.at(&mine, pid, class)).await.unwrap_err();
        assert_ne!(err.reason(), SPOT_RECLAIMED, "{err}");
    }
}
