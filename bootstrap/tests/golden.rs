//! Golden tests: each input format merged with a fixed configuration must
//! give exactly the stored output. Regenerate with `UPDATE_GOLDEN=1 cargo test`.

mod common;

use std::path::PathBuf;

use machine_bootstrap::{RegistryConfig, SizeLimit, apply};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn check(name: &str, input: &[u8], config: &RegistryConfig, limit: SizeLimit) -> Vec<u8> {
    let output = apply(input, config, limit).expect("apply");
    let path = golden_dir().join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &output).expect("write golden");
    }
    let expected =
        std::fs::read(&path).unwrap_or_else(|_| panic!("missing {}; run with UPDATE_GOLDEN=1", path.display()));
    assert!(output == expected, "{name} differs from golden file; inspect and run with UPDATE_GOLDEN=1 if intended");
    output
}

fn input(name: &str) -> Vec<u8> {
    std::fs::read(golden_dir().join(name)).expect("golden input")
}

#[test]
fn empty_user_data_becomes_cloud_config() {
    let out = check("empty.out", b"", &common::full_config(), SizeLimit::GCE);
    assert!(out.starts_with(b"#cloud-config\nwrite_files:\n"));
}

#[test]
fn cloud_config_without_write_files() {
    check("cloud-config-plain.out", &input("cloud-config-plain.in"), &common::full_config(), SizeLimit::GCE);
}

#[test]
fn cloud_config_with_write_files() {
    check(
        "cloud-config-write-files.out",
        &input("cloud-config-write-files.in"),
        &common::full_config(),
        SizeLimit::GCE,
    );
}

#[test]
fn cloud_config_flow_write_files_falls_back_to_mime() {
    let out = check("cloud-config-flow.out", &input("cloud-config-flow.in"), &common::mirror_only(), SizeLimit::GCE);
    assert!(out.starts_with(b"Content-Type: multipart/mixed"));
}

#[test]
fn shell_script_is_wrapped_in_mime() {
    check("script.out", &input("script.in"), &common::full_config(), SizeLimit::GCE);
}

#[test]
fn mime_multipart_gets_a_part() {
    check("multipart.out", &input("multipart.in"), &common::full_config(), SizeLimit::GCE);
}

#[test]
fn ignition_gets_storage_files() {
    check("ignition.out", &input("ignition.in"), &common::full_config(), SizeLimit::GCE);
}

#[test]
fn gzip_input_is_recompressed() {
    let out =
        check("cloud-config-plain.gz.out", &input("cloud-config-plain.in.gz"), &common::mirror_only(), SizeLimit::GCE);
    assert!(out.starts_with(&[0x1f, 0x8b]));
}

#[test]
fn oversized_script_is_gzipped() {
    let out = check("script-ec2.gz.out", &input("script-large.in"), &common::full_config(), SizeLimit::EC2);
    assert!(out.starts_with(&[0x1f, 0x8b]));
    assert!(out.len() <= SizeLimit::EC2.0);
}
