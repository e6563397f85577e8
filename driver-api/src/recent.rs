//! [`RecentCreates`]: machines this process created a moment ago, and the one
//! answer a status poll gets while the cloud does not show them yet.
//!
//! Clouds are eventually consistent: right after a create, a read may not find
//! the VM. GetMachineStatus must not answer NOT_FOUND then (the controller
//! would create the machine again), nor UNAVAILABLE (the controller would
//! record a failed create and back off). Every provider answers OK, not
//! initialized, with the pending step [`AWAIT_VISIBILITY`]
//! ([`MachineStatus::not_visible_yet`](crate::MachineStatus::not_visible_yet)),
//! for [`VISIBILITY_GRACE`] after the create.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How long after a create a VM the cloud does not show is taken to be on its
/// way. Clouds' read-after-write delays are seconds; this leaves ample room and
/// stays well inside the controller's creation timeout (20 minutes by default).
pub const VISIBILITY_GRACE: Duration = Duration::from_secs(10 * 60);

/// Pending step of a machine created a moment ago that the cloud does not show yet.
pub const AWAIT_VISIBILITY: &str = "await-visibility";

/// Most creates remembered at once; older ones are dropped first.
const CAPACITY: usize = 16_384;

/// Creates of the last [`VISIBILITY_GRACE`], by key (machine uid or instance
/// name), each with what the provider needs to answer for it.
#[derive(Debug)]
pub struct RecentCreates<K, V = ()> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K, V> Default for RecentCreates<K, V> {
    fn default() -> Self {
        Self { entries: Mutex::new(HashMap::new()) }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> RecentCreates<K, V> {
    /// Remembers a create of `key` now (and forgets expired ones).
    pub fn record(&self, key: K, value: V) {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|_, (_, at)| now.duration_since(*at) < VISIBILITY_GRACE);
        if entries.len() >= CAPACITY {
            let oldest = entries.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                entries.remove(&k);
            }
        }
        entries.insert(key, (value, now));
    }

    /// What was recorded for `key`, when it was created within [`VISIBILITY_GRACE`].
    pub fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.get(key).filter(|(_, at)| at.elapsed() < VISIBILITY_GRACE).map(|(v, _)| v.clone())
    }

    /// True when `key` was created within [`VISIBILITY_GRACE`].
    pub fn contains(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    /// What was recorded for `key`, forgotten as it is taken (for what may be used once).
    pub fn take(&self, key: &K) -> Option<V> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.remove(key).filter(|(_, at)| at.elapsed() < VISIBILITY_GRACE).map(|(v, _)| v)
    }

    /// Forgets `key` (the cloud shows it now, it was deleted, or its create failed).
    pub fn forget(&self, key: &K) {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn remembered_for_the_grace_period_then_forgotten() {
        let recent: RecentCreates<String, u32> = RecentCreates::default();
        recent.record("a".into(), 1);
        assert_eq!(recent.get(&"a".into()), Some(1));
        tokio::time::advance(VISIBILITY_GRACE - Duration::from_secs(1)).await;
        assert!(recent.contains(&"a".into()));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(!recent.contains(&"a".into()));
        recent.record("b".into(), 2);
        recent.forget(&"b".into());
        assert_eq!(recent.get(&"b".into()), None);
        recent.record("c".into(), 3);
        assert_eq!(recent.take(&"c".into()), Some(3));
        assert_eq!(recent.take(&"c".into()), None, "taken once");
    }
}
