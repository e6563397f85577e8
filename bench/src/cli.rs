//! Command-line flags and the sizes of each phase (full run or `--quick`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// Benchmarks a machine driver binary against direct SDK calls on its embedded fake cloud.
#[derive(Debug, Clone, Parser)]
#[command(name = "machine-driver-bench", version)]
pub(crate) struct Args {
    /// The driver binary, built with `--features embedded-fake` (e.g. target/debug/machine-driver-<cloud>).
    #[arg(long)]
    pub(crate) driver: PathBuf,

    /// providerSpec JSON; default `providers/<provider>/examples/machine-class.json`.
    #[arg(long)]
    pub(crate) machine_class: Option<PathBuf>,

    /// Secret data JSON; default `providers/<provider>/examples/secret.json`.
    #[arg(long)]
    pub(crate) secret: Option<PathBuf>,

    /// Tiny sizes for CI (K=20, fleet 10, no external-fake fleet, throughput 2 s, one start sample).
    #[arg(long)]
    pub(crate) quick: bool,

    /// Sequential GetMachineStatus iterations measured in the overhead phase (K).
    #[arg(long)]
    pub(crate) iterations: Option<usize>,

    /// Fleet sizes N, comma-separated (machines created, then N concurrent polls).
    #[arg(long, value_delimiter = ',')]
    pub(crate) fleet: Option<Vec<usize>>,

    /// Size of the fleet round run on the driver WITHOUT its embedded fake (the
    /// provider's fake as its own process, so that the driver's peak RSS is its
    /// own); 0 skips it. Default 10000, skipped with `--quick`.
    #[arg(long)]
    pub(crate) external_fleet: Option<usize>,

    /// Also count the instructions per GetMachineStatus poll with valgrind's
    /// callgrind (driver on an external fake; slow; "not measured" without valgrind).
    #[arg(long)]
    pub(crate) instructions: bool,

    /// Keep the callgrind dumps of `--instructions` in this directory (for
    /// `callgrind_annotate`; the `floor-second` dump holds N2 GetVolumeIDs calls).
    #[arg(long)]
    pub(crate) callgrind_dir: Option<std::path::PathBuf>,

    /// Only the UpdateMachine phase (the cloud calls of one hot update), on a
    /// driver with its embedded fake; no other phase, no target checked.
    #[arg(long)]
    pub(crate) update_only: bool,

    /// Creates in flight while building the fleet.
    #[arg(long, default_value_t = 32)]
    pub(crate) create_concurrency: usize,

    /// Duration of the throughput phase, seconds (T).
    #[arg(long)]
    pub(crate) throughput_secs: Option<f64>,

    /// Concurrent creators in the throughput phase.
    #[arg(long, default_value_t = 16)]
    pub(crate) throughput_concurrency: usize,

    /// Cloud rate limit (requests/s, also the burst) injected into the fake and given to the driver.
    #[arg(long, default_value_t = 20)]
    pub(crate) rate: u32,

    /// Phase 1 is repeated with the fake answering this many milliseconds later
    /// (a modeled cloud round trip; 0 skips the repeat). The target is judged
    /// on the run without added latency.
    #[arg(long, default_value_t = 20)]
    pub(crate) cloud_latency_ms: u64,

    /// How many times the driver is started to time socket readiness.
    #[arg(long)]
    pub(crate) starts: Option<usize>,

    /// The release binary whose size is reported (otherwise the size of `--driver`, labelled as such).
    #[arg(long)]
    pub(crate) release_binary: Option<PathBuf>,

    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,

    /// Upper bound of the driver's startup (socket and ready Probe), seconds.
    #[arg(long, default_value_t = 30)]
    pub(crate) startup_timeout_secs: u64,
}

/// The sizes every phase runs with.
#[derive(Debug, Clone)]
pub(crate) struct Sizes {
    /// Measured sequential iterations (K).
    pub(crate) iterations: usize,
    /// Unmeasured warm-up iterations before them.
    pub(crate) warmup: usize,
    /// Fleet sizes, ascending.
    pub(crate) fleet: Vec<usize>,
    /// The fleet round on the driver without its embedded fake, if any.
    pub(crate) external_fleet: Option<usize>,
    /// Throughput phase duration.
    pub(crate) throughput: Duration,
    /// Startup samples.
    pub(crate) starts: usize,
}

impl Args {
    /// The sizes implied by `--quick` and the explicit flags (explicit flags win).
    pub(crate) fn sizes(&self) -> Sizes {
        let (k, warmup, fleet, external, secs, starts) =
            if self.quick { (20, 5, vec![10], 0, 2.0, 1) } else { (1000, 50, vec![100, 1000], 10_000, 30.0, 5) };
        let mut fleet = self.fleet.clone().unwrap_or(fleet);
        fleet.retain(|n| *n > 0);
        fleet.sort_unstable();
        fleet.dedup();
        Sizes {
            iterations: self.iterations.unwrap_or(k).max(1),
            warmup,
            fleet,
            external_fleet: Some(self.external_fleet.unwrap_or(external)).filter(|n| *n > 0),
            throughput: Duration::from_secs_f64(self.throughput_secs.unwrap_or(secs).max(0.5)),
            starts: self.starts.unwrap_or(starts).max(1),
        }
    }

    /// The command line as typed, for the report.
    pub(crate) fn command_line() -> String {
        std::env::args().collect::<Vec<_>>().join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_and_explicit_sizes() {
        let quick = Args::parse_from(["b", "--driver", "d", "--quick"]).sizes();
        assert_eq!((quick.iterations, quick.fleet.clone(), quick.starts), (20, vec![10], 1));
        let full = Args::parse_from(["b", "--driver", "d", "--fleet", "1000,0,100,100"]).sizes();
        assert_eq!(full.fleet, vec![100, 1000]);
        assert_eq!(full.iterations, 1000);
        assert_eq!((quick.external_fleet, full.external_fleet), (None, Some(10_000)));
        let ext = Args::parse_from(["b", "--driver", "d", "--quick", "--external-fleet", "50"]).sizes();
        assert_eq!(ext.external_fleet, Some(50));
        let off = Args::parse_from(["b", "--driver", "d", "--external-fleet", "0"]).sizes();
        assert_eq!(off.external_fleet, None);
        let k = Args::parse_from(["b", "--driver", "d", "--quick", "--iterations", "7"]).sizes();
        assert_eq!(k.iterations, 7);
    }
}
