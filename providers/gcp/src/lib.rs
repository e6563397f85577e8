#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod clients;
mod config;
mod create;
mod credentials;
mod delete;
mod driver;
mod errors;
mod instance;
mod list;
mod lookup;
mod naming;
mod operations;
mod ownership;
mod share_image;
mod spec;
#[cfg(test)]
mod spec_coverage;
mod status;
mod timestamps;
mod update;
mod volumes;

pub use config::GcpConfig;
pub use driver::{GcpDriver, MAX_USER_DATA_BYTES};

/// Checks a machine class's providerSpec as every RPC does (INVALID_ARGUMENT
/// naming the field), without a cloud call: for tools and the spec mutation test.
pub fn check_provider_spec(raw: &[u8]) -> Result<(), machine_driver_api::DriverError> {
    spec::GcpProviderSpec::parse(raw).map(|_| ())
}
