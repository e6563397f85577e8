//! "Cannot place it here" and market types against fake-ec2: EC2's `Unsupported`
//! (instance type not offered in the zone) and its capacity codes are
//! RESOURCE_EXHAUSTED, so that MCM's autoscaler tries another pool or zone (as
//! the Go provider answers, `pkg/aws/errors/utils.go`); an
//! `interruptible-capacity-reservation` class launches into that market.

#![allow(clippy::unwrap_used)]

mod support;

use fake_cloud_support::Fault;
use machine_driver_api::{Driver, ErrorKind};
use support::{FakeCloud, class, create, ctx};

#[tokio::test]
async fn an_instance_type_the_zone_does_not_offer_is_resource_exhausted() {
    let cloud = FakeCloud::start().await;
    let (admin, driver) = (&cloud.admin, cloud.driver());
    let placed = class(serde_json::json!({"placement": {"availabilityZone": "eu-west-1c"}}));
    for (kind, reason) in [("placement", "Unsupported"), ("capacity", "InsufficientInstanceCapacity")] {
        admin.add_fault(Fault { operation: "create", kind, times: Some(1), phase: "before" }).await.unwrap();
        let err = driver.create_machine(&ctx("test", 20), create(&format!("m-{kind}"), &placed)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{kind}: {err}");
        assert_eq!(err.reason(), reason);
        assert_eq!(err.retry_after(), None, "{kind}: not a retry of the same request");
        if kind == "placement" {
            assert!(
                err.message().contains("instance type (m5.large)")
                    && err.message().contains("Availability Zone (eu-west-1c)"),
                "EC2's words reach the machine status: {}",
                err.message()
            );
        }
    }
    assert!(admin.instances().await.unwrap().is_empty(), "nothing was launched");
    // Once the zone takes it, the same class launches.
    driver.create_machine(&ctx("test", 20), create("m-placed", &placed)).await.unwrap();
}

#[tokio::test]
async fn an_interruptible_capacity_reservation_class_launches_in_that_market() {
    let cloud = FakeCloud::start().await;
    let (admin, driver) = (&cloud.admin, cloud.driver());
    let icr = class(serde_json::json!({
        "instanceMarketOptions": {"marketType": "interruptible-capacity-reservation"},
        "capacityReservation": {"capacityReservationId": "cr-0123456789abcdef0"}
    }));
    let created = driver.create_machine(&ctx("test", 20), create("m-icr", &icr)).await.unwrap();
    let live = admin.live_named("m-icr").await.unwrap();
    assert_eq!(live.len(), 1);
    assert!(created.provider_id.ends_with(&live[0].id));
    assert_eq!(live[0].extra["instance_lifecycle"], "interruptible-capacity-reservation");

    let on_demand = class(serde_json::json!({"instanceMarketOptions": {"marketType": "on-demand"}}));
    let err = driver.create_machine(&ctx("test", 20), create("m-od", &on_demand)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(err.field(), Some("providerSpec.instanceMarketOptions.marketType"));
}
