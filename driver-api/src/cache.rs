//! [`KeyedCache`]: the one bounded map of shared, long-lived per-key things
//! (SDK clients per credentials, rate limiters per account, coalescers per zone).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

/// A bounded map from keys to shared values, built on first use.
///
/// When full, inserting evicts the least recently used entry, so that keys that
/// stop being used (rotated credentials, deleted projects) do not pile up
/// while the busy ones (and the state they carry, like a rate limiter's
/// bucket) stay.
#[derive(Debug)]
pub struct KeyedCache<K, V> {
    capacity: usize,
    inner: Mutex<Entries<K, V>>,
}

#[derive(Debug)]
struct Entries<K, V> {
    map: HashMap<K, (Arc<V>, u64)>,
    clock: u64,
}

impl<K: Hash + Eq + Clone, V> KeyedCache<K, V> {
    /// An empty cache holding at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), inner: Mutex::new(Entries { map: HashMap::new(), clock: 0 }) }
    }

    /// The value of `key`, if cached.
    pub fn get<Q>(&self, key: &Q) -> Option<Arc<V>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.clock += 1;
        let now = inner.clock;
        inner.map.get_mut(key).map(|(v, used)| {
            *used = now;
            Arc::clone(v)
        })
    }

    /// The value of `key`, made by `make` when absent.
    pub fn get_or_insert_with(&self, key: &K, make: impl FnOnce() -> V) -> Arc<V> {
        if let Some(v) = self.get(key) {
            return v;
        }
        self.insert_if_absent(key.clone(), Arc::new(make()))
    }

    /// Caches `value` under `key` unless another was cached meanwhile (a value
    /// built outside the lock, e.g. asynchronously); answers the cached one.
    pub fn insert_if_absent(&self, key: K, value: Arc<V>) -> Arc<V> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.clock += 1;
        let now = inner.clock;
        if let Some((v, used)) = inner.map.get_mut(&key) {
            *used = now;
            return Arc::clone(v);
        }
        if inner.map.len() >= self.capacity {
            let oldest = inner.map.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                inner.map.remove(&k);
            }
        }
        inner.map.insert(key, (Arc::clone(&value), now));
        value
    }

    /// Drops `key`'s value (the next use builds it again); answers it.
    pub fn remove<Q>(&self, key: &Q) -> Option<Arc<V>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).map.remove(key).map(|(v, _)| v)
    }

    /// Caches `value` under `key`, replacing what was there.
    pub fn insert(&self, key: K, value: Arc<V>) {
        self.remove(&key);
        self.insert_if_absent(key, value);
    }

    /// Number of cached entries.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).map.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_shared_and_built_once() {
        let cache: KeyedCache<String, u32> = KeyedCache::new(4);
        let a = cache.get_or_insert_with(&"a".to_string(), || 1);
        let again = cache.get_or_insert_with(&"a".to_string(), || panic!("built twice"));
        assert!(Arc::ptr_eq(&a, &again));
        assert_eq!(cache.get("a").as_deref(), Some(&1));
        assert_eq!(cache.get("b"), None);
        cache.insert("a".to_string(), Arc::new(2));
        assert_eq!(cache.get("a").as_deref(), Some(&2));
        assert_eq!(cache.remove("a").as_deref(), Some(&2));
        assert_eq!(cache.get("a"), None);
    }

    #[test]
    fn full_cache_evicts_the_least_recently_used_entry() {
        let cache: KeyedCache<u32, u32> = KeyedCache::new(2);
        cache.get_or_insert_with(&1, || 10);
        cache.get_or_insert_with(&2, || 20);
        assert!(cache.get(&1).is_some(), "1 is now the most recently used");
        cache.get_or_insert_with(&3, || 30);
        assert_eq!(cache.len(), 2);
        assert!(cache.get(&2).is_none(), "2 was the least recently used");
        assert!(cache.get(&1).is_some() && cache.get(&3).is_some());
    }

    #[test]
    fn a_value_built_concurrently_loses_to_the_cached_one() {
        let cache: KeyedCache<u32, u32> = KeyedCache::new(2);
        let first = cache.insert_if_absent(1, Arc::new(1));
        let second = cache.insert_if_absent(1, Arc::new(2));
        assert!(Arc::ptr_eq(&first, &second));
    }
}
