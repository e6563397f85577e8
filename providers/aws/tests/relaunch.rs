//! CreateMachine of a machine whose instance was terminated right after launch
//! (a bad KMS key, a spot reclaim): the driver launches another, as the Go
//! provider does, under a token derived from the terminated instance, so that
//! repeated creates return that one new instance and never a second.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use fake_cloud_support::AdminClient;
use machine_driver_api::{CallContext, CreateMachine, Driver, Machine, MachineClass, MachineRef, SecretData};
use machine_driver_aws::{AwsConfig, AwsDriver};

fn ctx() -> CallContext {
    CallContext::with_timeout("test", Duration::from_secs(20))
}

#[tokio::test]
async fn a_terminated_launch_is_relaunched_once_and_idempotently() {
    let fake = fake_ec2::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let admin = AdminClient::for_cloud_url(&fake.url()).unwrap();
    admin.post("timing", serde_json::json!({"boot_ms": 100, "stop_ms": 50})).await.unwrap();
    let driver = AwsDriver::new(AwsConfig::default().with_endpoints(Some(fake.url().to_string()), |_| None)).unwrap();
    let secret: BTreeMap<String, String> = serde_json::from_str(include_str!("../examples/secret.json")).unwrap();
    let secret: SecretData = secret.into_iter().collect();
    let class = MachineClass {
        name: "class".into(),
        provider: "AWS".into(),
        provider_spec: include_bytes!("../examples/machine-class.json").to_vec(),
        node_template: None,
    };
    let machine = Machine { name: "relaunch-1".into(), uid: "uid-relaunch-1".into(), ..Default::default() };
    let create = || CreateMachine {
        machine: machine.clone(),
        class: class.clone(),
        secret: secret.clone(),
        user_data: Default::default(),
    };
    let first = driver.create_machine(&ctx(), create()).await.unwrap();

    // The instance goes away out of band (here: terminated through the driver by providerID).
    let by_id = Machine { provider_id: Some(first.provider_id.clone()), ..Default::default() };
    driver
        .delete_machine(&ctx(), MachineRef { machine: by_id, class: class.clone(), secret: secret.clone() })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    let second = driver.create_machine(&ctx(), create()).await.unwrap();
    assert_ne!(second.provider_id, first.provider_id, "a terminated instance is replaced");
    let third = driver.create_machine(&ctx(), create()).await.unwrap();
    assert_eq!(third.provider_id, second.provider_id, "a repeated create returns the relaunched instance");

    let live = admin.live_named("relaunch-1").await.unwrap();
    assert_eq!(live.len(), 1, "{live:?}");
    assert!(second.provider_id.ends_with(&live[0].id), "{} vs {}", second.provider_id, live[0].id);
}
