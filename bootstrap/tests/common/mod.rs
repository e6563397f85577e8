//! Test helpers: configurations, and decoders that read rendered files back
//! out of each user-data format with real parsers.
#![allow(dead_code, unreachable_pub)]

use std::io::Read;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use machine_bootstrap::{Credentials, Endpoint, RegistryConfig};

pub const MIRROR_PASSWORD: &str = "mirror-s3cret-pw";
pub const REGISTRY_PASSWORD: &str = "registry-s3cret-pw";

pub fn ca(n: u8) -> Vec<u8> {
    std::fs::read(format!("{}/tests/golden/ca{n}.pem", env!("CARGO_MANIFEST_DIR"))).expect("test CA")
}

/// Mirror with a path, CA and credentials; one registry with CA and
/// credentials; one plain http registry.
pub fn full_config() -> RegistryConfig {
    RegistryConfig {
        mirror: Some(Endpoint {
            url: "https://mirror.example.com:5000/proj".into(),
            ca_pem: Some(ca(1)),
            credentials: Some(Credentials { username: "mirror-user".into(), password: MIRROR_PASSWORD.into() }),
        }),
        registries: vec![
            Endpoint {
                url: "https://registry.example.com".into(),
                ca_pem: Some(ca(2)),
                credentials: Some(Credentials { username: "reg-user".into(), password: REGISTRY_PASSWORD.into() }),
            },
            Endpoint { url: "http://insecure.example.com:8080".into(), ca_pem: None, credentials: None },
        ],
    }
}

pub fn mirror_only() -> RegistryConfig {
    RegistryConfig {
        mirror: Some(Endpoint { url: "https://mirror.example.com".into(), ..Default::default() }),
        registries: vec![],
    }
}

pub fn gunzip_if_needed(data: &[u8]) -> Vec<u8> {
    if data.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(data).read_to_end(&mut out).expect("gzip");
        out
    } else {
        data.to_vec()
    }
}

/// A file as the machine would get it.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub path: String,
    pub mode: u32,
    pub content: Vec<u8>,
}

/// `write_files` of a cloud-config, decoded (serde_norway parser).
pub fn cloud_config_files(doc: &serde_norway::Value) -> Vec<File> {
    let Some(list) = doc.get("write_files").and_then(|w| w.as_sequence()) else {
        return vec![];
    };
    list.iter()
        .filter(|f| f.get("encoding").and_then(|e| e.as_str()) == Some("b64"))
        .map(|f| {
            let b64: String = f["content"].as_str().expect("content").chars().filter(|c| !c.is_whitespace()).collect();
            File {
                path: f["path"].as_str().expect("path").to_owned(),
                mode: u32::from_str_radix(f["permissions"].as_str().expect("permissions"), 8).expect("octal"),
                content: STANDARD.decode(b64).expect("base64"),
            }
        })
        .collect()
}

pub fn parse_cloud_config(text: &[u8]) -> serde_norway::Value {
    let text = std::str::from_utf8(text).expect("utf-8");
    assert!(text.starts_with("#cloud-config\n") || text.starts_with("#cloud-config\r\n"), "header kept");
    serde_norway::from_str(text).expect("cloud-config parses as YAML")
}

/// `(content type, decoded body)` of every leaf part (mail-parser).
pub fn mime_parts(data: &[u8]) -> Vec<(String, Vec<u8>)> {
    use mail_parser::MimeHeaders;
    let message = mail_parser::MessageParser::default().parse(data).expect("MIME parses");
    let root = message.content_type().expect("root content type");
    assert_eq!(root.ctype(), "multipart");
    message.parts[1..]
        .iter()
        .map(|p| {
            let ct = p.content_type().expect("part content type");
            (format!("{}/{}", ct.ctype(), ct.subtype().unwrap_or_default()), p.contents().to_vec())
        })
        .collect()
}

/// Files of an Ignition config, after validating it with `ignition-config`.
pub fn ignition_files(data: &[u8]) -> Vec<File> {
    let (_config, warnings) = ignition_config::Config::parse_slice(data).expect("valid Ignition config");
    assert!(warnings.is_empty(), "Ignition warnings: {warnings:?}");
    let v: serde_json::Value = serde_json::from_slice(data).expect("json");
    v.pointer("/storage/files")
        .and_then(|f| f.as_array())
        .into_iter()
        .flatten()
        .filter_map(|f| {
            let source = f.pointer("/contents/source")?.as_str()?;
            let b64 = source.strip_prefix("data:;base64,")?;
            Some(File {
                path: f["path"].as_str()?.to_owned(),
                mode: u32::try_from(f["mode"].as_u64()?).ok()?,
                content: STANDARD.decode(b64).ok()?,
            })
        })
        .collect()
}

/// Every rendered file in any supported output, whatever its format.
pub fn rendered_files(output: &[u8]) -> Vec<File> {
    let data = gunzip_if_needed(output);
    if data.starts_with(b"#cloud-config") {
        return cloud_config_files(&parse_cloud_config(&data));
    }
    if data.starts_with(b"{") {
        return ignition_files(&data);
    }
    mime_parts(&data)
        .into_iter()
        .filter(|(ct, _)| ct == "text/cloud-config")
        .flat_map(|(_, body)| cloud_config_files(&parse_cloud_config(&body)))
        .collect()
}
