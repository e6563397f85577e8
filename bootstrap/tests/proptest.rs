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

// Round trips: whatever goes in comes back out of the rendered user data,
// read with real parsers (tests/common): the original content unchanged, and
// the mirror in containerd's hosts.toml exactly as configured.

#[path = "common/mod.rs"]
mod common;

/// A valid mirror URL (scheme, host, optional port and path) and the host key
/// containerd must get for it: the registry API root `/v2` before the path.
fn mirror_url() -> impl Strategy<Value = (String, String)> {
    ("(https|http)", "[a-z][a-z0-9-]{0,12}", proptest::option::of(1u16..65535), "(/[a-z0-9_]{1,8}){0,2}").prop_map(
        |(scheme, host, port, path)| {
            let port = port.map(|p| format!(":{p}")).unwrap_or_default();
            (
                format!("{scheme}://{host}.example.com{port}{path}"),
                format!("{scheme}://{host}.example.com{port}/v2{path}"),
            )
        },
    )
}

/// The `server` and first host key of the default hosts.toml in `output`.
fn default_hosts(output: &[u8]) -> (String, Vec<String>) {
    let files = common::rendered_files(output);
    let hosts = files
        .iter()
        .find(|f| f.path == "/etc/containerd/certs.d/_default/hosts.toml")
        .expect("the default hosts.toml is rendered");
    let doc: toml::Table = std::str::from_utf8(&hosts.content).expect("utf-8").parse().expect("hosts.toml parses");
    let server = doc.get("server").and_then(|s| s.as_str()).unwrap_or_default().to_owned();
    let host_keys = doc.get("host").and_then(|h| h.as_table()).map(|t| t.keys().cloned().collect()).unwrap_or_default();
    (server, host_keys)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn a_script_comes_back_byte_for_byte_with_the_mirror_as_configured(
        // Any text (the MIME reader of the test decodes parts as UTF-8 text).
        body in any::<String>(),
        (url, host_key) in mirror_url(),
    ) {
        let mut script = b"#!/bin/bash\n".to_vec();
        script.extend(body.into_bytes());
        let config = RegistryConfig { mirror: Some(Endpoint { url, ..Default::default() }), registries: vec![] };
        let out = apply(&script, &config, SizeLimit(1 << 20)).expect("a script with a valid mirror is accepted");
        let parts = common::mime_parts(&common::gunzip_if_needed(&out));
        prop_assert_eq!(&parts[0].0, "text/x-shellscript");
        prop_assert_eq!(&parts[0].1, &script);
        let (_, hosts) = default_hosts(&out);
        prop_assert_eq!(hosts, vec![host_key]);
    }

    #[test]
    fn a_cloud_config_keeps_every_key_and_file_and_gains_the_mirror(
        files in proptest::collection::btree_map("[a-z]{1,10}", "[ -~]{0,40}", 0..4),
        commands in proptest::collection::vec("[a-z][ -~]{0,30}", 0..4),
        (url, host_key) in mirror_url(),
    ) {
        let mut doc = serde_norway::Mapping::new();
        let write_files: Vec<serde_norway::Value> = files
            .iter()
            .map(|(name, content)| {
                let mut f = serde_norway::Mapping::new();
                f.insert("path".into(), format!("/etc/test/{name}").into());
                f.insert("content".into(), content.clone().into());
                serde_norway::Value::Mapping(f)
            })
            .collect();
        if !write_files.is_empty() {
            doc.insert("write_files".into(), write_files.into());
        }
        doc.insert("runcmd".into(), commands.iter().cloned().map(serde_norway::Value::from).collect::<Vec<_>>().into());
        let input = format!("#cloud-config\n{}", serde_norway::to_string(&doc).expect("yaml"));
        let config = RegistryConfig { mirror: Some(Endpoint { url, ..Default::default() }), registries: vec![] };
        let out = apply(input.as_bytes(), &config, SizeLimit(1 << 20)).expect("a cloud-config with a valid mirror is accepted");
        let parsed = common::parse_cloud_config(&common::gunzip_if_needed(&out));
        prop_assert_eq!(parsed.get("runcmd"), doc.get("runcmd"), "other keys are kept unchanged");
        let kept = parsed.get("write_files").and_then(|w| w.as_sequence()).cloned().unwrap_or_default();
        for (name, content) in &files {
            let path = format!("/etc/test/{name}");
            let found = kept.iter().find(|f| f.get("path").and_then(|p| p.as_str()) == Some(path.as_str()));
            prop_assert_eq!(found.and_then(|f| f.get("content")).and_then(|c| c.as_str()), Some(content.as_str()), "{}", path);
        }
        let (_, hosts) = default_hosts(&out);
        prop_assert_eq!(hosts, vec![host_key]);
    }
}
