//! The targets, checked against the measured figures. A miss is a
//! finding, not a failure: the bench still exits 0.

use serde::Serialize;

use crate::phases::fleet::FleetRound;
use crate::report::Report;

/// Highest acceptable floor/echo ratio (an RPC without a cloud call ÷ a bare tonic echo), p50 and p99.
const MAX_FLOOR_ECHO_RATIO: f64 = 1.15;
/// Most a status poll may add over the direct SDK call at p50, ms.
const MAX_ADDED_P50_MS: f64 = 0.20;
/// Most a status poll may add over the direct SDK call at p99, ms.
const MAX_ADDED_P99_MS: f64 = 0.40;
/// Highest sidecar/direct ratio with the modeled cloud latency, p50 and p99.
const MAX_RATIO_WITH_LATENCY: f64 = 1.02;
/// The modeled cloud latency, ms (the ratio target is stated for it).
const TARGET_CLOUD_LATENCY_MS: u64 = 20;
/// Creates per second at least, as a share of the rate limit (18 at 20 req/s).
const MIN_CREATES_PER_LIMIT: f64 = 18.0 / 20.0;
/// Lifecycle cloud calls at most, for the providers the issue names; others are info.
/// Each is the performance issue's bound (AWS 7, GCP 6) plus the one read of
/// DeleteMachine that proves the VM is this machine's before it is deleted
/// (the ownership rule, ARCHITECTURE.md).
const LIFECYCLE_BOUNDS: [(&str, u64); 2] = [("aws", 8), ("gcp", 7)];
/// The fleet the polling targets are stated for.
const FLEET_TARGET_N: usize = 10_000;
/// Cloud calls at most for [`FLEET_TARGET_N`] concurrent polls (scaled for a smaller fleet).
const MAX_FLEET_CALLS: usize = 60;
/// p99 of [`FLEET_TARGET_N`] concurrent polls at most, ms.
const MAX_FLEET_P99_MS: f64 = 1000.0;
/// Peak RSS of the driver alone under that load, KiB: 64 MB (64,000,000 bytes, the stricter reading).
const MAX_PEAK_RSS_KIB: u64 = 64_000_000 / 1024;
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

/// Both percentiles within `bound`.
fn both_within(p50: f64, p99: f64, bound: f64) -> Verdict {
    Verdict::of(p50 <= bound && p99 <= bound)
}

/// The cloud-call bound for `n` concurrent polls: 60 per 10,000, at least 1.
fn fleet_calls_bound(n: usize) -> u64 {
    (MAX_FLEET_CALLS * n).div_ceil(FLEET_TARGET_N).max(1) as u64
}

/// The fleet round the polling targets are judged on: the one on the driver
/// without its embedded fake if it ran, else the largest embedded-fake round.
fn judged_round(r: &Report) -> Option<(&FleetRound, bool)> {
    let external = r.fleet_external.as_ref().and_then(|f| f.rounds.last()).map(|round| (round, true));
    external.or_else(|| r.fleet.as_ref().and_then(|f| f.rounds.last()).map(|round| (round, false)))
}

/// Every target, in the order.
pub(crate) fn check(r: &Report) -> Vec<Target> {
    let mut out = Vec::new();

    let name = format!("floor: RPC with no cloud call ÷ bare tonic echo ≤ {MAX_FLOOR_ECHO_RATIO} at p50 and p99");
    out.push(match &r.overhead {
        Some(o) => target(
            name,
            format!(
                "p50 {:.2} ({:.3} / {:.3} ms), p99 {:.2} ({:.3} / {:.3} ms)",
                o.floor_echo_p50, o.floor.p50_ms, o.echo.p50_ms, o.floor_echo_p99, o.floor.p99_ms, o.echo.p99_ms
            ),
            both_within(o.floor_echo_p50, o.floor_echo_p99, MAX_FLOOR_ECHO_RATIO),
        ),
        None => missing(&name),
    });

    let name = format!(
        "time a status poll adds over the direct SDK call ≤ {MAX_ADDED_P50_MS:.2} ms at p50, ≤ {MAX_ADDED_P99_MS:.2} ms at p99"
    );
    // The gRPC hop alone (the bare echo's round trip) is this figure's floor: shown beside it.
    out.push(match r.overhead.as_ref().map(|o| (o, &o.direct)) {
        Some((o, Some(d))) => target(
            name,
            format!(
                "+{:.3} ms at p50, +{:.3} ms at p99 ({:.3} vs {:.3} ms; {:.3} vs {:.3} ms); floor, the bare echo's round trip: {:.3} ms at p50, {:.3} ms at p99",
                d.added_p50_ms,
                d.added_p99_ms,
                o.sidecar.p50_ms,
                d.latency.p50_ms,
                o.sidecar.p99_ms,
                d.latency.p99_ms,
                o.echo.p50_ms,
                o.echo.p99_ms
            ),
            Verdict::of(d.added_p50_ms <= MAX_ADDED_P50_MS && d.added_p99_ms <= MAX_ADDED_P99_MS),
        ),
        Some((_, None)) => target(name, format!("no direct SDK client for {} in this build", r.provider), Verdict::Info),
        None => missing(&name),
    });

    let name = format!(
        "the same ratio sidecar/direct with {TARGET_CLOUD_LATENCY_MS} ms modeled cloud latency ≤ {MAX_RATIO_WITH_LATENCY} at p50 and p99"
    );
    // Its floor: the direct call plus the bare echo's round trip, over the direct call.
    out.push(match r.overhead_with_latency.as_ref().map(|o| (o, &o.direct)) {
        Some((o, Some(d))) => {
            let floor = |echo: f64, direct: f64| if direct > 0.0 { (direct + echo) / direct } else { f64::NAN };
            let figure = format!(
                "p50 {:.3}, p99 {:.3} ({} ms latency); floor, (direct + the bare echo's round trip) ÷ direct: p50 {:.3}, p99 {:.3}",
                d.ratio_p50,
                d.ratio_p99,
                r.cloud_latency_ms,
                floor(o.echo.p50_ms, d.latency.p50_ms),
                floor(o.echo.p99_ms, d.latency.p99_ms)
            );
            let verdict = if r.cloud_latency_ms == TARGET_CLOUD_LATENCY_MS {
                both_within(d.ratio_p50, d.ratio_p99, MAX_RATIO_WITH_LATENCY)
            } else {
                Verdict::Info
            };
            target(name, figure, verdict)
        }
        Some((_, None)) => target(name, format!("no direct SDK client for {} in this build", r.provider), Verdict::Info),
        None => missing(&name),
    });

    let name = "creates per second under the 20 req/s limit ≥ 18 (0.9 × the limit)";
    out.push(match &r.throughput {
        Some(t) => {
            let bound = MIN_CREATES_PER_LIMIT * f64::from(t.rate_per_second);
            target(
                name,
                format!("{:.2}/s at a {}/s limit (bound {bound:.1})", t.creates_per_second, t.rate_per_second),
                Verdict::of(t.creates_per_second >= bound),
            )
        }
        None => missing(name),
    });

    let name = "cloud calls for status → create → status → initialize → status → delete: AWS ≤ 8, GCP ≤ 7";
    out.push(match &r.lifecycle {
        Some(l) => match LIFECYCLE_BOUNDS.iter().find(|(p, _)| *p == r.provider) {
            Some((_, bound)) => {
                target(name, format!("{} calls (bound {bound})", l.total_calls), Verdict::of(l.total_calls <= *bound))
            }
            None => target(name, format!("{} calls (no bound for {})", l.total_calls, r.provider), Verdict::Info),
        },
        None => missing(name),
    });

    let judged = judged_round(r);
    let which = |external: bool| if external { "driver without fake" } else { "driver with embedded fake" };
    let name = "10,000 concurrent status polls of 10,000 machines: ≤ 60 cloud calls (scaled: 60 × N / 10,000)";
    out.push(match judged {
        Some((round, external)) => {
            let bound = fleet_calls_bound(round.machines);
            target(
                name,
                format!(
                    "N = {} ({}): {} calls (bound {bound}), {} failed",
                    round.machines,
                    which(external),
                    round.calls.total,
                    round.errors.values().sum::<usize>()
                ),
                Verdict::of(round.calls.total <= bound && round.errors.is_empty()),
            )
        }
        None => missing(name),
    });

    let name = "10,000 concurrent status polls: p99 ≤ 1 s";
    out.push(match judged {
        Some((round, external)) => {
            let figure = format!("N = {} ({}): p99 {:.0} ms", round.machines, which(external), round.latency.p99_ms);
            let verdict = if round.machines >= FLEET_TARGET_N {
                Verdict::of(round.latency.p99_ms <= MAX_FLEET_P99_MS && round.errors.is_empty())
            } else {
                Verdict::Info
            };
            target(name, figure, verdict)
        }
        None => missing(name),
    });

    let name = "10,000 concurrent status polls: peak RSS of the driver without the embedded fake ≤ 64 MB";
    let f = &r.footprint;
    out.push(match f.peak_rss_without_fake_kib {
        Some(kib) => {
            let n = f.peak_load_without_fake_concurrency;
            let figure = format!("N = {n}: {:.1} MiB (VmHWM)", kib as f64 / 1024.0);
            let verdict = if n >= FLEET_TARGET_N { Verdict::of(kib <= MAX_PEAK_RSS_KIB) } else { Verdict::Info };
            target(name, figure, verdict)
        }
        None => missing(name),
    });

    let name = "idle RSS ≤ 20 MB (driver without fake)";
    out.push(match &f.startups {
        Some(s) => target(
            name,
            format!("{:.1} MiB", s.idle_rss_median_kib as f64 / 1024.0),
            Verdict::of(s.idle_rss_median_kib <= MAX_IDLE_RSS_KIB),
        ),
        None => missing(name),
    });

    let name = "socket ready ≤ 50 ms after start";
    out.push(match &f.startups {
        Some(s) => target(
            name,
            format!("{:.1} ms (median of {})", s.socket_ready_median_ms, s.socket_ready_ms.len()),
            Verdict::of(s.socket_ready_median_ms <= MAX_SOCKET_READY_MS),
        ),
        None => missing(name),
    });

    let name = "instructions per status poll (callgrind, `--instructions`)";
    out.push(match (&r.instructions, &r.instructions_note) {
        (Some(i), _) => target(
            name,
            format!("{:.0} (an RPC without a cloud call: {:.0})", i.per_poll, i.per_floor_rpc),
            Verdict::Info,
        ),
        (None, Some(note)) => target(name, note.clone(), Verdict::NotMeasured),
        (None, None) => target(name, "not asked for (`--instructions`)", Verdict::NotMeasured),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phases::overhead::{DirectComparison, Overhead};
    use crate::stats::Latency;

    fn lat(p50: f64, p99: f64) -> Latency {
        Latency { n: 10, p50_ms: p50, p99_ms: p99, max_ms: p99 }
    }

    fn overhead(sidecar: f64, direct: Option<f64>, floor: f64, echo: f64) -> Overhead {
        Overhead {
            iterations: 10,
            warmup: 1,
            sidecar: lat(sidecar, sidecar),
            floor: lat(floor, floor),
            echo: lat(echo, echo),
            floor_echo_p50: floor / echo,
            floor_echo_p99: floor / echo,
            direct: direct.map(|d| DirectComparison {
                call: "x",
                latency: lat(d, d),
                ratio_p50: sidecar / d,
                ratio_p99: sidecar / d,
                added_p50_ms: sidecar - d,
                added_p99_ms: sidecar - d,
            }),
            sidecar_cloud_calls_per_poll: 1.0,
        }
    }

    #[test]
    fn verdicts_follow_the_bounds() {
        let mut r = Report::empty("aws");
        r.overhead = Some(overhead(1.1, Some(1.0), 0.11, 0.10));
        let t = check(&r);
        assert_eq!(t[0].verdict, Verdict::Pass);
        assert_eq!(t[1].verdict, Verdict::Pass);
        assert_eq!(t[2].verdict, Verdict::NotMeasured);
        r.overhead = Some(overhead(1.5, Some(1.0), 0.2, 0.1));
        let t = check(&r);
        assert_eq!(t[0].verdict, Verdict::Miss);
        assert_eq!(t[1].verdict, Verdict::Miss);
        assert!(t[0].figure.starts_with("p50 2.00"));
    }

    #[test]
    fn without_a_direct_client_the_floor_is_still_judged() {
        let mut r = Report::empty("openstack");
        r.overhead = Some(overhead(1.0, None, 0.1, 0.1));
        r.overhead_with_latency = Some(overhead(21.0, None, 0.1, 0.1));
        let t = check(&r);
        assert_eq!(t[0].verdict, Verdict::Pass);
        assert_eq!(t[1].verdict, Verdict::Info);
        assert_eq!(t[2].verdict, Verdict::Info);
    }

    #[test]
    fn fleet_bound_scales_with_n() {
        assert_eq!(fleet_calls_bound(10_000), 60);
        assert_eq!(fleet_calls_bound(2_000), 12);
        assert_eq!(fleet_calls_bound(10), 1);
    }
}
