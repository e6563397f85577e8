//! The targets, checked against the measured figures. A miss is a
//! finding, not a failure: the bench still exits 0.

use serde::Serialize;

use crate::report::Report;

/// AWS: calls of the Go provider for the same lifecycle (≈ 8-9); the target is "no more".
const AWS_GO_PROVIDER_LIFECYCLE_CALLS: u64 = 9;
/// Highest acceptable sidecar/direct p50 ratio.
const MAX_OVERHEAD_RATIO: f64 = 1.10;
/// "Not more than a few milliseconds" added to a lone poll.
const MAX_ADDED_LONE_POLL_MS: f64 = 5.0;
/// Concurrent polls per cloud call at least (1,000 polls → at most 10 calls).
const POLLS_PER_CALL: usize = 100;
/// Share of the allowed cloud request rate that must be used, %.
const MIN_RATE_USED_PERCENT: f64 = 95.0;
/// Idle RSS bound, KiB: the 20 MB (20,000,000 bytes, the stricter reading).
const MAX_IDLE_RSS_KIB: u64 = 20_000_000 / 1024;
/// Socket-ready bound, ms.
const MAX_SOCKET_READY_MS: f64 = 50.0;

/// Whether a target was met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum Verdict {
    /// Met.
    Pass,
    /// Missed.
    Miss,
    /// No bound applies to this provider; the figure is informational.
    Info,
    /// The phase did not produce the figure.
    NotMeasured,
}

impl Verdict {
    fn of(met: bool) -> Self {
        if met { Self::Pass } else { Self::Miss }
    }

    /// The word printed in the table.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::Miss => "MISS",
            Self::Info => "info",
            Self::NotMeasured => "not measured",
        }
    }
}

/// One target with its figure.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Target {
    /// The target as stated in the issue.
    pub(crate) target: String,
    /// The measured figure.
    pub(crate) figure: String,
    /// Met or not.
    pub(crate) verdict: Verdict,
}

fn target(target: impl Into<String>, figure: impl Into<String>, verdict: Verdict) -> Target {
    Target { target: target.into(), figure: figure.into(), verdict }
}

fn missing(name: &str) -> Target {
    target(name, "—", Verdict::NotMeasured)
}

/// Every target, in the order.
pub(crate) fn check(r: &Report) -> Vec<Target> {
    let mut out = Vec::new();

    let name = "overhead ratio sidecar/direct ≤ 1.10 at p50";
    out.push(match &r.overhead {
        Some(o) => target(
            name,
            match &r.overhead_with_latency {
                Some(l) => format!(
                    "{:.2} ({:.2} ms vs {:.2} ms); with the fake's answers {} ms later: {:.3}",
                    o.ratio_p50, o.sidecar.p50_ms, o.direct.p50_ms, r.cloud_latency_ms, l.ratio_p50
                ),
                None => format!("{:.2} ({:.2} ms vs {:.2} ms)", o.ratio_p50, o.sidecar.p50_ms, o.direct.p50_ms),
            },
            Verdict::of(o.ratio_p50 <= MAX_OVERHEAD_RATIO),
        ),
        None => missing(name),
    });

    let name = "each RPC makes at most one cloud read";
    out.push(match &r.lifecycle {
        Some(l) => target(
            name,
            format!("max {} read(s) in one RPC", l.max_reads_per_rpc),
            Verdict::of(l.max_reads_per_rpc <= 1),
        ),
        None => missing(name),
    });

    let name = "lifecycle no more calls than needed (AWS: ≤ Go provider's 8-9)";
    out.push(match &r.lifecycle {
        Some(l) if r.provider == "aws" => target(
            name,
            format!("{} calls", l.total_calls),
            Verdict::of(l.total_calls <= AWS_GO_PROVIDER_LIFECYCLE_CALLS),
        ),
        Some(l) => {
            target(name, format!("{} calls (no reference figure for {})", l.total_calls, r.provider), Verdict::Info)
        }
        None => missing(name),
    });

    let name = "1,000 concurrent polls → ≤ 10 cloud calls (scaled: ≤ N/100, at least 1)";
    out.push(match r.fleet.as_ref().and_then(|f| f.rounds.last()) {
        Some(round) => {
            let bound = (round.machines / POLLS_PER_CALL).max(1) as u64;
            target(
                name,
                format!("N = {}: {} calls (bound {bound})", round.machines, round.calls.total),
                Verdict::of(round.calls.total <= bound && round.errors.is_empty()),
            )
        }
        None => missing(name),
    });

    let name = "coalescing adds ≤ a few ms (5) to a lone poll";
    out.push(match &r.overhead {
        Some(o) => target(
            name,
            format!("+{:.2} ms at p50 over the direct call", o.added_p50_ms),
            Verdict::of(o.added_p50_ms <= MAX_ADDED_LONE_POLL_MS),
        ),
        None => missing(name),
    });

    let name = "rate limit: ≥ 95% of the allowed rate used";
    out.push(match &r.throughput {
        Some(t) => {
            target(name, format!("{:.1}%", t.used_percent), Verdict::of(t.used_percent >= MIN_RATE_USED_PERCENT))
        }
        None => missing(name),
    });

    let name = "rate limit: zero throttling errors surfaced";
    out.push(match &r.throughput {
        Some(t) => target(name, format!("{} surfaced", t.throttling_errors), Verdict::of(t.throttling_errors == 0)),
        None => missing(name),
    });

    let name = "idle RSS ≤ 20 MB (driver without fake)";
    out.push(match &r.footprint.startups {
        Some(s) => target(
            name,
            format!("{:.1} MiB", s.idle_rss_median_kib as f64 / 1024.0),
            Verdict::of(s.idle_rss_median_kib <= MAX_IDLE_RSS_KIB),
        ),
        None => missing(name),
    });

    let name = "socket ready ≤ 50 ms after start";
    out.push(match &r.footprint.startups {
        Some(s) => target(
            name,
            format!("{:.1} ms (median of {})", s.socket_ready_median_ms, s.socket_ready_ms.len()),
            Verdict::of(s.socket_ready_median_ms <= MAX_SOCKET_READY_MS),
        ),
        None => missing(name),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phases::overhead::Overhead;
    use crate::stats::Latency;

    fn overhead(sidecar_p50: f64, direct_p50: f64) -> Overhead {
        let lat = |p50| Latency { n: 10, p50_ms: p50, p99_ms: p50, max_ms: p50 };
        Overhead {
            direct_call: "x",
            iterations: 10,
            warmup: 1,
            sidecar: lat(sidecar_p50),
            direct: lat(direct_p50),
            floor: lat(0.1),
            ratio_p50: sidecar_p50 / direct_p50,
            ratio_p99: sidecar_p50 / direct_p50,
            added_p50_ms: sidecar_p50 - direct_p50,
            sidecar_cloud_calls_per_poll: 1.0,
        }
    }

    #[test]
    fn verdicts_follow_the_bounds() {
        let mut r = Report::empty("aws");
        r.overhead = Some(overhead(1.05, 1.0));
        let t = check(&r);
        assert_eq!(t[0].verdict, Verdict::Pass);
        assert_eq!(t[4].verdict, Verdict::Pass);
        assert_eq!(t[1].verdict, Verdict::NotMeasured);
        r.overhead = Some(overhead(8.0, 1.0));
        let t = check(&r);
        assert_eq!(t[0].verdict, Verdict::Miss);
        assert_eq!(t[4].verdict, Verdict::Miss);
        assert!(t[0].figure.starts_with("8.00"));
    }
}
