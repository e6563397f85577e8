//! Counting and timing of every cloud API call.
//!
//! Metric names are the ones existing machine-controller dashboards use:
//! `mcm_cloud_api_requests_total{provider,service,operation}`,
//! `mcm_cloud_api_requests_failed_total{provider,service,operation}` and the histogram
//! `mcm_cloud_api_api_request_duration_seconds{provider,service,operation}`.
//! They go through the `metrics` facade; the server installs the Prometheus recorder.

use std::future::Future;
use std::time::Instant;

use tracing::Instrument;

/// Labels of one cloud API call.
#[derive(Debug, Clone, Copy)]
pub struct CloudCall {
    /// Cloud (`aws`, `gcp`).
    pub provider: &'static str,
    /// Cloud service (`ec2`, `sts`, `compute`).
    pub service: &'static str,
    /// API operation (`RunInstances`, `instances.get`).
    pub operation: &'static str,
}

/// Runs one cloud API call, counting it, timing it and tracing it in a
/// `cloud_call` span. The error is returned unchanged for the provider to classify.
pub async fn cloud_call<T, E, F>(call: CloudCall, fut: F) -> Result<T, E>
where
    F: Future<Output = Result<T, E>>,
{
    let span = tracing::debug_span!(
        "cloud_call",
        provider = call.provider,
        service = call.service,
        operation = call.operation,
        ok = tracing::field::Empty,
    );
    let labels = [("provider", call.provider), ("service", call.service), ("operation", call.operation)];
    metrics::counter!("mcm_cloud_api_requests_total", &labels).increment(1);
    let started = Instant::now();
    let result = fut.instrument(span.clone()).await;
    metrics::histogram!("mcm_cloud_api_api_request_duration_seconds", &labels).record(started.elapsed().as_secs_f64());
    span.record("ok", result.is_ok());
    if result.is_err() {
        metrics::counter!("mcm_cloud_api_requests_failed_total", &labels).increment(1);
    }
    result
}
