//! Instances this sidecar launched recently, so that a status call right after
//! CreateMachine, while EC2 does not show the instance yet, answers "not
//! initialized, wait" instead of NOT_FOUND.
//!
//! Two sources, either suffices: an in-memory record (uid → instance), and the
//! machine's `lastKnownState`, which CreateMachine fills with the instance id
//! and launch time so that the rule also holds after a sidecar restart.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// How long after launch an invisible instance is assumed to be on its way.
/// EC2's read-after-write delay is seconds; this leaves ample room.
pub const VISIBILITY_GRACE: Duration = Duration::from_secs(10 * 60);

/// What CreateMachine remembers about a launch (also its `lastKnownState` JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Launch {
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
    pub fn now(instance_id: &str, region: &str, node_name: &str) -> Self {
        let launched_at = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        Self { instance_id: instance_id.into(), region: region.into(), node_name: node_name.into(), launched_at }
    }

    /// As `lastKnownState`.
    pub fn to_state(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// From `lastKnownState` (None for anything else, e.g. the Go provider's state).
    pub fn from_state(state: &str) -> Option<Self> {
        serde_json::from_str(state).ok()
    }

    /// True while within [`VISIBILITY_GRACE`] of the launch.
    pub fn is_recent(&self) -> bool {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        now.saturating_sub(self.launched_at) < VISIBILITY_GRACE.as_secs()
    }
}

/// The in-memory record of recent launches, by machine uid.
#[derive(Debug, Default)]
pub(crate) struct RecentLaunches(Mutex<HashMap<String, Launch>>);

impl RecentLaunches {
    /// Remembers a launch (and forgets stale ones).
    pub(crate) fn record(&self, uid: &str, launch: Launch) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.retain(|_, l| l.is_recent());
        m.insert(uid.to_string(), launch);
    }

    /// The recent launch of `uid`, if any.
    pub(crate) fn get(&self, uid: &str) -> Option<Launch> {
        let m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.get(uid).filter(|l| l.is_recent()).cloned()
    }

    /// Forgets `uid` (after DeleteMachine).
    pub(crate) fn forget(&self, uid: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
    }
}

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
        let r = RecentLaunches::default();
        r.record("uid-1", l.clone());
        r.record("uid-old", old);
        assert_eq!(r.get("uid-1"), Some(l));
        assert_eq!(r.get("uid-old"), None);
        r.forget("uid-1");
        assert_eq!(r.get("uid-1"), None);
    }
}
