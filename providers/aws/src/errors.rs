//! AWS SDK failures → [`DriverError`], in one place.
//!
//! The reason is the AWS error code; the message is deterministic (operation,
//! code, AWS's message), and the request id goes to the log only.

use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use machine_driver_api::{CloudCall, CloudFailure, DriverError, ErrorKind};

/// The kit's retry delay for failures the cloud names none for.
pub(crate) use machine_driver_api::RETRY_SOON;

/// Reason FAILED_PRECONDITION: every launch generation of the machine ended terminated; CreateMachine gives up instead of launching again.
pub(crate) const INSTANCE_TERMINATED: &str = "INSTANCE_TERMINATED";
/// Reason UNAVAILABLE (retry soon): a network interface of the instance is not visible to EC2 yet.
pub(crate) const INTERFACE_NOT_VISIBLE: &str = "INTERFACE_NOT_VISIBLE";
/// Reason FAILED_PRECONDITION: EBS refuses another modification of the volume until its six-hour cooldown has passed.
pub(crate) const VOLUME_MODIFICATION_COOLDOWN: &str = "VOLUME_MODIFICATION_COOLDOWN";
/// Reason FAILED_PRECONDITION: a modification of the volume is still running and does not reach the wanted size, type or performance.
pub(crate) const VOLUME_MODIFICATION_IN_PROGRESS: &str = "VOLUME_MODIFICATION_IN_PROGRESS";
/// Reason UNAVAILABLE (retry soon): AWS did not answer in time.
pub(crate) const TIMEOUT: &str = "TIMEOUT";
/// Reason UNAVAILABLE (retry soon): the request could not be sent to AWS.
pub(crate) const DISPATCH_FAILURE: &str = "DISPATCH_FAILURE";
/// Reason UNAVAILABLE (retry soon): AWS's answer could not be read.
pub(crate) const RESPONSE_ERROR: &str = "RESPONSE_ERROR";

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

/// Codes the autoscaler must see as RESOURCE_EXHAUSTED (try another pool or
/// zone): the Go provider's list (gardener/machine-controller-manager-provider-aws
/// `pkg/aws/errors/utils.go` `GetMCMErrorCodeForCreateMachine`: InsufficientCapacity,
/// InsufficientAddressCapacity, InsufficientInstanceCapacity, InsufficientVolumeCapacity,
/// InstanceLimitExceeded, VcpuLimitExceeded, VolumeLimitExceeded, MaxIOPSLimitExceeded,
/// RouteLimitExceeded, Unsupported) and the EC2 error codes reference's other capacity,
/// placement and quota codes. Any other `Insufficient*` and `*LimitExceeded` (but
/// `RequestLimitExceeded`, throttling; the per-resource limits of [`CLASS_LIMITS`];
/// `FilterLimitExceeded`, the driver's own request) too.
const EXHAUSTED: &[&str] = &[
    "Unsupported",
    "InsufficientVolumeCapacity",
    "RouteLimitExceeded",
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

/// `*LimitExceeded` codes that are not an account quota but a limit on what
/// one resource may carry, so the class asks for too much and no other pool
/// or zone helps: INVALID_ARGUMENT naming the class field, with what the limit
/// is (EC2 API reference, "Error codes for the Amazon EC2 API", client error
/// codes for specific actions).
const CLASS_LIMITS: &[(&str, &str, &str)] = &[
    // "You've reached the limit on the number of tags that you can assign to the specified resource."
    (
        "TagLimitExceeded",
        "providerSpec.tags",
        "more tags than EC2 allows on one resource (50, counting the driver's `Name` and \
         `mcm.gardener.cloud/machine-uid`)",
    ),
    // "You've reached the limit on the number of security groups that you can assign to an instance."
    (
        "SecurityGroupsPerInstanceLimitExceeded",
        "providerSpec.networkInterfaces[].securityGroupIDs",
        "more security groups than the account allows on one instance",
    ),
    // "You've reached the limit on the number of security groups you can associate with the specified
    // network interface."
    (
        "SecurityGroupsPerInterfaceLimitExceeded",
        "providerSpec.networkInterfaces[].securityGroupIDs",
        "more security groups than the account allows on one network interface (5 unless raised)",
    ),
    // "You've reached the limit on the number of Amazon EBS volumes or network interfaces that can be
    // attached to a single instance."
    (
        "AttachmentLimitExceeded",
        "providerSpec.blockDevices",
        "more volumes or network interfaces (providerSpec.networkInterfaces) than the machine type can attach",
    ),
];

/// The class field and the limit of a [`CLASS_LIMITS`] code.
fn class_limit(code: &str) -> Option<(&'static str, &'static str)> {
    CLASS_LIMITS.iter().find(|(c, _, _)| *c == code).map(|(_, field, limit)| (*field, *limit))
}

const UNAUTHENTICATED: &[&str] = &[
    "AuthFailure",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "MissingAuthenticationToken",
    "InvalidAccessKeyId",
    "ExpiredToken",
    "UnrecognizedClientException",
    // STS AssumeRoleWithWebIdentity: the workload identity token is refused.
    "InvalidIdentityToken",
    "ExpiredTokenException",
    "IDPRejectedClaim",
];

const PERMISSION_DENIED: &[&str] =
    &["UnauthorizedOperation", "AccessDenied", "AccessDeniedException", "OptInRequired", "Blocked"];

/// Classifies one AWS error code (with its HTTP status) into a driver error kind.
pub(crate) fn kind_for(code: &str, http_status: u16) -> ErrorKind {
    // `Unsupported` ("Your requested instance type (…) is not supported in your requested
    // Availability Zone (…)", or EC2's generic "The requested configuration is currently not
    // supported"): not here, try elsewhere, as the Go provider answers, so that MCM lets the
    // autoscaler pick another zone. Listed in EXHAUSTED, before the `Unsupported*` prefix rule.
    if THROTTLING.contains(&code) || TRANSIENT.contains(&code) {
        ErrorKind::Unavailable
    } else if class_limit(code).is_some() {
        ErrorKind::InvalidArgument
    } else if code == "FilterLimitExceeded" {
        // "The request uses too many filters or too many filter values": the driver's own request.
        ErrorKind::Internal
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
pub(crate) fn service_error(
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
    if let Some((field, limit)) = class_limit(code) {
        return DriverError::invalid_argument(field, format!("{limit}; {message}"));
    }
    let err = DriverError::new(kind, code, message);
    if kind == ErrorKind::Unavailable { err.with_retry_after(RETRY_SOON) } else { err }
}

/// A failed AWS request, classified once: AWS's error code (or, without an
/// answer, what went wrong on the way), its message, and the SDK error as source.
#[derive(Debug)]
pub(crate) struct AwsFailure {
    problem: Problem,
    source: Box<dyn std::error::Error + Send + Sync + 'static>,
}

/// What an [`AwsFailure`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Problem {
    /// AWS answered with an error.
    Service { code: String, http_status: u16, message: Option<String> },
    /// No (readable) answer: transient, retry soon. `reason` is ours (TIMEOUT, ...).
    Transport { reason: &'static str, what: &'static str },
    /// The SDK could not build the request, or failed in a way it does not describe.
    Internal { what: &'static str },
}

impl AwsFailure {
    /// Classifies any SDK failure of `service`/`operation`, logging the AWS request id.
    pub(crate) fn from_sdk<E>(service: &'static str, operation: &'static str, err: SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let problem = match &err {
            SdkError::ServiceError(se) => {
                let http_status = se.raw().status().as_u16();
                let code = se.err().code().unwrap_or("Unknown");
                let request_id = se.err().meta().extra("aws_request_id").unwrap_or("");
                tracing::warn!(service, operation, code, http_status, request_id, "AWS call failed");
                Problem::Service {
                    code: code.to_string(),
                    http_status,
                    message: se.err().message().map(str::to_string),
                }
            }
            SdkError::TimeoutError(_) => Problem::Transport { reason: TIMEOUT, what: "AWS did not answer in time" },
            SdkError::DispatchFailure(d) if d.is_timeout() => {
                Problem::Transport { reason: TIMEOUT, what: "AWS did not answer in time" }
            }
            SdkError::DispatchFailure(_) => {
                Problem::Transport { reason: DISPATCH_FAILURE, what: "could not reach AWS" }
            }
            SdkError::ResponseError(_) => {
                Problem::Transport { reason: RESPONSE_ERROR, what: "could not read AWS's answer" }
            }
            SdkError::ConstructionFailure(_) => Problem::Internal { what: "could not build the request" },
            _ => Problem::Internal { what: "unexpected SDK failure" },
        };
        if !matches!(problem, Problem::Service { .. }) {
            tracing::warn!(service, operation, problem = ?problem, error = %aws_sdk_ec2::error::DisplayErrorContext(&err), "AWS call failed");
        }
        Self { problem, source: Box::new(err) }
    }

    /// AWS's error code, when AWS answered with one.
    pub(crate) fn code(&self) -> Option<&str> {
        match &self.problem {
            Problem::Service { code, .. } => Some(code),
            _ => None,
        }
    }

    /// AWS refused the request's credentials (expired, revoked or unknown keys).
    pub(crate) fn is_credentials_refusal(&self) -> bool {
        self.code().is_some_and(|c| UNAUTHENTICATED.contains(&c))
    }

    /// The ClientToken was used before with other parameters.
    pub(crate) fn is_idempotency_mismatch(&self) -> bool {
        self.code() == Some("IdempotentParameterMismatch")
    }

    /// No instance has the id (`InvalidInstanceID.NotFound`).
    pub(crate) fn is_instance_not_found(&self) -> bool {
        self.code() == Some("InvalidInstanceID.NotFound")
    }

    /// No network interface has the id (`InvalidNetworkInterfaceID.NotFound`): for an
    /// interface RunInstances just returned, EC2 does not show it yet.
    pub(crate) fn is_interface_not_found(&self) -> bool {
        self.code() == Some("InvalidNetworkInterfaceID.NotFound")
    }

    /// EC2 does not know (any more) a Spot request id
    /// (`InvalidSpotInstanceRequestID.NotFound`): nothing is left to cancel.
    pub(crate) fn is_spot_request_not_found(&self) -> bool {
        self.code() == Some("InvalidSpotInstanceRequestID.NotFound")
    }

    /// The image id is well formed but names no image this account can see.
    pub(crate) fn is_image_not_found(&self) -> bool {
        self.code().is_some_and(|c| c.starts_with("InvalidAMIID.") && c != "InvalidAMIID.Malformed")
    }
}

impl CloudFailure for AwsFailure {
    fn is_throttled(&self) -> bool {
        self.code().is_some_and(is_throttling)
    }

    fn into_driver_error(self, call: CloudCall) -> DriverError {
        let (service, operation) = (call.service, call.operation);
        let classified = match &self.problem {
            Problem::Service { code, http_status, message } => {
                service_error(service, operation, code, *http_status, message.as_deref())
            }
            Problem::Transport { reason, what } => {
                DriverError::unavailable(*reason, format!("{service} {operation}: {what}"), RETRY_SOON)
            }
            Problem::Internal { what } => DriverError::internal(format!("{service} {operation}: {what}")),
        };
        classified.with_source(SourceError(self.source))
    }
}

/// The SDK error kept as a [`DriverError`]'s source.
#[derive(Debug)]
struct SourceError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for SourceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
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
            ("Unsupported", 400, ErrorKind::ResourceExhausted),
            ("UnsupportedOperation", 400, ErrorKind::InvalidArgument),
        ];
        for (code, status, kind) in cases {
            assert_eq!(kind_for(code, status), kind, "{code}");
        }
    }

    #[test]
    fn every_cannot_place_it_here_code_is_resource_exhausted() {
        // The Go provider's list (pkg/aws/errors/utils.go GetMCMErrorCodeForCreateMachine) ...
        let go = [
            "InsufficientCapacity",
            "InsufficientAddressCapacity",
            "InsufficientInstanceCapacity",
            "InsufficientVolumeCapacity",
            "InstanceLimitExceeded",
            "VcpuLimitExceeded",
            "VolumeLimitExceeded",
            "MaxIOPSLimitExceeded",
            "RouteLimitExceeded",
            "Unsupported",
        ];
        // ... and the other capacity, placement and quota codes of EC2's error codes reference.
        let ec2 = [
            "InsufficientHostCapacity",
            "InsufficientReservedInstanceCapacity",
            "InsufficientFreeAddressesInSubnet",
            "InsufficientCapacityOnOutpost",
            "MaxSpotInstanceCountExceeded",
            "SpotMaxPriceTooLow",
            "ReservationCapacityExceeded",
            "NetworkInterfaceLimitExceeded",
            "PrivateIpAddressLimitExceeded",
            "AddressLimitExceeded",
        ];
        for code in go.iter().chain(&ec2) {
            for status in [400, 500] {
                assert_eq!(kind_for(code, status), ErrorKind::ResourceExhausted, "{code} ({status})");
            }
        }
        // Refusals of the request itself stay INVALID_ARGUMENT.
        for code in ["UnsupportedOperation", "UnsupportedInstanceAttribute", "InvalidParameterValue"] {
            assert_eq!(kind_for(code, 400), ErrorKind::InvalidArgument, "{code}");
        }
        assert_eq!(kind_for("RequestLimitExceeded", 503), ErrorKind::Unavailable);
    }

    #[test]
    fn a_per_resource_limit_is_the_classs_invalid_argument_not_a_quota() {
        let e = service_error("ec2", "RunInstances", "TagLimitExceeded", 400, Some("Too many tags."));
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(e.field(), Some("providerSpec.tags"));
        assert!(e.message().starts_with("providerSpec.tags: more tags than EC2 allows on one resource (50"), "{e}");
        assert!(e.message().ends_with("ec2 RunInstances failed: TagLimitExceeded: Too many tags."), "{e}");
        assert_eq!(e.retry_after(), None);
        for (code, field) in [
            ("SecurityGroupsPerInstanceLimitExceeded", "providerSpec.networkInterfaces[].securityGroupIDs"),
            ("SecurityGroupsPerInterfaceLimitExceeded", "providerSpec.networkInterfaces[].securityGroupIDs"),
            ("AttachmentLimitExceeded", "providerSpec.blockDevices"),
        ] {
            for status in [400, 500] {
                let e = service_error("ec2", "RunInstances", code, status, None);
                assert_eq!((e.kind(), e.field()), (ErrorKind::InvalidArgument, Some(field)), "{code} ({status})");
                assert!(e.message().ends_with(&format!("ec2 RunInstances failed: {code}")), "{e}");
            }
        }
        // The driver's own request is too big: a bug, not the class and not a quota.
        assert_eq!(kind_for("FilterLimitExceeded", 400), ErrorKind::Internal);
        // Quotas stay RESOURCE_EXHAUSTED, also one EC2 adds later.
        for code in ["InstanceLimitExceeded", "VcpuLimitExceeded", "SomeNewLimitExceeded"] {
            assert_eq!(kind_for(code, 400), ErrorKind::ResourceExhausted, "{code}");
        }
    }

    #[test]
    fn throttling_carries_retry_and_message_is_deterministic() {
        let e = service_error("ec2", "RunInstances", "RequestLimitExceeded", 503, Some("Request limit exceeded."));
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert_eq!(e.reason(), "RequestLimitExceeded");
        assert_eq!(e.retry_after(), Some(RETRY_SOON));
        assert_eq!(e.message(), "ec2 RunInstances failed: RequestLimitExceeded: Request limit exceeded.");
        let cap = service_error("ec2", "RunInstances", "InsufficientInstanceCapacity", 500, None);
        assert_eq!(cap.retry_after(), None);
        assert_eq!(cap.message(), "ec2 RunInstances failed: InsufficientInstanceCapacity");
    }
}
