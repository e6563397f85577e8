//! The JSON shapes of the Compute Engine REST API (camelCase, unset fields
//! omitted, 64-bit integers as strings), as far as the fake serves them.

pub(crate) mod disk;
pub(crate) mod image;
pub(crate) mod instance;
pub(crate) mod operation;
pub(crate) mod policy;
