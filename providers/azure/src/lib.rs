#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod addresses;
mod clients;
mod config;
mod create;
mod credentials;
mod delete;
mod driver;
mod errors;
mod graph;
mod list;
mod lookup;
mod lro;
mod marketplace;
mod naming;
mod ownership;
mod paged;
mod share_image;
mod spec;
#[cfg(test)]
mod spec_coverage;
mod status;
mod tagging;
mod transport;
mod update;
mod vm;
mod volumes;

pub use config::AzureConfig;
pub use driver::AzureDriver;
pub use lookup::{GRAPH_REQUERY, LIST_REUSE};
pub use vm::MAX_USER_DATA_BYTES;

/// Checks a machine class's providerSpec as every RPC does (INVALID_ARGUMENT
/// naming the field), without a cloud call: for tools and the spec mutation test.
pub fn check_provider_spec(raw: &[u8]) -> Result<(), machine_driver_api::DriverError> {
    spec::AzureProviderSpec::parse_with_markers(raw).map(|_| ())
}
