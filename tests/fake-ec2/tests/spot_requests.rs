//! Spot Instance requests on fake-ec2, through the real aws-sdk-ec2: the
//! request a Spot launch makes, DescribeSpotInstanceRequests, what
//! terminating the instance does to a one-time and to a persistent request
//! (EC2 relaunches the latter), and CancelSpotInstanceRequests (idempotent,
//! stops the relaunch, leaves the instance running).

mod support;

use std::time::Duration;

use aws_sdk_ec2::types::{
    Filter, InstanceInterruptionBehavior, InstanceMarketOptionsRequest, MarketType, ResourceType, SpotInstanceState,
    SpotInstanceType, SpotMarketOptions, Tag, TagSpecification,
};
use fake_cloud_support::{AdminClient, OpClass};
use support::{CLUSTER_KEY, OWNER_KEY, SUBNET, calls, code, ec2, fake, interface, inventory_instance, run_one};

/// boot_ms and stop_ms of `support::fake`.
const STEP: Duration = Duration::from_millis(100);

async fn launch(client: &aws_sdk_ec2::Client, name: &str, request: SpotInstanceType) -> (String, String) {
    let behaviour = (request == SpotInstanceType::Persistent).then_some(InstanceInterruptionBehavior::Stop);
    let spot = SpotMarketOptions::builder().spot_instance_type(request).set_instance_interruption_behavior(behaviour);
    let out = run_one(client, interface(SUBNET))
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(Tag::builder().key("Name").value(name).build())
                .build(),
        )
        .instance_market_options(
            InstanceMarketOptionsRequest::builder().market_type(MarketType::Spot).spot_options(spot.build()).build(),
        )
        .send()
        .await
        .expect("spot launch");
    let instance = &out.instances()[0];
    (
        instance.instance_id().expect("id").to_owned(),
        instance.spot_instance_request_id().expect("a Spot instance names its request").to_owned(),
    )
}

async fn request(client: &aws_sdk_ec2::Client, id: &str) -> aws_sdk_ec2::types::SpotInstanceRequest {
    let out = client.describe_spot_instance_requests().spot_instance_request_ids(id).send().await.expect("describe");
    assert_eq!(out.spot_instance_requests().len(), 1);
    out.spot_instance_requests()[0].clone()
}

/// The caller's live instances named `name`.
async fn live_named(client: &aws_sdk_ec2::Client, name: &str) -> Vec<String> {
    let out = client
        .describe_instances()
        .filters(Filter::builder().name("tag:Name").values(name).build())
        .filters(Filter::builder().name("instance-state-name").values("pending").values("running").build())
        .send()
        .await
        .expect("describe instances");
    out.reservations().iter().flat_map(|r| r.instances()).filter_map(|i| i.instance_id().map(str::to_owned)).collect()
}

#[tokio::test]
async fn a_spot_launch_makes_an_active_request_of_its_type() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let (instance, sir) = launch(&client, "one", SpotInstanceType::Persistent).await;
    assert!(sir.starts_with("sir-") && sir.len() == 12, "{sir}");
    let r = request(&client, &sir).await;
    assert_eq!(r.state(), Some(&SpotInstanceState::Active));
    assert_eq!(r.r#type(), Some(&aws_sdk_ec2::types::SpotInstanceType::Persistent));
    assert_eq!(r.instance_id(), Some(instance.as_str()));
    assert_eq!(r.status().and_then(|s| s.code()), Some("fulfilled"));
    assert_eq!(r.instance_interruption_behavior(), Some(&InstanceInterruptionBehavior::Stop));
    let by_instance = client
        .describe_spot_instance_requests()
        .filters(Filter::builder().name("instance-id").values(&instance).build())
        .send()
        .await
        .expect("filter");
    assert_eq!(by_instance.spot_instance_requests().len(), 1);

    // Another account sees none of it; unknown and malformed ids are refused as EC2 does.
    let other = ec2(&handle, OWNER_KEY);
    let e = other.describe_spot_instance_requests().spot_instance_request_ids(&sir).send().await.unwrap_err();
    assert_eq!(code(&e), "InvalidSpotInstanceRequestID.NotFound");
    let e = client.cancel_spot_instance_requests().spot_instance_request_ids("sir-nope").send().await.unwrap_err();
    assert_eq!(code(&e), "InvalidSpotInstanceRequestID.Malformed");
    let e = client.cancel_spot_instance_requests().spot_instance_request_ids("sir-0000beef").send().await.unwrap_err();
    assert_eq!(code(&e), "InvalidSpotInstanceRequestID.NotFound");
    assert_eq!(request(&client, &sir).await.state(), Some(&SpotInstanceState::Active), "nothing was cancelled");
}

#[tokio::test]
async fn terminating_a_persistent_requests_instance_reopens_it_and_ec2_launches_another() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let (first, sir) = launch(&client, "persistent", SpotInstanceType::Persistent).await;
    client.terminate_instances().instance_ids(&first).send().await.expect("terminate");
    let r = request(&client, &sir).await;
    assert_eq!(r.state(), Some(&SpotInstanceState::Open));
    assert_eq!(r.status().and_then(|s| s.code()), Some("instance-terminated-by-user"));

    // Terminated after stop_ms, relaunched boot_ms later.
    tokio::time::sleep(STEP * 3).await;
    let r = request(&client, &sir).await;
    assert_eq!(r.state(), Some(&SpotInstanceState::Active));
    let second = r.instance_id().expect("the new instance").to_owned();
    assert_ne!(second, first);
    assert_eq!(live_named(&client, "persistent").await, vec![second.clone()], "the relaunch carries the tags");
    let inventory = inventory_instance(&handle, &second).await;
    assert_eq!(inventory["spot_instance_request_id"], sir.as_str());
    assert_eq!(inventory["live"], true);
}

#[tokio::test]
async fn a_cancelled_persistent_request_launches_nothing_more_and_cancelling_again_is_fine() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let (instance, sir) = launch(&client, "cancelled", SpotInstanceType::Persistent).await;
    let out = client.cancel_spot_instance_requests().spot_instance_request_ids(&sir).send().await.expect("cancel");
    let cancelled = &out.cancelled_spot_instance_requests()[0];
    assert_eq!(cancelled.spot_instance_request_id(), Some(sir.as_str()));
    assert_eq!(cancelled.state().map(|s| s.as_str()), Some("cancelled"));
    let r = request(&client, &sir).await;
    assert_eq!(r.status().and_then(|s| s.code()), Some("request-canceled-and-instance-running"));
    assert_eq!(
        live_named(&client, "cancelled").await,
        vec![instance.clone()],
        "cancelling leaves the instance running"
    );

    let again = client.cancel_spot_instance_requests().spot_instance_request_ids(&sir).send().await.expect("again");
    assert_eq!(again.cancelled_spot_instance_requests()[0].state().map(|s| s.as_str()), Some("cancelled"));

    client.terminate_instances().instance_ids(&instance).send().await.expect("terminate");
    tokio::time::sleep(STEP * 4).await;
    assert!(live_named(&client, "cancelled").await.is_empty(), "no relaunch of a cancelled request");
    assert_eq!(request(&client, &sir).await.state(), Some(&SpotInstanceState::Cancelled));
}

#[tokio::test]
async fn a_one_time_request_closes_with_its_instance() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let (instance, sir) = launch(&client, "one-time", SpotInstanceType::OneTime).await;
    client.terminate_instances().instance_ids(&instance).send().await.expect("terminate");
    tokio::time::sleep(STEP * 4).await;
    let r = request(&client, &sir).await;
    assert_eq!(r.state(), Some(&SpotInstanceState::Closed));
    assert_eq!(r.status().and_then(|s| s.code()), Some("instance-terminated-by-user"));
    assert!(live_named(&client, "one-time").await.is_empty());
    let out = client.cancel_spot_instance_requests().spot_instance_request_ids(&sir).send().await.expect("cancel");
    assert_eq!(out.cancelled_spot_instance_requests()[0].state().map(|s| s.as_str()), Some("closed"));
}

#[tokio::test]
async fn an_interruption_disables_a_persistent_request_and_counts_are_classed() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let admin_client = AdminClient::for_cloud_url(&handle.url()).expect("admin client");
    let (instance, sir) = launch(&client, "stopped", SpotInstanceType::Persistent).await;
    admin_client.reclaim(&instance).await.expect("reclaim");
    let r = request(&client, &sir).await;
    assert_eq!(r.state(), Some(&SpotInstanceState::Disabled));
    assert_eq!(r.status().and_then(|s| s.code()), Some("instance-stopped-no-capacity"));

    admin_client.reset_calls().await.expect("reset calls");
    client.describe_spot_instance_requests().send().await.expect("describe all");
    client.cancel_spot_instance_requests().spot_instance_request_ids(&sir).send().await.expect("cancel");
    let counts = calls(&handle).await;
    assert_eq!(counts.of("DescribeSpotInstanceRequests"), 1, "{counts:?}");
    assert_eq!(counts.of("CancelSpotInstanceRequests"), 1, "{counts:?}");
    assert_eq!(counts.of_class(OpClass::Read), 1, "{counts:?}");
    assert_eq!(counts.of_class(OpClass::Delete), 1, "{counts:?}");
}
