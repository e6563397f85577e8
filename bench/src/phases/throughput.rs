//! Phase 4: creates under a cloud rate limit injected into the fake, with the
//! driver's client-side limiter at the same rate: machines per second, share
//! of the allowed request rate used, throttling errors that reached the caller.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::task::JoinSet;

use crate::admin::{Admin, CallCounts};
use crate::stats::Latency;
use crate::workload::{Sidecar, error_key, is_throttling, new_machine};

/// Pause before a caller retries a failed create (the same machine, as the machine-controller would).
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// What phase 4 measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Throughput {
    /// Rate limit of the fake and the driver, requests/s.
    pub(crate) rate_per_second: u32,
    /// Burst of both token buckets.
    pub(crate) burst: u32,
    /// Concurrent callers.
    pub(crate) concurrency: usize,
    /// From the first create until the last one answered (new creates start only within T), s.
    pub(crate) seconds: f64,
    /// Creates answered OK.
    pub(crate) creates_ok: u64,
    /// creates_ok / seconds.
    pub(crate) creates_per_second: f64,
    /// Cloud requests received by the fake during the phase.
    pub(crate) calls: CallCounts,
    /// Requests the fake let through (total − throttled).
    pub(crate) accepted_calls: u64,
    /// accepted_calls / creates_ok.
    pub(crate) calls_per_create: f64,
    /// Requests the fake's bucket could admit in `seconds`: rate × seconds + burst.
    pub(crate) allowed_calls: f64,
    /// accepted_calls / allowed_calls, %.
    pub(crate) used_percent: f64,
    /// allowed_calls / calls_per_create / seconds: the most creates/s the limit (with its burst) allows at this call count.
    pub(crate) max_creates_per_second: f64,
    /// Failed creates whose status carried a throttling reason (RequestLimitExceeded, rateLimitExceeded, ...).
    pub(crate) throttling_errors: u64,
    /// All failed creates by `CODE (reason)`.
    pub(crate) errors: BTreeMap<String, u64>,
    /// Latency of the creates that answered OK.
    pub(crate) create_latency: Latency,
}

#[derive(Default)]
struct Tally {
    ok: Vec<Duration>,
    throttled: u64,
    errors: BTreeMap<String, u64>,
}

/// Runs phase 4 against a driver started with `--cloud-rate-limit rate --cloud-burst rate`.
pub(crate) async fn run(
    sidecar: &Sidecar,
    admin: &Admin,
    rate: u32,
    duration: Duration,
    concurrency: usize,
) -> Result<Throughput, String> {
    admin.set_rate_limit(rate, rate).await?;
    admin.reset_calls().await?;
    let started = Instant::now();
    let mut set = JoinSet::new();
    for worker in 0..concurrency.max(1) {
        let sidecar = sidecar.clone();
        set.spawn(async move {
            let mut tally = Tally::default();
            let mut n = 0;
            let mut m = new_machine(&format!("tp{worker}"), n);
            while started.elapsed() < duration {
                let t = Instant::now();
                match sidecar.create(&mut m).await {
                    Ok(()) => {
                        tally.ok.push(t.elapsed());
                        n += 1;
                        m = new_machine(&format!("tp{worker}"), n);
                    }
                    Err(s) => {
                        if is_throttling(&s) {
                            tally.throttled += 1;
                        }
                        *tally.errors.entry(error_key(&s)).or_default() += 1;
                        tokio::time::sleep(RETRY_PAUSE).await;
                    }
                }
            }
            tally
        });
    }
    let mut all = Tally::default();
    while let Some(joined) = set.join_next().await {
        let t = joined.map_err(|e| format!("create task: {e}"))?;
        all.ok.extend(t.ok);
        all.throttled += t.throttled;
        for (k, v) in t.errors {
            *all.errors.entry(k).or_default() += v;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let calls = admin.calls().await?;
    admin.set_rate_limit(0, 0).await?;

    let creates_ok = all.ok.len() as u64;
    let accepted_calls = calls.total.saturating_sub(calls.throttled);
    let calls_per_create = if creates_ok > 0 { accepted_calls as f64 / creates_ok as f64 } else { 0.0 };
    let allowed_calls = f64::from(rate) * seconds + f64::from(rate);
    Ok(Throughput {
        rate_per_second: rate,
        burst: rate,
        concurrency,
        seconds,
        creates_ok,
        creates_per_second: creates_ok as f64 / seconds,
        accepted_calls,
        calls_per_create,
        allowed_calls,
        used_percent: 100.0 * accepted_calls as f64 / allowed_calls,
        max_creates_per_second: if calls_per_create > 0.0 { allowed_calls / calls_per_create / seconds } else { 0.0 },
        throttling_errors: all.throttled,
        errors: all.errors,
        create_latency: Latency::of(&all.ok),
        calls,
    })
}
