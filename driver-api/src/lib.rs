#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod cloud_call;
mod coalesce;
mod context;
mod driver;
mod error;
mod idempotency;
mod machine;
mod rate_limit;
mod secret;
mod spec;

pub use cloud_call::{CloudCall, cloud_call};
pub use coalesce::{BatchFn, Coalescer};
pub use context::CallContext;
pub use driver::{
    Capabilities, CreateMachine, CreatedMachine, DeletedMachine, Driver, DriverInfo, InitializedMachine, ListMachines,
    MachineRef, MachineStatus, SecretBytes, ShareImage, SharedImage,
};
pub use error::{DriverError, ErrorKind, Result};
pub use idempotency::idempotency_token;
pub use machine::{Address, AddressType, Machine, MachineClass, NodeTemplate};
pub use rate_limit::{RateLimiter, UNLIMITED_THROTTLE_PAUSE};
pub use secret::SecretData;
pub use spec::parse_provider_spec;
