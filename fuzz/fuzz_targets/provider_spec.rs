//! Any bytes as a machine class providerSpec: the kit's lenient parser (with a
//! spec shape of every kind of field) and the OpenStack and Alicloud specs
//! never panic, and every refusal names a `providerSpec...` field.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use machine_driver_api::{DriverError, parse_provider_spec};
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

fn names_the_field(result: Result<(), DriverError>) {
    if let Err(e) = result {
        let field = e.field().unwrap_or_default();
        assert!(field.starts_with("providerSpec"), "refusal names {field:?}: {}", e.message());
    }
}

fuzz_target!(|data: &[u8]| {
    names_the_field(parse_provider_spec::<Spec>(data).map(|_| ()));
    names_the_field(machine_driver_openstack::check_provider_spec(data));
    names_the_field(machine_driver_alicloud::check_provider_spec(data));
});
