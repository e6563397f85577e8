//! Phase 1: a lone GetMachineStatus through the sidecar vs. the same SDK read
//! made directly against the same fake (where this build has a direct client
//! for the provider), and the sidecar's floor (GetVolumeIDs, no cloud call)
//! vs. the same RPC answered by a bare tonic echo server: sequential,
//! interleaved.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::admin::Admin;
use crate::direct::DirectClient;
use crate::stats::Latency;
use crate::workload::{Inputs, Sidecar, new_machine};

/// The sidecar against the direct SDK call (providers with a direct client only).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DirectComparison {
    /// The direct SDK operation compared against.
    pub(crate) call: &'static str,
    /// The SDK call made directly.
    pub(crate) latency: Latency,
    /// sidecar p50 / direct p50.
    pub(crate) ratio_p50: f64,
    /// sidecar p99 / direct p99.
    pub(crate) ratio_p99: f64,
    /// sidecar p50 − direct p50, ms.
    pub(crate) added_p50_ms: f64,
    /// sidecar p99 − direct p99, ms.
    pub(crate) added_p99_ms: f64,
}

/// What phase 1 measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Overhead {
    /// Measured iterations of each (K).
    pub(crate) iterations: usize,
    /// Unmeasured warm-up iterations of each.
    pub(crate) warmup: usize,
    /// GetMachineStatus through the sidecar's Unix socket.
    pub(crate) sidecar: Latency,
    /// GetVolumeIDs through the sidecar: no cloud call, so the gRPC hop and
    /// the server's per-RPC plumbing alone.
    pub(crate) floor: Latency,
    /// The same GetVolumeIDs, same client, answered by a bare tonic server (the echo).
    pub(crate) echo: Latency,
    /// floor p50 / echo p50.
    pub(crate) floor_echo_p50: f64,
    /// floor p99 / echo p99.
    pub(crate) floor_echo_p99: f64,
    /// The comparison with the direct SDK call, when this build has a client for the provider.
    pub(crate) direct: Option<DirectComparison>,
    /// Cloud requests the sidecar made per GetMachineStatus (all counted requests minus the K direct ones, / K).
    pub(crate) sidecar_cloud_calls_per_poll: f64,
}

/// Where phase 1 sends its calls.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Endpoints<'a> {
    /// The driver.
    pub(crate) sidecar: &'a Sidecar,
    /// The bare tonic echo server, through the same kind of client.
    pub(crate) echo: &'a Sidecar,
    /// The fake's admin API.
    pub(crate) admin: &'a Admin,
    /// The request inputs (the direct client's credentials).
    pub(crate) inputs: &'a Inputs,
    /// The fake's API URL.
    pub(crate) cloud_url: &'a str,
}

/// Runs phase 1 on one freshly created, running machine; the direct
/// comparison only when this build has a direct SDK client for the provider.
pub(crate) async fn run(t: Endpoints<'_>, iterations: usize, warmup: usize) -> Result<Overhead, String> {
    let Endpoints { sidecar, echo, admin, inputs, cloud_url } = t;
    let mut m = new_machine("overhead", 0);
    sidecar.create_retrying(&mut m, Duration::from_secs(60)).await?;
    sidecar.wait_running(&m, Duration::from_secs(60)).await?;
    let direct = if DirectClient::available_for(&m.provider_id) {
        Some(DirectClient::new(&m.provider_id, cloud_url, &inputs.secret_values).await?)
    } else {
        None
    };

    let status = |i: usize| {
        let m = &m;
        async move {
            let t = Instant::now();
            sidecar.status(m).await.map_err(|s| format!("GetMachineStatus (iteration {i}): {}", s.message()))?;
            Ok::<Duration, String>(t.elapsed())
        }
    };
    let read = |i: usize| {
        let direct = direct.as_ref();
        async move {
            let Some(direct) = direct else {
                return Ok(None);
            };
            let t = Instant::now();
            direct.read().await.map_err(|e| format!("direct read (iteration {i}): {e}"))?;
            Ok::<Option<Duration>, String>(Some(t.elapsed()))
        }
    };
    let volume_ids = |to: &'static str, on: &Sidecar, i: usize| {
        let on = on.clone();
        async move {
            let t = Instant::now();
            on.volume_ids().await.map_err(|s| format!("GetVolumeIDs on the {to} (iteration {i}): {}", s.message()))?;
            Ok::<Duration, String>(t.elapsed())
        }
    };

    for i in 0..warmup {
        read(i).await?;
        status(i).await?;
        volume_ids("sidecar", sidecar, i).await?;
        volume_ids("echo", echo, i).await?;
    }
    admin.reset_calls().await?;
    let (mut side, mut dir) = (Vec::with_capacity(iterations), Vec::with_capacity(iterations));
    let (mut flo, mut ech) = (Vec::with_capacity(iterations), Vec::with_capacity(iterations));
    for i in 0..iterations {
        // Alternate which goes first so that neither always runs on a warmer cache.
        if i % 2 == 0 {
            flo.push(volume_ids("sidecar", sidecar, i).await?);
            ech.push(volume_ids("echo", echo, i).await?);
            dir.extend(read(i).await?);
            side.push(status(i).await?);
        } else {
            ech.push(volume_ids("echo", echo, i).await?);
            flo.push(volume_ids("sidecar", sidecar, i).await?);
            side.push(status(i).await?);
            dir.extend(read(i).await?);
        }
    }
    let counts = admin.calls().await?;
    let sidecar_calls = counts.total.saturating_sub(dir.len() as u64);

    let (s, f, e) = (Latency::of(&side), Latency::of(&flo), Latency::of(&ech));
    let direct = direct.map(|client| {
        let d = Latency::of(&dir);
        DirectComparison {
            call: client.call_name(),
            latency: d,
            ratio_p50: ratio(s.p50_ms, d.p50_ms),
            ratio_p99: ratio(s.p99_ms, d.p99_ms),
            added_p50_ms: s.p50_ms - d.p50_ms,
            added_p99_ms: s.p99_ms - d.p99_ms,
        }
    });
    Ok(Overhead {
        iterations,
        warmup,
        sidecar: s,
        floor: f,
        echo: e,
        floor_echo_p50: ratio(f.p50_ms, e.p50_ms),
        floor_echo_p99: ratio(f.p99_ms, e.p99_ms),
        direct,
        sidecar_cloud_calls_per_poll: sidecar_calls as f64 / iterations as f64,
    })
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { f64::INFINITY }
}
