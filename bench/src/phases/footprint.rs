//! Phase 5: startup time to a connectable socket, idle and peak RSS, binary size.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::process::{CloudMode, DriverProcess};
use crate::stats::median_ms;

/// How long a freshly started driver is left alone before its idle RSS is read.
const IDLE_AFTER: Duration = Duration::from_millis(500);

/// Startups of the driver without a fake (`--cloud-endpoint` to a closed port; no cloud call is made).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Startups {
    /// Spawn → socket connectable, ms, one per start.
    pub(crate) socket_ready_ms: Vec<f64>,
    /// Median of `socket_ready_ms`.
    pub(crate) socket_ready_median_ms: f64,
    /// Spawn → Probe ready, ms, one per start.
    pub(crate) probe_ready_ms: Vec<f64>,
    /// VmRSS 500 ms after ready with no call made, KiB, one per start.
    pub(crate) idle_rss_kib: Vec<u64>,
    /// Median of `idle_rss_kib`.
    pub(crate) idle_rss_median_kib: u64,
}

/// The binary whose size is reported.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BinarySize {
    /// Its path.
    pub(crate) path: String,
    /// Its size in bytes.
    pub(crate) bytes: u64,
    /// Whether it was given as the release binary (`--release-binary`); otherwise it is the benchmarked debug binary.
    pub(crate) release: bool,
}

/// Starts the driver `starts` times without a fake and measures each startup.
pub(crate) async fn startups(binary: &Path, starts: usize, timeout: Duration) -> Result<Startups, String> {
    let mut s = Startups::default();
    let (mut socket, mut rss) = (Vec::new(), Vec::new());
    for _ in 0..starts {
        let driver = DriverProcess::start(binary, CloudMode::Unreachable, &[], timeout).await?;
        tokio::time::sleep(IDLE_AFTER).await;
        let memory = driver.memory()?;
        socket.push(driver.socket_ready);
        s.socket_ready_ms.push(ms(driver.socket_ready));
        s.probe_ready_ms.push(ms(driver.probe_ready));
        s.idle_rss_kib.push(memory.rss_kib);
        rss.push(memory.rss_kib);
        driver.stop(Duration::from_secs(10)).await?;
    }
    s.socket_ready_median_ms = median_ms(&socket);
    rss.sort_unstable();
    s.idle_rss_median_kib = rss.get(rss.len().saturating_sub(1) / 2).copied().unwrap_or(0);
    Ok(s)
}

/// Size of `release` if given, else of `debug`.
pub(crate) fn binary_size(release: Option<&Path>, debug: &Path) -> Result<BinarySize, String> {
    let (path, is_release) = match release {
        Some(p) => (p, true),
        None => (debug, false),
    };
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(BinarySize { path: path.display().to_string(), bytes: meta.len(), release: is_release })
}

/// Idle RSS of a driver started by the harness, read after the idle pause.
pub(crate) async fn idle_rss_kib(driver: &DriverProcess) -> Result<u64, String> {
    tokio::time::sleep(IDLE_AFTER).await;
    Ok(driver.memory()?.rss_kib)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
