#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
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
