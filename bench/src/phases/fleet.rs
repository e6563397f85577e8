//! Phase 3: N machines, then N concurrent GetMachineStatus calls: cloud
//! requests issued, latency, and the driver's memory while they run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use machine_driver_proto::v1::Machine;
use serde::Serialize;
use tokio::task::JoinSet;

use crate::admin::{Admin, CallCounts};
use crate::process::DriverProcess;
use crate::stats::Latency;
use crate::workload::{Sidecar, error_key, new_machine};

/// How often the driver's RSS is sampled during a round.
const RSS_SAMPLE_EVERY: Duration = Duration::from_millis(5);

/// Time given to new VMs to leave pending/provisioning (the fake's default boot time is 300 ms).
const SETTLE: Duration = Duration::from_millis(1000);

/// Creates between two progress lines on stderr (only for fleets larger than this).
const PROGRESS_EVERY: usize = 1000;

/// One fleet size.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FleetRound {
    /// Machines that exist (N) and concurrent GetMachineStatus calls made (one per machine).
    pub(crate) machines: usize,
    /// Cloud requests during the N calls.
    pub(crate) calls: CallCounts,
    /// Latency of each call, from the caller.
    pub(crate) latency: Latency,
    /// From the first call sent to the last answer, ms.
    pub(crate) wall_ms: f64,
    /// Failed calls by `CODE (reason)`.
    pub(crate) errors: BTreeMap<String, usize>,
    /// Highest sampled VmRSS of the driver during the calls, KiB.
    pub(crate) rss_peak_sampled_kib: u64,
    /// VmHWM of the driver right after the calls, KiB (lifetime peak).
    pub(crate) hwm_after_kib: u64,
}

/// Building the fleet (through the sidecar, cloud rate limit off).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct FleetBuild {
    /// Machines created.
    pub(crate) created: usize,
    /// Creates in flight at once.
    pub(crate) concurrency: usize,
    /// Total time spent creating, s.
    pub(crate) seconds: f64,
    /// Cloud requests made while creating, per created machine.
    pub(crate) cloud_calls_per_create: f64,
}

/// What phase 3 measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Fleet {
    /// One entry per fleet size, ascending.
    pub(crate) rounds: Vec<FleetRound>,
    /// How the machines were made.
    pub(crate) build: FleetBuild,
}

/// Runs phase 3 for each size in `sizes` (ascending; machines accumulate).
pub(crate) async fn run(
    driver: &DriverProcess,
    sidecar: &Sidecar,
    admin: &Admin,
    sizes: &[usize],
    concurrency: usize,
) -> Result<Fleet, String> {
    let mut machines: Vec<Machine> = Vec::new();
    let mut build = FleetBuild { concurrency, ..Default::default() };
    let mut build_calls = 0u64;
    let mut rounds = Vec::new();
    for &n in sizes {
        let started = Instant::now();
        admin.reset_calls().await?;
        let fresh = create_many(sidecar, machines.len(), n.saturating_sub(machines.len()), concurrency).await?;
        build_calls += admin.calls().await?.total;
        build.seconds += started.elapsed().as_secs_f64();
        build.created += fresh.len();
        machines.extend(fresh);
        tokio::time::sleep(SETTLE).await;
        rounds.push(poll_all(driver, sidecar, admin, &machines).await?);
    }
    if build.created > 0 {
        build.cloud_calls_per_create = build_calls as f64 / build.created as f64;
    }
    Ok(Fleet { rounds, build })
}

async fn create_many(
    sidecar: &Sidecar,
    first: usize,
    count: usize,
    concurrency: usize,
) -> Result<Vec<Machine>, String> {
    let done = AtomicUsize::new(0);
    let started = Instant::now();
    let results: Vec<Result<Machine, String>> = futures::stream::iter(first..first + count)
        .map(|i| {
            let done = &done;
            async move {
                let mut m = new_machine("fleet", i);
                let r = sidecar.create_retrying(&mut m, Duration::from_secs(120)).await.map(|()| m);
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if count > PROGRESS_EVERY && (n.is_multiple_of(PROGRESS_EVERY) || n == count) {
                    eprintln!("fleet: {n}/{count} machines created ({:.0} s)", started.elapsed().as_secs_f64());
                }
                r
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    results.into_iter().collect()
}

async fn poll_all(
    driver: &DriverProcess,
    sidecar: &Sidecar,
    admin: &Admin,
    machines: &[Machine],
) -> Result<FleetRound, String> {
    admin.reset_calls().await?;
    let memory = driver.memory()?;
    let peak = Arc::new(AtomicU64::new(memory.rss_kib));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        let pid_status = driver.memory_probe();
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                if let Some(rss) = pid_status() {
                    peak.fetch_max(rss, Ordering::Relaxed);
                }
                tokio::time::sleep(RSS_SAMPLE_EVERY).await;
            }
        })
    };

    let started = Instant::now();
    let mut set = JoinSet::new();
    for m in machines {
        let (sidecar, m) = (sidecar.clone(), m.clone());
        set.spawn(async move {
            let t = Instant::now();
            let r = sidecar.status(&m).await;
            (t.elapsed(), r.err().map(|s| error_key(&s)))
        });
    }
    let mut latencies = Vec::with_capacity(machines.len());
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    while let Some(joined) = set.join_next().await {
        let (elapsed, err) = joined.map_err(|e| format!("status task: {e}"))?;
        latencies.push(elapsed);
        if let Some(key) = err {
            *errors.entry(key).or_default() += 1;
        }
    }
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    done.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    let calls = admin.calls().await?;
    let after = driver.memory()?;
    Ok(FleetRound {
        machines: machines.len(),
        calls,
        latency: Latency::of(&latencies),
        wall_ms,
        errors,
        rss_peak_sampled_kib: peak.load(Ordering::Relaxed).max(after.rss_kib),
        hwm_after_kib: after.hwm_kib,
    })
}
