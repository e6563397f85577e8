//! Waiting for insert operations, with the waits of concurrent creates of one
//! project and zone shared.
//!
//! A create whose operation is the only one waited for in its zone waits with
//! its own `zoneOperations.wait` (one call answers it when the operation is
//! done). A create that finds other waits in progress registers its operation
//! with the zone's [`OperationWaiter`] instead; one poller task then reads
//! every registered operation with one `zoneOperations.list` whose filter
//! selects them by name (`name eq "PREFIX(?:s1|s2|...)"`, as the status
//! lookups do), every page, at most every [`POLL_INTERVAL`], and hands each
//! waiter its operation. A lone waiter's operation is in that listing too (it
//! takes whichever answer comes first), and a lone waiter whose wait answered
//! "still running" joins the poller when it runs.
//!
//! What a waiter learns: its DONE operation; the classified error of the
//! listing (every waiter of that listing gets it); that the operation was not
//! in [`ABSENT_LIMIT`] listings in a row (unknown to Compute: treated like a
//! wait that ended without an answer); or nothing by its bound. A refused
//! filter (400, which the driver and not the caller would have caused) sends
//! every waiter back to its own `zoneOperations.wait`, for good, with a
//! warning logged once.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use google_cloud_compute_v1::model::{Operation, OperationList, operation};
use machine_driver_api::{CallContext, DriverError, ErrorKind, KeyedCache, PageTokens};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::clients::{Api, SharedApi};
use crate::credentials::GcpCredentials;
use crate::lookup::{filter_chunks, name_filter};
use crate::naming::InstanceRef;

/// Pause between the first registration of a poller's run and its first listing.
pub(crate) const FIRST_POLL_DELAY: Duration = Duration::from_millis(250);

/// Least time between the starts of two listings of one zone. Under a steady
/// stream of creates the poller lists once per interval: with the default
/// 20 requests/s, 1.3 of them go to listings and the rest to inserts.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(750);

/// Longest pause between two listings of a zone: the interval doubles from
/// [`POLL_INTERVAL`] after each listing that finished none of its operations
/// and no new wait joined (GCE's inserts take tens of seconds: a 20 s
/// operation costs about 7 listings, not 27), back to [`POLL_INTERVAL`] when
/// one is done or a new wait registers.
pub(crate) const MAX_POLL_INTERVAL: Duration = Duration::from_secs(5);

/// Least time between the starts of a lone create's first and second
/// `zoneOperations.wait`; it doubles for each further "still running" answer,
/// up to [`MAX_POLL_INTERVAL`]. GCE's wait blocks up to 2 minutes, but is
/// best-effort: it "might return before the default deadline is reached, or
/// might return after zero seconds" (zoneOperations.wait reference), and a
/// client calling it again at once would poll in a tight loop.
pub(crate) const FIRST_WAIT_SPACING: Duration = Duration::from_secs(1);

/// Listings in a row an operation may be missing from before its waiters
/// are told that Compute does not know it.
pub(crate) const ABSENT_LIMIT: u32 = 3;

/// Deadline of one listing (it serves several RPCs, each of which still
/// answers by its own deadline).
const LIST_DEADLINE: Duration = Duration::from_secs(30);

/// Page size of `zoneOperations.list` (the API's maximum).
const LIST_PAGE_SIZE: u32 = 500;

/// Most zone waiters (one per credentials, project and zone).
const MAX_WAITERS: usize = 256;

/// One page of `zoneOperations.list`: (filter, page token, the call's context).
pub(crate) type ListFn = Arc<
    dyn Fn(String, String, CallContext) -> Pin<Box<dyn Future<Output = Result<OperationList, DriverError>> + Send>>
        + Send
        + Sync,
>;

/// Credentials (key fingerprint), the generation of their clients, project, zone.
type ZoneKey = ([u8; 32], u64, String, String);

/// The zone waiters of one driver, created on first use.
#[derive(Debug)]
pub(crate) struct OperationWaiters {
    by_zone: KeyedCache<ZoneKey, OperationWaiter>,
}

impl Default for OperationWaiters {
    fn default() -> Self {
        Self { by_zone: KeyedCache::new(MAX_WAITERS) }
    }
}

impl OperationWaiters {
    /// The waiter of `target`'s project and zone, listing with `api`'s clients and limiter.
    pub(crate) fn for_zone(&self, api: &Api<'_>, key: &GcpCredentials, target: &InstanceRef) -> Arc<OperationWaiter> {
        let zone_key = (key.fingerprint, api.clients.generation, target.project.clone(), target.zone.clone());
        self.by_zone.get_or_insert_with(&zone_key, || {
            OperationWaiter::new(list_fn(api.shared(), target.project.clone(), target.zone.clone()))
        })
    }
}

/// `zoneOperations.list` through the kit's call path (limiter, metrics, the listing's own deadline).
fn list_fn(shared: SharedApi, project: String, zone: String) -> ListFn {
    Arc::new(move |filter: String, page_token: String, ctx: CallContext| {
        let shared = shared.clone();
        let project = project.clone();
        let zone = zone.clone();
        Box::pin(async move {
            let api = shared.bind(&ctx);
            api.call("zoneOperations.list", || {
                api.clients
                    .operations
                    .list()
                    .set_project(&project)
                    .set_zone(&zone)
                    .set_filter(filter.clone())
                    .set_max_results(LIST_PAGE_SIZE)
                    .set_page_token(page_token.clone())
                    .send()
            })
            .await
            .map_err(|f| f.into_driver_error())
        })
    })
}

/// What the poller tells a waiter.
#[derive(Debug)]
enum Answer {
    /// The operation, DONE.
    Done(Box<Operation>),
    /// The listing failed.
    Failed(DriverError),
    /// Missing from [`ABSENT_LIMIT`] listings in a row.
    Absent,
    /// Compute refused the name filter: wait alone.
    Refused,
}

#[derive(Debug)]
struct Waiter {
    shared: bool,
    tx: oneshot::Sender<Answer>,
}

#[derive(Debug, Default)]
struct Waiting {
    waiters: Vec<Waiter>,
    /// Listings in a row that did not show the operation.
    absent: u32,
}

#[derive(Debug, Default)]
struct State {
    ops: HashMap<String, Waiting>,
    /// Waits registered so far (the poller's pace resets when it grows).
    registered: u64,
    /// A poller task runs.
    polling: bool,
    /// Compute refused the name filter: every wait is alone from now on.
    refused: bool,
}

impl State {
    /// Drops waiters that went away (answered by their deadline, cancelled).
    fn prune(&mut self) {
        self.ops.retain(|_, w| {
            w.waiters.retain(|x| !x.tx.is_closed());
            !w.waiters.is_empty()
        });
    }

    fn any_shared(&self) -> bool {
        self.ops.values().any(|w| w.waiters.iter().any(|x| x.shared))
    }

    /// Answers every waiter of `name` and forgets it.
    fn answer(&mut self, name: &str, mut make: impl FnMut() -> Answer) {
        for waiter in self.ops.remove(name).map(|w| w.waiters).unwrap_or_default() {
            // A waiter that went away meanwhile needs no answer.
            let _ = waiter.tx.send(make());
        }
    }
}

/// The shared operation waits of one credentials, project and zone.
pub(crate) struct OperationWaiter {
    list: ListFn,
    first_delay: Duration,
    interval: Duration,
    state: Mutex<State>,
}

impl std::fmt::Debug for OperationWaiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperationWaiter").field("interval", &self.interval).finish_non_exhaustive()
    }
}

impl OperationWaiter {
    /// A waiter listing pages with `list`, paced by [`FIRST_POLL_DELAY`] and [`POLL_INTERVAL`].
    pub(crate) fn new(list: ListFn) -> Self {
        Self::with_pace(list, FIRST_POLL_DELAY, POLL_INTERVAL)
    }

    fn with_pace(list: ListFn, first_delay: Duration, interval: Duration) -> Self {
        Self { list, first_delay, interval, state: Mutex::default() }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits at most `bound` for operation `op_name` to be DONE: `Some` the
    /// DONE operation, `None` when it was not done by then or Compute does
    /// not know it, the error of the wait or listing that failed.
    /// `wait_alone` makes one `zoneOperations.wait` call for this operation
    /// (made only while no other wait of this zone runs).
    pub(crate) async fn wait<W, F>(
        self: &Arc<Self>,
        op_name: &str,
        bound: Duration,
        mut wait_alone: W,
    ) -> Result<Option<Operation>, DriverError>
    where
        W: FnMut() -> F,
        F: Future<Output = Result<Operation, DriverError>>,
    {
        let deadline = Instant::now() + bound;
        let (mut rx, mut alone) = self.register(op_name);
        // When the next own wait may start, and how many answered "still running".
        let mut next_own: Option<Instant> = None;
        let mut running_answers = 0u32;
        loop {
            let answer = if alone {
                let paced = match next_own.take() {
                    Some(at) => pause(&mut rx, at.min(deadline)).await,
                    None => None,
                };
                if let Some(answer) = paced {
                    answer
                } else if Instant::now() >= deadline {
                    return Ok(None);
                } else {
                    let started = Instant::now();
                    let mut own = std::pin::pin!(tokio::time::timeout_at(deadline, wait_alone()));
                    // The own wait, or the poller's answer when it comes first; a
                    // refusal leaves the own wait running.
                    let own = loop {
                        match rx.as_mut() {
                            Some(shared) => tokio::select! {
                                answer = shared => match answer {
                                    Ok(Answer::Refused) => rx = None,
                                    answer => break Err(answer),
                                },
                                own = &mut own => break Ok(own),
                            },
                            None => break Ok((&mut own).await),
                        }
                    };
                    match own {
                        Ok(Err(_elapsed)) => return Ok(None),
                        Ok(Ok(Ok(op))) if is_done(&op) => return Ok(Some(op)),
                        Ok(Ok(Ok(_running))) => {
                            alone = !self.join_poller(op_name);
                            next_own = Some(started + wait_spacing(running_answers));
                            running_answers = running_answers.saturating_add(1);
                            continue;
                        }
                        Ok(Ok(Err(e))) => return Err(e),
                        Err(answer) => answer,
                    }
                }
            } else {
                let Some(rx) = rx.as_mut() else { return Ok(None) };
                match tokio::time::timeout_at(deadline, rx).await {
                    Err(_elapsed) => return Ok(None),
                    Ok(answer) => answer,
                }
            };
            match answer {
                Ok(Answer::Done(op)) => return Ok(Some(*op)),
                Ok(Answer::Failed(e)) => return Err(e),
                Ok(Answer::Absent) | Err(_) => return Ok(None),
                Ok(Answer::Refused) => {
                    rx = None;
                    alone = true;
                }
            }
        }
    }

    /// Registers a wait for `op_name`: its answer channel (none when the name
    /// cannot be listed) and whether it waits alone. The first wait of a zone
    /// waits alone; the others start the poller if it does not run.
    fn register(self: &Arc<Self>, op_name: &str) -> (Option<oneshot::Receiver<Answer>>, bool) {
        let mut st = self.lock();
        if st.refused || !listable(op_name) {
            return (None, true);
        }
        st.prune();
        let alone = st.ops.is_empty();
        let (tx, rx) = oneshot::channel();
        st.registered += 1;
        st.ops.entry(op_name.to_string()).or_default().waiters.push(Waiter { shared: !alone, tx });
        if !alone {
            self.ensure_polling(&mut st);
        }
        (Some(rx), alone)
    }

    /// A lone wait that answered "still running": join the poller when it runs.
    fn join_poller(&self, op_name: &str) -> bool {
        let mut st = self.lock();
        if !st.polling {
            return false;
        }
        let Some(w) = st.ops.get_mut(op_name) else { return false };
        w.waiters.iter_mut().filter(|x| !x.tx.is_closed()).for_each(|x| x.shared = true);
        true
    }

    fn ensure_polling(self: &Arc<Self>, st: &mut State) {
        if !st.polling {
            st.polling = true;
            tokio::spawn(Arc::clone(self).poll());
        }
    }

    /// The poller: one listing per interval while shared waits are registered,
    /// the interval doubling (up to [`MAX_POLL_INTERVAL`]) while listings find
    /// nothing done and no new wait registers.
    async fn poll(self: Arc<Self>) {
        let mut next = Instant::now() + self.first_delay;
        let mut interval = self.interval;
        let mut seen_registrations = self.lock().registered;
        loop {
            tokio::time::sleep_until(next).await;
            let names: Vec<String> = {
                let mut st = self.lock();
                st.prune();
                if !st.any_shared() {
                    st.polling = false;
                    return;
                }
                if st.registered != seen_registrations {
                    seen_registrations = st.registered;
                    interval = self.interval;
                }
                st.ops.keys().cloned().collect()
            };
            let started = Instant::now();
            let Some(finished) = self.round(names).await else { return };
            interval =
                if finished > 0 { self.interval } else { (interval * 2).min(MAX_POLL_INTERVAL.max(self.interval)) };
            let registered = self.lock().registered;
            if registered != seen_registrations {
                seen_registrations = registered;
                interval = self.interval;
            }
            next = started + interval;
        }
    }

    /// One listing of `names` (one call per filter chunk and page): how many
    /// of them it answered, `None` when the filter was refused (the poller stops).
    async fn round(&self, names: Vec<String>) -> Option<usize> {
        let mut finished = 0;
        for chunk in filter_chunks(names) {
            let listed = self.list_named(&chunk).await;
            let mut st = self.lock();
            match listed {
                Ok(mut found) => {
                    for name in &chunk {
                        match found.remove(name) {
                            Some(op) if is_done(&op) => {
                                finished += 1;
                                st.answer(name, || Answer::Done(Box::new(op.clone())));
                            }
                            Some(_running) => {
                                if let Some(w) = st.ops.get_mut(name) {
                                    w.absent = 0;
                                }
                            }
                            None => {
                                let gone = st.ops.get_mut(name).is_some_and(|w| {
                                    w.absent += 1;
                                    w.absent >= ABSENT_LIMIT
                                });
                                if gone {
                                    finished += 1;
                                    st.answer(name, || Answer::Absent);
                                }
                            }
                        }
                    }
                }
                // A refused filter, or a role allowed zoneOperations.get but not .list.
                Err(e) if matches!(e.kind(), ErrorKind::InvalidArgument | ErrorKind::PermissionDenied) => {
                    tracing::warn!(
                        error = %e,
                        "Compute refused the zoneOperations.list call; \
                         creates wait for their operation with their own zoneOperations.wait from now on"
                    );
                    st.refused = true;
                    st.polling = false;
                    let all: Vec<String> = st.ops.keys().cloned().collect();
                    for name in all {
                        st.answer(&name, || Answer::Refused);
                    }
                    return None;
                }
                Err(e) => {
                    finished += chunk.len();
                    for name in &chunk {
                        st.answer(name, || Answer::Failed(e.clone()));
                    }
                }
            }
        }
        Some(finished)
    }

    /// `zoneOperations.list` filtered to `names`, every page: the operations found, by name.
    async fn list_named(&self, names: &[String]) -> Result<HashMap<String, Operation>, DriverError> {
        let filter = name_filter(names);
        let ctx = CallContext::with_timeout("shared operation wait", LIST_DEADLINE);
        let mut found = HashMap::new();
        let mut tokens = PageTokens::new("compute.zoneOperations.list");
        let mut page_token = String::new();
        loop {
            let page = (self.list)(filter.clone(), page_token.clone(), ctx.clone()).await?;
            for op in page.items {
                if let Some(name) = op.name.clone().filter(|n| names.contains(n)) {
                    found.insert(name, op);
                }
            }
            match tokens.next(page.next_page_token.as_deref())? {
                Some(t) => page_token = t,
                None => return Ok(found),
            }
        }
    }
}

/// The least time between the starts of a lone wait's own `zoneOperations.wait`
/// calls after `running` "still running" answers: [`FIRST_WAIT_SPACING`], doubling,
/// at most [`MAX_POLL_INTERVAL`].
fn wait_spacing(running: u32) -> Duration {
    FIRST_WAIT_SPACING.saturating_mul(1u32 << running.min(8)).min(MAX_POLL_INTERVAL)
}

/// Waits until `until` for the next own wait, or for the poller's answer when
/// it comes first (`Some`); a refusal of the shared listing only drops the
/// channel (the wait stays alone).
async fn pause(
    rx: &mut Option<oneshot::Receiver<Answer>>,
    until: Instant,
) -> Option<Result<Answer, oneshot::error::RecvError>> {
    let Some(shared) = rx.as_mut() else {
        tokio::time::sleep_until(until).await;
        return None;
    };
    tokio::select! {
        answer = shared => match answer {
            Ok(Answer::Refused) => {
                *rx = None;
                tokio::time::sleep_until(until).await;
                None
            }
            answer => Some(answer),
        },
        () = tokio::time::sleep_until(until) => None,
    }
}

/// Whether an operation name can go into a name filter unescaped (GCE's
/// operation names are `operation-<digits>-<hex>-...`).
fn listable(name: &str) -> bool {
    !name.is_empty() && name.len() <= 128 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether an operation is DONE.
pub(crate) fn is_done(op: &Operation) -> bool {
    matches!(op.status, Some(operation::Status::Done))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A listing answering from `pages` (by page token) and recording (filter, token) of each call.
    struct MockList {
        calls: Mutex<Vec<(String, String)>>,
        pages: Mutex<HashMap<String, Result<OperationList, DriverError>>>,
    }

    impl MockList {
        fn new() -> Arc<Self> {
            Arc::new(Self { calls: Mutex::default(), pages: Mutex::default() })
        }

        fn page(&self, token: &str, page: Result<OperationList, DriverError>) {
            self.pages.lock().unwrap().insert(token.to_string(), page);
        }

        fn calls(&self) -> Vec<(String, String)> {
            self.calls.lock().unwrap().clone()
        }

        fn waiter(self: &Arc<Self>) -> Arc<OperationWaiter> {
            let me = Arc::clone(self);
            let list: ListFn = Arc::new(move |filter, token, _ctx| {
                me.calls.lock().unwrap().push((filter, token.clone()));
                let answer = match me.pages.lock().unwrap().get(&token) {
                    Some(Ok(page)) => Ok(page.clone()),
                    Some(Err(e)) => Err(e.clone()),
                    None => Ok(OperationList::new()),
                };
                Box::pin(async move { answer })
            });
            Arc::new(OperationWaiter::with_pace(list, Duration::from_millis(250), Duration::from_millis(500)))
        }
    }

    fn op(name: &str, status: &str) -> Operation {
        let mut op = Operation::new();
        op.name = Some(name.to_string());
        op.status = Some(operation::Status::from(status));
        op
    }

    fn listing(ops: &[Operation], next: Option<&str>) -> OperationList {
        let mut l = OperationList::new();
        l.items = ops.to_vec();
        l.next_page_token = next.map(str::to_string);
        l
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("operation-17000-{i:02}")).collect()
    }

    /// Waits for every name at once; the lone wait never answers, counted in `alone`.
    async fn wait_all(
        waiter: &Arc<OperationWaiter>,
        names: &[String],
        alone: &AtomicUsize,
    ) -> Vec<Result<Option<Operation>, DriverError>> {
        let waits = names.iter().map(|name| {
            waiter.wait(name, Duration::from_secs(10), || {
                alone.fetch_add(1, Ordering::Relaxed);
                std::future::pending::<Result<Operation, DriverError>>()
            })
        });
        futures_join_all(waits).await
    }

    /// `join_all` without a futures dependency: polls every future in order,
    /// so that every wait registers before any listing.
    async fn futures_join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
        let mut pending: Vec<Option<Pin<Box<F>>>> = futures.into_iter().map(|f| Some(Box::pin(f))).collect();
        let mut results: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
        std::future::poll_fn(|cx| {
            for (slot, result) in pending.iter_mut().zip(results.iter_mut()) {
                if let Some(f) = slot
                    && let std::task::Poll::Ready(v) = f.as_mut().poll(cx)
                {
                    *result = Some(v);
                    *slot = None;
                }
            }
            if pending.iter().all(Option::is_none) { std::task::Poll::Ready(()) } else { std::task::Poll::Pending }
        })
        .await;
        results.into_iter().map(|r| r.unwrap()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn many_waiters_are_answered_by_one_listing() {
        let mock = MockList::new();
        let ops = names(12);
        let done: Vec<Operation> = ops.iter().map(|n| op(n, "DONE")).collect();
        mock.page("", Ok(listing(&done, None)));
        let alone = AtomicUsize::new(0);
        let results = wait_all(&mock.waiter(), &ops, &alone).await;
        for (r, name) in results.iter().zip(&ops) {
            assert_eq!(r.as_ref().unwrap().as_ref().unwrap().name.as_deref(), Some(name.as_str()));
        }
        let calls = mock.calls();
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert_eq!(
            calls[0].0,
            format!(
                "name eq \"operation-17000-(?:{})\"",
                (0..12).map(|i| format!("{i:02}")).collect::<Vec<_>>().join("|")
            )
        );
        assert_eq!(alone.load(Ordering::Relaxed), 1, "only the first wait is made alone");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_wait_makes_no_listing() {
        let mock = MockList::new();
        let waiter = mock.waiter();
        let got = waiter
            .wait("operation-1", Duration::from_secs(10), || async { Ok(op("operation-1", "DONE")) })
            .await
            .unwrap();
        assert!(got.is_some());
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(mock.calls().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn running_operations_stay_registered_until_done() {
        let mock = MockList::new();
        let ops = names(3);
        mock.page("", Ok(listing(&[op(&ops[0], "DONE"), op(&ops[1], "RUNNING"), op(&ops[2], "RUNNING")], None)));
        let waiter = mock.waiter();
        let alone = AtomicUsize::new(0);
        let (results, ()) = tokio::join!(wait_all(&waiter, &ops, &alone), async {
            tokio::time::sleep(Duration::from_millis(400)).await;
            let all_done: Vec<Operation> = ops.iter().map(|n| op(n, "DONE")).collect();
            mock.page("", Ok(listing(&all_done, None)));
        });
        assert!(results.iter().all(|r| matches!(r, Ok(Some(_)))), "{results:?}");
        let calls = mock.calls();
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(calls[1].0, "name eq \"operation-17000-0(?:1|2)\"", "the second listing asks for the rest only");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_listing_reaches_every_waiter() {
        let mock = MockList::new();
        mock.page("", Err(DriverError::unavailable("rateLimitExceeded", "throttled", Duration::from_secs(5))));
        let alone = AtomicUsize::new(0);
        let results = wait_all(&mock.waiter(), &names(5), &alone).await;
        for r in &results {
            let e = r.as_ref().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Unavailable);
            assert_eq!(e.reason(), "rateLimitExceeded");
            assert_eq!(e.retry_after(), Some(Duration::from_secs(5)));
        }
        assert_eq!(mock.calls().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_operation_missing_from_the_listings_ends_its_wait() {
        let mock = MockList::new();
        let ops = names(2);
        mock.page("", Ok(listing(&[op(&ops[0], "DONE")], None)));
        let waiter = mock.waiter();
        let alone = AtomicUsize::new(0);
        let (results, ()) = tokio::join!(wait_all(&waiter, &ops, &alone), async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            mock.page("", Ok(listing(&[], None)));
        });
        assert!(matches!(results[0], Ok(Some(_))));
        assert!(matches!(results[1], Ok(None)), "{:?}", results[1]);
        // One listing answered ops[0]; ops[1] was missing from ABSENT_LIMIT listings in a row.
        assert_eq!(mock.calls().len(), ABSENT_LIMIT as usize, "{:?}", mock.calls());
    }

    #[tokio::test(start_paused = true)]
    async fn every_page_is_read() {
        let mock = MockList::new();
        let ops = names(3);
        mock.page("", Ok(listing(&[op(&ops[0], "DONE")], Some("page-2"))));
        mock.page("page-2", Ok(listing(&[op(&ops[1], "DONE")], Some("page-3"))));
        mock.page("page-3", Ok(listing(&[op(&ops[2], "DONE")], None)));
        let alone = AtomicUsize::new(0);
        let results = wait_all(&mock.waiter(), &ops, &alone).await;
        assert!(results.iter().all(|r| matches!(r, Ok(Some(_)))), "{results:?}");
        let tokens: Vec<String> = mock.calls().into_iter().map(|(_, t)| t).collect();
        assert_eq!(tokens, ["", "page-2", "page-3"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_repeated_page_token_fails_the_listing() {
        let mock = MockList::new();
        mock.page("", Ok(listing(&[], Some("again"))));
        mock.page("again", Ok(listing(&[], Some("again"))));
        let alone = AtomicUsize::new(0);
        let results = wait_all(&mock.waiter(), &names(2), &alone).await;
        assert!(results.iter().all(|r| r.as_ref().is_err_and(|e| e.reason() == "PAGE_TOKEN_REPEATED")), "{results:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_filter_sends_every_waiter_to_its_own_wait() {
        let mock = MockList::new();
        mock.page("", Err(DriverError::invalid_argument("filter", "Invalid list filter expression.")));
        let waiter = mock.waiter();
        let alone = AtomicUsize::new(0);
        let waits = names(3).into_iter().map(|name| {
            let waiter = Arc::clone(&waiter);
            let alone = &alone;
            async move {
                waiter
                    .wait(&name, Duration::from_secs(10), || {
                        alone.fetch_add(1, Ordering::Relaxed);
                        let name = name.clone();
                        async move {
                            tokio::time::sleep(Duration::from_millis(500)).await;
                            Ok(op(&name, "DONE"))
                        }
                    })
                    .await
            }
        });
        let results = futures_join_all(waits).await;
        assert!(results.iter().all(|r| matches!(r, Ok(Some(_)))), "{results:?}");
        assert_eq!(mock.calls().len(), 1);
        // The first wait was alone from the start (one call); the two others after the refusal.
        assert_eq!(alone.load(Ordering::Relaxed), 3);
        // Later waits go alone without listing.
        let got = waiter.wait("operation-9", Duration::from_secs(10), || async { Ok(op("operation-9", "DONE")) }).await;
        assert!(matches!(got, Ok(Some(_))));
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(mock.calls().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_wait_answered_at_once_is_not_repeated_in_a_tight_loop() {
        // GCE's best-effort wait may answer a running operation after zero seconds.
        let mock = MockList::new();
        let waiter = mock.waiter();
        let started = Instant::now();
        let done_at = started + Duration::from_secs(20);
        let calls = AtomicUsize::new(0);
        let got = waiter
            .wait("operation-slow", Duration::from_secs(40), || {
                calls.fetch_add(1, Ordering::Relaxed);
                let status = if Instant::now() >= done_at { "DONE" } else { "RUNNING" };
                let answer = op("operation-slow", status);
                async move { Ok(answer) }
            })
            .await
            .unwrap();
        assert!(got.is_some_and(|o| is_done(&o)));
        let calls = calls.load(Ordering::Relaxed);
        // Spacing 1, 2, 4, 5, 5, ... s: waits at 0, 1, 3, 7, 12, 17, 22 s.
        assert_eq!(calls, 7, "own waits for a 20 s operation");
        assert!(started.elapsed() <= Duration::from_secs(25), "{:?}", started.elapsed());
        assert!(mock.calls().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_poller_slows_down_while_nothing_finishes() {
        let mock = MockList::new();
        let ops = names(3);
        let running: Vec<Operation> = ops.iter().map(|n| op(n, "RUNNING")).collect();
        mock.page("", Ok(listing(&running, None)));
        let waiter = mock.waiter();
        let started = Instant::now();
        let waits = ops.iter().map(|name| {
            waiter.wait(name, Duration::from_secs(30), std::future::pending::<Result<Operation, DriverError>>)
        });
        let (results, ()) = tokio::join!(futures_join_all(waits), async {
            tokio::time::sleep(Duration::from_secs(20)).await;
            let done: Vec<Operation> = ops.iter().map(|n| op(n, "DONE")).collect();
            mock.page("", Ok(listing(&done, None)));
        });
        assert!(results.iter().all(|r| matches!(r, Ok(Some(_)))), "{results:?}");
        // Listings at 0.25, 1.25, 3.25, 7.25, 12.25, 17.25, 22.25 s (the mock's 500 ms
        // interval doubling after each idle listing, up to 5 s), not one every 500 ms (45).
        assert_eq!(mock.calls().len(), 7);
        assert!(started.elapsed() <= Duration::from_secs(23), "{:?}", started.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_at_its_bound() {
        let mock = MockList::new();
        let ops = names(2);
        mock.page("", Ok(listing(&[op(&ops[0], "RUNNING"), op(&ops[1], "RUNNING")], None)));
        let waiter = mock.waiter();
        let started = Instant::now();
        let waits = ops.iter().map(|name| {
            waiter.wait(name, Duration::from_secs(2), std::future::pending::<Result<Operation, DriverError>>)
        });
        let results = futures_join_all(waits).await;
        assert!(results.iter().all(|r| matches!(r, Ok(None))), "{results:?}");
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        // The poller stops once nobody waits.
        let calls = mock.calls().len();
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(mock.calls().len() <= calls + 1);
        assert!(!waiter.lock().polling);
    }
}
