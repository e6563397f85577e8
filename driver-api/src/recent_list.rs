//! [`RecentList`]: the last full list of a cloud's resources, answering the
//! lookups of the next moments.
//!
//! Where a cloud can read many machines only by listing (Azure's resource
//! group, an OpenStack project's servers by name prefix), every batched
//! status read costs a whole list. Polls reach a driver in waves (the server
//! serves a bounded number of calls at once), so without this 10,000 polls
//! would list the same servers once a wave. A list answers the lookups that
//! go out within its reuse window after the list *started* and that it shows
//! every key of: an answer is then at most that window older than its poll,
//! and a key the list does not show (a machine created since) is read afresh
//! by the caller.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// One list: its entries by key and when it started.
#[derive(Debug)]
pub struct Listed<V> {
    started: Instant,
    by_key: HashMap<String, V>,
}

impl<V> Listed<V> {
    /// Every entry of the list.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.by_key.values()
    }
}

/// The entries a list answers for the keys asked, with the list they come from.
pub type ListAnswer<V> = (Arc<Listed<V>>, HashMap<String, V>);

/// The last list of one scope (a resource group, a project and name prefix).
#[derive(Debug)]
pub struct RecentList<V> {
    reuse: Duration,
    /// Keys are compared after this (ARM names are case-insensitive).
    normalize: fn(&str) -> String,
    last: Mutex<Option<Arc<Listed<V>>>>,
}

impl<V: Clone> RecentList<V> {
    /// No list yet; a list answers for `reuse` after it started, comparing
    /// keys after `normalize`.
    pub fn new(reuse: Duration, normalize: fn(&str) -> String) -> Self {
        Self { reuse, normalize, last: Mutex::new(None) }
    }

    /// The entries of `keys` (under the keys as asked) and the list they come
    /// from, when the last list started less than the reuse window ago and
    /// shows every key; `None` otherwise (list again).
    pub fn answering(&self, keys: &[String]) -> Option<ListAnswer<V>> {
        let list = self.last.lock().unwrap_or_else(PoisonError::into_inner).clone()?;
        if list.started.elapsed() > self.reuse {
            return None;
        }
        let found = self.named(&list, keys);
        (found.len() == keys.len()).then_some((list, found))
    }

    /// Keeps a list that started at `started` (replacing the last one) and
    /// answers `keys` from it: the entries it shows.
    pub fn keep(
        &self,
        started: Instant,
        entries: impl IntoIterator<Item = (String, V)>,
        keys: &[String],
    ) -> ListAnswer<V> {
        let by_key = entries.into_iter().map(|(k, v)| ((self.normalize)(&k), v)).collect();
        let list = Arc::new(Listed { started, by_key });
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&list));
        let found = self.named(&list, keys);
        (list, found)
    }

    fn named(&self, list: &Listed<V>, keys: &[String]) -> HashMap<String, V> {
        keys.iter().filter_map(|k| Some((k.clone(), list.by_key.get(&(self.normalize)(k))?.clone()))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_recent_list_answers_the_keys_it_shows_under_the_keys_asked() {
        let recent = RecentList::new(Duration::from_secs(60), |k| k.to_ascii_lowercase());
        assert!(recent.answering(&keys(&["a"])).is_none(), "no list yet");
        let (list, found) =
            recent.keep(Instant::now(), [("A".to_string(), 1), ("b".to_string(), 2)], &keys(&["a", "c"]));
        assert_eq!(found, HashMap::from([("a".to_string(), 1)]), "c is not in the list");
        assert_eq!(list.values().count(), 2);
        let (_, again) = recent.answering(&keys(&["B", "a"])).expect("within the window, every key shown");
        assert_eq!(again, HashMap::from([("B".to_string(), 2), ("a".to_string(), 1)]));
        assert!(recent.answering(&keys(&["a", "new"])).is_none(), "a key the list lacks: list again");
    }

    #[test]
    fn a_list_older_than_the_window_answers_nothing() {
        let recent = RecentList::new(Duration::from_millis(10), |k| k.to_string());
        let long_ago = Instant::now().checked_sub(Duration::from_secs(1)).expect("an instant a second ago");
        recent.keep(long_ago, [("a".to_string(), 1)], &[]);
        assert!(recent.answering(&keys(&["a"])).is_none());
        recent.keep(Instant::now(), [("a".to_string(), 1)], &[]);
        assert!(recent.answering(&keys(&["a"])).is_some(), "a new list replaces it");
    }
}
