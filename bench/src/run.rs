//! One benchmark run: which driver processes are started with which flags,
//! and the order of the phases.

use std::time::Duration;

use machine_driver_proto::v1::Capability;

use crate::admin::Admin;
use crate::cli::{Args, Sizes};
use crate::echo::EchoProcess;
use crate::external::{ExternalFake, provider_of};
use crate::instructions::{self, Callgrind};
use crate::phases::{fleet, footprint, lifecycle, overhead, throughput, update};
use crate::process::{CloudMode, DriverProcess};
use crate::report::{MachineInfo, Report};
use crate::targets;
use crate::workload::{Inputs, Sidecar};

/// Grace given to the driver after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(20);

/// A started driver with its connection and inputs.
struct Session {
    driver: DriverProcess,
    sidecar: Sidecar,
    admin: Admin,
    inputs: Inputs,
    provider: String,
    plugin: String,
    initialize: bool,
    update: bool,
}

/// A driver on its embedded fake.
async fn session(args: &Args, extra: &[String]) -> Result<Session, String> {
    let timeout = Duration::from_secs(args.startup_timeout_secs);
    session_on(args, CloudMode::EmbeddedFake, extra, &[], timeout).await
}

/// A driver on `mode`'s cloud, under `wrapper` (none when empty), with its fake set up.
async fn session_on(
    args: &Args,
    mode: CloudMode,
    extra: &[String],
    wrapper: &[String],
    timeout: Duration,
) -> Result<Session, String> {
    let driver = DriverProcess::start_wrapped(wrapper, &args.driver, mode, extra, timeout).await?;
    let conn = driver.connect().await?;
    let (info, caps) = conn.describe().await?;
    let inputs = Inputs::load(&info.provider, args.machine_class.as_deref(), args.secret.as_deref())?;
    let admin = Admin::for_cloud_url(driver.cloud_url())?;
    for (path, body) in crate::workload::fake_setup(&info.provider)? {
        admin.post(&path, body).await.map_err(|e| format!("fakeSetup {path}: {e}"))?;
    }
    Ok(Session {
        sidecar: Sidecar::new(conn, inputs.clone()),
        admin,
        inputs,
        plugin: format!("{} {}", info.name, info.vendor_version),
        provider: info.provider,
        initialize: caps.has(Capability::InitializeMachine),
        update: caps.has(Capability::UpdateMachine),
        driver,
    })
}

/// Runs every phase; a phase that breaks is recorded in `errors` and the others still run.
pub(crate) async fn run(args: &Args) -> Report {
    let sizes = args.sizes();
    let mut report = Report::empty("unknown");
    report.command = Args::command_line();
    report.driver = args.driver.display().to_string();
    report.quick = args.quick;
    report.machine = MachineInfo::local();

    if args.update_only {
        if let Err(e) = update_only(args, &mut report).await {
            report.errors.push(e);
        }
        return report;
    }
    if let Err(e) = unlimited_phases(args, &sizes, &mut report).await {
        report.errors.push(e);
    }
    if let Err(e) = rate_limited_phase(args, &sizes, &mut report).await {
        report.errors.push(format!("throughput: {e}"));
    }
    if let Some(n) = sizes.external_fleet
        && let Err(e) = external_fleet_phase(args, n, &mut report).await
    {
        report.errors.push(format!("fleet without the embedded fake: {e}"));
    }
    if args.instructions {
        match instructions_phase(args, &mut report).await {
            Ok(i) => report.instructions = Some(i),
            Err(Skipped::NotMeasured(why)) => report.instructions_note = Some(why),
            Err(Skipped::Broke(e)) => report.errors.push(format!("instructions: {e}")),
        }
    }
    let timeout = Duration::from_secs(args.startup_timeout_secs);
    match footprint::startups(&args.driver, sizes.starts, timeout).await {
        Ok(s) => report.footprint.startups = Some(s),
        Err(e) => report.errors.push(format!("footprint (startups without a fake): {e}")),
    }
    match footprint::binary_size(args.release_binary.as_deref(), &args.driver) {
        Ok(b) => report.footprint.binary = Some(b),
        Err(e) => report.errors.push(format!("binary size: {e}")),
    }
    report.targets = targets::check(&report);
    report
}

/// Phases 1-3 (and the idle/peak RSS of phase 5) on a driver whose client-side limiter is off.
async fn unlimited_phases(args: &Args, sizes: &Sizes, report: &mut Report) -> Result<(), String> {
    let s = session(args, &["--cloud-rate-limit".into(), "0".into()]).await?;
    report.provider = s.provider.clone();
    report.plugin = s.plugin.clone();
    report.footprint.socket_ready_with_fake_ms.push(s.driver.socket_ready.as_secs_f64() * 1000.0);
    report.footprint.idle_rss_with_fake_kib = Some(footprint::idle_rss_kib(&s.driver).await?);

    match lifecycle::run(&s.sidecar, &s.admin, s.initialize).await {
        Ok(l) => report.lifecycle = Some(l),
        Err(e) => report.errors.push(format!("lifecycle: {e}")),
    }
    update_phase(&s, report).await;
    let timeout = Duration::from_secs(args.startup_timeout_secs);
    match echo_sidecar(&s, timeout).await {
        Ok((echo_process, echo)) => {
            let at = overhead::Endpoints {
                sidecar: &s.sidecar,
                echo: &echo,
                admin: &s.admin,
                inputs: &s.inputs,
                cloud_url: s.driver.cloud_url(),
            };
            match overhead::run(at, sizes.iterations, sizes.warmup).await {
                Ok(o) => report.overhead = Some(o),
                Err(e) => report.errors.push(format!("overhead: {e}")),
            }
            if args.cloud_latency_ms > 0 {
                report.cloud_latency_ms = args.cloud_latency_ms;
                match overhead_with_latency(at, sizes, args.cloud_latency_ms).await {
                    Ok(o) => report.overhead_with_latency = Some(o),
                    Err(e) => {
                        report.errors.push(format!("overhead with {} ms cloud latency: {e}", args.cloud_latency_ms))
                    }
                }
            }
            echo_process.stop().await;
        }
        Err(e) => report.errors.push(format!("overhead: the bare tonic echo server: {e}")),
    }
    match fleet::run(&s.driver, &s.sidecar, &s.admin, &sizes.fleet, args.create_concurrency).await {
        Ok(f) => {
            if let Some(last) = f.rounds.last() {
                report.footprint.peak_rss_under_load_kib = Some(last.hwm_after_kib);
                report.footprint.peak_load_concurrency = last.machines;
            }
            report.fleet = Some(f);
        }
        Err(e) => report.errors.push(format!("fleet: {e}")),
    }
    let tail = s.driver.log_tail(20);
    s.driver.stop(STOP_GRACE).await.map_err(|e| format!("stopping the driver: {e}\n{tail}"))
}

/// The UpdateMachine phase on `s`, its result or error recorded in `report`.
async fn update_phase(s: &Session, report: &mut Report) {
    match update::run(&s.sidecar, &s.admin, &s.provider, s.update, s.initialize).await {
        Ok(u) => {
            report.errors.extend(u.findings.iter().map(|f| format!("update: {f}")));
            report.update = Some(u);
        }
        Err(e) => report.errors.push(format!("update: {e}")),
    }
}

/// `--update-only`: the UpdateMachine phase alone, on a driver with its embedded fake (limiter off).
async fn update_only(args: &Args, report: &mut Report) -> Result<(), String> {
    let s = session(args, &["--cloud-rate-limit".into(), "0".into()]).await?;
    report.provider = s.provider.clone();
    report.plugin = s.plugin.clone();
    update_phase(&s, report).await;
    let tail = s.driver.log_tail(20);
    s.driver.stop(STOP_GRACE).await.map_err(|e| format!("stopping the driver: {e}\n{tail}"))
}

/// Most iterations of phase 1's repeat with latency (each costs two cloud round trips).
const MAX_LATENCY_ITERATIONS: usize = 200;

/// Phase 1 again while the fake delays every answer by `ms`; the delay is removed afterwards.
async fn overhead_with_latency(
    at: overhead::Endpoints<'_>,
    sizes: &Sizes,
    ms: u64,
) -> Result<overhead::Overhead, String> {
    at.admin.set_latency(ms).await?;
    let iterations = sizes.iterations.min(MAX_LATENCY_ITERATIONS);
    let warmup = sizes.warmup.min(iterations);
    let measured = overhead::run(at, iterations, warmup).await;
    at.admin.set_latency(0).await?;
    measured
}

/// The bare tonic echo server started, and a client of it like the session's.
async fn echo_sidecar(s: &Session, timeout: Duration) -> Result<(EchoProcess, Sidecar), String> {
    let echo = EchoProcess::start(timeout).await?;
    match echo.connect().await {
        Ok(conn) => Ok((echo, Sidecar::new(conn, s.inputs.clone()))),
        Err(e) => {
            echo.stop().await;
            Err(e)
        }
    }
}

/// The provider the driver serves: as the earlier phases found it, else asked of a driver without a fake.
async fn provider(args: &Args, report: &Report) -> Result<String, String> {
    if report.provider != "unknown" {
        return Ok(report.provider.clone());
    }
    provider_of(&args.driver, Duration::from_secs(args.startup_timeout_secs)).await
}

/// Phase 3 once more, `n` machines, on a driver whose cloud is the provider's
/// fake running as its own process: the driver's peak RSS is the driver's alone.
async fn external_fleet_phase(args: &Args, n: usize, report: &mut Report) -> Result<(), String> {
    let timeout = Duration::from_secs(args.startup_timeout_secs);
    let provider = provider(args, report).await?;
    let fake = ExternalFake::start(&args.driver, &provider, timeout).await?;
    eprintln!("fleet without the embedded fake: {n} machines (creating them takes a while in a debug build)");
    let extra = ["--cloud-rate-limit".to_string(), "0".to_string()];
    let measured = match session_on(args, fake.mode(), &extra, &[], timeout).await {
        Ok(s) => {
            let f = fleet::run(&s.driver, &s.sidecar, &s.admin, &[n], args.create_concurrency).await;
            let tail = s.driver.log_tail(20);
            let stopped = s.driver.stop(STOP_GRACE).await.map_err(|e| format!("stopping the driver: {e}\n{tail}"));
            f.and_then(|f| stopped.map(|()| f))
        }
        Err(e) => Err(e),
    };
    let fake_stopped = fake.stop().await;
    let f = measured?;
    if let Some(last) = f.rounds.last() {
        report.footprint.peak_rss_without_fake_kib = Some(last.hwm_after_kib);
        report.footprint.peak_load_without_fake_concurrency = last.machines;
    }
    report.fleet_external = Some(f);
    fake_stopped.map_err(|e| format!("stopping the fake: {e}"))
}

/// Why the instructions phase gave no figure.
enum Skipped {
    /// A tool is missing: reported as "not measured".
    NotMeasured(String),
    /// Something broke: an error.
    Broke(String),
}

/// Startup bound of a driver under valgrind (tens of times slower than native).
const VALGRIND_STARTUP: Duration = Duration::from_secs(300);

/// The optional phase: instructions per GetMachineStatus of the driver under callgrind, on an external fake.
async fn instructions_phase(args: &Args, report: &mut Report) -> Result<instructions::Instructions, Skipped> {
    instructions::available().await.map_err(|why| Skipped::NotMeasured(format!("not measured: {why}")))?;
    let timeout = Duration::from_secs(args.startup_timeout_secs);
    let provider = provider(args, report).await.map_err(Skipped::Broke)?;
    let fake = ExternalFake::start(&args.driver, &provider, timeout).await.map_err(Skipped::Broke)?;
    eprintln!("instructions: driver under callgrind (slow)");
    let measured = async {
        let callgrind = Callgrind::new(args.callgrind_dir.as_deref())?;
        let extra = ["--cloud-rate-limit".to_string(), "0".to_string()];
        let startup = timeout.max(VALGRIND_STARTUP);
        let s = session_on(args, fake.mode(), &extra, &callgrind.wrapper(), startup).await?;
        let m = instructions::measure(&s.sidecar, s.driver.pid(), &callgrind).await;
        let tail = s.driver.log_tail(20);
        // Under valgrind the driver may take longer than its grace; the figure stands anyway.
        if let Err(e) = s.driver.stop(VALGRIND_STARTUP).await {
            eprintln!("instructions: stopping the driver under valgrind: {e}\n{tail}");
        }
        m
    }
    .await;
    let _ = fake.stop().await;
    measured.map_err(Skipped::Broke)
}

/// Phase 4 on a driver limited to the injected rate.
async fn rate_limited_phase(args: &Args, sizes: &Sizes, report: &mut Report) -> Result<(), String> {
    let rate = args.rate.to_string();
    let extra = ["--cloud-rate-limit".into(), rate.clone(), "--cloud-burst".into(), rate];
    let s = session(args, &extra).await?;
    report.footprint.socket_ready_with_fake_ms.push(s.driver.socket_ready.as_secs_f64() * 1000.0);
    if report.provider == "unknown" {
        report.provider = s.provider.clone();
        report.plugin = s.plugin.clone();
    }
    let measured =
        throughput::run(&s.sidecar, &s.admin, args.rate, sizes.throughput, args.throughput_concurrency).await;
    let live = crate::admin::live_instances(&s.admin).await;
    let tail = s.driver.log_tail(20);
    let stopped = s.driver.stop(STOP_GRACE).await;
    let t = measured?;
    if let Ok(live) = live
        && (live as u64) < t.creates_ok
    {
        return Err(format!("{} creates answered OK but the fake holds only {live} live instances", t.creates_ok));
    }
    report.throughput = Some(t);
    stopped.map_err(|e| format!("stopping the driver: {e}\n{tail}"))
}
