//! One benchmark run: which driver processes are started with which flags,
//! and the order of the phases.

use std::time::Duration;

use machine_driver_proto::v1::Capability;

use crate::admin::Admin;
use crate::cli::{Args, Sizes};
use crate::phases::{fleet, footprint, lifecycle, overhead, throughput};
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
}

async fn session(args: &Args, extra: &[String]) -> Result<Session, String> {
    let timeout = Duration::from_secs(args.startup_timeout_secs);
    let driver = DriverProcess::start(&args.driver, CloudMode::EmbeddedFake, extra, timeout).await?;
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

    if let Err(e) = unlimited_phases(args, &sizes, &mut report).await {
        report.errors.push(e);
    }
    if let Err(e) = rate_limited_phase(args, &sizes, &mut report).await {
        report.errors.push(format!("throughput: {e}"));
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
    match overhead::run(&s.sidecar, &s.admin, &s.inputs, s.driver.cloud_url(), sizes.iterations, sizes.warmup).await {
        Ok(o) => report.overhead = o,
        Err(e) => report.errors.push(format!("overhead: {e}")),
    }
    if args.cloud_latency_ms > 0 {
        report.cloud_latency_ms = args.cloud_latency_ms;
        match overhead_with_latency(&s, sizes, args.cloud_latency_ms).await {
            Ok(o) => report.overhead_with_latency = o,
            Err(e) => report.errors.push(format!("overhead with {} ms cloud latency: {e}", args.cloud_latency_ms)),
        }
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

/// Most iterations of phase 1's repeat with latency (each costs two cloud round trips).
const MAX_LATENCY_ITERATIONS: usize = 200;

/// Phase 1 again while the fake delays every answer by `ms`; the delay is removed afterwards.
async fn overhead_with_latency(s: &Session, sizes: &Sizes, ms: u64) -> Result<Option<overhead::Overhead>, String> {
    s.admin.set_latency(ms).await?;
    let iterations = sizes.iterations.min(MAX_LATENCY_ITERATIONS);
    let warmup = sizes.warmup.min(iterations);
    let measured = overhead::run(&s.sidecar, &s.admin, &s.inputs, s.driver.cloud_url(), iterations, warmup).await;
    s.admin.set_latency(0).await?;
    measured
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
