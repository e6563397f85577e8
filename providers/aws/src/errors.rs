//! AWS SDK failures → [`DriverError`], in one place.
//!
//! The reason is the AWS error code; the message is deterministic (operation,
//! code, AWS's message), and the request id goes to the log only.

use std::time::Duration;

use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use machine_driver_api::{DriverError, ErrorKind};

/// Delay the caller should wait after throttling or a transient AWS failure.
pub const RETRY_AFTER: Duration = Duration::from_secs(5);

/// Longest part of AWS's own message kept in ours.
const MAX_AWS_MESSAGE: usize = 300;

const THROTTLING: &[&str] = &[
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "EC2ThrottledException",
    "SlowDown",
    "PriorRequestNotComplete",
];

/// Whether `code` is one of AWS's throttling codes: the request was refused
/// before it had any effect, so sending it again is safe.
pub(crate) fn is_throttling(code: &str) -> bool {
    THROTTLING.contains(&code)
}

const TRANSIENT: &[&str] = &[
    "InternalError",
    "InternalFailure",
    "ServiceUnavailable",
    "Unavailable",
    "RequestTimeout",
    "RequestTimeoutException",
    "RequestExpired",
    "IDPCommunicationError",
    "IncorrectState",
    "IncorrectInstanceState",
    "InvalidInstanceID.NotFound.Pending",
];

const EXHAUSTED: &[&str] = &[
    "InsufficientInstanceCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientAddressCapacity",
    "InsufficientFreeAddressesInSubnet",
    "InsufficientCapacityOnOutpost",
    "InstanceLimitExceeded",
    "VcpuLimitExceeded",
    "MaxSpotInstanceCountExceeded",
    "VolumeLimitExceeded",
    "AddressLimitExceeded",
    "NetworkInterfaceLimitExceeded",
    "ResourceLimitExceeded",
    "PrivateIpAddressLimitExceeded",
    "MaxIOPSLimitExceeded",
    "SpotMaxPriceTooLow",
    "ReservationCapacityExceeded",
];

const UNAUTHENTICATED: &[&str] = &[
    "AuthFailure",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "MissingAuthenticationToken",
    "InvalidAccessKeyId",
    "ExpiredToken",
    "UnrecognizedClientException",
];

const PERMISSION_DENIED: &[&str] =
    &["UnauthorizedOperation", "AccessDenied", "AccessDeniedException", "OptInRequired", "Blocked"];

/// Classifies one AWS error code (with its HTTP status) into a driver error kind.
pub fn kind_for(code: &str, http_status: u16) -> ErrorKind {
    if THROTTLING.contains(&code) || TRANSIENT.contains(&code) {
        ErrorKind::Unavailable
    } else if EXHAUSTED.contains(&code)
        || code.starts_with("Insufficient")
        || (code.ends_with("LimitExceeded") && code != "RequestLimitExceeded")
    {
        ErrorKind::ResourceExhausted
    } else if UNAUTHENTICATED.contains(&code) {
        ErrorKind::Unauthenticated
    } else if PERMISSION_DENIED.contains(&code) {
        ErrorKind::PermissionDenied
    } else if code == "InvalidInstanceID.NotFound" {
        ErrorKind::NotFound
    } else if code == "IdempotentParameterMismatch" {
        ErrorKind::FailedPrecondition
    } else if code.starts_with("Invalid")
        || code.starts_with("MissingParameter")
        || code.starts_with("UnknownParameter")
        || code.starts_with("Unsupported")
        || code == "ValidationError"
        || code.ends_with(".Malformed")
        || code.ends_with(".NotFound")
    {
        ErrorKind::InvalidArgument
    } else if http_status >= 500 {
        ErrorKind::Unavailable
    } else {
        ErrorKind::Internal
    }
}

/// The driver error for a service error answered by AWS.
pub fn service_error(
    service: &str,
    operation: &str,
    code: &str,
    http_status: u16,
    aws_message: Option<&str>,
) -> DriverError {
    let kind = kind_for(code, http_status);
    let detail: String = aws_message.unwrap_or("").chars().take(MAX_AWS_MESSAGE).collect();
    let message = if detail.is_empty() {
        format!("{service} {operation} failed: {code}")
    } else {
        format!("{service} {operation} failed: {code}: {detail}")
    };
    let err = DriverError::new(kind, code, message);
    if kind == ErrorKind::Unavailable { err.with_retry_after(RETRY_AFTER) } else { err }
}

/// Classifies any SDK failure of `operation`, logging the AWS request id.
pub(crate) fn from_sdk<E>(service: &'static str, operation: &'static str, err: SdkError<E, HttpResponse>) -> DriverError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let transient = |reason: &str, what: &str| {
        DriverError::unavailable(reason, format!("{service} {operation}: {what}"), RETRY_AFTER)
    };
    let classified = match &err {
        SdkError::ServiceError(se) => {
            let status = se.raw().status().as_u16();
            let code = se.err().code().unwrap_or("Unknown");
            let request_id = se.err().meta().extra("aws_request_id").unwrap_or("");
            tracing::warn!(service, operation, code, http_status = status, request_id, "AWS call failed");
            service_error(service, operation, code, status, se.err().message())
        }
        SdkError::TimeoutError(_) => transient("TIMEOUT", "AWS did not answer in time"),
        SdkError::DispatchFailure(d) if d.is_timeout() => transient("TIMEOUT", "AWS did not answer in time"),
        SdkError::DispatchFailure(_) => transient("DISPATCH_FAILURE", "could not reach AWS"),
        SdkError::ResponseError(_) => transient("RESPONSE_ERROR", "could not read AWS's answer"),
        SdkError::ConstructionFailure(_) => {
            DriverError::internal(format!("{service} {operation}: could not build the request"))
        }
        _ => DriverError::internal(format!("{service} {operation}: unexpected SDK failure")),
    };
    if !matches!(err, SdkError::ServiceError(_)) {
        tracing::warn!(service, operation, reason = classified.reason(), error = %aws_sdk_ec2::error::DisplayErrorContext(&err), "AWS call failed");
    }
    classified.with_source(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_kinds() {
        let cases = [
            ("RequestLimitExceeded", 503, ErrorKind::Unavailable),
            ("Throttling", 400, ErrorKind::Unavailable),
            ("ThrottlingException", 400, ErrorKind::Unavailable),
            ("Unavailable", 503, ErrorKind::Unavailable),
            ("SomethingNew", 502, ErrorKind::Unavailable),
            ("InsufficientInstanceCapacity", 500, ErrorKind::ResourceExhausted),
            ("InstanceLimitExceeded", 400, ErrorKind::ResourceExhausted),
            ("VcpuLimitExceeded", 400, ErrorKind::ResourceExhausted),
            ("VolumeLimitExceeded", 400, ErrorKind::ResourceExhausted),
            ("AuthFailure", 401, ErrorKind::Unauthenticated),
            ("SignatureDoesNotMatch", 403, ErrorKind::Unauthenticated),
            ("InvalidClientTokenId", 403, ErrorKind::Unauthenticated),
            ("UnauthorizedOperation", 403, ErrorKind::PermissionDenied),
            ("AccessDenied", 403, ErrorKind::PermissionDenied),
            ("InvalidParameterValue", 400, ErrorKind::InvalidArgument),
            ("InvalidAMIID.NotFound", 400, ErrorKind::InvalidArgument),
            ("InvalidAMIID.Malformed", 400, ErrorKind::InvalidArgument),
            ("InvalidSubnetID.NotFound", 400, ErrorKind::InvalidArgument),
            ("InvalidGroup.NotFound", 400, ErrorKind::InvalidArgument),
            ("MissingParameter", 400, ErrorKind::InvalidArgument),
            ("InvalidInstanceID.NotFound", 400, ErrorKind::NotFound),
            ("IdempotentParameterMismatch", 400, ErrorKind::FailedPrecondition),
            ("WeirdClientError", 400, ErrorKind::Internal),
        ];
        for (code, status, kind) in cases {
            assert_eq!(kind_for(code, status), kind, "{code}");
        }
    }

    #[test]
    fn throttling_carries_retry_and_message_is_deterministic() {
        let e = service_error("ec2", "RunInstances", "RequestLimitExceeded", 503, Some("Request limit exceeded."));
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert_eq!(e.reason(), "RequestLimitExceeded");
        assert_eq!(e.retry_after(), Some(RETRY_AFTER));
        assert_eq!(e.message(), "ec2 RunInstances failed: RequestLimitExceeded: Request limit exceeded.");
        let cap = service_error("ec2", "RunInstances", "InsufficientInstanceCapacity", 500, None);
        assert_eq!(cap.retry_after(), None);
        assert_eq!(cap.message(), "ec2 RunInstances failed: InsufficientInstanceCapacity");
    }
}
