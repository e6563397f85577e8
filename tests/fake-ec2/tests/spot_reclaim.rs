//! `POST /_admin/instances/{id}/reclaim` on fake-ec2: a Spot interruption as
//! EC2 makes it, read back through the real aws-sdk-ec2, and the outcomes for
//! an on-demand instance (409) and for no live instance (404).

mod support;

use aws_sdk_ec2::types::{
    InstanceInterruptionBehavior, InstanceLifecycleType, InstanceMarketOptionsRequest, InstanceStateName, MarketType,
    SpotInstanceType, SpotMarketOptions,
};
use fake_cloud_support::{AdminClient, ReclaimAnswer};
use serde_json::json;
use support::{CLUSTER_KEY, SUBNET, calls, code, ec2, fake, interface, inventory_instance, run_one};

fn run(client: &aws_sdk_ec2::Client) -> aws_sdk_ec2::operation::run_instances::builders::RunInstancesFluentBuilder {
    run_one(client, interface(SUBNET).delete_on_termination(true))
}

fn spot(request: SpotInstanceType, behaviour: Option<InstanceInterruptionBehavior>) -> InstanceMarketOptionsRequest {
    let options =
        SpotMarketOptions::builder().spot_instance_type(request).set_instance_interruption_behavior(behaviour);
    InstanceMarketOptionsRequest::builder().market_type(MarketType::Spot).spot_options(options.build()).build()
}

async fn describe(client: &aws_sdk_ec2::Client, id: &str) -> aws_sdk_ec2::types::Instance {
    let out = client.describe_instances().instance_ids(id).send().await.expect("describe");
    out.reservations()[0].instances()[0].clone()
}

#[tokio::test]
async fn a_reclaimed_spot_instance_reads_back_terminated_with_the_spot_state_reason() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let admin_client = AdminClient::for_cloud_url(&handle.url()).expect("admin client");
    let out = run(&client)
        .client_token("spot-token-1")
        .instance_market_options(spot(SpotInstanceType::OneTime, None))
        .send()
        .await
        .expect("spot launch");
    let id = out.instances()[0].instance_id().expect("id").to_owned();
    let launched = describe(&client, &id).await;
    assert_eq!(launched.instance_lifecycle(), Some(&InstanceLifecycleType::Spot));
    let request_id = launched.spot_instance_request_id().expect("a Spot instance names its request").to_owned();
    assert!(request_id.starts_with("sir-"), "{request_id}");
    assert_eq!(launched.state_reason(), None, "a running instance has no state reason");
    let eni = launched.network_interfaces()[0].network_interface_id().expect("eni").to_owned();

    admin_client.reset_calls().await.expect("reset calls");
    let shown = admin_client.reclaim(&id).await.expect("reclaimed");
    assert!(shown.contains("terminated (48)") && shown.contains("Server.SpotInstanceTermination"), "{shown}");
    assert_eq!(calls(&handle).await.total, 0, "a reclaim counts no call");

    let reclaimed = describe(&client, &id).await;
    let state = reclaimed.state().expect("state");
    assert_eq!((state.name(), state.code()), (Some(&InstanceStateName::Terminated), Some(48)));
    let reason = reclaimed.state_reason().expect("stateReason");
    assert_eq!(reason.code(), Some("Server.SpotInstanceTermination"));
    assert_eq!(reason.message(), Some("Server.SpotInstanceTermination: Spot instance termination"));
    let transition = reclaimed.state_transition_reason().expect("reason");
    assert!(transition.starts_with("Service initiated (") && transition.ends_with(" GMT)"), "{transition}");
    assert_eq!(reclaimed.instance_lifecycle(), Some(&InstanceLifecycleType::Spot), "still a Spot instance");
    assert_eq!(reclaimed.spot_instance_request_id(), Some(request_id.as_str()));
    assert!(reclaimed.network_interfaces().is_empty() && reclaimed.block_device_mappings().is_empty());
    let enis = client.describe_network_interfaces().network_interface_ids(&eni).send().await;
    assert_eq!(code(&enis.expect_err("the interface went with the instance")), "InvalidNetworkInterfaceID.NotFound");

    // The ClientToken still answers the terminated instance, as EC2 does.
    let again = run(&client)
        .client_token("spot-token-1")
        .instance_market_options(spot(SpotInstanceType::OneTime, None))
        .send()
        .await
        .expect("same token");
    assert_eq!(again.instances()[0].instance_id(), Some(id.as_str()));
    assert_eq!(again.instances()[0].state().and_then(|s| s.name()), Some(&InstanceStateName::Terminated));

    let entry = inventory_instance(&handle, &id).await;
    assert_eq!((entry["live"].clone(), entry["state"].clone()), (json!(false), json!("terminated")));
    assert_eq!(entry["state_reason_code"], json!("Server.SpotInstanceTermination"));

    // Already reclaimed: no live instance any more.
    let err = admin_client.reclaim(&id).await.expect_err("twice");
    assert!(err.contains("HTTP 404"), "{err}");
}

#[tokio::test]
async fn a_spot_instance_that_stops_on_interruption_reads_back_stopped_and_keeps_its_parts() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let admin_client = AdminClient::for_cloud_url(&handle.url()).expect("admin client");
    for behaviour in [InstanceInterruptionBehavior::Stop, InstanceInterruptionBehavior::Hibernate] {
        let out = run(&client)
            .instance_market_options(spot(SpotInstanceType::Persistent, Some(behaviour.clone())))
            .send()
            .await
            .expect("persistent spot launch");
        let id = out.instances()[0].instance_id().expect("id").to_owned();
        let before = describe(&client, &id).await;
        admin_client.reclaim(&id).await.expect("reclaimed");
        let after = describe(&client, &id).await;
        let state = after.state().expect("state");
        assert_eq!((state.name(), state.code()), (Some(&InstanceStateName::Stopped), Some(80)), "{behaviour:?}");
        assert_eq!(after.state_reason().and_then(|r| r.code()), Some("Server.SpotInstanceShutdown"));
        assert!(after.state_transition_reason().is_some_and(|r| r.starts_with("Service initiated (")));
        assert_eq!(after.private_dns_name(), before.private_dns_name(), "a stopped instance keeps its address");
        assert_eq!(after.network_interfaces().len(), 1);
        assert_eq!(inventory_instance(&handle, &id).await["live"], json!(true), "it still exists");
        // Listed among stopped instances.
        let stopped = client
            .describe_instances()
            .filters(aws_sdk_ec2::types::Filter::builder().name("instance-state-name").values("stopped").build())
            .send()
            .await
            .expect("filter");
        assert!(stopped.reservations().iter().flat_map(|r| r.instances()).any(|i| i.instance_id() == Some(&id)));
        assert!(admin_client.reclaim(&id).await.expect_err("stopped").contains("HTTP 404"));

        // Its user terminates it: a user's termination, interfaces gone.
        client.terminate_instances().instance_ids(&id).send().await.expect("terminate");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        let gone = describe(&client, &id).await;
        assert_eq!(gone.state().and_then(|s| s.name()), Some(&InstanceStateName::Terminated));
        assert_eq!(gone.state_reason().and_then(|r| r.code()), Some("Client.UserInitiatedShutdown"));
        assert!(gone.network_interfaces().is_empty());
    }
}

#[tokio::test]
async fn only_spot_instances_are_reclaimed_and_only_live_ones() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let admin_client = AdminClient::for_cloud_url(&handle.url()).expect("admin client");
    let on_demand = run(&client).send().await.expect("on-demand");
    let id = on_demand.instances()[0].instance_id().expect("id").to_owned();
    let block = InstanceMarketOptionsRequest::builder().market_type(MarketType::CapacityBlock).build();
    let capacity_block = run(&client).instance_market_options(block).send().await.expect("capacity block");
    let block_id = capacity_block.instances()[0].instance_id().expect("id").to_owned();
    for not_spot in [&id, &block_id] {
        let err = admin_client.reclaim(not_spot).await.expect_err("not a Spot VM");
        assert!(err.contains("HTTP 409") && err.contains("not a Spot VM"), "{err}");
        let after = describe(&client, not_spot).await;
        assert_ne!(after.state().and_then(|s| s.name()), Some(&InstanceStateName::Terminated), "left alone");
        assert_eq!(after.state_reason(), None);
    }
    assert_eq!(describe(&client, &id).await.instance_lifecycle(), None, "on-demand shows no lifecycle");

    match admin_client.reclaim_answer("i-0000000000000dead").await.expect("an answer") {
        ReclaimAnswer::NotFound(why) => assert!(why.contains("no live instance"), "{why}"),
        other => panic!("a missing instance is 404: {other}"),
    }
}

#[tokio::test]
async fn spot_request_type_and_interruption_behaviour_must_agree() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    for (request, behaviour) in [
        (SpotInstanceType::OneTime, Some(InstanceInterruptionBehavior::Stop)),
        (SpotInstanceType::OneTime, Some(InstanceInterruptionBehavior::Hibernate)),
        (SpotInstanceType::Persistent, Some(InstanceInterruptionBehavior::Terminate)),
        (SpotInstanceType::Persistent, None),
    ] {
        let refused = run(&client)
            .instance_market_options(spot(request.clone(), behaviour.clone()))
            .send()
            .await
            .expect_err("refused");
        assert_eq!(code(&refused), "InvalidParameterCombination", "{request:?} {behaviour:?}");
    }
    run(&client)
        .instance_market_options(spot(SpotInstanceType::OneTime, Some(InstanceInterruptionBehavior::Terminate)))
        .send()
        .await
        .expect("one-time terminate");
    let lifecycle = aws_sdk_ec2::types::Filter::builder().name("instance-lifecycle").values("spot").build();
    let spot_only = client.describe_instances().filters(lifecycle).send().await.expect("filter");
    assert_eq!(spot_only.reservations().iter().flat_map(|r| r.instances()).count(), 1);
}
