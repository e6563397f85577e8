#![doc = include_str!("../README.md")]

mod absent;
mod cache;
mod cloud_call;
mod coalesce;
mod context;
mod driver;
mod error;
mod idempotency;
mod machine;
mod name_prefix;
mod ownership;
mod pages;
mod provider;
mod rate_limit;
pub mod reasons;
mod recent;
mod recent_list;
mod secret;
mod secret_keys;
mod spec;
pub mod spec_mutations;
pub mod spec_walk;
mod update;

pub use absent::{AbsentVm, DUPLICATE_VMS};
pub use cache::KeyedCache;
pub use cloud_call::{CallFailure, CloudCall, CloudCaller, CloudFailure, cloud_call};
pub use coalesce::{BATCH_DEADLINE, BatchFn, Coalescer};
pub use context::CallContext;
pub use driver::{
    Capabilities, CreateMachine, CreatedMachine, DeletedMachine, Driver, DriverInfo, ImageShares, InitializedMachine,
    ListImageShares, ListMachines, MachineRef, MachineStatus, OwnerSecret, RevokeImageShare, RevokedImageShare,
    SecretBytes, ShareImage, SharedImage,
};
pub use error::{
    DriverError, ErrorKind, MAX_CLOUD_MESSAGE, OWNER_CREDENTIALS_REQUIRED, RETRY_SOON, Result, SPOT_RECLAIMED,
    cloud_failure_message,
};
pub use idempotency::idempotency_token;
pub use machine::{Address, AddressType, Machine, MachineClass, NodeTemplate, NodeTemplateSpec, Taint};
pub use name_prefix::{common_prefix, common_prefix_len};
pub use ownership::{ClusterMarkers, Foreign, MarkedVm, Ownership, foreign_name_taken, foreign_not_found};
pub use pages::{MAX_PAGES, PageTokens};
pub use provider::{CloudOptions, Provider};
pub use rate_limit::{RateLimiter, UNLIMITED_THROTTLE_PAUSE};
pub use recent::{AWAIT_VISIBILITY, RecentCreates, VISIBILITY_GRACE};
pub use recent_list::{ListAnswer, Listed, RecentList};
pub use secret::SecretData;
pub use secret_keys::SecretKeys;
pub use spec::{parse_provider_spec, set_strict_provider_spec};
pub use update::{
    ChangeOutcome, FieldChange, NEEDS_REPLACEMENT, TagPlan, UpdateMachine, UpdatePlan, UpdatedMachine,
    unrecorded_changes,
};
