#![doc = include_str!("../README.md")]

mod aws_call;
mod clients;
mod config;
mod create;
mod credentials;
mod delete;
mod driver;
mod errors;
mod initialize;
mod launch;
mod list;
mod lookup;
mod ownership;
mod provider_id;
mod recent;
mod share_image;
mod spec;
#[cfg(test)]
mod spec_fields_tests;
mod spec_validation;
mod spot;
mod status;
mod steps;
mod tags;
mod update;
mod update_settings;
mod volumes;

pub use config::AwsConfig;
pub use credentials::{ACCESS_KEY_ID_KEYS, ROLE_ARN_KEYS, SECRET_ACCESS_KEY_KEYS, TOKEN_FILE_KEYS};
pub use driver::AwsDriver;

/// Checks a machine class's providerSpec as every RPC does (INVALID_ARGUMENT
/// naming the field), without a cloud call: for tools and the spec mutation test.
pub fn check_provider_spec(raw: &[u8]) -> Result<(), machine_driver_api::DriverError> {
    spec_validation::parse_and_validate(raw).map(|_| ())
}
