//! Instances this sidecar launched recently, so that a status call right after
//! CreateMachine, while EC2 does not show the instance yet, answers "not
//! initialized, wait" instead of NOT_FOUND (the kit's [`AbsentVm`] rule).
//!
//! The one memory is the kit's in-memory [`RecentCreates`]: (credentials,
//! uid) → launch, so that only requests with the credentials the launch was
//! made with use it. After a sidecar restart the kit's young-machine rule
//! ([`Machine::is_young`], from the request's creation time and providerID)
//! answers instead; the machine's `lastKnownState` is not read (CreateMachine
//! leaves it empty, as every provider does).
//!
//! [`AbsentVm`]: machine_driver_api::AbsentVm
//! [`Machine::is_young`]: machine_driver_api::Machine::is_young

use machine_driver_api::RecentCreates;

use crate::clients::CredentialsKey;

/// What CreateMachine remembers about a launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Launch {
    /// The instance id.
    pub instance_id: String,
    /// Region of the instance.
    pub region: String,
    /// Private DNS name (node name) as RunInstances reported it.
    pub node_name: String,
}

/// The in-memory record of recent launches, by (credentials, machine uid).
pub(crate) type RecentLaunches = RecentCreates<(CredentialsKey, String), Launch>;
