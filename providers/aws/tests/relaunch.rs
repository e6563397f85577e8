//! CreateMachine of a machine whose instance was terminated right after launch
//! (a bad KMS key, a spot reclaim): the driver launches another, as the Go
//! provider does, under a token derived from the terminated instance, so that
//! repeated creates return that one new instance and never a second.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use machine_driver_api::{Driver, Machine, MachineRef};
use support::{FakeCloud, ctx};

#[tokio::test]
async fn a_terminated_launch_is_relaunched_once_and_idempotently() {
    let cloud = FakeCloud::start_timed(100, 50).await;
    let driver = cloud.driver();
    let create = || cloud.create_request("relaunch-1");
    let first = driver.create_machine(&ctx("test", 20), create()).await.unwrap();

    // The instance goes away out of band (here: terminated through the driver by providerID).
    let by_id = Machine { provider_id: Some(first.provider_id.clone()), ..Default::default() };
    driver
        .delete_machine(&ctx("test", 20), MachineRef { machine: by_id, ..cloud.machine_ref("relaunch-1") })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    let second = driver.create_machine(&ctx("test", 20), create()).await.unwrap();
    assert_ne!(second.provider_id, first.provider_id, "a terminated instance is replaced");
    let third = driver.create_machine(&ctx("test", 20), create()).await.unwrap();
    assert_eq!(third.provider_id, second.provider_id, "a repeated create returns the relaunched instance");

    let live = cloud.admin.live_named("relaunch-1").await.unwrap();
    assert_eq!(live.len(), 1, "{live:?}");
    assert!(second.provider_id.ends_with(&live[0].id), "{} vs {}", second.provider_id, live[0].id);
}
