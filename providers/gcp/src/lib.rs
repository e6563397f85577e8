#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
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
mod volumes;

pub use config::GcpConfig;
pub use driver::{GcpDriver, MAX_USER_DATA_BYTES};
