//! Fresh sightings of instances in state `pending`, so that InitializeMachine
//! right after CreateMachine or GetMachineStatus refuses ("not running yet")
//! without reading EC2 again.
//!
//! The machine-controller calls InitializeMachine straight after CreateMachine;
//! RunInstances has just answered `pending`, and EC2 keeps an instance pending
//! for seconds, so a DescribeInstances then only confirms what is known. A
//! sighting counts for [`PENDING_FRESH`]; after that the next InitializeMachine
//! reads EC2. Only refusals rest on a sighting: every write InitializeMachine
//! makes is computed from a fresh read.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a `pending` sighting stands in for a read. Short against EC2's
/// pending phase (tens of seconds), so that it delays initialization by at
/// most this much when the instance turned running right after it was seen.
pub(crate) const PENDING_FRESH: Duration = Duration::from_secs(1);

/// Most sightings kept; older ones are dropped first when full (they are stale anyway).
const MAX_SIGHTINGS: usize = 10_000;

/// Instance id → when it was last seen `pending`.
#[derive(Debug, Default)]
pub(crate) struct PendingSightings(Mutex<HashMap<String, Instant>>);

impl PendingSightings {
    /// Records what a read or RunInstances showed: `state` of `instance_id` now.
    pub(crate) fn observe(&self, instance_id: &str, state: &str) {
        if instance_id.is_empty() {
            return;
        }
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if state != "pending" {
            m.remove(instance_id);
            return;
        }
        if m.len() >= MAX_SIGHTINGS {
            m.retain(|_, seen| seen.elapsed() < PENDING_FRESH);
        }
        m.insert(instance_id.to_string(), Instant::now());
    }

    /// How long ago `instance_id` was seen `pending`, when that is less than [`PENDING_FRESH`].
    pub(crate) fn fresh(&self, instance_id: &str) -> Option<Duration> {
        let m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.get(instance_id).map(Instant::elapsed).filter(|age| *age < PENDING_FRESH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sighting_is_fresh_until_another_state_or_age() {
        let s = PendingSightings::default();
        assert_eq!(s.fresh("i-1"), None);
        s.observe("i-1", "pending");
        assert!(s.fresh("i-1").is_some_and(|age| age < PENDING_FRESH));
        s.observe("i-1", "running");
        assert_eq!(s.fresh("i-1"), None, "a later non-pending sighting wins");
        s.observe("", "pending");
        assert_eq!(s.fresh(""), None);
        s.0.lock().unwrap().insert("i-old".into(), Instant::now() - PENDING_FRESH);
        assert_eq!(s.fresh("i-old"), None, "an old sighting does not count");
    }
}
