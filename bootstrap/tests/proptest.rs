//! Arbitrary user data and arbitrary configuration never panic.

use machine_bootstrap::{Credentials, Endpoint, RegistryConfig, SizeLimit, apply};
use proptest::prelude::*;

fn user_data() -> impl Strategy<Value = Vec<u8>> {
    let prefix = prop_oneof![
        Just(Vec::new()),
        Just(b"#cloud-config\n".to_vec()),
        Just(b"#cloud-config\nwrite_files:\n".to_vec()),
        Just(b"#!/bin/sh\n".to_vec()),
        Just(b"Content-Type: multipart/mixed; boundary=b\n\n--b\n".to_vec()),
        Just(br#"{"ignition":{"version":"3.4.0"}"#.to_vec()),
        Just(vec![0x1f, 0x8b]),
    ];
    let body = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..256),
        "[ -~\n]{0,200}".prop_map(String::into_bytes),
        "(- |  |write_files:|\n|path: |\\[|\\]|\\{|\\}|: |--b--\n|#|\"|'|[a-z]){0,60}".prop_map(String::into_bytes),
    ];
    (prefix, body).prop_map(|(mut p, b)| {
        p.extend(b);
        p
    })
}

fn endpoint() -> impl Strategy<Value = Endpoint> {
    let url = prop_oneof![
        Just("https://mirror.example.com/proj".to_owned()),
        Just("http://r.example:5000".to_owned()),
        "[a-z:/.?#\\[\\]@%\"\\\\ ]{0,30}",
    ];
    let ca = prop_oneof![
        Just(None),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Some),
        Just(Some(b"-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n".to_vec())),
    ];
    let credentials = proptest::option::of(
        ("[a-z:]{0,8}", "\\PC{0,8}").prop_map(|(username, password)| Credentials { username, password }),
    );
    (url, ca, credentials).prop_map(|(url, ca_pem, credentials)| Endpoint { url, ca_pem, credentials })
}

fn config() -> impl Strategy<Value = RegistryConfig> {
    (proptest::option::of(endpoint()), proptest::collection::vec(endpoint(), 0..3))
        .prop_map(|(mirror, registries)| RegistryConfig { mirror, registries })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn apply_never_panics(data in user_data(), config in config(), limit in 0usize..20_000) {
        let result = apply(&data, &config, SizeLimit(limit));
        if config.is_empty() {
            prop_assert_eq!(result.ok(), Some(data));
        } else if let Ok(out) = result {
            prop_assert!(out.len() <= limit);
        }
    }
}
