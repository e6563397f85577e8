//! Behaviour of `apply`: rendered files read back with real parsers, user
//! data kept intact, validation, size limits and secret hygiene.

mod common;

use common::{File, full_config, mirror_only, rendered_files};
use machine_bootstrap::{BootstrapError, Credentials, Endpoint, RegistryConfig, RegistryConfigFile, SizeLimit, apply};

const KNOWN_CAPABILITIES: [&str; 3] = ["pull", "resolve", "push"];

fn golden(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"))).expect("golden input")
}

fn all_inputs() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("empty", Vec::new()),
        ("cloud-config-plain", golden("cloud-config-plain.in")),
        ("cloud-config-write-files", golden("cloud-config-write-files.in")),
        ("cloud-config-flow", golden("cloud-config-flow.in")),
        ("script", golden("script.in")),
        ("multipart", golden("multipart.in")),
        ("ignition", golden("ignition.in")),
        ("gzip", golden("cloud-config-plain.in.gz")),
    ]
}

fn file<'a>(files: &'a [File], path: &str) -> &'a File {
    files
        .iter()
        .find(|f| f.path == path)
        .unwrap_or_else(|| panic!("{path} not rendered; have {:?}", files.iter().map(|f| &f.path).collect::<Vec<_>>()))
}

#[test]
fn nothing_configured_passes_user_data_through_byte_for_byte() {
    let mut inputs = all_inputs();
    inputs.push(("garbage", vec![0xff, 0x00, 0x1f, 0x8b, 0x13]));
    inputs.push(("huge", vec![b'x'; 100_000]));
    for (name, input) in inputs {
        let out = apply(&input, &RegistryConfig::default(), SizeLimit(1)).expect(name);
        assert_eq!(out, input, "{name}");
    }
}

#[test]
fn every_format_delivers_the_same_valid_files() {
    for (name, input) in all_inputs() {
        let out = apply(&input, &full_config(), SizeLimit::GCE).unwrap_or_else(|e| panic!("{name}: {e}"));
        let files: Vec<File> = rendered_files(&out)
            .into_iter()
            .filter(|f| !f.path.starts_with("/etc/x") && f.path != "/etc/hostname")
            .collect();
        assert_eq!(files.len(), 7, "{name}: {:?}", files.iter().map(|f| &f.path).collect::<Vec<_>>());

        let hosts = file(&files, "/etc/containerd/certs.d/_default/hosts.toml");
        assert_eq!(hosts.mode, 0o644);
        let table: toml::Table =
            std::str::from_utf8(&hosts.content).expect("utf-8").parse().expect("hosts.toml parses");
        assert!(table.get("server").is_none(), "{name}: no server key, upstream stays the fallback");
        let host_tables = table["host"].as_table().expect("host table");
        assert_eq!(host_tables.keys().collect::<Vec<_>>(), ["https://mirror.example.com:5000/v2/proj"]);
        for (_, host) in host_tables {
            let caps: Vec<&str> = host["capabilities"]
                .as_array()
                .expect("capabilities")
                .iter()
                .map(|c| c.as_str().expect("string"))
                .collect();
            assert!(caps.iter().all(|c| KNOWN_CAPABILITIES.contains(c)), "{name}: unknown capability in {caps:?}");
            assert_eq!(caps, ["pull", "resolve"]);
            assert_eq!(host["override_path"].as_bool(), Some(true));
            let ca_path = host["ca"].as_str().expect("ca path");
            assert_eq!(file(&files, ca_path).content, common::ca(1), "{name}: mirror CA referenced and rendered");
        }

        let drop_in = file(&files, "/etc/containerd/conf.d/50-machine-driver-registry.toml");
        let drop_in: toml::Table =
            std::str::from_utf8(&drop_in.content).expect("utf-8").parse().expect("drop-in parses");
        assert_eq!(drop_in["version"].as_integer(), Some(2));
        assert_eq!(
            drop_in["plugins"]["io.containerd.cri.v1.images"]["registry"]["config_path"].as_str(),
            Some("/etc/containerd/certs.d")
        );

        assert_eq!(file(&files, "/etc/containerd/certs.d/registry.example.com/ca.crt").content, common::ca(2));

        for path in [
            "/etc/kubernetes/image-credential-provider-config.yaml",
            "/etc/kubernetes/dynamic-credential-provider-config.yaml",
            "/etc/kubernetes/static-image-credentials.json",
        ] {
            assert_eq!(file(&files, path).mode, 0o600, "{name}: {path}");
        }
        let kubelet: serde_norway::Value =
            serde_norway::from_slice(&file(&files, "/etc/kubernetes/image-credential-provider-config.yaml").content)
                .expect("yaml");
        assert_eq!(kubelet["apiVersion"].as_str(), Some("kubelet.config.k8s.io/v1"));
        assert_eq!(kubelet["kind"].as_str(), Some("CredentialProviderConfig"));
        let dynamic: serde_norway::Value =
            serde_norway::from_slice(&file(&files, "/etc/kubernetes/dynamic-credential-provider-config.yaml").content)
                .expect("yaml");
        assert_eq!(dynamic["mirror"]["endpoint"].as_str(), Some("mirror.example.com:5000"));
        assert_eq!(dynamic["mirror"]["credentialsStrategy"].as_str(), Some("MirrorCredentialsFirst"));
        let response: serde_json::Value =
            serde_json::from_slice(&file(&files, "/etc/kubernetes/static-image-credentials.json").content)
                .expect("json");
        assert_eq!(response["kind"], "CredentialProviderResponse");
        assert_eq!(response["auth"]["mirror.example.com:5000"]["password"], common::MIRROR_PASSWORD);
        assert_eq!(response["auth"]["registry.example.com"]["username"], "reg-user");
    }
}

#[test]
fn mirror_without_path_or_ca_renders_only_hosts_toml_and_drop_in() {
    let out = apply(b"", &mirror_only(), SizeLimit::EC2).expect("apply");
    let files = rendered_files(&out);
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["/etc/containerd/conf.d/50-machine-driver-registry.toml", "/etc/containerd/certs.d/_default/hosts.toml"]
    );
    let hosts = String::from_utf8(files[1].content.clone()).expect("utf-8");
    assert!(hosts.contains("[host.\"https://mirror.example.com/v2\"]"), "{hosts}");
    assert!(!hosts.contains("ca ="), "{hosts}");
}

#[test]
fn registries_without_mirror_render_no_default_hosts_file() {
    let config = RegistryConfig {
        mirror: None,
        registries: vec![Endpoint { url: "https://r.example".into(), ca_pem: Some(common::ca(1)), credentials: None }],
    };
    let files = rendered_files(&apply(b"", &config, SizeLimit::EC2).expect("apply"));
    assert!(files.iter().all(|f| !f.path.contains("_default")));
    assert_eq!(file(&files, "/etc/containerd/certs.d/r.example/ca.crt").content, common::ca(1));
}

#[test]
fn cloud_config_keeps_every_original_key() {
    for name in ["cloud-config-plain.in", "cloud-config-write-files.in", "cloud-config-flow.in"] {
        let input = golden(name);
        let original = common::parse_cloud_config(&input);
        let out = apply(&input, &full_config(), SizeLimit::GCE).expect("apply");
        if out.starts_with(b"#cloud-config") {
            let merged = common::parse_cloud_config(&out);
            let (original, merged) = (original.as_mapping().expect("map"), merged.as_mapping().expect("map"));
            for (k, v) in original {
                if k.as_str() == Some("write_files") {
                    let before = v.as_sequence().expect("seq");
                    let after = merged[k].as_sequence().expect("seq");
                    assert_eq!(&after[..before.len()], &before[..], "{name}: existing write_files kept first");
                    assert_eq!(after.len(), before.len() + 7);
                } else {
                    assert_eq!(merged.get(k), Some(v), "{name}: key {k:?}");
                }
            }
            // The user's bytes are kept verbatim, not re-serialised.
            let text = String::from_utf8(out).expect("utf-8");
            assert!(text.contains("# operator comment that must survive") || !name.contains("plain"));
            assert!(text.contains("permissions: 0644") || !name.contains("write-files"));
        } else {
            // Fallback: the original is an untouched MIME part.
            let parts = common::mime_parts(&out);
            assert_eq!(parts[0].0, "text/cloud-config");
            assert_eq!(parts[0].1, input, "{name}");
        }
    }
}

#[test]
fn cloud_config_layouts_are_merged_in_place() {
    let cases: [&[u8]; 5] = [
        b"#cloud-config\r\nhostname: a\r\nwrite_files:\r\n- path: /etc/a\r\n  content: a\r\nruncmd: [ls]\r\n",
        b"#cloud-config\nwrite_files:\nhostname: a\n",
        b"#cloud-config\nhostname: a",
        b"#cloud-config\n",
        b"#cloud-config\nwrite_files:   # the files\n    -   path: /etc/a\n        content: |+\n          a\n\n",
    ];
    for input in cases {
        let out = apply(input, &mirror_only(), SizeLimit::GCE).expect("apply");
        let shown = String::from_utf8_lossy(input).into_owned();
        assert!(out.starts_with(b"#cloud-config"), "{shown}: merged in place, not wrapped");
        let doc = common::parse_cloud_config(&out);
        let original: serde_norway::Value = serde_norway::from_slice(input).expect("yaml");
        if let Some(hostname) = original.get("hostname") {
            assert_eq!(doc.get("hostname"), Some(hostname));
        }
        let files = common::cloud_config_files(&doc);
        assert_eq!(files.len(), 2, "{shown}");
        let all = doc["write_files"].as_sequence().expect("seq");
        if let Some(before) = original.get("write_files").and_then(|w| w.as_sequence()) {
            assert_eq!(&all[..before.len()], &before[..], "{shown}");
        }
    }
}

#[test]
fn multipart_keeps_existing_parts_byte_identical() {
    let input = golden("multipart.in");
    let out = apply(&input, &full_config(), SizeLimit::GCE).expect("apply");
    let closing = b"--===============1234==--\r\n";
    let split = input.len() - closing.len();
    assert!(out.starts_with(&input[..split]), "everything before the closing delimiter is unchanged");
    assert!(out.ends_with(closing));
    let parts = common::mime_parts(&out);
    let original = common::mime_parts(&input);
    assert_eq!(parts.len(), original.len() + 1);
    assert_eq!(&parts[..original.len()], &original[..]);
    assert_eq!(parts[original.len()].0, "text/cloud-config");
}

#[test]
fn script_is_kept_exactly_including_non_ascii() {
    let script = "#!/bin/bash\r\necho 'grüße'\n".as_bytes();
    let out = apply(script, &mirror_only(), SizeLimit::GCE).expect("apply");
    let parts = common::mime_parts(&out);
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0].0, "text/x-shellscript");
    assert_eq!(parts[0].1, script);
    assert_eq!(parts[1].0, "text/cloud-config");
}

#[test]
fn ignition_keeps_existing_config_and_validates() {
    let input = golden("ignition.in");
    let out = apply(&input, &full_config(), SizeLimit::GCE).expect("apply");
    assert_eq!(common::ignition_files(&out).len(), 7);
    let v: serde_json::Value = serde_json::from_slice(&out).expect("json");
    assert_eq!(v["storage"]["files"][0]["path"], "/etc/hostname");
    assert_eq!(v["storage"]["files"][0]["contents"]["source"], "data:,node-1");
    assert_eq!(v["systemd"]["units"][0]["name"], "kubelet.service");
    assert_eq!(v["ignition"]["version"], "3.4.0");
}

#[test]
fn ignition_errors() {
    let replace = br#"{"ignition":{"version":"3.3.0","config":{"replace":{"source":"https://x/y.ign"}}}}"#;
    assert!(matches!(apply(replace, &mirror_only(), SizeLimit::GCE), Err(BootstrapError::UnsupportedUserData { .. })));
    let v2 = br#"{"ignition":{"version":"2.3.0"}}"#;
    assert!(matches!(apply(v2, &mirror_only(), SizeLimit::GCE), Err(BootstrapError::UnsupportedUserData { .. })));
    let duplicate = br#"{"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"/etc/containerd/certs.d/_default/hosts.toml"}]}}"#;
    assert!(matches!(
        apply(duplicate, &mirror_only(), SizeLimit::GCE),
        Err(BootstrapError::UnsupportedUserData { .. })
    ));
    let err = apply(&golden("ignition.in"), &full_config(), SizeLimit(1000)).expect_err("too large");
    match err {
        BootstrapError::TooLarge { size, limit, .. } => {
            assert_eq!(limit, 1000);
            assert!(size > 1000);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn unknown_formats_are_rejected_when_configured() {
    for input in [
        &b"just some text"[..],
        b"#include\nhttps://x",
        b"{\"a\":1}",
        b"\x00\x01binary",
        b"#cloud-config\n- a list\n",
        b"#cloud-config\nwrite_files: 3\n",
    ] {
        let err = apply(input, &mirror_only(), SizeLimit::GCE).expect_err("rejected");
        assert!(
            matches!(err, BootstrapError::UnsupportedUserData { .. } | BootstrapError::MalformedUserData { .. }),
            "{err:?}"
        );
    }
}

#[test]
fn size_limit_gzips_or_reports_both_sizes() {
    let script = golden("script-large.in");
    assert!(script.len() > SizeLimit::EC2.0);
    let out = apply(&script, &full_config(), SizeLimit::EC2).expect("gzipped to fit");
    let parts = common::mime_parts(&common::gunzip_if_needed(&out));
    assert_eq!(parts[0].1, script);

    let err = apply(&script, &full_config(), SizeLimit(500)).expect_err("too large");
    match err {
        BootstrapError::TooLarge { size, limit, .. } => {
            assert_eq!(limit, 500);
            assert!(size > 500 && size < script.len(), "size is the compressed size: {size}");
            let msg = err.to_string();
            assert!(msg.contains(&size.to_string()) && msg.contains("500"), "{msg}");
        }
        other => panic!("unexpected {other:?}"),
    }
    // Small enough: not compressed.
    let out = apply(b"#!/bin/sh\n", &mirror_only(), SizeLimit::EC2).expect("apply");
    assert!(out.starts_with(b"Content-Type: multipart/mixed"));
}

fn endpoint(url: &str) -> Endpoint {
    Endpoint { url: url.into(), ..Default::default() }
}

fn field_of(config: &RegistryConfig) -> String {
    match apply(b"", config, SizeLimit::GCE).expect_err("invalid") {
        BootstrapError::InvalidField { field, .. } => field,
        BootstrapError::ConflictingCa { second, .. } => format!("conflict:{second}"),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn validation_names_the_field() {
    let reg = |e: Endpoint| RegistryConfig { mirror: None, registries: vec![endpoint("https://ok.example"), e] };
    for url in [
        "ftp://x.example",
        "https://x.example/?q=1",
        "https://x.example/#f",
        "https://",
        "x.example",
        "https://u:p@x.example",
        "https://x.example/path",
        " https://x.example",
    ] {
        assert_eq!(field_of(&reg(endpoint(url))), "registries[1].url", "{url}");
    }
    assert_eq!(field_of(&RegistryConfig { mirror: Some(endpoint("unix:///x")), registries: vec![] }), "mirror.url");
    let not_cert = b"-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----\n".to_vec();
    assert_eq!(
        field_of(&reg(Endpoint { ca_pem: Some(not_cert), ..endpoint("https://x.example") })),
        "registries[1].ca"
    );
    assert_eq!(
        field_of(&reg(Endpoint { ca_pem: Some(b"not pem".to_vec()), ..endpoint("https://x.example") })),
        "registries[1].ca"
    );
    let creds = |u: &str| Some(Credentials { username: u.into(), password: "pw".into() });
    assert_eq!(
        field_of(&reg(Endpoint { credentials: creds("a:b"), ..endpoint("https://x.example") })),
        "registries[1].credentials.username"
    );
    assert_eq!(
        field_of(&reg(Endpoint { credentials: creds(""), ..endpoint("https://x.example") })),
        "registries[1].credentials.username"
    );

    let conflict = RegistryConfig {
        mirror: None,
        registries: vec![
            Endpoint { ca_pem: Some(common::ca(1)), ..endpoint("https://r.example") },
            Endpoint { ca_pem: Some(common::ca(2)), ..endpoint("https://r.example:443") },
        ],
    };
    assert_eq!(field_of(&conflict), "conflict:registries[1]");
    let same = RegistryConfig {
        mirror: None,
        registries: vec![
            Endpoint { ca_pem: Some(common::ca(1)), ..endpoint("https://r.example") },
            Endpoint { ca_pem: Some(common::ca(1)), ..endpoint("https://R.example/") },
        ],
    };
    let files = rendered_files(&apply(b"", &same, SizeLimit::GCE).expect("same CA twice is fine"));
    assert_eq!(files.iter().filter(|f| f.path.ends_with("ca.crt")).count(), 1);
}

#[test]
fn secrets_never_appear_in_errors_or_debug() {
    let creds = Credentials { username: "u".into(), password: "TOPSECRET-PW".into() };
    assert!(!format!("{creds:?}").contains("TOPSECRET"));
    let mut config = full_config();
    config.registries[0].credentials =
        Some(Credentials { username: "TOPSECRET-PW:x".into(), password: "TOPSECRET-PW".into() });
    let user_data = b"#cloud-config\nsecret: TOPSECRET-PW\n  bad: [indent";
    for (data, cfg) in [(&b""[..], &config), (&user_data[..], &full_config()), (&b"TOPSECRET-PW"[..], &full_config())] {
        let err = apply(data, cfg, SizeLimit::GCE).expect_err("fails");
        assert!(!err.to_string().contains("TOPSECRET"), "{err}");
        assert!(!format!("{err:?}").contains("TOPSECRET"), "{err:?}");
    }
    let err = apply(&golden("script-large.in"), &full_config(), SizeLimit(10)).expect_err("too large");
    assert!(!err.to_string().contains(common::MIRROR_PASSWORD));
}

#[test]
fn config_file_loads_inline_and_file_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("ca.pem"), common::ca(1)).expect("write");
    std::fs::write(dir.path().join("password"), "from-file\n").expect("write");
    let yaml = "mirror:\n  url: https://mirror.example.com\n  ca:\n    file: ca.pem\n  credentials:\n    username: m\n    password:\n      file: password\nregistries:\n- url: https://r.example\n  credentials:\n    username: r\n    password:\n      inline: inline-pw\n";
    std::fs::write(dir.path().join("registries.yaml"), yaml).expect("write");
    let config = RegistryConfigFile::load(&dir.path().join("registries.yaml")).expect("load");
    let mirror = config.mirror.as_ref().expect("mirror");
    assert_eq!(mirror.ca_pem.as_deref(), Some(&common::ca(1)[..]));
    assert_eq!(mirror.credentials.as_ref().map(|c| c.password.as_str()), Some("from-file"));
    assert_eq!(config.registries[0].credentials.as_ref().map(|c| c.password.as_str()), Some("inline-pw"));
    apply(b"", &config, SizeLimit::EC2).expect("loaded config applies");

    let json = r#"{"registries":[{"url":"https://r.example"}]}"#;
    assert_eq!(RegistryConfigFile::parse(json.as_bytes()).expect("json").registries.len(), 1);

    let err = RegistryConfigFile::parse(
        b"mirror:\n  url: https://m\n  credentials:\n    username: u\n    password: {inline: [SECRETVALUE]}\n",
    )
    .expect_err("bad");
    assert!(err.contains("mirror.credentials.password"), "{err}");
    assert!(!err.contains("SECRETVALUE"), "{err}");
    let err = RegistryConfigFile::parse(b"mirror:\n  url: https://m\n  ca: {file: a, inline: b}\n").expect_err("both");
    assert!(err.contains("exactly one of") && err.contains("mirror.ca"), "{err}");
    let err = RegistryConfigFile::parse(b"mirrors: []\n").expect_err("unknown field");
    assert!(err.contains("unknown field"), "{err}");
    let missing = RegistryConfigFile::load(&dir.path().join("nope.yaml")).expect_err("missing");
    assert!(matches!(missing, BootstrapError::ConfigFile { .. }));
}
