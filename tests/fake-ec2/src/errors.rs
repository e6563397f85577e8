//! EC2 and STS errors with their real codes, HTTP statuses and XML bodies.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use fake_cloud_support::FaultKind;

use crate::xml::{STS_NAMESPACE, escape};

/// An EC2 API error: HTTP status, error code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ec2Error {
    pub(crate) status: StatusCode,
    pub(crate) code: String,
    pub(crate) message: String,
}

impl Ec2Error {
    /// An error with an explicit status.
    pub(crate) fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self { status, code: code.to_owned(), message: message.into() }
    }

    /// A client error (HTTP 400), the status of almost every EC2 client error.
    pub(crate) fn client(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// `MissingParameter`.
    pub(crate) fn missing_parameter(name: &str) -> Self {
        Self::client("MissingParameter", format!("The request must contain the parameter {name}"))
    }

    /// `InvalidParameterValue` for one parameter.
    pub(crate) fn invalid_value(name: &str, value: &str) -> Self {
        Self::client("InvalidParameterValue", format!("Invalid value '{value}' for {name}"))
    }

    /// `InvalidParameterCombination`.
    pub(crate) fn combination(message: impl Into<String>) -> Self {
        Self::client("InvalidParameterCombination", message)
    }

    /// `InvalidAction` for an unknown action.
    pub(crate) fn invalid_action(action: &str) -> Self {
        Self::client("InvalidAction", format!("The action {action} is not valid for this web service."))
    }

    /// `AuthFailure` (HTTP 401).
    pub(crate) fn auth_failure(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "AuthFailure", message)
    }

    /// The `NotFound` error of one id family, e.g. `InvalidInstanceID.NotFound`.
    pub(crate) fn not_found(code: &str, noun: &str, ids: &[String]) -> Self {
        let message = if ids.len() == 1 {
            format!("The {noun} ID '{}' does not exist", ids[0])
        } else {
            format!("The {noun} IDs '{}' do not exist", ids.join(", "))
        };
        Self::client(code, message)
    }

    /// The `Malformed` error of one id family, e.g. `InvalidInstanceID.Malformed`.
    pub(crate) fn malformed(code: &str, id: &str) -> Self {
        Self::client(code, format!("Invalid id: \"{id}\""))
    }

    /// EC2's answer when the instance type is not offered in the Availability Zone
    /// (400 `Unsupported`, in EC2's words, naming the zones of the region that
    /// could take it): the "cannot place it here" of RunInstances.
    pub(crate) fn placement(instance_type: &str, zone: &str, region: &str) -> Self {
        let others: Vec<String> =
            ["a", "b", "c"].iter().map(|z| format!("{region}{z}")).filter(|z| z != zone).collect();
        Self::client(
            "Unsupported",
            format!(
                "Your requested instance type ({instance_type}) is not supported in your requested Availability \
                 Zone ({zone}). Please retry your request by not specifying an Availability Zone or choosing {}.",
                others.join(", ")
            ),
        )
    }

    /// The EC2 error for an injected fault.
    pub(crate) fn from_fault(kind: FaultKind) -> Self {
        match kind {
            FaultKind::Throttle => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "RequestLimitExceeded", "Request limit exceeded.")
            }
            FaultKind::Capacity => Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InsufficientInstanceCapacity",
                "We currently do not have sufficient capacity in the Availability Zone you requested. \
                 Our system will be working on provisioning additional capacity.",
            ),
            // Without the request at hand (a fault on another action, or in phase `after`):
            // EC2's generic wording of the code. RunInstances gets [`Ec2Error::placement`].
            FaultKind::Placement => Self::client(
                "Unsupported",
                "The requested configuration is currently not supported. Please check the documentation for \
                 supported configurations.",
            ),
            FaultKind::Unavailable => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "Unavailable",
                "The server is overloaded and can't handle the request.",
            ),
            FaultKind::Internal => {
                Self::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", "An internal error has occurred.")
            }
            FaultKind::Auth => Self::auth_failure("AWS was not able to validate the provided access credentials"),
            FaultKind::Permission => Self::new(
                StatusCode::FORBIDDEN,
                "UnauthorizedOperation",
                "You are not authorized to perform this operation.",
            ),
            FaultKind::Invalid => Self::new(
                StatusCode::BAD_REQUEST,
                "InvalidParameterValue",
                "Value for parameter is invalid (injected fault).",
            ),
        }
    }

    /// The EC2 error document: `<Response><Errors><Error>..</Error></Errors><RequestID>..</RequestID></Response>`.
    pub(crate) fn to_response(&self, request_id: &str) -> Response {
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{}</Code><Message>{}</Message></Error></Errors><RequestID>{}</RequestID></Response>",
            escape(&self.code),
            escape(&self.message),
            request_id
        );
        xml_response(self.status, request_id, body)
    }
}

/// An STS error (awsQuery protocol).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StsError {
    pub(crate) status: StatusCode,
    pub(crate) code: String,
    pub(crate) message: String,
}

impl StsError {
    /// An STS error with its status, code and message.
    pub(crate) fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self { status, code: code.to_owned(), message: message.into() }
    }

    /// The STS error for an injected fault.
    pub(crate) fn from_fault(kind: FaultKind) -> Self {
        let (status, code, message) = match kind {
            FaultKind::Throttle => (StatusCode::BAD_REQUEST, "Throttling", "Rate exceeded"),
            FaultKind::Capacity | FaultKind::Placement | FaultKind::Internal => {
                (StatusCode::INTERNAL_SERVER_ERROR, "InternalFailure", "An internal error has occurred.")
            }
            FaultKind::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", "Service unavailable."),
            FaultKind::Auth => (
                StatusCode::FORBIDDEN,
                "InvalidClientTokenId",
                "The security token included in the request is invalid.",
            ),
            FaultKind::Permission => (StatusCode::FORBIDDEN, "AccessDenied", "Access denied."),
            FaultKind::Invalid => (StatusCode::BAD_REQUEST, "ValidationError", "1 validation error detected."),
        };
        Self::new(status, code, message)
    }

    /// The STS error document.
    pub(crate) fn to_response(&self, request_id: &str) -> Response {
        let kind = if self.status.is_server_error() { "Receiver" } else { "Sender" };
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ErrorResponse xmlns=\"{STS_NAMESPACE}\"><Error><Type>{kind}</Type><Code>{}</Code><Message>{}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>",
            escape(&self.code),
            escape(&self.message),
        );
        xml_response(self.status, request_id, body)
    }
}

/// An XML answer with the headers EC2 and STS send.
pub(crate) fn xml_response(status: StatusCode, request_id: &str, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/xml;charset=UTF-8"),
            (header::HeaderName::from_static("x-amzn-requestid"), request_id),
        ],
        body,
    )
        .into_response()
}
