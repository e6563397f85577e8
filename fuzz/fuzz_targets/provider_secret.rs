//! Any secret (keys and values split from the input at NUL bytes, every value
//! marked): the OpenStack and Alicloud credential checks never panic, a
//! refusal names a `secret.` key, and no value ever appears in an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use machine_driver_api::{DriverError, SecretData};

/// Prefix of every value: an error message containing it leaked a value.
const CANARY: &str = "C4NARY";

fn check(result: Result<(), DriverError>) {
    if let Err(e) = result {
        assert!(e.field().unwrap_or_default().starts_with("secret."), "refusal names {:?}", e.field());
        assert!(!e.message().contains(CANARY), "a secret value reached an error: {}", e.message());
    }
}

fuzz_target!(|data: &[u8]| {
    let mut secret = SecretData::new(Default::default());
    let mut parts = data.split(|b| *b == 0);
    while let (Some(key), Some(value)) = (parts.next(), parts.next()) {
        let Ok(key) = std::str::from_utf8(key) else { continue };
        let mut marked = CANARY.as_bytes().to_vec();
        marked.extend_from_slice(value);
        secret.insert(key, marked);
    }
    check(machine_driver_openstack::check_secret(&secret));
    check(machine_driver_alicloud::check_secret(&secret));
});
