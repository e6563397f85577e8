#![doc = include_str!("../README.md")]
// Tests may unwrap: a panic is the failure report.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod connection;
pub mod context;
pub mod fake_admin;
pub mod filter;
pub mod junit;
pub mod merge_patch;
pub mod outcome;
mod process;
pub mod report;
pub mod restart;
pub mod runner;
pub mod scenario;
pub mod scenarios;
pub mod settings;
pub mod soak;
pub mod spawn;
pub mod spawn_fake;
pub mod status_details;
pub mod tracker;
