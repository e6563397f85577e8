//! Phase 1: a lone GetMachineStatus through the sidecar vs. the same SDK read
//! made directly against the same fake, sequential, interleaved.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::admin::Admin;
use crate::direct::DirectClient;
use crate::stats::Latency;
use crate::workload::{Inputs, Sidecar, new_machine};

/// What phase 1 measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Overhead {
    /// The direct SDK operation compared against.
    pub(crate) direct_call: &'static str,
    /// Measured iterations of each (K).
    pub(crate) iterations: usize,
    /// Unmeasured warm-up iterations of each.
    pub(crate) warmup: usize,
    /// GetMachineStatus through the sidecar's Unix socket.
    pub(crate) sidecar: Latency,
    /// The SDK call made directly.
    pub(crate) direct: Latency,
    /// GetVolumeIDs through the sidecar: no cloud call, so the gRPC hop and
    /// the server's per-RPC plumbing alone.
    pub(crate) floor: Latency,
    /// sidecar p50 / direct p50.
    pub(crate) ratio_p50: f64,
    /// sidecar p99 / direct p99.
    pub(crate) ratio_p99: f64,
    /// sidecar p50 − direct p50, ms.
    pub(crate) added_p50_ms: f64,
    /// Cloud requests the sidecar made per GetMachineStatus (all counted requests minus the K direct ones, / K).
    pub(crate) sidecar_cloud_calls_per_poll: f64,
}

/// Runs phase 1 on one freshly created, running machine; `None` when this
/// build has no direct SDK client for the provider (nothing to compare with).
pub(crate) async fn run(
    sidecar: &Sidecar,
    admin: &Admin,
    inputs: &Inputs,
    cloud_url: &str,
    iterations: usize,
    warmup: usize,
) -> Result<Option<Overhead>, String> {
    let mut m = new_machine("overhead", 0);
    sidecar.create_retrying(&mut m, Duration::from_secs(60)).await?;
    sidecar.wait_running(&m, Duration::from_secs(60)).await?;
    if !DirectClient::available_for(&m.provider_id) {
        return Ok(None);
    }
    let direct = DirectClient::new(&m.provider_id, cloud_url, &inputs.secret_values).await?;
    let direct_call = direct.call_name();

    let status = |i: usize| {
        let m = &m;
        async move {
            let t = Instant::now();
            sidecar.status(m).await.map_err(|s| format!("GetMachineStatus (iteration {i}): {}", s.message()))?;
            Ok::<Duration, String>(t.elapsed())
        }
    };
    let read = |i: usize| {
        let direct = &direct;
        async move {
            let t = Instant::now();
            direct.read().await.map_err(|e| format!("direct read (iteration {i}): {e}"))?;
            Ok::<Duration, String>(t.elapsed())
        }
    };

    let floor = |i: usize| async move {
        let t = Instant::now();
        sidecar.volume_ids().await.map_err(|s| format!("GetVolumeIDs (iteration {i}): {}", s.message()))?;
        Ok::<Duration, String>(t.elapsed())
    };

    for i in 0..warmup {
        read(i).await?;
        status(i).await?;
        floor(i).await?;
    }
    admin.reset_calls().await?;
    let (mut side, mut dir) = (Vec::with_capacity(iterations), Vec::with_capacity(iterations));
    let mut flo = Vec::with_capacity(iterations);
    for i in 0..iterations {
        flo.push(floor(i).await?);
        // Alternate which goes first so that neither always runs on a warmer cache.
        if i % 2 == 0 {
            dir.push(read(i).await?);
            side.push(status(i).await?);
        } else {
            side.push(status(i).await?);
            dir.push(read(i).await?);
        }
    }
    let counts = admin.calls().await?;
    let sidecar_calls = counts.total.saturating_sub(iterations as u64);

    let (s, d) = (Latency::of(&side), Latency::of(&dir));
    Ok(Some(Overhead {
        direct_call,
        iterations,
        warmup,
        sidecar: s,
        direct: d,
        floor: Latency::of(&flo),
        ratio_p50: ratio(s.p50_ms, d.p50_ms),
        ratio_p99: ratio(s.p99_ms, d.p99_ms),
        added_p50_ms: s.p50_ms - d.p50_ms,
        sidecar_cloud_calls_per_poll: sidecar_calls as f64 / iterations as f64,
    }))
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { f64::INFINITY }
}
