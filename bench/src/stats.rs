//! Latency percentiles.

use std::time::Duration;

use serde::Serialize;

/// Percentiles of a set of latencies, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct Latency {
    /// Number of samples.
    pub(crate) n: usize,
    /// Median.
    pub(crate) p50_ms: f64,
    /// 99th percentile.
    pub(crate) p99_ms: f64,
    /// Largest sample.
    pub(crate) max_ms: f64,
}

impl Latency {
    /// Nearest-rank percentiles of `samples` (all zero when empty).
    pub(crate) fn of(samples: &[Duration]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        ms.sort_by(f64::total_cmp);
        Self { n: ms.len(), p50_ms: rank(&ms, 50.0), p99_ms: rank(&ms, 99.0), max_ms: ms[ms.len() - 1] }
    }
}

/// The nearest-rank `p`th percentile of sorted, non-empty `sorted`.
fn rank(sorted: &[f64], p: f64) -> f64 {
    let idx = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[idx.clamp(1, sorted.len()) - 1]
}

/// Median of a few durations in milliseconds (0 when empty).
pub(crate) fn median_ms(samples: &[Duration]) -> f64 {
    Latency::of(samples).p50_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let s: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let l = Latency::of(&s);
        assert_eq!((l.n, l.p50_ms, l.p99_ms, l.max_ms), (100, 50.0, 99.0, 100.0));
        let one = Latency::of(&[Duration::from_millis(7)]);
        assert_eq!((one.p50_ms, one.p99_ms), (7.0, 7.0));
        assert_eq!(Latency::of(&[]), Latency::default());
        assert_eq!(median_ms(&[Duration::from_millis(3), Duration::from_millis(1), Duration::from_millis(2)]), 2.0);
    }
}
