#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
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
mod share_image;
mod spec;
mod status;
mod volumes;

pub use config::AlicloudConfig;
pub use driver::{AlicloudDriver, MAX_USER_DATA_BYTES};
