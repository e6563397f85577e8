#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod aws_call;
mod clients;
mod config;
mod create;
mod credentials;
mod delete;
mod driver;
pub mod errors;
mod initialize;
pub mod launch;
mod list;
mod lookup;
pub mod provider_id;
pub mod recent;
mod share_image;
pub mod spec;
pub mod spec_validation;
mod status;
pub mod steps;
pub mod tags;
pub mod volumes;

pub use config::AwsConfig;
pub use credentials::{ACCESS_KEY_ID_KEYS, SECRET_ACCESS_KEY_KEYS};
pub use driver::AwsDriver;
