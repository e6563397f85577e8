//! Classification of Compute Engine failures (HTTP errors, transport errors,
//! failed zone operations) into the driver's [`ErrorKind`]s.
//!
//! The `reason` of a classified error is GCE's own reason string when there is
//! one (`rateLimitExceeded`, `ZONE_RESOURCE_POOL_EXHAUSTED`, ...), otherwise the
//! HTTP status class. Messages name the Compute call and carry GCE's message,
//! never request ids or credentials, so they stay deterministic.

use google_cloud_compute_v1::model::Operation;
use google_cloud_gax::error::Error as GaxError;
use google_cloud_gax::error::rpc::StatusDetails;
use std::sync::Arc;

use machine_driver_api::{CloudCall, CloudFailure, DriverError, ErrorKind, cloud_failure_message};

/// The kit's retry delay for failures the cloud names none for.
pub(crate) use machine_driver_api::RETRY_SOON;

/// Reason UNAVAILABLE (retry soon): the instance changed between the read and the write of an update (its fingerprint is stale).
pub(crate) const FINGERPRINT_CHANGED: &str = "FINGERPRINT_CHANGED";
/// Reason UNAVAILABLE (retry soon): an operation of UpdateMachine is still running.
pub(crate) const UPDATE_IN_PROGRESS: &str = "UPDATE_IN_PROGRESS";
/// Reason UNAVAILABLE: every request-id generation of the insert was used by a failed insert; the retry starts over.
pub(crate) const REQUEST_ID_GENERATIONS_EXHAUSTED: &str = "REQUEST_ID_GENERATIONS_EXHAUSTED";
/// Reason UNAVAILABLE (retry soon): the reclaimed Spot VM of the machine is being started again.
pub(crate) const SPOT_VM_STARTING: &str = "SPOT_VM_STARTING";
/// Reason UNAUTHENTICATED: the workload identity token was not exchanged for an access token (STS refused it or did not answer).
pub(crate) const WORKLOAD_IDENTITY_EXCHANGE_FAILED: &str = "WORKLOAD_IDENTITY_EXCHANGE_FAILED";
/// Reason UNAVAILABLE (retry soon): the credentials could not be refreshed for a passing reason.
pub(crate) const CREDENTIALS_UNAVAILABLE: &str = "CREDENTIALS_UNAVAILABLE";
/// The reason of a GCE failure with neither a reason, an HTTP status nor a transport problem (its kind is INTERNAL).
pub(crate) const UNKNOWN: &str = "UNKNOWN";
/// Reason UNAVAILABLE (retry soon): the image's IAM policy changed between its read and its write.
pub(crate) const IAM_POLICY_CONFLICT: &str = "IAM_POLICY_CONFLICT";

/// GCE reasons (HTTP error `errors[].reason` and operation error `code`) that mean throttling.
const THROTTLING_REASONS: &[&str] = &["rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"];

/// GCE reasons that mean quota or capacity is exhausted: the machine cannot
/// be placed in this zone now. The resource pool codes are those of Compute
/// Engine's "Troubleshooting resource availability errors" and of the Go
/// provider (`checkIfResourceExhaustedError` in
/// gardener/machine-controller-manager-provider-gcp
/// `pkg/gcp/machine_controller_util.go`: `RESOURCE_POOL_EXHAUSTED`,
/// `ZONE_RESOURCE_POOL_EXHAUSTED`, `ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS`
/// and any code containing `QUOTA`, see [`is_exhausted_reason`]).
const EXHAUSTED_REASONS: &[&str] = &[
    "quotaExceeded",
    "QUOTA_EXCEEDED",
    "RESOURCE_POOL_EXHAUSTED",
    "ZONE_RESOURCE_POOL_EXHAUSTED",
    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
    "resourceExhausted",
    "RESOURCE_EXHAUSTED",
];

/// Whether a GCE reason or operation error code means exhausted quota or
/// capacity: one of [`EXHAUSTED_REASONS`], or a code naming a quota
/// (`QUOTA_EXCEEDED`, `quotaExceeded`, ...; the Go provider's
/// `strings.Contains(code, "QUOTA")`).
fn is_exhausted_reason(reason: &str) -> bool {
    EXHAUSTED_REASONS.contains(&reason) || reason.to_ascii_uppercase().contains("QUOTA")
}

/// A failed Compute API call, reduced to what classification needs.
#[derive(Debug, Clone)]
pub(crate) struct GceFailure {
    /// HTTP status of the answer, when there was one.
    pub(crate) http_status: Option<u16>,
    /// GCE's reason (first `errors[].reason`) or operation error code.
    pub(crate) reason: Option<String>,
    /// GCE's message (already free of credentials).
    pub(crate) message: String,
    /// What went wrong below HTTP (connection refused, reset, credentials).
    pub(crate) transport: Option<TransportProblem>,
    /// The SDK's error, kept as the driver error's source (for logs).
    source: Option<Arc<GaxError>>,
}

/// Failures that happened before an HTTP answer arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransportProblem {
    /// Connect, I/O or an attempt timeout: transient.
    Network,
    /// The credentials could not produce an access token.
    Credentials,
    /// The credentials could not produce an access token for a passing
    /// reason (the token endpoint unreachable or failing): transient.
    CredentialsTransient,
    /// The answer could not be decoded: a bug or an incompatible endpoint.
    Decode,
}

impl GceFailure {
    /// Reduces a `google-cloud-gax` error.
    pub(crate) fn from_gax(err: &GaxError) -> Self {
        if let Some(status) = err.status() {
            let reason = status.details.iter().find_map(|d| match d {
                StatusDetails::ErrorInfo(info) if !info.reason.is_empty() => Some(info.reason.clone()),
                _ => None,
            });
            return Self {
                http_status: err.http_status_code(),
                reason,
                message: status.message.clone(),
                transport: None,
                source: None,
            };
        }
        if let Some(code) = err.http_status_code() {
            // An HTTP error whose body is not GCE's error JSON: parse what we can.
            let (reason, message) = err.http_payload().map(|p| parse_error_body(p)).unwrap_or_default();
            return Self { http_status: Some(code), reason, message, transport: None, source: None };
        }
        let transport = if err.is_authentication() {
            if err.is_transient_and_before_rpc() {
                TransportProblem::CredentialsTransient
            } else {
                TransportProblem::Credentials
            }
        } else if err.is_deserialization() || err.is_serialization() || err.is_binding() {
            TransportProblem::Decode
        } else {
            TransportProblem::Network
        };
        Self { http_status: None, reason: None, message: String::new(), transport: Some(transport), source: None }
    }

    /// The failure recorded in a DONE zone operation, if it failed.
    pub(crate) fn from_operation(op: &Operation) -> Option<Self> {
        let error = op.error.as_ref()?;
        // The entry that says why the machine cannot be placed, when one
        // does (the Go provider looks at the last one), else the first.
        let first = error
            .errors
            .iter()
            .find(|e| e.code.as_deref().is_some_and(is_exhausted_reason))
            .or_else(|| error.errors.first());
        let reason = first.and_then(|e| e.code.clone()).filter(|c| !c.is_empty());
        let message =
            first.and_then(|e| e.message.clone()).or_else(|| op.http_error_message.clone()).unwrap_or_default();
        let http_status = op.http_error_status_code.and_then(|c| u16::try_from(c).ok());
        if reason.is_none() && http_status.is_none() && error.errors.is_empty() {
            return None;
        }
        Some(Self { http_status, reason, message, transport: None, source: None })
    }

    /// Classifies a failed Compute request, keeping the SDK's error as source.
    pub(crate) fn classify(err: GaxError) -> Self {
        let failure = Self::from_gax(&err);
        tracing::debug!(http_status = ?failure.http_status, reason = ?failure.reason, "compute call failed");
        Self { source: Some(Arc::new(err)), ..failure }
    }

    /// True when the call failed for want of valid credentials: the
    /// credentials produced no token, or Compute refused the token (401).
    pub(crate) fn is_unauthenticated(&self) -> bool {
        self.transport == Some(TransportProblem::Credentials) || self.http_status == Some(401)
    }

    /// True when the credentials produced no token (no HTTP answer).
    pub(crate) fn is_credentials_problem(&self) -> bool {
        matches!(self.transport, Some(TransportProblem::Credentials | TransportProblem::CredentialsTransient))
    }

    /// This failure with GCE's reason and message replaced by the driver's
    /// own explanation (credentials problems carry no message of the SDK's).
    pub(crate) fn explained(self, reason: &str, message: String) -> Self {
        Self { reason: Some(reason.to_string()), message, ..self }
    }

    /// `error: error_description` of a token endpoint's refusal (RFC 6749
    /// error body, as Google's STS answers `invalid_grant`) found in the
    /// SDK's error, when there is one. The refusal names no token.
    pub(crate) fn token_endpoint_refusal(&self) -> Option<String> {
        let mut next: Option<&(dyn std::error::Error + 'static)> = self.source.as_deref().map(|e| e as _);
        while let Some(err) = next {
            let text = err.to_string();
            if let Some(body) = text.split_once("body=<").and_then(|(_, rest)| rest.rsplit_once('>')).map(|b| b.0)
                && let Ok(v) = serde_json::from_str::<serde_json::Value>(body)
                && let Some(code) = v.get("error").and_then(|e| e.as_str())
            {
                let description = v.get("error_description").and_then(|d| d.as_str()).unwrap_or_default();
                let refusal = format!("{code}: {description}");
                return Some(refusal.trim_end_matches([':', ' ']).chars().take(240).collect());
            }
            next = err.source();
        }
        None
    }

    /// A machine or accelerator type this zone does not offer (400 `invalid`, "Machine type
    /// with name '...' does not exist in zone '...'"): not here, try elsewhere, as the Go
    /// provider answers, so that MCM lets the autoscaler pick another zone.
    pub(crate) fn is_not_offered_in_zone(&self) -> bool {
        self.http_status == Some(400) && self.message.contains("does not exist in zone")
    }

    /// 403 or 404: the resource is not there, or not visible to the caller.
    pub(crate) fn is_not_found_or_forbidden(&self) -> bool {
        matches!(self.http_status, Some(403 | 404))
    }

    /// A write refused because the resource changed since it was read: a
    /// stale fingerprint (`conditionNotMet`, 412, or 400 on some methods).
    pub(crate) fn is_stale_fingerprint(&self) -> bool {
        self.reason.as_deref() == Some("conditionNotMet") || (self.http_status == Some(412) && self.reason.is_none())
    }

    /// 400 that is not a stale fingerprint: Compute refused the value itself.
    pub(crate) fn is_value_refused(&self) -> bool {
        self.http_status == Some(400) && !self.is_stale_fingerprint()
    }

    /// True for HTTP 404.
    pub(crate) fn is_not_found(&self) -> bool {
        self.http_status == Some(404)
    }

    /// True for "already exists" (HTTP 409 or the operation code).
    pub(crate) fn is_already_exists(&self) -> bool {
        self.http_status == Some(409) || self.reason.as_deref() == Some("RESOURCE_ALREADY_EXISTS")
    }

    /// True for a stale IAM policy etag (412 conditionNotMet, or 409 on some APIs).
    pub(crate) fn is_etag_conflict(&self) -> bool {
        matches!(self.http_status, Some(409) | Some(412))
    }

    /// True when Compute throttled the request (a throttling reason such as
    /// 403 `rateLimitExceeded`, or HTTP 429 without a quota reason): it had no
    /// effect, so sending it again is safe.
    pub(crate) fn is_throttling(&self) -> bool {
        if self.transport.is_some() {
            return false;
        }
        let reason = self.reason.as_deref().unwrap_or("");
        THROTTLING_REASONS.contains(&reason) || (self.http_status == Some(429) && !is_exhausted_reason(reason))
    }

    /// The driver error kind this failure belongs to.
    pub(crate) fn kind(&self) -> ErrorKind {
        if let Some(t) = self.transport {
            return match t {
                TransportProblem::Network => ErrorKind::Unavailable,
                TransportProblem::Credentials => ErrorKind::Unauthenticated,
                TransportProblem::CredentialsTransient => ErrorKind::Unavailable,
                TransportProblem::Decode => ErrorKind::Internal,
            };
        }
        if self.is_throttling() {
            return ErrorKind::Unavailable;
        }
        let reason = self.reason.as_deref().unwrap_or("");
        if is_exhausted_reason(reason) || self.is_not_offered_in_zone() {
            return ErrorKind::ResourceExhausted;
        }
        match self.http_status {
            Some(429 | 408) => ErrorKind::Unavailable,
            Some(s) if s >= 500 => ErrorKind::Unavailable,
            Some(401) => ErrorKind::Unauthenticated,
            Some(403) => ErrorKind::PermissionDenied,
            Some(400) => ErrorKind::InvalidArgument,
            Some(404) => ErrorKind::NotFound,
            Some(409) => ErrorKind::AlreadyExists,
            Some(412) => ErrorKind::FailedPrecondition,
            _ if reason == "RESOURCE_ALREADY_EXISTS" => ErrorKind::AlreadyExists,
            _ if reason == "RESOURCE_NOT_FOUND" => ErrorKind::NotFound,
            _ => ErrorKind::Internal,
        }
    }

    /// The stable reason reported with the driver error.
    fn reason_word(&self) -> String {
        if let Some(r) = &self.reason {
            return r.clone();
        }
        match (self.transport, self.http_status) {
            (Some(TransportProblem::Network), _) => machine_driver_api::reasons::TRANSPORT.to_string(),
            (Some(TransportProblem::Credentials), _) => machine_driver_api::reasons::CREDENTIALS.to_string(),
            (Some(TransportProblem::CredentialsTransient), _) => CREDENTIALS_UNAVAILABLE.to_string(),
            (Some(TransportProblem::Decode), _) => machine_driver_api::reasons::UNDECODABLE_RESPONSE.to_string(),
            (None, Some(s)) => machine_driver_api::reasons::http_status(s),
            (None, None) => UNKNOWN.to_string(),
        }
    }

    /// The classified driver error for the Compute call (or operation) `operation` (e.g. `instances.insert`).
    pub(crate) fn driver_error(self, operation: &str) -> DriverError {
        let kind = self.kind();
        let reason = self.reason_word();
        let message = cloud_failure_message(&format!("compute {operation}"), &reason, self.http_status, &self.message);
        let mut err = DriverError::new(kind, reason, message);
        if kind == ErrorKind::Unavailable {
            err = err.with_retry_after(RETRY_SOON);
        }
        match self.source {
            Some(source) => err.with_source(source),
            None => err,
        }
    }
}

impl CloudFailure for GceFailure {
    fn is_throttled(&self) -> bool {
        self.is_throttling()
    }

    fn into_driver_error(self, call: CloudCall) -> DriverError {
        self.driver_error(call.operation)
    }
}

/// The first `error.errors[].reason` and the `error.message` of a GCE error body.
fn parse_error_body(body: &[u8]) -> (Option<String>, String) {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return (None, String::new());
    };
    let reason = v.pointer("/error/errors/0/reason").and_then(|r| r.as_str()).map(str::to_string);
    let message = v.pointer("/error/message").and_then(|m| m.as_str()).unwrap_or_default().to_string();
    (reason, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes_body::gce_error;

    #[test]
    fn a_token_endpoint_that_fails_for_a_passing_reason_is_unavailable() {
        use google_cloud_gax::error::CredentialsError;
        let passing = GceFailure::from_gax(&GaxError::authentication(CredentialsError::from_msg(true, "503 from STS")));
        assert_eq!(passing.kind(), ErrorKind::Unavailable);
        assert!(passing.is_credentials_problem() && !passing.is_unauthenticated());
        let refused =
            GceFailure::from_gax(&GaxError::authentication(CredentialsError::from_msg(false, "invalid_grant")));
        assert_eq!(refused.kind(), ErrorKind::Unauthenticated);
        assert!(refused.is_credentials_problem() && refused.is_unauthenticated());
    }

    mod bytes_body {
        /// A GCE error body as the real API sends it.
        pub(super) fn gce_error(code: u16, reason: &str, message: &str) -> Vec<u8> {
            serde_json::json!({"error": {"code": code, "message": message,
                "errors": [{"message": message, "domain": "global", "reason": reason}]}})
            .to_string()
            .into_bytes()
        }
    }

    fn http(code: u16, reason: &str) -> GceFailure {
        let err = GaxError::http(code, http::HeaderMap::new(), gce_error(code, reason, "boom").into());
        GceFailure::from_gax(&err)
    }

    #[test]
    fn a_machine_type_not_offered_in_the_zone_is_resource_exhausted() {
        let msg = "Invalid value for field 'resource.machineType': 'zones/europe-west1-b/machineTypes/a3-highgpu-8g'. \
                   Machine type with name 'a3-highgpu-8g' does not exist in zone 'europe-west1-b'.";
        let err = GaxError::http(400, http::HeaderMap::new(), gce_error(400, "invalid", msg).into());
        let f = GceFailure::from_gax(&err);
        assert_eq!(f.kind(), ErrorKind::ResourceExhausted);
        assert_eq!(http(400, "invalid").kind(), ErrorKind::InvalidArgument, "other invalid values stay invalid");
    }

    #[test]
    fn http_errors_map_by_reason_then_status() {
        assert_eq!(http(429, "rateLimitExceeded").kind(), ErrorKind::Unavailable);
        assert_eq!(http(403, "rateLimitExceeded").kind(), ErrorKind::Unavailable);
        assert_eq!(http(403, "userRateLimitExceeded").kind(), ErrorKind::Unavailable);
        assert_eq!(http(403, "quotaExceeded").kind(), ErrorKind::ResourceExhausted);
        assert_eq!(http(503, "backendError").kind(), ErrorKind::Unavailable);
        assert_eq!(http(500, "internalError").kind(), ErrorKind::Unavailable);
        assert_eq!(http(401, "authError").kind(), ErrorKind::Unauthenticated);
        assert_eq!(http(403, "forbidden").kind(), ErrorKind::PermissionDenied);
        assert_eq!(http(400, "invalid").kind(), ErrorKind::InvalidArgument);
        assert_eq!(http(404, "notFound").kind(), ErrorKind::NotFound);
        assert_eq!(http(409, "alreadyExists").kind(), ErrorKind::AlreadyExists);
        assert_eq!(http(412, "conditionNotMet").kind(), ErrorKind::FailedPrecondition);
    }

    #[test]
    fn throttling_is_recognised_by_reason_or_429() {
        assert!(http(429, "rateLimitExceeded").is_throttling());
        assert!(http(403, "rateLimitExceeded").is_throttling());
        assert!(http(403, "userRateLimitExceeded").is_throttling());
        assert!(http(429, "tooManyRequests").is_throttling());
        assert!(!http(429, "quotaExceeded").is_throttling());
        assert!(!http(403, "quotaExceeded").is_throttling());
        assert!(!http(403, "forbidden").is_throttling());
        assert!(!http(503, "backendError").is_throttling());
        assert!(!GceFailure::from_gax(&GaxError::io("connection reset")).is_throttling());
    }

    #[test]
    fn reason_survives_into_the_driver_error() {
        let e = http(429, "rateLimitExceeded").driver_error("instances.get");
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert_eq!(e.reason(), "rateLimitExceeded");
        assert_eq!(e.retry_after(), Some(RETRY_SOON));
        assert_eq!(e.message(), "compute instances.get failed: rateLimitExceeded (HTTP 429): boom");
        let e = http(403, "forbidden").driver_error("instances.get");
        assert_eq!(e.retry_after(), None);
    }

    #[test]
    fn the_sdk_parsed_error_body_keeps_gce_reason() {
        // What google-cloud-gax builds from a real GCE error answer.
        let body = bytes::Bytes::from(gce_error(403, "quotaExceeded", "Quota 'CPUS' exceeded."));
        let status = google_cloud_gax::error::rpc::Status::try_from(&body).expect("GCE error JSON");
        let err = GaxError::service_with_http_metadata(status, Some(403), None);
        let f = GceFailure::from_gax(&err);
        assert_eq!(f.reason.as_deref(), Some("quotaExceeded"));
        assert_eq!(f.kind(), ErrorKind::ResourceExhausted);
        assert_eq!(f.message, "Quota 'CPUS' exceeded.");
    }

    #[test]
    fn transport_errors_are_unavailable() {
        let err = GaxError::io("connection reset");
        let f = GceFailure::from_gax(&err);
        assert_eq!(f.kind(), ErrorKind::Unavailable);
        assert_eq!(f.driver_error("instances.list").reason(), "TRANSPORT");
    }

    #[test]
    fn failed_operations_map_like_http_errors() {
        use google_cloud_compute_v1::model::operation::{Error as OpError, error::Errors};
        let mut op = Operation::new();
        let mut item = Errors::new();
        item.code = Some("ZONE_RESOURCE_POOL_EXHAUSTED".into());
        item.message = Some("The zone does not have enough resources".into());
        let mut error = OpError::new();
        error.errors = vec![item];
        op.error = Some(error);
        op.http_error_status_code = Some(503);
        let f = GceFailure::from_operation(&op).expect("failed operation");
        assert_eq!(f.kind(), ErrorKind::ResourceExhausted);
        assert_eq!(f.driver_error("instances.insert").reason(), "ZONE_RESOURCE_POOL_EXHAUSTED");

        let mut quota = Operation::new();
        let mut item = Errors::new();
        item.code = Some("QUOTA_EXCEEDED".into());
        let mut error = OpError::new();
        error.errors = vec![item];
        quota.error = Some(error);
        quota.http_error_status_code = Some(403);
        assert_eq!(GceFailure::from_operation(&quota).map(|f| f.kind()), Some(ErrorKind::ResourceExhausted));

        assert!(GceFailure::from_operation(&Operation::new()).is_none());
    }

    /// A failed operation with these `error.errors[].code`s.
    fn failed_op(codes: &[&str]) -> Operation {
        use google_cloud_compute_v1::model::operation::{Error as OpError, error::Errors};
        let mut error = OpError::new();
        error.errors = codes
            .iter()
            .map(|c| {
                let mut item = Errors::new();
                item.code = Some((*c).into());
                item.message = Some(format!("{c} happened"));
                item
            })
            .collect();
        let mut op = Operation::new();
        op.error = Some(error);
        op.http_error_status_code = Some(503);
        op
    }

    #[test]
    fn every_cannot_place_it_here_code_is_resource_exhausted() {
        // Compute's resource availability codes and the Go provider's list (any code with QUOTA).
        for code in [
            "ZONE_RESOURCE_POOL_EXHAUSTED",
            "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
            "RESOURCE_POOL_EXHAUSTED",
            "QUOTA_EXCEEDED",
            "REGIONAL_QUOTA_EXCEEDED",
        ] {
            let f = GceFailure::from_operation(&failed_op(&[code])).unwrap();
            assert_eq!(f.kind(), ErrorKind::ResourceExhausted, "{code}");
            assert_eq!(f.driver_error("instances.insert").reason(), code);
        }
        // The exhausted entry decides wherever it is; otherwise the first entry.
        let f = GceFailure::from_operation(&failed_op(&["UNSUPPORTED_OPERATION", "ZONE_RESOURCE_POOL_EXHAUSTED"]));
        let f = f.unwrap();
        assert_eq!(
            (f.kind(), f.reason.as_deref()),
            (ErrorKind::ResourceExhausted, Some("ZONE_RESOURCE_POOL_EXHAUSTED"))
        );
        assert_eq!(f.message, "ZONE_RESOURCE_POOL_EXHAUSTED happened");
        let f = GceFailure::from_operation(&failed_op(&["INTERNAL_ERROR", "UNSUPPORTED_OPERATION"])).unwrap();
        assert_eq!(f.reason.as_deref(), Some("INTERNAL_ERROR"));
        assert_eq!(f.kind(), ErrorKind::Unavailable, "a 503 without an exhausted code");
        // An accelerator type the zone does not offer, refused at once, like a machine type.
        let msg = "Invalid value for field 'resource.guestAccelerators[0].acceleratorType': \
                   'projects/p/zones/europe-west1-b/acceleratorTypes/nvidia-h100-80gb'. \
                   Accelerator type 'nvidia-h100-80gb' does not exist in zone 'europe-west1-b'.";
        let err = GaxError::http(400, http::HeaderMap::new(), gce_error(400, "invalid", msg).into());
        assert_eq!(GceFailure::from_gax(&err).kind(), ErrorKind::ResourceExhausted);
        assert_eq!(http(429, "QUOTA_EXCEEDED").kind(), ErrorKind::ResourceExhausted, "a quota 429 is no throttle");
    }

    #[test]
    fn long_messages_are_clipped() {
        let failure = GceFailure {
            http_status: Some(500),
            reason: None,
            message: "é".repeat(400),
            transport: None,
            source: None,
        };
        let err = failure.driver_error("instances.get");
        assert!(
            err.message().chars().count()
                <= "compute instances.get failed: HTTP_500 (HTTP 500): ".len() + machine_driver_api::MAX_CLOUD_MESSAGE
        );
    }
}
