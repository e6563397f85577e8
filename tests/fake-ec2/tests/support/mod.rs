//! Shared helpers of the fake-ec2 integration tests: the fake, SDK clients and the admin API.

#![allow(dead_code, unreachable_pub)]

use aws_sdk_ec2::config::retry::RetryConfig;
use aws_sdk_ec2::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::operation::run_instances::builders::RunInstancesFluentBuilder;
use aws_sdk_ec2::types::builders::InstanceNetworkInterfaceSpecificationBuilder;
use aws_sdk_ec2::types::{InstanceNetworkInterfaceSpecification, InstanceType};
use fake_cloud_support::{AdminClient, CallCounts, Timing};
use fake_ec2::FakeHandle;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Access key id of the cluster (consumer) account 222222222222.
pub const CLUSTER_KEY: &str = "AKIDCLUSTER";
/// Access key id of the image owner account 111111111111.
pub const OWNER_KEY: &str = "AKIDOWNER";

/// A fake on a free port with fast state transitions.
pub async fn fake() -> FakeHandle {
    let handle = fake_ec2::start("127.0.0.1:0".parse().expect("addr")).await.expect("start fake");
    admin_client(&handle).set_timing(Timing { boot_ms: 100, stop_ms: 100, operation_ms: None }).await.expect("timing");
    handle
}

/// An EC2 client for `key` against the fake, without retries (errors surface directly).
pub fn ec2(handle: &FakeHandle, key: &str) -> aws_sdk_ec2::Client {
    let config = aws_sdk_ec2::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("eu-west-1"))
        .credentials_provider(Credentials::new(key, "test-secret", None, None, "test"))
        .endpoint_url(handle.url())
        .retry_config(RetryConfig::disabled())
        .build();
    aws_sdk_ec2::Client::from_conf(config)
}

/// An STS client for `key` against the fake.
pub fn sts(handle: &FakeHandle, key: &str) -> aws_sdk_sts::Client {
    let config = aws_sdk_sts::Config::builder()
        .behavior_version(aws_sdk_sts::config::BehaviorVersion::latest())
        .region(aws_sdk_sts::config::Region::new("eu-west-1"))
        .credentials_provider(aws_sdk_sts::config::Credentials::new(key, "test-secret", None, None, "test"))
        .endpoint_url(handle.url())
        .retry_config(aws_sdk_sts::config::retry::RetryConfig::disabled())
        .build();
    aws_sdk_sts::Client::from_conf(config)
}

/// The subnet of the fake's default VPC most tests launch into.
pub const SUBNET: &str = "subnet-0123456789abcdef0";

/// A primary interface (device index 0) in `subnet`; tests add groups and the like.
pub fn interface(subnet: &str) -> InstanceNetworkInterfaceSpecificationBuilder {
    InstanceNetworkInterfaceSpecification::builder().device_index(0).subnet_id(subnet)
}

/// A RunInstances of one m5.large of the public image with `interface` as its one interface;
/// tests add tags, disks and market options.
pub fn run_one(
    client: &aws_sdk_ec2::Client,
    interface: InstanceNetworkInterfaceSpecificationBuilder,
) -> RunInstancesFluentBuilder {
    client
        .run_instances()
        .image_id(fake_ec2::PUBLIC_IMAGE)
        .instance_type(InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .network_interfaces(interface.build())
}

/// The error code of an SDK error (e.g. `InvalidInstanceID.NotFound`).
pub fn code<E: ProvideErrorMetadata>(error: &E) -> String {
    error.code().unwrap_or("<none>").to_owned()
}

/// The fake's admin API.
pub fn admin_client(handle: &FakeHandle) -> AdminClient {
    AdminClient::for_cloud_url(&handle.url()).expect("admin client")
}

/// `GET /_admin/calls`.
pub async fn calls(handle: &FakeHandle) -> CallCounts {
    admin_client(handle).calls().await.unwrap_or_else(|e| panic!("{e}"))
}

/// `GET /_admin/<path>` (e.g. `/inventory`, `/sts`) through [`AdminClient::get_json`].
pub async fn admin_get(handle: &FakeHandle, path: &str) -> Value {
    admin_client(handle).get_json(path).await.unwrap_or_else(|e| panic!("{e}"))
}

/// A raw HTTP/1.1 request; returns status and body.
pub async fn raw(
    handle: &FakeHandle,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
    authorization: Option<&str>,
) -> (u16, String) {
    let mut stream = TcpStream::connect(handle.local_addr()).await.expect("connect");
    let auth = authorization.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: fake\r\nConnection: close\r\nContent-Type: {content_type}\r\n{auth}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read");
    let status = answer.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status line");
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// The inventory entry of one instance.
pub async fn inventory_instance(handle: &FakeHandle, id: &str) -> Value {
    let inventory = admin_get(handle, "/inventory").await;
    inventory["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .find(|i| i["id"] == id)
        .cloned()
        .expect("instance in inventory")
}
