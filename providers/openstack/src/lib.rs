#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod clients;
mod config;
mod create;
mod credentials;
mod delete;
mod driver;
mod errors;
mod go_volumes;
mod initialize;
mod list;
mod lookup;
mod naming;
mod os;
mod ownership;
mod ports;
mod resolve;
mod share_image;
mod spec;
#[cfg(test)]
mod spec_coverage;
mod status;
mod update;
mod volumes;

pub use config::OpenStackConfig;
pub use driver::{MAX_USER_DATA_BYTES, OpenStackDriver};

/// Checks a machine class's providerSpec as every RPC does (INVALID_ARGUMENT
/// naming the field), without a cloud call: for tools and the fuzz targets.
pub fn check_provider_spec(raw: &[u8]) -> Result<(), machine_driver_api::DriverError> {
    spec::OpenStackSpec::parse(raw).map(|_| ())
}

/// Checks a secret's Keystone credentials as every RPC does, without a call.
pub fn check_secret(secret: &machine_driver_api::SecretData) -> Result<(), machine_driver_api::DriverError> {
    credentials::OsCredentials::from_secret(secret, "secret").map(|_| ())
}
