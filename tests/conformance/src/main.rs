//! `machine-driver-conformance`: runs the conformance scenarios against a driver endpoint,
//! or against a provider binary it spawns on its embedded fake cloud or on a standalone
//! fake cloud it spawns too (`--spawn-fake`, which lets scenarios restart the driver).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{ArgGroup, Parser};
use machine_driver_conformance::connection::Connection;
use machine_driver_conformance::context::Ctx;
use machine_driver_conformance::fake_admin::FakeAdmin;
use machine_driver_conformance::filter::Filter;
use machine_driver_conformance::junit::junit_xml;
use machine_driver_conformance::outcome::{Outcome, ScenarioReport};
use machine_driver_conformance::report::{Summary, result_line};
use machine_driver_conformance::restart::Restarter;
use machine_driver_conformance::runner::Suite;
use machine_driver_conformance::scenarios;
use machine_driver_conformance::settings::{self, Settings};
use machine_driver_conformance::soak::config::{NEEDS_RESTARTS, SoakConfig};
use machine_driver_conformance::soak::{self, SoakTarget};
use machine_driver_conformance::spawn::SpawnedDriver;
use machine_driver_conformance::spawn_fake::SpawnedFake;
use machine_driver_conformance::tracker::Tracker;
use tokio::sync::Mutex;

/// Checks a machine driver against the machinedriver.v1 contract.
#[derive(Debug, Parser)]
#[command(version, group(ArgGroup::new("target").args(["endpoint", "spawn"])))]
struct Cli {
    /// Endpoint of a running driver: `unix:///abs/path.sock` (or `tcp://host:port`).
    #[arg(long)]
    endpoint: Option<String>,
    /// Provider binary to start on its embedded fake cloud (implies --fake-admin).
    #[arg(long)]
    spawn: Option<PathBuf>,
    /// Standalone fake cloud binary (`fake-ec2`, `fake-gce`) to start first; the spawned
    /// driver then uses it through `--cloud-endpoint`, and scenarios may restart the driver.
    #[arg(long, requires = "spawn", conflicts_with = "endpoint")]
    spawn_fake: Option<PathBuf>,
    /// Extra argument passed to the spawned binary (repeatable).
    #[arg(long = "spawn-arg", allow_hyphen_values = true)]
    spawn_args: Vec<String>,
    /// providerSpec JSON of the machine class to create machines with (required to run).
    #[arg(long)]
    machine_class: Option<PathBuf>,
    /// Secret data JSON, an object of strings: credentials and userData (required to run).
    #[arg(long)]
    secret: Option<PathBuf>,
    /// Provider conformance file (invalidSpecs, shareImage); default: conformance.json next to --machine-class.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Admin API of the fake cloud, e.g. `http://127.0.0.1:8080/_admin`.
    #[arg(long)]
    fake_admin: Option<String>,
    /// How often idempotent steps are repeated.
    #[arg(long, default_value_t = 10)]
    repeat: usize,
    /// Upper bound in seconds of every wait (visibility, initialization, deletion).
    #[arg(long, default_value_t = 30)]
    wait_secs: u64,
    /// Deadline in seconds of each RPC.
    #[arg(long, default_value_t = 60)]
    rpc_timeout_secs: u64,
    /// Write a JUnit XML report to this file.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Run only scenarios whose name matches this regular expression.
    #[arg(long)]
    run: Option<String>,
    /// Skip scenarios whose name matches this regular expression.
    #[arg(long)]
    skip: Option<String>,
    /// List the scenario names and exit.
    #[arg(long)]
    list: bool,
    /// Soak instead of the scenarios: this many machines through the whole lifecycle at once
    /// under injected faults and driver kills (needs --spawn and --spawn-fake).
    #[arg(long, value_name = "N")]
    soak_machines: Option<usize>,
    /// Soak: how often the driver is killed (SIGKILL) and restarted during the run, at least.
    #[arg(long, value_name = "K", default_value_t = 5, requires = "soak_machines")]
    soak_restarts: usize,
    /// Soak: share of the cloud calls the fake fails (throttling, 5xx, lost answers, capacity on create).
    #[arg(long, value_name = "F", default_value_t = 0.3, requires = "soak_machines")]
    soak_fault_rate: f64,
    /// Soak: seed of the moments of the restarts (default: random, printed in the summary).
    #[arg(long, value_name = "S", requires = "soak_machines")]
    soak_seed: Option<u64>,
    /// Soak: factor on every retry delay (MCM's 5 s / 3 min / 10 min periods and the driver's RetryInfo).
    #[arg(long, value_name = "X", default_value_t = 0.02, requires = "soak_machines")]
    soak_time_scale: f64,
    /// Soak: how long new instances stay invisible to the cloud's reads, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 3000, requires = "soak_machines")]
    soak_invisible_ms: u64,
    /// Soak: bound of the whole run in seconds; machines not through by then fail.
    #[arg(long, value_name = "S", default_value_t = 600, requires = "soak_machines")]
    soak_timeout_secs: u64,
}

/// The soak's settings when `--soak-machines` is given; refused without a driver the suite
/// can restart.
fn soak_config(cli: &Cli) -> Result<Option<SoakConfig>, String> {
    let Some(machines) = cli.soak_machines else { return Ok(None) };
    if cli.spawn.is_none() || cli.spawn_fake.is_none() {
        return Err(NEEDS_RESTARTS.into());
    }
    let config = SoakConfig {
        machines,
        restarts: cli.soak_restarts,
        fault_rate: cli.soak_fault_rate,
        seed: cli.soak_seed.unwrap_or_else(|| u64::from(rand::random::<u32>())),
        time_scale: cli.soak_time_scale,
        invisible_ms: cli.soak_invisible_ms,
        timeout: Duration::from_secs(cli.soak_timeout_secs),
    };
    config.check()?;
    Ok(Some(config))
}

/// Name of the extra result reported for the spawned driver's shutdown.
const SHUTDOWN_CHECK: &str = "spawn/clean-shutdown";

/// How long a spawned process may take to become ready.
const STARTUP: Duration = Duration::from_secs(60);

/// How long a spawned process may take to exit after SIGTERM.
const GRACE: Duration = Duration::from_secs(30);

fn load_settings(cli: &Cli) -> Result<Settings, String> {
    let (Some(machine_class), Some(secret)) = (&cli.machine_class, &cli.secret) else {
        return Err("--machine-class and --secret are required".into());
    };
    let provider = match settings::conformance_file(cli.config.as_deref(), machine_class) {
        Some(path) => settings::read_provider_conformance(&path)?,
        None => Default::default(),
    };
    Ok(Settings {
        provider_spec: settings::read_provider_spec(machine_class)?,
        secret: settings::read_secret(secret)?,
        repeat: cli.repeat.max(1),
        wait: Duration::from_secs(cli.wait_secs),
        rpc_timeout: Duration::from_secs(cli.rpc_timeout_secs),
        provider,
    })
}

/// Prints the driver's log tail to stderr.
fn print_log_tail(tail: &str) {
    eprintln!("--- driver log (tail) ---\n{tail}\n---");
}

/// Prints the result line of a setup failure and the summary; exit code 1.
fn setup_failed(why: &str, spawned: Option<&SpawnedDriver>) -> ExitCode {
    setup_failed_with_log(why, spawned.map(|d| d.log_tail(40)).as_deref())
}

fn setup_failed_with_log(why: &str, log_tail: Option<&str>) -> ExitCode {
    let report = ScenarioReport { name: "setup".into(), outcome: Outcome::Fail(why.into()), duration: Duration::ZERO };
    println!("{}", result_line(&report));
    if let Some(tail) = log_tail {
        print_log_tail(tail);
    }
    let _ = std::io::stderr().flush();
    println!("{}", Summary::of(&[report]).line());
    ExitCode::from(1)
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let all = scenarios::all();
    if cli.list {
        for s in &all {
            println!("{}", s.name);
        }
        return ExitCode::SUCCESS;
    }
    let filter = match Filter::new(cli.run.as_deref(), cli.skip.as_deref()) {
        Ok(f) => f,
        Err(e) => return setup_failed(&format!("--run/--skip: {e}"), None),
    };
    let settings = match load_settings(&cli) {
        Ok(s) => Arc::new(s),
        Err(e) => return setup_failed(&e, None),
    };
    let soak_config = match soak_config(&cli) {
        Ok(c) => c,
        Err(e) => return setup_failed(&e, None),
    };

    // Dropping a spawned process (on any early return) kills it.
    let mut spawned_fake = None;
    if let Some(binary) = &cli.spawn_fake {
        match SpawnedFake::start(binary, STARTUP).await {
            Ok(f) => spawned_fake = Some(f),
            Err(f) => return setup_failed_with_log(&f.reason, Some(&f.log_tail)),
        }
    }
    let mut spawned = None;
    if let Some(binary) = &cli.spawn {
        let allow = settings.provider.share_image.as_ref().map(|s| s.allow_list()).unwrap_or_default();
        let backend = spawned_fake.as_ref().map(SpawnedFake::backend);
        match SpawnedDriver::start(binary, backend, &allow, &cli.spawn_args, STARTUP).await {
            Ok(d) => spawned = Some(d),
            Err(f) => return setup_failed_with_log(&f.reason, Some(&f.log_tail)),
        }
    }
    let endpoint = match (&spawned, &cli.endpoint) {
        (Some(d), _) => d.endpoint(),
        (None, Some(e)) => e.clone(),
        (None, None) => return setup_failed("one of --endpoint or --spawn is required", None),
    };
    let fake_url = cli.fake_admin.clone().or_else(|| spawned.as_ref().map(SpawnedDriver::fake_admin_url));

    let conn = match Connection::connect(&endpoint).await {
        Ok(c) => c,
        Err(e) => return setup_failed(&e, spawned.as_ref()),
    };
    let (info, caps) = match conn.describe().await {
        Ok(x) => x,
        Err(e) => return setup_failed(&e, spawned.as_ref()),
    };
    let fake = match fake_url.as_deref().map(FakeAdmin::new).transpose() {
        Ok(f) => f,
        Err(e) => return setup_failed(&e, spawned.as_ref()),
    };
    if let Some(f) = &fake
        && let Err(e) = f.calls().await
    {
        return setup_failed(&format!("fake admin API at {} unreachable: {e}", f.url()), spawned.as_ref());
    }
    // From here on the driver is shared with the scenarios that restart it.
    let spawned = spawned.map(|d| Arc::new(Mutex::new(d)));
    let restarter = match &spawned {
        Some(d) => Restarter::new(d.clone(), conn.clone(), GRACE, STARTUP).await,
        None => None,
    };
    eprintln!(
        "driver {} {} (provider {}) at {endpoint}; fake admin: {}",
        info.name,
        info.vendor_version,
        info.provider,
        fake.as_ref().map_or("none", |f| f.url())
    );

    let mut reports = match (soak_config, &restarter, &fake) {
        (Some(config), Some(restarter), Some(fake)) => {
            let target = SoakTarget {
                ctx: Ctx {
                    conn,
                    settings,
                    caps,
                    fake: Some(fake.clone()),
                    tracker: Tracker::default(),
                    provider: info.provider.clone(),
                    short: "soak",
                    restarter: Some(restarter.clone()),
                },
                restarter: restarter.clone(),
                fake: fake.clone(),
                driver: format!("{} {} (provider {})", info.name, info.vendor_version, info.provider),
                fake_name: cli
                    .spawn_fake
                    .as_ref()
                    .and_then(|p| p.file_name())
                    .map_or_else(|| "the fake".into(), |n| n.to_string_lossy().into_owned()),
            };
            eprintln!("soak: {}", config.flags());
            let result = soak::run(target, config).await;
            for r in &result.reports {
                println!("{}", result_line(r));
            }
            if let Some(figures) = &result.figures {
                println!("{}", figures.block());
            }
            result.reports
        }
        (Some(_), _, _) => return setup_failed(NEEDS_RESTARTS, None),
        (None, _, _) => {
            let suite = Suite { conn, settings, caps, fake, provider: info.provider.clone(), restarter };
            suite.run(&all, &filter, |r| println!("{}", result_line(r))).await
        }
    };

    if let Some(d) = &spawned {
        let started = Instant::now();
        let outcome = match d.lock().await.stop(GRACE).await {
            Ok(()) => Outcome::Pass,
            Err(e) => Outcome::Fail(e),
        };
        let report = ScenarioReport { name: SHUTDOWN_CHECK.into(), outcome, duration: started.elapsed() };
        println!("{}", result_line(&report));
        reports.push(report);
    }

    if let Some(f) = spawned_fake.as_mut()
        && let Err(e) = f.stop(GRACE).await
    {
        eprintln!("stopping the fake cloud: {e}\n--- fake cloud log (tail) ---\n{}\n---", f.log_tail(20));
    }

    let summary = Summary::of(&reports);
    if summary.failed > 0
        && let Some(d) = &spawned
    {
        print_log_tail(&d.lock().await.log_tail(40));
    }
    if let Some(path) = &cli.junit {
        let suite_name = format!("machine-driver-conformance.{}", info.provider);
        if let Err(e) = std::fs::write(path, junit_xml(&suite_name, &reports)) {
            eprintln!("writing --junit {}: {e}", path.display());
        }
    }
    let _ = std::io::stderr().flush();
    let _ = std::io::stdout().flush();
    println!("{}", summary.line());
    if summary.failed > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn spawn_fake_needs_spawn_and_excludes_endpoint() {
        let ok = Cli::try_parse_from(["c", "--spawn", "drv", "--spawn-fake", "fake-ec2"]);
        assert!(ok.is_ok_and(|c| c.spawn_fake == Some(PathBuf::from("fake-ec2"))));
        assert!(Cli::try_parse_from(["c", "--spawn-fake", "fake-ec2"]).is_err());
        assert!(Cli::try_parse_from(["c", "--endpoint", "/tmp/d.sock", "--spawn-fake", "fake-ec2"]).is_err());
        assert!(Cli::try_parse_from(["c", "--spawn", "drv"]).is_ok_and(|c| c.spawn_fake.is_none()));
    }

    #[test]
    fn soak_needs_a_restartable_driver_and_sane_values() {
        let parse = |args: &[&str]| Cli::try_parse_from([&["c"][..], args].concat());
        let with_fake = ["--spawn", "drv", "--spawn-fake", "fake-ec2"];
        let cli = parse(&[&with_fake[..], &["--soak-machines", "12", "--soak-seed", "3"][..]].concat()).unwrap();
        let config = soak_config(&cli).unwrap().unwrap();
        assert_eq!((config.machines, config.restarts, config.seed), (12, 5, 3));
        assert_eq!((config.fault_rate, config.time_scale), (0.3, 0.02));
        assert_eq!(soak_config(&parse(&with_fake).unwrap()).unwrap(), None);
        for target in [&["--spawn", "drv"][..], &["--endpoint", "/tmp/d.sock"][..]] {
            let cli = parse(&[target, &["--soak-machines", "12"][..]].concat()).unwrap();
            assert_eq!(soak_config(&cli).unwrap_err(), NEEDS_RESTARTS);
        }
        let cli =
            parse(&[&with_fake[..], &["--soak-machines", "12", "--soak-fault-rate", "1.5"][..]].concat()).unwrap();
        assert!(soak_config(&cli).is_err());
        assert!(
            parse(&[&with_fake[..], &["--soak-restarts", "3"][..]].concat()).is_err(),
            "soak flags need --soak-machines"
        );
    }
}
