//! The one place where driver errors become gRPC statuses.

use std::collections::HashMap;

use machine_driver_api::{DriverError, ErrorKind};
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// `google.rpc.ErrorInfo.domain` of every error this server returns.
pub const ERROR_DOMAIN: &str = "machinedriver";

/// The gRPC code for an error kind (see the error table in driver.proto).
pub fn code_for(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::InvalidArgument => Code::InvalidArgument,
        ErrorKind::NotFound => Code::NotFound,
        ErrorKind::AlreadyExists => Code::AlreadyExists,
        ErrorKind::Duplicate => Code::OutOfRange,
        ErrorKind::Unavailable => Code::Unavailable,
        ErrorKind::ResourceExhausted => Code::ResourceExhausted,
        ErrorKind::Unauthenticated => Code::Unauthenticated,
        ErrorKind::PermissionDenied => Code::PermissionDenied,
        ErrorKind::FailedPrecondition => Code::FailedPrecondition,
        ErrorKind::DeadlineExceeded => Code::DeadlineExceeded,
        ErrorKind::Unimplemented => Code::Unimplemented,
        ErrorKind::Internal => Code::Internal,
    }
}

/// Converts a driver error into a status with `ErrorInfo` (stable reason),
/// `RetryInfo` (when a delay is known) and `BadRequest` (for a named field).
/// The message is the error's deterministic message; sources go to logs only.
pub fn to_status(err: &DriverError) -> Status {
    let mut details = ErrorDetails::new();
    let mut metadata = HashMap::new();
    if let Some(field) = err.field() {
        metadata.insert("field".to_string(), field.to_string());
        details.add_bad_request_violation(field, err.message());
    }
    details.set_error_info(err.reason(), ERROR_DOMAIN, metadata);
    if let Some(delay) = err.retry_after() {
        details.set_retry_info(Some(delay));
    }
    Status::with_error_details(code_for(err.kind()), err.message(), details)
}

impl crate::admission::Refused {
    /// The gRPC status admission answers with (no driver code ran).
    pub(crate) fn into_status(self) -> Status {
        use crate::admission::Refused;
        match self {
            Refused::BodyTimeout(timeout) => Status::deadline_exceeded(format!(
                "the request did not arrive in full within the server's request body timeout ({} ms)",
                timeout.as_millis()
            )),
            Refused::TooLarge(limit) => {
                Status::out_of_range(format!("request larger than the server's limit of {limit} bytes"))
            }
            Refused::Reading(e) => Status::cancelled(format!("reading the request: {e}")),
            Refused::ShuttingDown => Status::unavailable("the server is shutting down"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn carries_reason_field_and_retry() {
        let s = to_status(&DriverError::invalid_argument("providerSpec.ami", "is required"));
        assert_eq!(s.code(), Code::InvalidArgument);
        let d = s.get_error_details();
        assert_eq!(d.error_info().unwrap().reason, "INVALID_FIELD");
        assert_eq!(d.error_info().unwrap().metadata["field"], "providerSpec.ami");
        assert_eq!(d.bad_request().unwrap().field_violations[0].field, "providerSpec.ami");

        let s = to_status(&DriverError::unavailable("RequestLimitExceeded", "throttled", Duration::from_secs(5)));
        assert_eq!(s.code(), Code::Unavailable);
        assert_eq!(s.get_error_details().retry_info().unwrap().retry_delay, Some(Duration::from_secs(5)));
    }
}
