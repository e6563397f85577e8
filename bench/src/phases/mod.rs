//! The measurements, one module each. Every phase returns a serialisable
//! result; an `Err` means the phase could not be measured (something broke).

pub(crate) mod fleet;
pub(crate) mod footprint;
pub(crate) mod lifecycle;
pub(crate) mod overhead;
pub(crate) mod throughput;
pub(crate) mod update;
