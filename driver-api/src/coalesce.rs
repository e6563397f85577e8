//! Coalescing of concurrent point lookups into batched cloud reads.
//!
//! The machine-controller polls the status of every machine; a thousand
//! concurrent `GetMachineStatus` calls must not become a thousand cloud reads
//! when the cloud can answer many ids in one call (EC2 DescribeInstances).
//! A lone lookup is sent at once (no waiting window); lookups that arrive while
//! a batch is in flight queue up and go out together when it returns. A further
//! batch runs alongside only when a full batch is waiting, and a queue short
//! of a full batch gathers for a few milliseconds before it goes out, up to
//! `max_in_flight` batches at a time and `max_batch` keys per batch. (With
//! half a batch as the bar, 10,000 concurrent AWS polls took 72
//! DescribeInstances instead of 52: partial batches went out while full
//! ones were forming.)
//!
//! Traces stay whole: a batch's read runs in a `coalesced_read` span whose
//! parent is the span of the lookup that opened the batch, with a
//! follows-from link to the span of every other lookup it answers (the
//! server's trace exporter keeps enough links per span for a full batch), so
//! the cloud call inside shows up under the RPCs it served.
//!
//! A queued lookup whose caller gave up before its batch went out is dropped
//! from the queue instead of being fetched, so keys of abandoned calls never
//! take batch room (or a cloud call) from live ones.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tracing::{Instrument, Span};

use crate::context::CallContext;
use crate::error::DriverError;

/// How long a queue short of a full batch gathers after a batch returned,
/// before the next goes out (10,000 concurrent AWS polls: 52-59 calls with
/// 10 ms, 63-64 with 3 ms, the clients sending 512 at a time).
const LINGER: std::time::Duration = std::time::Duration::from_millis(10);

/// Deadline of one batched read, made on behalf of several RPCs (each waiting
/// RPC still answers by its own deadline).
pub const BATCH_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// The batched read: keys in, a result per key out (keys missing from the map
/// are "absent"). An `Err` fails every lookup of the batch. The context bounds
/// the read by [`BATCH_DEADLINE`].
pub type BatchFn<K, V> = Arc<
    dyn Fn(Vec<K>, CallContext) -> Pin<Box<dyn Future<Output = Result<HashMap<K, V>, DriverError>> + Send>>
        + Send
        + Sync,
>;

/// Coalesces concurrent lookups of keys `K` into batched calls.
pub struct Coalescer<K, V> {
    inner: Arc<Inner<K, V>>,
}

struct Inner<K, V> {
    what: &'static str,
    fetch: BatchFn<K, V>,
    max_batch: usize,
    max_in_flight: usize,
    state: Mutex<State<K, V>>,
}

type Waiter<V> = oneshot::Sender<Result<Option<V>, DriverError>>;

/// A queued lookup: its key, where its answer goes, and the caller's span.
type Queued<K, V> = (K, Waiter<V>, Span);

struct State<K, V> {
    queue: Vec<Queued<K, V>>,
    in_flight: usize,
}

impl<K, V> std::fmt::Debug for Coalescer<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coalescer")
            .field("what", &self.inner.what)
            .field("max_batch", &self.inner.max_batch)
            .field("max_in_flight", &self.inner.max_in_flight)
            .finish()
    }
}

impl<K, V> Coalescer<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Clone + Send + 'static,
{
    /// A coalescer calling `fetch` with at most `max_batch` keys, at most
    /// `max_in_flight` batches at once. `what` names the read in errors
    /// (`ec2 DescribeInstances`).
    pub fn new(what: &'static str, fetch: BatchFn<K, V>, max_batch: usize, max_in_flight: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                what,
                fetch,
                max_batch: max_batch.max(1),
                max_in_flight: max_in_flight.max(1),
                state: Mutex::new(State { queue: Vec::new(), in_flight: 0 }),
            }),
        }
    }

    /// Looks `key` up, sharing a cloud call with concurrent lookups.
    /// `Ok(None)` when the batch answered without this key.
    pub async fn get(&self, key: K) -> Result<Option<V>, DriverError> {
        let (tx, rx) = oneshot::channel();
        {
            let mut st = lock(&self.inner.state);
            st.queue.push((key, tx, Span::current()));
        }
        Inner::pump(&self.inner);
        rx.await.unwrap_or_else(|_| Err(DriverError::internal("batched lookup was dropped")))
    }

    /// [`Coalescer::get`], answering DEADLINE_EXCEEDED when `ctx`'s deadline
    /// comes first (the batch goes on for the other lookups in it).
    pub async fn get_within(&self, ctx: &CallContext, key: K) -> Result<Option<V>, DriverError> {
        match tokio::time::timeout_at(ctx.deadline(), self.get(key)).await {
            Ok(answer) => answer,
            Err(_) => Err(DriverError::deadline_exceeded(format!(
                "{} did not answer before the call's deadline",
                self.inner.what
            ))),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<K, V> Inner<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Clone + Send + 'static,
{
    /// Starts batches while there is queued work and a free slot.
    fn pump(self: &Arc<Self>) {
        loop {
            let batch = {
                let mut st = lock(&self.state);
                // A lookup whose caller gave up (its deadline passed, its RPC was
                // cancelled) is not fetched: its key would only cost batch room.
                st.queue.retain(|(_, tx, _)| !tx.is_closed());
                let worth_a_parallel_batch = st.in_flight == 0 || st.queue.len() >= self.max_batch;
                if st.queue.is_empty() || st.in_flight >= self.max_in_flight || !worth_a_parallel_batch {
                    return;
                }
                st.in_flight += 1;
                let n = st.queue.len().min(self.max_batch);
                st.queue.drain(..n).collect::<Vec<_>>()
            };
            let this = self.clone();
            let span = batch_span(&batch);
            let batch: Vec<(K, Waiter<V>)> = batch.into_iter().map(|(k, tx, _)| (k, tx)).collect();
            let this_batch = this.clone();
            // The span covers the read and the answers only, so that it (and the
            // opening RPC's span, its parent) closes before the linger below.
            let answer = async move {
                let this = this_batch;
                // Each key once, in queue order (a set: batches reach 10,000 keys).
                let keys: Vec<K> = {
                    let mut seen = HashSet::with_capacity(batch.len());
                    batch.iter().filter(|(k, _)| seen.insert(k)).map(|(k, _)| k.clone()).collect()
                };
                let result = (this.fetch)(keys, CallContext::with_timeout("batched read", BATCH_DEADLINE)).await;
                match result {
                    Ok(map) => {
                        for (k, tx) in batch {
                            let _ = tx.send(Ok(map.get(&k).cloned()));
                        }
                    }
                    Err(e) => {
                        // Every waiter gets the whole error (field and source included).
                        for (_, tx) in batch {
                            let _ = tx.send(Err(e.clone()));
                        }
                    }
                }
            }
            .instrument(span);
            let work = async move {
                answer.await;
                // Under load, stragglers short of a full batch are about to be joined
                // by more: let them gather for a moment (the slot stays taken
                // meanwhile). A lone lookup never waits: it finds no batch in flight.
                let stragglers = lock(&this.state).queue.len();
                if stragglers > 0 && stragglers < this.max_batch {
                    tokio::time::sleep(LINGER).await;
                }
                lock(&this.state).in_flight -= 1;
                this.pump();
            };
            tokio::spawn(work);
        }
    }
}

/// The span of one batch: child of the first lookup's span, following from the others'.
fn batch_span<K, V>(batch: &[Queued<K, V>]) -> Span {
    let Some((_, _, first)) = batch.first() else {
        return Span::none();
    };
    let span = tracing::debug_span!(parent: first, "coalesced_read", keys = batch.len());
    for (_, _, other) in &batch[1..] {
        span.follows_from(other);
    }
    span
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    fn counting(calls: Arc<AtomicUsize>, sizes: Arc<Mutex<Vec<usize>>>) -> BatchFn<u32, u32> {
        Arc::new(move |keys: Vec<u32>, _ctx| {
            calls.fetch_add(1, Ordering::SeqCst);
            lock(&sizes).push(keys.len());
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(keys.into_iter().filter(|k| k % 7 != 0).map(|k| (k, k * 10)).collect())
            })
        })
    }

    #[tokio::test]
    async fn lone_lookup_goes_out_at_once() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = Coalescer::new("test read", counting(calls.clone(), Arc::default()), 100, 2);
        let started = tokio::time::Instant::now();
        assert_eq!(c.get(3).await.unwrap(), Some(30));
        assert!(started.elapsed() < Duration::from_millis(40), "{:?}", started.elapsed());
        assert_eq!(c.get(7).await.unwrap(), None, "absent key");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn concurrent_lookups_share_calls() {
        let calls = Arc::new(AtomicUsize::new(0));
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let c = Arc::new(Coalescer::new("test read", counting(calls.clone(), sizes.clone()), 200, 2));
        let tasks: Vec<_> = (1..=1000u32)
            .map(|k| {
                let c = c.clone();
                tokio::spawn(async move { (k, c.get(k).await) })
            })
            .collect();
        for t in tasks {
            let (k, r) = t.await.unwrap();
            assert_eq!(r.unwrap(), if k % 7 == 0 { None } else { Some(k * 10) });
        }
        let n = calls.load(Ordering::SeqCst);
        assert!(n <= 10, "1000 lookups took {n} calls: {:?}", lock(&sizes));
        assert!(lock(&sizes).iter().all(|s| *s <= 200));
    }

    #[tokio::test]
    async fn a_failed_batch_fails_its_lookups_only() {
        let fail = Arc::new(AtomicUsize::new(1));
        let f = fail.clone();
        let fetch: BatchFn<u32, u32> = Arc::new(move |keys: Vec<u32>, _ctx| {
            let fail_now = f.fetch_sub(1, Ordering::SeqCst) == 1;
            Box::pin(async move {
                if fail_now {
                    Err(DriverError::invalid_argument("providerSpec.zone", "no such zone")
                        .with_retry_after(Duration::from_secs(1)))
                } else {
                    Ok(keys.into_iter().map(|k| (k, k)).collect())
                }
            })
        });
        let c = Coalescer::new("test read", fetch, 10, 1);
        let err = c.get(1).await.unwrap_err();
        assert_eq!(err.retry_after(), Some(Duration::from_secs(1)));
        assert_eq!(err.field(), Some("providerSpec.zone"), "the waiter gets the whole error");
        assert_eq!(c.get(2).await.unwrap(), Some(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lookup_answers_by_its_own_deadline() {
        let fetch: BatchFn<u32, u32> = Arc::new(|_keys: Vec<u32>, _ctx| Box::pin(std::future::pending()));
        let c = Coalescer::new("test read", fetch, 10, 1);
        let ctx = CallContext::with_timeout("Test", Duration::from_millis(10));
        let err = c.get_within(&ctx, 1).await.unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::DeadlineExceeded);
        assert_eq!(err.message(), "test read did not answer before the call's deadline");
    }

    #[tokio::test(start_paused = true)]
    async fn lookups_whose_callers_gave_up_are_not_fetched() {
        let keys_fetched = Arc::new(Mutex::new(Vec::new()));
        let release = Arc::new(tokio::sync::Notify::new());
        let (seen, gate) = (keys_fetched.clone(), release.clone());
        let fetch: BatchFn<u32, u32> = Arc::new(move |keys: Vec<u32>, _ctx| {
            lock(&seen).push(keys.clone());
            let gate = gate.clone();
            Box::pin(async move {
                if keys.contains(&1) {
                    gate.notified().await;
                }
                Ok(keys.into_iter().map(|k| (k, k)).collect())
            })
        });
        let c = Arc::new(Coalescer::new("test read", fetch, 10, 1));
        let first = tokio::spawn({
            let c = c.clone();
            async move { c.get(1).await }
        });
        tokio::task::yield_now().await;
        // Queued behind the batch in flight; these callers give up before it returns.
        let short = CallContext::with_timeout("Test", Duration::from_millis(10));
        for k in 2..=4 {
            assert!(c.get_within(&short, k).await.is_err());
        }
        let live = tokio::spawn({
            let c = c.clone();
            async move { c.get(5).await }
        });
        tokio::task::yield_now().await;
        release.notify_one();
        assert_eq!(first.await.unwrap().unwrap(), Some(1));
        assert_eq!(live.await.unwrap().unwrap(), Some(5));
        assert_eq!(*lock(&keys_fetched), vec![vec![1], vec![5]], "abandoned keys 2-4 were fetched");
    }
}
