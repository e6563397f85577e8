//! Logs, traces and the metrics recorder, installed once per process.

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::io::IsTerminal as _;
use tracing_subscriber::filter::{FilterExt as _, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::{LogFormat, ServerArgs};
use crate::error::ServeError;

/// Histogram buckets (seconds) for RPC and cloud-call durations, as CSI sidecars use.
const BUCKETS: &[f64] =
    &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0];

/// Installed telemetry; flushes traces when dropped.
pub struct Telemetry {
    /// Renders the Prometheus exposition.
    pub prometheus: PrometheusHandle,
    tracer: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(t) = self.tracer.take() {
            let _ = t.shutdown();
        }
    }
}

/// A filter that lets everything through but `targets` (and everything under
/// them) above INFO. It is AND-ed with the operator's filter rather than added
/// to it as a directive: in an `EnvFilter` a more specific directive wins, so
/// `--log trace,azure_core::policies::transport=debug` would outrank an added
/// `azure_core=info` and print request bodies (secrets, user data).
fn cap(targets: &[&str]) -> Targets {
    targets
        .iter()
        .fold(Targets::new().with_default(LevelFilter::TRACE), |t, target| t.with_target(*target, LevelFilter::INFO))
}

/// Links kept per exported span (the SDK's default, 128, is less than a full coalesced batch).
const MAX_LINKS_PER_SPAN: u32 = 512;

/// Installs the global tracing subscriber (text or JSON logs, optional OTLP
/// export) and the Prometheus metrics recorder. `secret_logging_targets`
/// (the provider's SDK targets that print secrets at debug) are capped at INFO
/// in both filters.
pub(crate) fn init(args: &ServerArgs, secret_logging_targets: &[&str]) -> Result<Telemetry, ServeError> {
    let filter = EnvFilter::try_new(&args.log)
        .map_err(|e| ServeError::Config(format!("--log {:?}: {e}", args.log)))?
        .and(cap(secret_logging_targets));
    let trace_filter = EnvFilter::try_new(&args.trace_filter)
        .map_err(|e| ServeError::Config(format!("--trace-filter {:?}: {e}", args.trace_filter)))?
        .and(cap(secret_logging_targets));
    let fmt = match args.log_format {
        // Colour only on a terminal: escape codes in `kubectl logs` help nobody.
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormat::Json => {
            tracing_subscriber::fmt::layer().json().with_current_span(true).with_writer(std::io::stderr).boxed()
        }
    };
    let tracer = match &args.otlp_endpoint {
        Some(endpoint) => {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(endpoint)
                .build()
                .map_err(|e| ServeError::Telemetry(format!("OTLP exporter for {endpoint}: {e}")))?;
            Some(
                SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    // A coalesced read links to every RPC it answers (up to 200 in AWS and GCP).
                    .with_max_links_per_span(MAX_LINKS_PER_SPAN)
                    .with_resource(opentelemetry_sdk::Resource::builder().with_service_name("machine-driver").build())
                    .build(),
            )
        }
        None => None,
    };
    // Each output has its own filter: logs follow `--log`, traces `--trace-filter`.
    let otel = tracer
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer("machine-driver")).with_filter(trace_filter));
    tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(otel)
        .try_init()
        .map_err(|e| ServeError::Telemetry(e.to_string()))?;
    let prometheus = install_prometheus()?;
    Ok(Telemetry { prometheus, tracer })
}

/// Installs the global Prometheus recorder with this server's buckets.
pub fn install_prometheus() -> Result<PrometheusHandle, ServeError> {
    PrometheusBuilder::new()
        .set_buckets(BUCKETS)
        .map_err(|e| ServeError::Telemetry(e.to_string()))?
        .install_recorder()
        .map_err(|e| ServeError::Telemetry(e.to_string()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tracing_subscriber::layer::{Context, SubscriberExt};

    use super::*;

    /// Counts the events that pass its filter.
    struct Count(Arc<AtomicUsize>);

    impl<S: tracing::Subscriber> Layer<S> for Count {
        fn on_event(&self, _: &tracing::Event<'_>, _: Context<'_, S>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn secret_logging_targets_stay_at_info_under_debug() {
        // The second filter names a module of the capped target itself: it must not outrank the cap.
        for log in ["debug", "trace,sdk_crate::policies::transport=trace"] {
            let seen = Arc::new(AtomicUsize::new(0));
            let filter = EnvFilter::new(log).and(cap(&["sdk_crate"]));
            let subscriber = tracing_subscriber::registry().with(Count(Arc::clone(&seen)).with_filter(filter));
            tracing::subscriber::with_default(subscriber, || {
                tracing::debug!(target: "sdk_crate::policies::transport", "Authorization: Bearer secret");
                tracing::trace!(target: "sdk_crate", "body: secret");
                tracing::info!(target: "sdk_crate::policies", "kept");
                tracing::debug!(target: "machine_driver_server", "kept");
            });
            assert_eq!(seen.load(Ordering::Relaxed), 2, "--log {log}");
        }
    }
}
