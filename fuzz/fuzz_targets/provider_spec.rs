//! Any bytes as a machine class providerSpec: the kit's lenient parser (with a
//! spec shape of every kind of field) and the OpenStack and Alicloud spec
//! checks (what their CreateMachine checks before any cloud call) never
//! panic, and every refusal is INVALID_ARGUMENT naming a `providerSpec...`
//! field. The AWS, GCP and Azure specs are covered by the spec mutation test
//! in each provider (fuzz/README.md).
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use machine_driver_api::{DriverError, ErrorKind, parse_provider_spec};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct Spec {
    #[serde(default)]
    name: String,
    #[serde(default)]
    count: Option<i64>,
    #[serde(default)]
    ratio: Option<f64>,
    #[serde(default)]
    enabled: bool,
    #[serde(default)]
    tags: BTreeMap<String, String>,
    #[serde(default)]
    disks: Vec<Disk>,
    #[serde(default)]
    nested: Option<Box<Spec>>,
    #[serde(default)]
    mode: Option<Mode>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Disk {
    #[serde(default)]
    size: u32,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
enum Mode {
    Fast,
    Safe { level: u8 },
}

/// A refusal of `who` is INVALID_ARGUMENT and names a `providerSpec...` field.
fn refused_naming_the_field(who: &str, result: Result<(), DriverError>) {
    if let Err(e) = result {
        let field = e.field().unwrap_or_default();
        assert!(
            e.kind() == ErrorKind::InvalidArgument,
            "{who}: refusal is {:?}, not INVALID_ARGUMENT: {}",
            e.kind(),
            e.message()
        );
        assert!(field.starts_with("providerSpec"), "{who}: refusal names {field:?}: {}", e.message());
    }
}

fuzz_target!(|data: &[u8]| {
    refused_naming_the_field("kit", parse_provider_spec::<Spec>(data).map(|_| ()));
    refused_naming_the_field("openstack", machine_driver_openstack::check_provider_spec(data));
    refused_naming_the_field("alicloud", machine_driver_alicloud::check_provider_spec(data));
});
