//! Reading a gRPC status: code, the named field and the ErrorInfo reason.

use tonic::{Code, Status};
use tonic_types::StatusExt;

/// The field an error names: ErrorInfo metadata `field`, else the first BadRequest violation.
pub fn error_field(status: &Status) -> Option<String> {
    let details = status.get_error_details();
    if let Some(field) = details.error_info().and_then(|i| i.metadata.get("field")) {
        return Some(field.clone());
    }
    details.bad_request().and_then(|b| b.field_violations.first()).map(|v| v.field.clone())
}

/// The ErrorInfo reason, if any.
pub fn error_reason(status: &Status) -> Option<String> {
    status.get_error_details().error_info().map(|i| i.reason.clone())
}

/// `CODE: message` for failure reasons (driver messages carry no secrets by contract).
pub fn describe(status: &Status) -> String {
    format!("{}: {}", code_name(status.code()), status.message())
}

/// The canonical upper-case name of a code (`NOT_FOUND`).
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use tonic_types::ErrorDetails;

    use super::*;

    #[test]
    fn reads_field_from_error_info_or_bad_request() {
        let mut d = ErrorDetails::new();
        d.set_error_info(
            "INVALID_FIELD",
            "machinedriver",
            HashMap::from([("field".to_string(), "machine.uid".to_string())]),
        );
        let s = Status::with_error_details(Code::InvalidArgument, "machine.uid: is required", d);
        assert_eq!(error_field(&s).as_deref(), Some("machine.uid"));
        assert_eq!(error_reason(&s).as_deref(), Some("INVALID_FIELD"));

        let mut d = ErrorDetails::new();
        d.add_bad_request_violation("secret.accessKeyID", "is required");
        let s = Status::with_error_details(Code::InvalidArgument, "x", d);
        assert_eq!(error_field(&s).as_deref(), Some("secret.accessKeyID"));
        assert_eq!(error_reason(&s), None);

        assert_eq!(error_field(&Status::invalid_argument("bare")), None);
        assert_eq!(describe(&Status::not_found("gone")), "NOT_FOUND: gone");
    }
}
