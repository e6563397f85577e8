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
mod initialize;
mod list;
mod lookup;
mod naming;
mod os;
mod ports;
mod resolve;
mod share_image;
mod spec;
mod status;
mod volumes;

pub use config::OpenStackConfig;
pub use driver::{MAX_USER_DATA_BYTES, OpenStackDriver};
