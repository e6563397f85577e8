//! A small typed client of the ECS and STS RPC APIs: the actions this driver
//! needs, signed with ACS3-HMAC-SHA256 ([`signer`]), sent over the
//! workspace's HTTP stack (reqwest), answers decoded into typed structs
//! ([`model`]). No maintained Rust SDK for ECS exists (see the README).

pub(crate) mod client;
pub(crate) mod model;
pub(crate) mod signer;
