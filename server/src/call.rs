//! What every RPC handler does around the provider call: deadline, tracing span
//! joined to the caller's `traceparent`, metrics, logging, and the error mapping.

use std::future::Future;
use std::time::{Duration, Instant};

use machine_driver_api::{CallContext, DriverError, ErrorKind};
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tonic::metadata::MetadataMap;
use tonic::{Response, Status};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use machine_driver_proto::v1 as pb;

use crate::admission::Arrival;
use crate::status::{code_for, to_status};

/// How MCM's Go providers count an answer in MCM's driver metrics.
pub(crate) trait McmAnswer {
    /// MCM's numeric error code when the Go providers return this answer as an
    /// error: a machine whose initialization is pending is `Uninitialized`
    /// (17), counted as a failure without a duration, as the AWS provider does.
    fn mcm_error_code(&self) -> Option<i32> {
        None
    }
}

/// The code of MCM's `codes.Uninitialized` (machine-controller-manager `pkg/util/provider/machinecodes/codes`).
const MCM_UNINITIALIZED: i32 = 17;

impl McmAnswer for pb::GetMachineStatusResponse {
    fn mcm_error_code(&self) -> Option<i32> {
        self.initialization.as_ref().is_some_and(|i| !i.initialized).then_some(MCM_UNINITIALIZED)
    }
}

impl McmAnswer for pb::CreateMachineResponse {}
impl McmAnswer for pb::InitializeMachineResponse {}
impl McmAnswer for pb::DeleteMachineResponse {}
impl McmAnswer for pb::ListMachinesResponse {}
impl McmAnswer for pb::GetVolumeIDsResponse {}
impl McmAnswer for pb::ShareImageResponse {}
impl McmAnswer for pb::RevokeImageShareResponse {}
impl McmAnswer for pb::ListImageSharesResponse {}
impl McmAnswer for pb::UpdateMachineResponse {}

/// Per-server settings the call wrapper needs.
#[derive(Debug, Clone)]
pub(crate) struct CallSettings {
    pub(crate) provider: &'static str,
    pub(crate) default_timeout: Duration,
    /// Turns true when the shutdown grace period is over: calls still running
    /// are abandoned with UNAVAILABLE so the caller retries elsewhere.
    pub(crate) abandon: tokio::sync::watch::Receiver<bool>,
}

/// Identifying, non-secret facts about a call, recorded on its span.
#[derive(Debug, Default)]
pub(crate) struct CallLabels<'a> {
    pub(crate) machine: &'a str,
    pub(crate) provider_id: &'a str,
}

/// Builds the call context from the caller's `grpc-timeout`, or the default.
///
/// The provider's deadline is a little earlier than the caller's (a tenth of
/// it, at most 250 ms), so that a DEADLINE_EXCEEDED answer reaches the caller
/// before it gives up on its own and sees only CANCELLED.
///
/// No call runs longer than [`LONGEST_CALL`], whatever the caller asked for.
///
/// The deadline counts from when the request's headers arrived (the
/// [`Arrival`] the admission recorded), so that the time its body took and
/// its wait for a call slot are spent from it, as they are from the caller's.
pub(crate) fn context<T>(rpc: &'static str, request: &tonic::Request<T>, default_timeout: Duration) -> CallContext {
    let timeout = request
        .metadata()
        .get("grpc-timeout")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_grpc_timeout)
        .map(|t| t.saturating_sub((t / 10).min(Duration::from_millis(250))))
        .unwrap_or(default_timeout);
    let from = request.extensions().get::<Arrival>().map_or_else(tokio::time::Instant::now, |a| a.0);
    CallContext::new(rpc, from + timeout.min(LONGEST_CALL))
}

/// Longest any call may run, whatever deadline the caller asked for. Enforced
/// here, in the one place every handler takes its deadline from, rather than
/// by tonic's server-wide timeout layer: that layer parsed `grpc-timeout` a
/// second time and armed a second timer on every RPC (about 4 % of the
/// instructions of an RPC without a cloud call, measured with the bench's
/// `--instructions`).
pub(crate) const LONGEST_CALL: Duration = Duration::from_secs(600);

/// Runs `work` for `rpc` under its deadline and span; maps its error once.
pub(crate) async fn run<T, R, F>(
    settings: &CallSettings,
    ctx: CallContext,
    metadata: &MetadataMap,
    labels: CallLabels<'_>,
    work: F,
    into_response: impl FnOnce(T) -> R,
) -> Result<Response<R>, Status>
where
    R: McmAnswer,
    F: Future<Output = Result<T, DriverError>>,
{
    let rpc = ctx.rpc();
    let span = tracing::info_span!(
        "rpc",
        otel.name = rpc,
        rpc,
        machine = labels.machine,
        provider_id = labels.provider_id,
        code = tracing::field::Empty,
    );
    // Most callers send no trace context: skip the propagator for them.
    if metadata.contains_key(TRACEPARENT) {
        let parent = TraceContextPropagator::new().extract(&MetadataExtractor(metadata));
        let _ = span.set_parent(parent);
    }
    let started = Instant::now();
    let deadline = ctx.deadline();
    let mut abandon = settings.abandon.clone();
    let result = async {
        tokio::select! {
            r = tokio::time::timeout_at(deadline, work) => match r {
                Ok(r) => r,
                Err(_) => Err(DriverError::deadline_exceeded(format!("{rpc} did not finish before its deadline"))),
            },
            _ = abandon.wait_for(|a| *a) => Err(DriverError::unavailable(
                machine_driver_api::reasons::SHUTTING_DOWN,
                format!("{rpc} was abandoned: the driver is shutting down"),
                Duration::from_secs(5),
            )),
        }
    }
    .instrument(span.clone())
    .await;
    let elapsed = started.elapsed();
    let code = match &result {
        Ok(_) => tonic::Code::Ok,
        Err(e) => code_for(e.kind()),
    };
    let code_label = code_name(code);
    span.record("code", code_label);
    let result = result.map(into_response);
    // As MCM's metrics package declares them and the Go providers record them:
    // duration of successful calls only, failures by MCM's numeric code.
    match result.as_ref().map(McmAnswer::mcm_error_code) {
        Ok(None) => {
            metrics::histogram!("mcm_cloud_api_driver_request_duration_seconds", "provider" => settings.provider, "operation" => mcm_operation(rpc))
                .record(elapsed.as_secs_f64());
        }
        Ok(Some(mcm_code)) => {
            metrics::counter!("mcm_cloud_api_driver_requests_failed_total", "provider" => settings.provider, "operation" => mcm_operation(rpc), "error_code" => mcm_code_label(mcm_code))
                .increment(1);
        }
        Err(_) => {}
    }
    metrics::histogram!("machine_driver_rpc_duration_seconds", "method" => rpc, "grpc_status_code" => code_label)
        .record(elapsed.as_secs_f64());
    let _enter = span.enter();
    match result {
        Ok(v) => {
            // Reads (status polls above all) succeed thousands of times an hour: debug only.
            if changes_machines(rpc) {
                tracing::info!(elapsed_ms = elapsed.as_millis() as u64, "rpc ok");
            } else {
                tracing::debug!(elapsed_ms = elapsed.as_millis() as u64, "rpc ok");
            }
            Ok(Response::new(v))
        }
        Err(e) => {
            metrics::counter!("mcm_cloud_api_driver_requests_failed_total", "provider" => settings.provider, "operation" => mcm_operation(rpc), "error_code" => mcm_code_label(code as i32))
                .increment(1);
            if e.reason() == machine_driver_api::SPOT_RECLAIMED {
                metrics::counter!("machine_driver_spot_reclaimed_answers_total", "provider" => settings.provider)
                    .increment(1);
            }
            let source = std::error::Error::source(&e).map(|s| format!("{s:#}")).unwrap_or_default();
            if e.kind() == ErrorKind::Internal {
                tracing::error!(
                    elapsed_ms = elapsed.as_millis() as u64,
                    reason = e.reason(),
                    source,
                    "rpc failed: {}",
                    e.message()
                );
            } else {
                tracing::warn!(
                    elapsed_ms = elapsed.as_millis() as u64,
                    reason = e.reason(),
                    source,
                    "rpc failed: {}",
                    e.message()
                );
            }
            Err(to_status(&e))
        }
    }
}

/// Whether `rpc` changes cloud resources (its successes are logged at INFO).
fn changes_machines(rpc: &str) -> bool {
    matches!(rpc, "CreateMachine" | "InitializeMachine" | "DeleteMachine" | "ShareImage" | "RevokeImageShare")
}

/// The W3C trace context header.
const TRACEPARENT: &str = "traceparent";

/// The name of a gRPC code as tonic's `Debug` writes it (`Ok`, `NotFound`),
/// without formatting a string on every RPC.
fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code as C;
    match code {
        C::Ok => "Ok",
        C::Cancelled => "Cancelled",
        C::Unknown => "Unknown",
        C::InvalidArgument => "InvalidArgument",
        C::DeadlineExceeded => "DeadlineExceeded",
        C::NotFound => "NotFound",
        C::AlreadyExists => "AlreadyExists",
        C::PermissionDenied => "PermissionDenied",
        C::ResourceExhausted => "ResourceExhausted",
        C::FailedPrecondition => "FailedPrecondition",
        C::Aborted => "Aborted",
        C::OutOfRange => "OutOfRange",
        C::Unimplemented => "Unimplemented",
        C::Internal => "Internal",
        C::Unavailable => "Unavailable",
        C::DataLoss => "DataLoss",
        C::Unauthenticated => "Unauthenticated",
    }
}

/// MCM's numeric error code as its metrics label (`"17"`), without allocating.
fn mcm_code_label(code: i32) -> &'static str {
    const LABELS: [&str; 18] =
        ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17"];
    usize::try_from(code).ok().and_then(|i| LABELS.get(i)).copied().unwrap_or("unknown")
}

struct MetadataExtractor<'a>(&'a MetadataMap);

impl Extractor for MetadataExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|k| match k {
                tonic::metadata::KeyRef::Ascii(k) => Some(k.as_str()),
                tonic::metadata::KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

/// Parses a `grpc-timeout` header value (`100m`, `5S`, ...).
pub(crate) fn parse_grpc_timeout(v: &str) -> Option<Duration> {
    if v.len() < 2 || v.len() > 9 {
        return None;
    }
    let (num, unit) = v.split_at(v.len() - 1);
    let n: u64 = num.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The `operation` label the Go providers record for an RPC (MCM's dashboards
/// group by it): snake case, and `list_machine` in the singular as they write it.
pub(crate) fn mcm_operation(rpc: &'static str) -> &'static str {
    match rpc {
        "CreateMachine" => "create_machine",
        "InitializeMachine" => "initialize_machine",
        "GetMachineStatus" => "get_machine_status",
        "DeleteMachine" => "delete_machine",
        "ListMachines" => "list_machine",
        "GetVolumeIDs" => "get_volume_ids",
        "ShareImage" => "share_image",
        "RevokeImageShare" => "revoke_image_share",
        "ListImageShares" => "list_image_shares",
        "UpdateMachine" => "update_machine",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_names_are_tonics_debug_names() {
        for i in 0..=16 {
            let code = tonic::Code::from_i32(i);
            assert_eq!(code_name(code), format!("{code:?}"));
        }
        assert_eq!(mcm_code_label(17), "17");
        assert_eq!(mcm_code_label(0), "0");
        assert_eq!(mcm_code_label(99), "unknown");
    }

    #[test]
    fn no_call_runs_longer_than_the_longest_call() {
        let mut request = tonic::Request::new(());
        request.metadata_mut().insert("grpc-timeout", "2H".parse().expect("header"));
        let ctx = context("CreateMachine", &request, Duration::from_secs(60));
        assert!(ctx.remaining() <= LONGEST_CALL, "{:?}", ctx.remaining());
        assert!(ctx.remaining() > LONGEST_CALL - Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_counts_from_the_arrival_of_the_request() {
        let mut request = tonic::Request::new(());
        request.metadata_mut().insert("grpc-timeout", "10S".parse().expect("header"));
        request.extensions_mut().insert(Arrival(tokio::time::Instant::now()));
        tokio::time::advance(Duration::from_secs(4)).await;
        let ctx = context("GetMachineStatus", &request, Duration::from_secs(60));
        // 10 s less 250 ms of margin, of which 4 s went by before the handler ran.
        assert_eq!(ctx.remaining(), Duration::from_millis(5_750));
    }

    #[test]
    fn grpc_timeout_units() {
        assert_eq!(parse_grpc_timeout("100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_grpc_timeout("2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout("5x"), None);
        assert_eq!(parse_grpc_timeout("1234567890S"), None);
    }
}
