//! [`KeyedCache`]: the one bounded map of shared, long-lived per-key things
//! (SDK clients per credentials, rate limiters per account, coalescers per
//! zone, point lookups such as an image's root device), with single-flight
//! fetching ([`KeyedCache::get_or_fetch`]).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::OnceCell;

use crate::DriverError;

/// One fetch of a key in flight, its answer shared by every caller waiting on it.
type Flight<V> = Arc<OnceCell<Result<Arc<V>, DriverError>>>;

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
    /// Fetches in flight ([`KeyedCache::get_or_fetch`]), removed when they end.
    flights: Mutex<HashMap<K, Flight<V>>>,
}

#[derive(Debug)]
struct Entries<K, V> {
    map: HashMap<K, (Arc<V>, u64)>,
    clock: u64,
}

impl<K: Hash + Eq + Clone, V> KeyedCache<K, V> {
    /// An empty cache holding at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            inner: Mutex::new(Entries { map: HashMap::new(), clock: 0 }),
            flights: Mutex::new(HashMap::new()),
        }
    }

    /// The value of `key`, fetched by `fetch` when absent, one fetch at a time
    /// per key (single flight): callers that ask while a fetch of their key is
    /// in flight wait for it and share its answer, error included, so that
    /// 100 concurrent creates of one image make one lookup. A fetched value is
    /// cached; an error is not (the next caller fetches again). When the
    /// caller whose fetch is in flight goes away, a waiting caller fetches.
    pub async fn get_or_fetch<F, Fut>(&self, key: &K, fetch: F) -> Result<Arc<V>, DriverError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, DriverError>>,
    {
        if let Some(v) = self.get(key) {
            return Ok(v);
        }
        let flight = {
            let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(flights.entry(key.clone()).or_default())
        };
        let answer = flight
            .get_or_init(|| async {
                // A flight that ended just before this one began cached it.
                match self.get(key) {
                    Some(v) => Ok(v),
                    None => fetch().await.map(|v| self.insert_if_absent(key.clone(), Arc::new(v))),
                }
            })
            .await
            .clone();
        let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
        if flights.get(key).is_some_and(|f| Arc::ptr_eq(f, &flight)) {
            flights.remove(key);
        }
        answer
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
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// `n` concurrent `get_or_fetch` of `key`, each with a fetch that counts
    /// itself in `calls`, waits 20 ms and answers `answer`.
    async fn fetch_at_once(
        cache: &Arc<KeyedCache<String, String>>,
        key: &str,
        n: usize,
        calls: &Arc<AtomicUsize>,
        answer: Result<&'static str, DriverError>,
    ) -> Vec<Result<Arc<String>, DriverError>> {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..n {
            let (cache, calls, answer, key) = (Arc::clone(cache), Arc::clone(calls), answer.clone(), key.to_string());
            set.spawn(async move {
                cache
                    .get_or_fetch(&key, || async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        answer.map(str::to_string)
                    })
                    .await
            });
        }
        set.join_all().await
    }

    #[tokio::test]
    async fn concurrent_fetches_of_one_key_make_one_call_and_share_its_answer() {
        let cache = Arc::new(KeyedCache::new(4));
        let calls = Arc::new(AtomicUsize::new(0));
        let answers = fetch_at_once(&cache, "ami-1", 100, &calls, Ok("/dev/xvda")).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1, "one fetch for 100 concurrent callers");
        assert!(answers.iter().all(|a| a.as_deref().is_ok_and(|v| v == "/dev/xvda")));
        assert_eq!(fetch_at_once(&cache, "ami-1", 1, &calls, Ok("other")).await[0].as_deref().unwrap(), "/dev/xvda");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "then cached");
        assert!(cache.flights.lock().unwrap().is_empty(), "no flight left behind");
    }

    #[tokio::test]
    async fn an_error_is_shared_by_the_waiters_and_not_cached() {
        let cache = Arc::new(KeyedCache::new(4));
        let calls = Arc::new(AtomicUsize::new(0));
        let refused = DriverError::invalid_argument("providerSpec.ami", "image not found");
        let answers = fetch_at_once(&cache, "ami-2", 10, &calls, Err(refused)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(answers.iter().all(|a| a.as_ref().is_err_and(|e| e.field() == Some("providerSpec.ami"))));
        assert!(cache.get("ami-2").is_none(), "an error is not cached");
        let again = fetch_at_once(&cache, "ami-2", 1, &calls, Ok("/dev/sda1")).await;
        assert_eq!(again[0].as_deref().unwrap(), "/dev/sda1");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

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
