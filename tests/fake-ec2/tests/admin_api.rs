//! The admin API against the fake: faults, rate limit and counters as the SDK sees them, and the raw wire.

mod support;

use aws_sdk_ec2::types::InstanceType;
use fake_cloud_support::Fault;
use support::{CLUSTER_KEY, admin_client, admin_get, calls, code, ec2, fake, raw};

fn run(client: &aws_sdk_ec2::Client) -> aws_sdk_ec2::operation::run_instances::builders::RunInstancesFluentBuilder {
    client
        .run_instances()
        .image_id(fake_ec2::PUBLIC_IMAGE)
        .instance_type(InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
}

#[tokio::test]
async fn injected_faults_reach_the_sdk_with_real_codes() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    admin_client(&handle)
        .add_fault(Fault { operation: "create", kind: "throttle", times: Some(1), phase: "before" })
        .await
        .expect("fault");
    let throttled = run(&client).send().await.expect_err("throttle");
    assert_eq!(code(&throttled), "RequestLimitExceeded");
    assert_eq!(throttled.raw_response().map(|r| r.status().as_u16()), Some(503));
    run(&client).send().await.expect("fault used up");

    admin_client(&handle)
        .add_fault(Fault { operation: "DescribeInstances", kind: "capacity", times: None, phase: "before" })
        .await
        .expect("fault");
    let capacity = client.describe_instances().send().await.expect_err("capacity");
    assert_eq!(code(&capacity), "InsufficientInstanceCapacity");
    admin_client(&handle).clear_faults().await.expect("clear faults");
    client.describe_instances().send().await.expect("faults cleared");

    admin_client(&handle)
        .add_fault(Fault { operation: "*", kind: "permission", times: Some(1), phase: "before" })
        .await
        .expect("fault");
    assert_eq!(code(&client.describe_images().send().await.expect_err("permission")), "UnauthorizedOperation");

    let counts = calls(&handle).await;
    assert_eq!(counts.of("RunInstances"), 2);
    assert_eq!(counts.of("DescribeInstances"), 2);
    assert_eq!(counts.total, 5);
    admin_client(&handle).reset_calls().await.expect("reset calls");
    assert_eq!(calls(&handle).await.total, 0);
}

#[tokio::test]
async fn after_fault_loses_the_response_but_keeps_the_effect() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    admin_client(&handle)
        .add_fault(Fault { operation: "RunInstances", kind: "internal", times: Some(1), phase: "after" })
        .await
        .expect("fault");
    let lost = run(&client).client_token("lost-1").send().await.expect_err("lost response");
    assert_eq!(code(&lost), "InternalError");
    let inventory = admin_get(&handle, "/inventory").await;
    assert_eq!(inventory["instances"].as_array().map(Vec::len), Some(1), "the instance exists");
    let retried = run(&client).client_token("lost-1").send().await.expect("retry with same token");
    assert_eq!(
        retried.instances()[0].instance_id().map(str::to_owned),
        inventory["instances"][0]["id"].as_str().map(str::to_owned)
    );
    assert_eq!(admin_get(&handle, "/inventory").await["instances"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn rate_limit_throttles_and_counts() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    admin_client(&handle).set_rate_limit(1, 2).await.expect("rate limit");
    client.describe_instances().send().await.expect("1");
    client.describe_instances().send().await.expect("2");
    let third = client.describe_instances().send().await.expect_err("3 is throttled");
    assert_eq!(code(&third), "RequestLimitExceeded");
    assert_eq!(calls(&handle).await.throttled, 1);
    admin_client(&handle).reset().await.expect("reset");
    client.describe_instances().send().await.expect("reset lifts the limit");
}

#[tokio::test]
async fn wire_format_matches_ec2() {
    let handle = fake().await;
    let auth =
        "AWS4-HMAC-SHA256 Credential=AKIDCLUSTER/20240101/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=x";
    let form = "application/x-www-form-urlencoded";
    let (status, body) = raw(
        &handle,
        "POST",
        "/",
        form,
        "Action=DescribeInstances&Version=2016-11-15&InstanceId.1=i-0123456789abcdef0",
        Some(auth),
    )
    .await;
    assert_eq!(status, 400);
    assert!(body.contains("<Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code><Message>"), "{body}");
    assert!(body.contains("<RequestID>"), "{body}");

    let (status, body) = raw(
        &handle,
        "POST",
        "/",
        form,
        "Action=RunInstances&Version=2016-11-15&ImageId=ami-0123456789abcdef0&MinCount=1&MaxCount=1",
        Some(auth),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("<RunInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>"),
        "{body}"
    );
    assert!(body.contains("<instanceState><code>0</code><name>pending</name></instanceState>"), "{body}");
    assert!(body.contains(".ec2.internal</privateDnsName>"), "{body}");

    let (status, body) =
        raw(&handle, "POST", "/", form, "Action=GetCallerIdentity&Version=2011-06-15", Some(auth)).await;
    assert_eq!(status, 200);
    assert!(body.contains("<GetCallerIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"), "{body}");

    let (status, body) = raw(&handle, "POST", "/", form, "Action=DescribeInstances&Version=2016-11-15", None).await;
    assert_eq!(status, 401);
    assert!(body.contains("<Code>AuthFailure</Code>"), "{body}");

    let (status, body) = raw(&handle, "POST", "/", form, "Action=Bogus&Version=2016-11-15", Some(auth)).await;
    assert_eq!(status, 400);
    assert!(body.contains("<Code>InvalidAction</Code>"), "{body}");
}

#[tokio::test]
async fn a_placement_fault_is_ec2s_unsupported_naming_the_type_and_zone() {
    let handle = fake().await;
    let client = ec2(&handle, CLUSTER_KEY);
    admin_client(&handle)
        .add_fault(Fault { operation: "create", kind: "placement", times: Some(1), phase: "before" })
        .await
        .expect("fault");
    let refused = run(&client)
        .placement(aws_sdk_ec2::types::Placement::builder().availability_zone("eu-west-1b").build())
        .send()
        .await
        .expect_err("placement");
    assert_eq!(code(&refused), "Unsupported");
    assert_eq!(refused.raw_response().map(|r| r.status().as_u16()), Some(400));
    let message = aws_sdk_ec2::error::ProvideErrorMetadata::message(&refused).unwrap_or_default().to_owned();
    assert_eq!(
        message,
        "Your requested instance type (m5.large) is not supported in your requested Availability Zone (eu-west-1b). \
         Please retry your request by not specifying an Availability Zone or choosing eu-west-1a, eu-west-1c."
    );
    let inventory = admin_get(&handle, "/inventory").await;
    assert_eq!(inventory["instances"].as_array().map(Vec::len), Some(0), "a refused launch creates nothing");

    // Phase after: the instance exists, the answer is the same refusal (the zone defaults to the region's first).
    admin_client(&handle)
        .add_fault(Fault { operation: "RunInstances", kind: "placement", times: Some(1), phase: "after" })
        .await
        .expect("fault");
    let lost = run(&client).send().await.expect_err("placement after");
    assert_eq!(code(&lost), "Unsupported");
    assert!(
        aws_sdk_ec2::error::ProvideErrorMetadata::message(&lost)
            .is_some_and(|m| m.contains("Availability Zone (eu-west-1a)")),
        "{lost:?}"
    );
    // On another action there is no request to name: EC2's generic wording.
    admin_client(&handle)
        .add_fault(Fault { operation: "DescribeInstances", kind: "placement", times: Some(1), phase: "before" })
        .await
        .expect("fault");
    let other = client.describe_instances().send().await.expect_err("placement on a read");
    assert_eq!(code(&other), "Unsupported");
}
