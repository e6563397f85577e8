//! Instances this sidecar launched recently, so that a status call right after
//! CreateMachine, while EC2 does not show the instance yet, answers "not
//! initialized, wait" instead of NOT_FOUND.
//!
//! Two sources, either suffices: the kit's in-memory [`RecentCreates`] (uid →
//! launch), and the machine's `lastKnownState`, which CreateMachine fills with
//! the instance id and launch time so that the rule also holds after a
//! sidecar restart when the controller sends it back.

use std::time::{SystemTime, UNIX_EPOCH};

use machine_driver_api::{RecentCreates, VISIBILITY_GRACE};
use serde::{Deserialize, Serialize};

/// What CreateMachine remembers about a launch (also its `lastKnownState` JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Launch {
    /// The instance id.
    pub instance_id: String,
    /// Region of the instance.
    pub region: String,
    /// Private DNS name (node name) as RunInstances reported it.
    pub node_name: String,
    /// Launch time, seconds since the Unix epoch.
    pub launched_at: u64,
}

impl Launch {
    /// A launch happening now.
    pub(crate) fn now(instance_id: &str, region: &str, node_name: &str) -> Self {
        let launched_at = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        Self { instance_id: instance_id.into(), region: region.into(), node_name: node_name.into(), launched_at }
    }

    /// As `lastKnownState`.
    pub(crate) fn to_state(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// From `lastKnownState` (None for anything else, e.g. the Go provider's state).
    pub(crate) fn from_state(state: &str) -> Option<Self> {
        serde_json::from_str(state).ok()
    }

    /// True while within [`VISIBILITY_GRACE`] of the launch.
    pub(crate) fn is_recent(&self) -> bool {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        now.saturating_sub(self.launched_at) < VISIBILITY_GRACE.as_secs()
    }
}

/// The in-memory record of recent launches, by machine uid.
pub(crate) type RecentLaunches = RecentCreates<String, Launch>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trip_and_grace() {
        let l = Launch::now("i-1", "eu-west-1", "ip-10-0-0-1.eu-west-1.compute.internal");
        assert_eq!(Launch::from_state(&l.to_state()), Some(l.clone()));
        assert!(l.is_recent());
        assert_eq!(Launch::from_state(""), None);
        let old = Launch { launched_at: l.launched_at - VISIBILITY_GRACE.as_secs() - 1, ..l.clone() };
        assert!(!old.is_recent());
    }
}
