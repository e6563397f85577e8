//! Killing the driver during the run: SIGKILL and restart at moments drawn from the seed,
//! spread over the run by the machines' progress, so that every kill lands while machines
//! are still mid-lifecycle and calls are in flight.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::restart::Restarter;
use crate::soak::client::Epoch;
use crate::spawn::StopMode;

/// Milestones of one machine: created, initialized, delete accepted, gone.
pub const MILESTONES_PER_MACHINE: usize = 4;

/// How far the run is: milestones reached, and whether it is over or aborted.
#[derive(Debug, Default)]
pub struct Progress {
    milestones: AtomicUsize,
    finished: AtomicBool,
    aborted: AtomicBool,
}

impl Progress {
    /// One more milestone reached.
    pub fn milestone(&self) {
        self.milestones.fetch_add(1, Ordering::SeqCst);
    }

    /// Milestones reached so far.
    pub fn milestones(&self) -> usize {
        self.milestones.load(Ordering::SeqCst)
    }

    /// Every machine is through (or gave up).
    pub fn finish(&self) {
        self.finished.store(true, Ordering::SeqCst);
    }

    /// Whether [`Self::finish`] was called.
    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::SeqCst)
    }

    /// The run cannot go on (the driver did not come back): machines stop.
    pub fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
    }

    /// Whether [`Self::abort`] was called.
    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }
}

/// The milestone counts at which the driver is killed: one in each of `restarts` equal
/// slices of the run's `milestones`, at a point of the slice drawn from `seed`; every
/// point is at least 1 and below `milestones`, so each kill comes after the run started
/// and before its last machine is gone.
pub fn plan(restarts: usize, milestones: usize, seed: u64) -> Vec<usize> {
    let mut rng = StdRng::seed_from_u64(seed);
    let span = milestones.saturating_sub(1) as f64;
    (0..restarts)
        .map(|k| {
            let at: f64 = (k as f64 + rng.random::<f64>()) / restarts as f64;
            (1 + (span * at).floor() as usize).min(milestones.saturating_sub(1).max(1))
        })
        .collect()
}

/// What the restarts did.
#[derive(Debug, Clone, Default)]
pub struct Restarts {
    /// Restarts done.
    pub done: usize,
    /// How long the driver was away each time (kill to ready Probe).
    pub downtime: Vec<Duration>,
    /// Why restarting failed, if it did (the run is aborted then).
    pub error: Option<String>,
}

/// Waits for each point of `plan`, then kills the driver with SIGKILL and restarts it,
/// marking the restart in `epoch`. Stops early when the run finishes; aborts the run when
/// the driver does not come back.
pub async fn drive(restarter: Restarter, plan: Vec<usize>, progress: Arc<Progress>, epoch: Arc<Epoch>) -> Restarts {
    let mut out = Restarts::default();
    for point in plan {
        while progress.milestones() < point {
            if progress.is_finished() {
                return out;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        epoch.bump();
        let started = Instant::now();
        let result = restarter.restart(StopMode::Crash).await;
        epoch.bump();
        match result {
            Ok(_) => {
                out.done += 1;
                out.downtime.push(started.elapsed());
            }
            Err(e) => {
                out.error = Some(e);
                progress.abort();
                return out;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_spreads_points_inside_the_run_and_follows_the_seed() {
        for (restarts, milestones) in [(5, 48), (5, 800), (1, 4), (8, 4)] {
            let points = plan(restarts, milestones, 42);
            assert_eq!(points.len(), restarts);
            assert!(points.iter().all(|p| *p >= 1 && *p < milestones), "{points:?} of {milestones}");
            assert!(points.windows(2).all(|w| w[0] <= w[1]), "{points:?}");
        }
        let points = plan(5, 800, 1);
        for (k, p) in points.iter().enumerate() {
            let slice = 799.0 / 5.0;
            assert!(
                (*p as f64) >= 1.0 + slice * k as f64 - 1.0 && (*p as f64) <= 1.0 + slice * (k + 1) as f64,
                "{points:?}"
            );
        }
        assert_eq!(plan(5, 800, 9), plan(5, 800, 9));
        assert_ne!(plan(5, 800, 9), plan(5, 800, 10));
    }

    #[test]
    fn progress_flags() {
        let p = Progress::default();
        p.milestone();
        p.milestone();
        assert_eq!(p.milestones(), 2);
        assert!(!p.is_finished() && !p.is_aborted());
        p.finish();
        p.abort();
        assert!(p.is_finished() && p.is_aborted());
    }
}
