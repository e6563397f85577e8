//! Instances this process inserted a short while ago.
//!
//! Compute Engine is eventually consistent: right after instances.insert an
//! instances.get may still answer 404 (and instances.list leave it out). GetMachineStatus must not report such a
//! machine as NOT_FOUND (the controller would create it again), so the driver
//! remembers its recent inserts and reports UNAVAILABLE (`NOT_VISIBLE_YET`) for them.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::naming::InstanceRef;

/// How long an insert is remembered.
pub(crate) const REMEMBER_FOR: Duration = Duration::from_secs(300);

/// Recently inserted instances with the time of their insert.
#[derive(Debug, Default)]
pub(crate) struct RecentInserts {
    inserted: Mutex<HashMap<InstanceRef, Instant>>,
}

impl RecentInserts {
    /// Remembers an insert of `instance` now.
    pub(crate) fn record(&self, instance: &InstanceRef) {
        let now = Instant::now();
        let mut map = self.inserted.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, at| now.duration_since(*at) < REMEMBER_FOR);
        map.insert(instance.clone(), now);
    }

    /// Forgets `instance` (deleted, or its insert failed).
    pub(crate) fn forget(&self, instance: &InstanceRef) {
        self.inserted.lock().unwrap_or_else(PoisonError::into_inner).remove(instance);
    }

    /// True when `instance` was inserted within [`REMEMBER_FOR`].
    pub(crate) fn contains(&self, instance: &InstanceRef) -> bool {
        let map = self.inserted.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(instance).is_some_and(|at| at.elapsed() < REMEMBER_FOR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str) -> InstanceRef {
        InstanceRef { project: "p".into(), zone: "z".into(), name: name.into() }
    }

    #[tokio::test(start_paused = true)]
    async fn remembers_for_a_while_then_forgets() {
        let recent = RecentInserts::default();
        recent.record(&r("a"));
        assert!(recent.contains(&r("a")));
        assert!(!recent.contains(&r("b")));
        tokio::time::advance(REMEMBER_FOR + Duration::from_secs(1)).await;
        assert!(!recent.contains(&r("a")));
        recent.record(&r("b"));
        recent.forget(&r("b"));
        assert!(!recent.contains(&r("b")));
    }
}
