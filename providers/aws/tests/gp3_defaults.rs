//! A gp3 root volume launched without `iops` or `throughput` has EC2's
//! defaults (3000 IOPS, 125 MiB/s; fake-ec2 shows them as EC2 does): an
//! UpdateMachine whose class now asks for exactly those is UNCHANGED and
//! sends no ModifyVolume; other values are applied.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use fake_cloud_support::AdminClient;
use machine_driver_api::{
    CallContext, ChangeOutcome, CreateMachine, Driver, Machine, MachineClass, SecretData, UpdateMachine,
};
use machine_driver_aws::{AwsConfig, AwsDriver};
use serde_json::{Value, json};

fn ctx() -> CallContext {
    CallContext::with_timeout("test", Duration::from_secs(20))
}

fn secret() -> SecretData {
    let secret: BTreeMap<String, String> = serde_json::from_str(include_str!("../examples/secret.json")).unwrap();
    secret.into_iter().collect()
}

/// The example class (one gp3 root volume of 50 GiB, no iops or throughput)
/// with `ebs` merged into its volume's `ebs`.
fn class(ebs: Value) -> MachineClass {
    let mut spec: Value = serde_json::from_str(include_str!("../examples/machine-class.json")).unwrap();
    for (k, v) in ebs.as_object().unwrap() {
        spec["blockDevices"][0]["ebs"][k] = v.clone();
    }
    MachineClass {
        name: "class".into(),
        provider: "AWS".into(),
        provider_spec: serde_json::to_vec(&spec).unwrap(),
        node_template: None,
    }
}

#[tokio::test]
async fn asking_for_the_gp3_defaults_changes_nothing() {
    let fake = fake_ec2::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let admin = AdminClient::for_cloud_url(&fake.url()).unwrap();
    admin.post("timing", json!({"boot_ms": 20, "stop_ms": 20})).await.unwrap();
    let driver = AwsDriver::new(AwsConfig::default().with_endpoints(Some(fake.url().to_string()), |_| None)).unwrap();
    let plain = class(json!({}));
    let machine = Machine { name: "gp3-defaults".into(), uid: "uid-gp3".into(), ..Default::default() };
    let create = CreateMachine {
        machine: machine.clone(),
        class: plain.clone(),
        secret: secret(),
        user_data: Default::default(),
    };
    let pid = driver.create_machine(&ctx(), create).await.unwrap().provider_id;
    let machine = Machine { provider_id: Some(pid), ..machine };
    let update = |class: MachineClass, validate_only: bool| UpdateMachine {
        machine: machine.clone(),
        class,
        previous_class: Some(plain.clone()),
        secret: secret(),
        validate_only,
    };
    admin.reset_calls().await.unwrap();

    let done = driver.update_machine(&ctx(), update(class(json!({"iops": 3000, "throughput": 125})), false)).await;
    let done = done.unwrap();
    let outcome = |field: &str| done.changes.iter().find(|c| c.field == field).map(|c| c.outcome);
    assert_eq!(outcome("providerSpec.blockDevices[0].ebs.iops"), Some(ChangeOutcome::Unchanged), "{done:?}");
    assert_eq!(outcome("providerSpec.blockDevices[0].ebs.throughput"), Some(ChangeOutcome::Unchanged), "{done:?}");
    let volume = done.changes.iter().filter(|c| c.field.starts_with("providerSpec.blockDevices"));
    assert!(volume.clone().count() == 4 && volume.into_iter().all(|c| c.outcome == ChangeOutcome::Unchanged));
    let calls = admin.calls().await.unwrap().calls;
    assert_eq!(calls.get("ModifyVolume"), None, "{calls:?}");

    // Other values are a change.
    let more =
        driver.update_machine(&ctx(), update(class(json!({"iops": 4000, "throughput": 250})), true)).await.unwrap();
    let outcome = |field: &str| more.changes.iter().find(|c| c.field == field).map(|c| c.outcome);
    assert_eq!(outcome("providerSpec.blockDevices[0].ebs.iops"), Some(ChangeOutcome::Applied), "{more:?}");
    assert_eq!(outcome("providerSpec.blockDevices[0].ebs.throughput"), Some(ChangeOutcome::Applied), "{more:?}");
}
