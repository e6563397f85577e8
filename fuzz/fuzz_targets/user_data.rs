//! Any bytes as user data with a registry mirror merged in, and as the
//! operator's registry configuration file: never a panic; merged user data is
//! never larger than the limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use machine_bootstrap::{Endpoint, RegistryConfig, RegistryConfigFile, SizeLimit, apply};

const LIMIT: usize = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    let _ = RegistryConfigFile::parse(data);
    let config = RegistryConfig {
        mirror: Some(Endpoint { url: "https://mirror.example.com".into(), ca_pem: None, credentials: None }),
        registries: Vec::new(),
    };
    if let Ok(merged) = apply(data, &config, SizeLimit(LIMIT)) {
        assert!(merged.len() <= LIMIT, "merged user data of {} bytes exceeds the limit", merged.len());
    }
});
