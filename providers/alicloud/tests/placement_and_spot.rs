//! "Cannot place it here" and spot classes against fake-ECS: `Zone.NotOnSale`
//! and `OperationDenied.NoStock` are RESOURCE_EXHAUSTED (as the Go provider
//! answers, `pkg/alicloud/errors/utils.go`), and a `SpotWithPriceLimit` class
//! with `spotPriceLimit` and `spotDuration` launches with them.

#![allow(clippy::unwrap_used)]

mod support;

use fake_cloud_support::Fault;
use machine_driver_api::{CreateMachine, Driver, ErrorKind};
use support::{FakeCloud, ctx};

#[tokio::test]
async fn an_instance_the_zone_does_not_sell_is_resource_exhausted() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    for (kind, reason) in [("placement", "Zone.NotOnSale"), ("capacity", "OperationDenied.NoStock")] {
        cloud.admin.add_fault(Fault { operation: "create", kind, times: Some(1), phase: "before" }).await.unwrap();
        let err =
            driver.create_machine(&ctx("create", 20), cloud.create_request(&format!("m-{kind}"))).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{kind}: {err}");
        assert_eq!(err.reason(), reason);
        assert_eq!(err.retry_after(), None);
    }
    assert!(cloud.inventory().await.instances.is_empty(), "nothing was launched");
    driver.create_machine(&ctx("create", 20), cloud.create_request("m-later")).await.unwrap();
}

#[tokio::test]
async fn a_spot_class_with_a_price_limit_launches_with_it() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    let class = cloud.class_with(|v| {
        v["spotStrategy"] = "SpotWithPriceLimit".into();
        v["spotPriceLimit"] = 0.125.into();
        v["spotDuration"] = 0.into();
    });
    let request = CreateMachine { class, ..cloud.create_request("m-spot") };
    let created = driver.create_machine(&ctx("create", 20), request).await.unwrap();
    let inventory = cloud.inventory().await;
    let instance = inventory.instances.iter().find(|i| created.provider_id.ends_with(&i.id)).unwrap();
    assert_eq!(instance.extra["spot_strategy"], "SpotWithPriceLimit");
    assert_eq!(instance.extra["spot_price_limit"], "0.125");
    assert_eq!(instance.extra["spot_duration"], 0);

    // A limit with a strategy that has none is refused before any call, naming the field.
    cloud.admin.reset_calls().await.unwrap();
    let class = cloud.class_with(|v| {
        v["spotStrategy"] = "SpotAsPriceGo".into();
        v["spotPriceLimit"] = 0.5.into();
    });
    let err = driver
        .create_machine(&ctx("create", 20), CreateMachine { class, ..cloud.create_request("m-bad") })
        .await
        .unwrap_err();
    assert_eq!((err.kind(), err.field()), (ErrorKind::InvalidArgument, Some("providerSpec.spotPriceLimit")));
    assert_eq!(cloud.calls().await.total, 0);
}
