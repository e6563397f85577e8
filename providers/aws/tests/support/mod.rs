//! What the driver tests against `fake-ec2` share: the generic provider
//! fixture (`machine-driver-provider-fixture`) on `fake-ec2` with this
//! provider's examples, and EC2 requests of the tests' own.

#![allow(dead_code, unused_imports, unreachable_pub, clippy::unwrap_used)] // each test binary uses a part of it

use machine_driver_api::{CreateMachine, Machine, MachineClass, SecretData};
use machine_driver_aws::AwsDriver;
pub use machine_driver_provider_fixture::ctx;
use machine_driver_provider_fixture::{Examples, Fixture, patched_class};
use serde_json::{Value, json};

/// This provider's `examples/` directory.
pub const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");

machine_driver_provider_fixture::fake_cloud! {
    /// A running fake EC2 (and STS) with the example class and secret.
    pub struct FakeCloud(AwsDriver);
}

impl FakeCloud {
    /// Starts the fake on a free port.
    pub async fn start() -> Self {
        Self(Fixture::start("AWS", EXAMPLES, fake_ec2::start).await)
    }

    /// Starts the fake with instances booting in `boot_ms` and stopping in `stop_ms`.
    pub async fn start_timed(boot_ms: u64, stop_ms: u64) -> Self {
        let cloud = Self::start().await;
        cloud.admin("timing", json!({"boot_ms": boot_ms, "stop_ms": stop_ms})).await;
        cloud
    }

    /// An EC2 client of the cluster account (the example secret's keys) against the fake.
    pub fn ec2(&self) -> aws_sdk_ec2::Client {
        ec2_client(&self.fake.url(), &self.secret)
    }
}

/// The example class and secret.
pub fn examples() -> Examples {
    Examples::load("AWS", EXAMPLES)
}

/// The example secret.
pub fn secret() -> SecretData {
    examples().secret
}

/// The example class with `patch`'s top-level keys set.
pub fn class(patch: Value) -> MachineClass {
    patched_class(&examples().class, |spec| {
        for (k, v) in patch.as_object().unwrap() {
            spec[k] = v.clone();
        }
    })
}

/// A machine named `name` with uid `uid-<name>`.
pub fn machine(name: &str) -> Machine {
    Machine { name: name.into(), uid: format!("uid-{name}"), ..Default::default() }
}

/// CreateMachine of machine `name` with `class` and the example secret.
pub fn create(name: &str, class: &MachineClass) -> CreateMachine {
    CreateMachine { machine: machine(name), class: class.clone(), secret: secret(), user_data: Default::default() }
}

/// The instance id at the end of a provider id (`aws:///eu-west-1/i-...`).
pub fn instance_id(provider_id: &str) -> &str {
    provider_id.rsplit('/').next().unwrap()
}

/// An EC2 client with `secret`'s keys (`accessKeyID`, `secretAccessKey`) against the fake at `url`.
pub fn ec2_client(url: &str, secret: &SecretData) -> aws_sdk_ec2::Client {
    let key = |k: &str| String::from_utf8(secret.get(k).unwrap().to_vec()).unwrap();
    let config = aws_sdk_ec2::Config::builder()
        .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
        .region(aws_sdk_ec2::config::Region::new("eu-west-1"))
        .credentials_provider(aws_sdk_ec2::config::Credentials::new(
            key("accessKeyID"),
            key("secretAccessKey"),
            None,
            None,
            "test",
        ))
        .endpoint_url(url)
        .build();
    aws_sdk_ec2::Client::from_conf(config)
}
