//! Instance lifecycle, idempotency, pagination, filters and consistency through the real aws-sdk-ec2.

mod support;

use std::time::Duration;

use aws_sdk_ec2::types::{
    BlockDeviceMapping, EbsBlockDevice, Filter, InstanceType, ResourceType, Tag, TagSpecification, VolumeType,
};
use serde_json::json;
use support::{CLUSTER_KEY, SUBNET, admin_client, admin_get, code, ec2, fake, interface, inventory_instance, run_one};

const USER_DATA: &str = "I2Nsb3VkLWNvbmZpZwpydW5jbWQ6IFtlY2hvLCBoaV0K";

fn tags(resource: ResourceType, pairs: &[(&str, &str)]) -> TagSpecification {
    let mut spec = TagSpecification::builder().resource_type(resource);
    for (key, value) in pairs {
        spec = spec.tags(Tag::builder().key(*key).value(*value).build());
    }
    spec.build()
}

fn run(
    client: &aws_sdk_ec2::Client,
    name: &str,
) -> aws_sdk_ec2::operation::run_instances::builders::RunInstancesFluentBuilder {
    run_one(client, interface(SUBNET).groups("sg-0123456789abcdef0"))
        .tag_specifications(tags(ResourceType::Instance, &[("Name", name), ("role", "node")]))
}

#[tokio::test]
async fn run_describe_terminate_lifecycle() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let out = run(&client, "machine-a")
        .user_data(USER_DATA)
        .block_device_mappings(
            BlockDeviceMapping::builder()
                .device_name("/dev/xvda")
                .ebs(
                    EbsBlockDevice::builder()
                        .volume_size(50)
                        .volume_type(VolumeType::Gp3)
                        .delete_on_termination(true)
                        .build(),
                )
                .build(),
        )
        .tag_specifications(tags(ResourceType::Volume, &[("Name", "machine-a")]))
        .send()
        .await
        .expect("run");
    assert!(out.reservation_id().is_some_and(|r| r.starts_with("r-")));
    assert_eq!(out.owner_id(), Some(fake_ec2::CLUSTER_ACCOUNT));
    let instance = &out.instances()[0];
    let id = instance.instance_id().expect("id").to_owned();
    assert_eq!(instance.state().and_then(|s| s.code()), Some(0));
    assert_eq!(instance.instance_type(), Some(&InstanceType::M5Large));
    let ip = instance.private_ip_address().expect("ip");
    assert!(ip.starts_with("10.0."));
    assert_eq!(
        instance.private_dns_name(),
        Some(format!("ip-{}.eu-west-1.compute.internal", ip.replace('.', "-")).as_str())
    );
    let eni = &instance.network_interfaces()[0];
    assert!(eni.network_interface_id().is_some_and(|e| e.starts_with("eni-")));
    assert_eq!(eni.source_dest_check(), Some(true));
    assert_eq!(eni.groups()[0].group_id(), Some("sg-0123456789abcdef0"));
    assert_eq!(instance.tags().iter().find(|t| t.key() == Some("Name")).and_then(|t| t.value()), Some("machine-a"));

    tokio::time::sleep(Duration::from_millis(150)).await;
    let described = client.describe_instances().instance_ids(&id).send().await.expect("describe");
    let described = &described.reservations()[0].instances()[0];
    assert_eq!(described.state().and_then(|s| s.name()).map(|n| n.as_str()), Some("running"));
    assert_eq!(described.state().and_then(|s| s.code()), Some(16));
    assert_eq!(described.block_device_mappings()[0].device_name(), Some("/dev/xvda"));

    let inventory = inventory_instance(&handle, &id).await;
    assert_eq!(inventory["name"], "machine-a");
    assert_eq!(inventory["live"], true);
    assert_eq!(inventory["user_data_base64"], USER_DATA);
    assert_eq!(inventory["block_devices"][0]["size_gib"], 50);
    assert_eq!(inventory["block_devices"][0]["tags"]["Name"], "machine-a");

    let terminated = client.terminate_instances().instance_ids(&id).send().await.expect("terminate");
    let change = &terminated.terminating_instances()[0];
    assert_eq!(change.previous_state().and_then(|s| s.code()), Some(16));
    assert_eq!(change.current_state().and_then(|s| s.code()), Some(32));
    assert_eq!(inventory_instance(&handle, &id).await["live"], false);

    tokio::time::sleep(Duration::from_millis(150)).await;
    let again = client.terminate_instances().instance_ids(&id).send().await.expect("terminate is idempotent");
    assert_eq!(again.terminating_instances()[0].current_state().and_then(|s| s.code()), Some(48));
    let described = client.describe_instances().instance_ids(&id).send().await.expect("terminated stay visible");
    let described = &described.reservations()[0].instances()[0];
    assert_eq!(described.state().and_then(|s| s.code()), Some(48));
    assert!(described.network_interfaces().is_empty());
    assert_eq!(described.state_reason().and_then(|r| r.code()), Some("Client.UserInitiatedShutdown"));
}

#[tokio::test]
async fn client_token_is_idempotent_and_detects_mismatch() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let first = run(&client, "m").client_token("token-1").send().await.expect("run");
    let id = first.instances()[0].instance_id().expect("id").to_owned();
    let second = run(&client, "m").client_token("token-1").send().await.expect("replay");
    assert_eq!(second.instances()[0].instance_id(), Some(id.as_str()));
    assert_eq!(second.reservation_id(), first.reservation_id());

    let mismatch = run(&client, "other-name").client_token("token-1").send().await.expect_err("mismatch");
    assert_eq!(code(&mismatch), "IdempotentParameterMismatch");

    // Concurrent launches with one token create one instance.
    let tasks: Vec<_> = (0..6)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { run(&client, "c").client_token("token-2").send().await })
        })
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    for task in tasks {
        let out = task.await.expect("join").expect("run");
        ids.insert(out.instances()[0].instance_id().expect("id").to_owned());
    }
    assert_eq!(ids.len(), 1);
    let inventory = admin_get(&handle, "/inventory").await;
    assert_eq!(inventory["instances"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn pagination_and_filters() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    for i in 0..7 {
        run(&client, &format!("single-{i}")).send().await.expect("run");
    }
    let multi = client
        .run_instances()
        .image_id(fake_ec2::PUBLIC_IMAGE)
        .instance_type(InstanceType::T3Micro)
        .min_count(5)
        .max_count(5)
        .tag_specifications(tags(ResourceType::Instance, &[("role", "worker")]))
        .send()
        .await
        .expect("run 5");
    assert_eq!(multi.instances().len(), 5);

    let pages: Vec<_> = client
        .describe_instances()
        .max_results(5)
        .into_paginator()
        .send()
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .map(|page| page.expect("page"))
        .collect();
    assert_eq!(pages.len(), 3);
    let ids: std::collections::BTreeSet<_> = pages
        .iter()
        .flat_map(|p| p.reservations())
        .flat_map(|r| r.instances())
        .filter_map(|i| i.instance_id())
        .collect();
    assert_eq!(ids.len(), 12);

    let too_small = client.describe_instances().max_results(4).send().await.expect_err("bounds");
    assert_eq!(code(&too_small), "InvalidParameterValue");
    let combo =
        client.describe_instances().instance_ids("i-0123456789abcdef0").max_results(5).send().await.expect_err("combo");
    assert_eq!(code(&combo), "InvalidParameterCombination");

    let by_tag = client
        .describe_instances()
        .filters(Filter::builder().name("tag:role").values("node").build())
        .filters(Filter::builder().name("instance-state-name").values("pending").values("running").build())
        .send()
        .await
        .expect("filter");
    let count: usize = by_tag.reservations().iter().map(|r| r.instances().len()).sum();
    assert_eq!(count, 7);
    let by_name = client
        .describe_instances()
        .filters(Filter::builder().name("tag:Name").values("single-?").build())
        .send()
        .await
        .expect("wildcard");
    assert_eq!(by_name.reservations().len(), 7);
    let by_key = client
        .describe_instances()
        .filters(Filter::builder().name("tag-key").values("Name").build())
        .send()
        .await
        .expect("tag-key");
    assert_eq!(by_key.reservations().len(), 7);
    let bogus = client
        .describe_instances()
        .filters(Filter::builder().name("bogus").values("x").build())
        .send()
        .await
        .expect_err("bad filter");
    assert_eq!(code(&bogus), "InvalidParameterValue");
}

#[tokio::test]
async fn not_found_and_validation_codes() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let missing = client.describe_instances().instance_ids("i-0123456789abcdef0").send().await.expect_err("missing");
    assert_eq!(code(&missing), "InvalidInstanceID.NotFound");
    let malformed = client.describe_instances().instance_ids("i-xyz").send().await.expect_err("malformed");
    assert_eq!(code(&malformed), "InvalidInstanceID.Malformed");
    let terminate = client.terminate_instances().instance_ids("i-0123456789abcdef0").send().await.expect_err("missing");
    assert_eq!(code(&terminate), "InvalidInstanceID.NotFound");

    let unknown_ami = run(&client, "x").image_id("ami-0fffffffffffffff0").send().await.expect_err("ami");
    assert_eq!(code(&unknown_ami), "InvalidAMIID.NotFound");
    let private_ami = run(&client, "x").image_id(fake_ec2::PRIVATE_IMAGE).send().await.expect_err("not shared");
    assert_eq!(code(&private_ami), "InvalidAMIID.NotFound");
    let bad_type = run(&client, "x").instance_type(InstanceType::from("")).send().await.expect_err("type");
    assert_eq!(code(&bad_type), "InvalidParameterValue");
    let no_count = client.run_instances().image_id(fake_ec2::PUBLIC_IMAGE).send().await.expect_err("counts");
    assert_eq!(code(&no_count), "MissingParameter");
    let bad_user_data = run(&client, "x").user_data("not base64!").send().await.expect_err("user data");
    assert_eq!(code(&bad_user_data), "InvalidParameterValue");
    let reserved = run(&client, "x")
        .tag_specifications(tags(ResourceType::Instance, &[("aws:x", "y")]))
        .send()
        .await
        .expect_err("aws: tag");
    assert_eq!(code(&reserved), "InvalidParameterValue");

    // Instances of one account are invisible to another.
    let out = run(&client, "mine").send().await.expect("run");
    let id = out.instances()[0].instance_id().expect("id");
    let other = ec2(&handle, support::OWNER_KEY);
    let foreign = other.describe_instances().instance_ids(id).send().await.expect_err("foreign");
    assert_eq!(code(&foreign), "InvalidInstanceID.NotFound");
}

#[tokio::test]
async fn new_instances_are_invisible_for_the_consistency_window() {
    let handle = fake().await;
    admin_client(&handle).set_invisible_ms(400).await.expect("consistency");
    let client = ec2(&handle, CLUSTER_KEY);
    let out = run(&client, "late").send().await.expect("run");
    let id = out.instances()[0].instance_id().expect("id").to_owned();
    let early = client.describe_instances().instance_ids(&id).send().await.expect_err("invisible");
    assert_eq!(code(&early), "InvalidInstanceID.NotFound");
    let listed = client.describe_instances().send().await.expect("list");
    assert!(listed.reservations().is_empty());
    let enis = client
        .describe_network_interfaces()
        .filters(Filter::builder().name("attachment.instance-id").values(&id).build())
        .send()
        .await
        .expect("enis");
    assert!(enis.network_interfaces().is_empty());
    tokio::time::sleep(Duration::from_millis(450)).await;
    let later = client.describe_instances().instance_ids(&id).send().await.expect("visible");
    assert_eq!(later.reservations().len(), 1);
}

#[tokio::test]
async fn market_types_of_the_api_reference_launch_and_others_are_refused() {
    use aws_sdk_ec2::types::{InstanceMarketOptionsRequest, MarketType, SpotMarketOptions};
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let market = |t: &str| InstanceMarketOptionsRequest::builder().market_type(MarketType::from(t)).build();
    for (i, t) in ["spot", "capacity-block", "interruptible-capacity-reservation"].into_iter().enumerate() {
        let out = run(&client, &format!("market-{i}")).instance_market_options(market(t)).send().await.expect(t);
        let id = out.instances()[0].instance_id().expect("id");
        assert_eq!(inventory_instance(&handle, id).await["instance_lifecycle"], json!(t), "{t}");
    }
    let on_demand = run(&client, "plain").send().await.expect("on-demand");
    let id = on_demand.instances()[0].instance_id().expect("id");
    assert_eq!(inventory_instance(&handle, id).await["instance_lifecycle"], json!(null));

    for bad in ["on-demand", "Spot", "reserved"] {
        let refused = run(&client, "x").instance_market_options(market(bad)).send().await.expect_err(bad);
        assert_eq!(code(&refused), "InvalidParameterValue", "{bad}");
    }
    let spot = |o: SpotMarketOptions| {
        InstanceMarketOptionsRequest::builder().market_type(MarketType::Spot).spot_options(o).build()
    };
    let behaviour = SpotMarketOptions::builder()
        .instance_interruption_behavior(aws_sdk_ec2::types::InstanceInterruptionBehavior::from("vanish"))
        .build();
    let refused = run(&client, "x").instance_market_options(spot(behaviour)).send().await.expect_err("behaviour");
    assert_eq!(code(&refused), "InvalidParameterValue");
    let cheap = SpotMarketOptions::builder().max_price("0.0001").build();
    let refused = run(&client, "x").instance_market_options(spot(cheap)).send().await.expect_err("price");
    assert_eq!(code(&refused), "InvalidParameterValue");
}

#[tokio::test]
async fn metadata_options_are_launched_modified_and_described_as_ec2_does() {
    use aws_sdk_ec2::types::{HttpTokensState, InstanceMetadataEndpointState, InstanceMetadataOptionsRequest};
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    let out = run(&client, "imds")
        .metadata_options(
            InstanceMetadataOptionsRequest::builder()
                .http_tokens(HttpTokensState::Required)
                .http_put_response_hop_limit(2)
                .build(),
        )
        .send()
        .await
        .expect("run");
    let id = out.instances()[0].instance_id().expect("id").to_owned();
    let launched = out.instances()[0].metadata_options().expect("metadata options");
    assert_eq!(launched.http_tokens(), Some(&HttpTokensState::Required));
    assert_eq!(launched.http_put_response_hop_limit(), Some(2));
    assert_eq!(launched.http_endpoint(), Some(&InstanceMetadataEndpointState::Enabled), "EC2's default");

    // Only the hop limit: the endpoint is kept, the omitted HttpTokens is its default (optional).
    let modified = client
        .modify_instance_metadata_options()
        .instance_id(&id)
        .http_put_response_hop_limit(3)
        .send()
        .await
        .expect("modify");
    assert_eq!(modified.instance_id(), Some(id.as_str()));
    let answered = modified.instance_metadata_options().expect("options");
    assert_eq!(answered.state().map(|s| s.as_str()), Some("pending"));
    assert_eq!(answered.http_put_response_hop_limit(), Some(3));
    assert_eq!(answered.http_tokens(), Some(&HttpTokensState::Optional));
    let described = client.describe_instances().instance_ids(&id).send().await.expect("describe");
    let m = described.reservations()[0].instances()[0].metadata_options().expect("options").clone();
    assert_eq!((m.http_put_response_hop_limit(), m.state().map(|s| s.as_str())), (Some(3), Some("pending")));
    assert_eq!(m.http_endpoint(), Some(&InstanceMetadataEndpointState::Enabled));
    tokio::time::sleep(Duration::from_millis(150)).await;
    let inventory = inventory_instance(&handle, &id).await;
    assert_eq!(inventory["metadata_options"]["state"], "applied");
    assert_eq!(inventory["metadata_options"]["http_put_response_hop_limit"], 3);

    client
        .modify_instance_metadata_options()
        .instance_id(&id)
        .http_tokens(HttpTokensState::Required)
        .http_endpoint(InstanceMetadataEndpointState::Disabled)
        .send()
        .await
        .expect("modify both");
    let inventory = inventory_instance(&handle, &id).await;
    assert_eq!(
        (&inventory["metadata_options"]["http_tokens"], &inventory["metadata_options"]["http_endpoint"]),
        (&json!("required"), &json!("disabled"))
    );
    assert_eq!(inventory["metadata_options"]["http_put_response_hop_limit"], 3, "kept");

    let bad = client
        .modify_instance_metadata_options()
        .instance_id(&id)
        .http_put_response_hop_limit(65)
        .send()
        .await
        .expect_err("hop limit");
    assert_eq!(code(&bad), "InvalidParameterValue");
    let missing = client
        .modify_instance_metadata_options()
        .instance_id("i-0123456789abcdef0")
        .http_tokens(HttpTokensState::Required)
        .send()
        .await
        .expect_err("missing");
    assert_eq!(code(&missing), "InvalidInstanceID.NotFound");
    client.terminate_instances().instance_ids(&id).send().await.expect("terminate");
    let gone = client
        .modify_instance_metadata_options()
        .instance_id(&id)
        .http_tokens(HttpTokensState::Required)
        .send()
        .await
        .expect_err("terminated");
    assert_eq!(code(&gone), "IncorrectInstanceState");
}
