#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod clients;
mod config;
mod create;
mod credentials;
mod delete;
mod driver;
mod ecs;
mod errors;
mod list;
mod lookup;
mod naming;
mod ownership;
mod share_image;
mod spec;
#[cfg(test)]
mod spec_fields_tests;
mod status;
mod update;
mod volumes;

pub use config::AlicloudConfig;
pub use driver::{AlicloudDriver, MAX_USER_DATA_BYTES};

/// Checks a machine class's providerSpec as every RPC does (INVALID_ARGUMENT
/// naming the field), without a cloud call: for tools and the fuzz targets.
pub fn check_provider_spec(raw: &[u8]) -> Result<(), machine_driver_api::DriverError> {
    spec::AlicloudProviderSpec::parse(raw).map(|_| ())
}

/// Checks a secret's access key as every RPC does, without a call.
pub fn check_secret(secret: &machine_driver_api::SecretData) -> Result<(), machine_driver_api::DriverError> {
    credentials::AccessKey::from_secret(secret, "secret").map(|_| ())
}
