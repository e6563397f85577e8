//! The AMI's root device name (a class whose block device names `/root`) is
//! looked up once: 100 concurrent creates of one AMI on a fresh driver make one
//! DescribeImages between them (single flight in the kit's
//! `KeyedCache::get_or_fetch`), and later creates none.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use machine_driver_api::{CreateMachine, Driver, Machine};
use support::{FakeCloud, ctx};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_of_one_ami_make_one_image_lookup() {
    let cloud = FakeCloud::start().await;
    let admin = &cloud.admin;
    // DescribeImages answers slowly, so that every create asks while the first lookup is in flight.
    admin.post("latency", serde_json::json!({"operation": "DescribeImages", "ms": 300})).await.unwrap();
    let driver = Arc::new(cloud.driver());
    let (class, secret) = (&cloud.class, &cloud.secret);
    let create = |i: usize| CreateMachine {
        machine: Machine { name: format!("sf-{i}"), uid: format!("uid-sf-{i}"), ..Default::default() },
        class: class.clone(),
        secret: secret.clone(),
        user_data: Default::default(),
    };
    let mut set = tokio::task::JoinSet::new();
    for i in 0..100 {
        let (driver, req) = (Arc::clone(&driver), create(i));
        set.spawn(async move { driver.create_machine(&ctx("test", 60), req).await });
    }
    for created in set.join_all().await {
        created.unwrap();
    }
    let calls = admin.calls().await.unwrap();
    assert_eq!(calls.calls.get("DescribeImages").copied(), Some(1), "{:?}", calls.calls);
    assert_eq!(calls.calls.get("RunInstances").copied(), Some(100), "{:?}", calls.calls);

    driver.create_machine(&ctx("test", 20), create(100)).await.unwrap();
    let calls = admin.calls().await.unwrap();
    assert_eq!(calls.calls.get("DescribeImages").copied(), Some(1), "cached afterwards: {:?}", calls.calls);
}
