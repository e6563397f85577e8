//! Classification of ECS and STS failures (`{"Code","Message","RequestId"}`
//! answers, transport failures) into the driver's [`ErrorKind`]s.
//!
//! The `reason` of a classified error is ECS's `Code`; messages name the
//! action and carry ECS's message, never the `RequestId` (logged at debug)
//! or credentials, so they stay deterministic.

use machine_driver_api::{CloudCall, CloudFailure, DriverError, ErrorKind, cloud_failure_message};

/// The kit's retry delay for failures the cloud names none for.
pub(crate) use machine_driver_api::RETRY_SOON;

/// ECS's own code, also a reason (FAILED_PRECONDITION): a ClientToken was reused with other parameters; also answered when the retry finds no instance carrying the uid yet.
pub(crate) const IDEMPOTENT_PARAMETER_MISMATCH: &str = "IdempotentParameterMismatch";
/// Reason UNAVAILABLE (retry soon): ECS reclaimed the machine's spot instance and has not released it yet.
pub(crate) const SPOT_INSTANCE_PENDING_RELEASE: &str = "SPOT_INSTANCE_PENDING_RELEASE";

/// Codes that mean "cannot place it here" (no stock, not sold in the zone, the
/// zone does not offer the type or disk category) or an exhausted quota: the
/// autoscaler tries another pool or zone. The Go provider's list
/// (gardener/machine-controller-manager-provider-alicloud `pkg/alicloud/errors/utils.go`
/// `GetMCMErrorCodeForCreateMachine`, codes in `codes.go`) and the other
/// RunInstances codes of the ECS API reference's error table of that kind.
/// `QuotaExceed*`, and anything `NoStock`/`StockNotEnough`, too.
const EXHAUSTED_CODES: &[&str] = &[
    // The Go provider's.
    "QuotaExceed.DiskCapacity",
    "QuotaExceed.ElasticQuota",
    "OperationDenied.CloudSSDNotSupported",
    "OperationDenied.NoStock",
    "OperationDenied.ZoneNotAllowed",
    "OperationDenied.ZoneSystemCategoryNotMatch",
    "Zone.NotOnSale",
    "Zone.NotOpen",
    "InvalidVpcZone.NotSupported",
    "InvalidInstanceType.ZoneNotSupported",
    "InvalidZoneId.NotSupportShareEncryptedImage",
    "ResourceNotAvailable",
    // ECS's RunInstances error table.
    "InvalidResourceType.NotSupported",
    "CategoryNotSupported",
    "OperationDenied.ResourceControl",
    "QuotaExceeded.PrivateIpAddress",
    "QuotaExceed.ShareImageUser",
];

/// ECS's code for an account with an overdue payment ("Your account has an
/// outstanding payment", RunInstances error table): no zone or pool can serve
/// the request until the bill is paid, so it is FAILED_PRECONDITION, not
/// "cannot place it here".
const ARREARAGE: &str = "Account.Arrearage";

/// A failed ECS or STS call, reduced to what classification needs.
#[derive(Debug, Clone)]
pub(crate) struct EcsFailure {
    /// HTTP status of the answer, when there was one.
    pub(crate) http_status: Option<u16>,
    /// ECS's `Code`.
    pub(crate) code: String,
    /// ECS's `Message`.
    pub(crate) message: String,
    /// No answer (connection, timeout) or an answer that is not ECS's JSON.
    pub(crate) transport: bool,
}

impl EcsFailure {
    /// An answer with ECS's error body.
    pub(crate) fn answered(status: u16, code: impl Into<String>, message: impl Into<String>) -> Self {
        Self { http_status: Some(status), code: code.into(), message: message.into(), transport: false }
    }

    /// No usable answer.
    pub(crate) fn transport(message: impl Into<String>) -> Self {
        Self { http_status: None, code: String::new(), message: message.into(), transport: true }
    }

    /// True when the instance does not exist (never for a key ECS does not know:
    /// `InvalidAccessKeyId.NotFound` must not make a delete look done).
    pub(crate) fn is_not_found(&self) -> bool {
        self.code == "InvalidInstanceId.NotFound"
    }

    /// The ClientToken was used before with other parameters.
    pub(crate) fn is_idempotent_mismatch(&self) -> bool {
        self.code == IDEMPOTENT_PARAMETER_MISMATCH
    }

    /// The instance (or, for ResizeDisk, the disk: `IncorrectDiskStatus`, a disk
    /// being resized or its instance being released) is in a state that refuses
    /// the operation for now (still starting, stopping).
    pub(crate) fn is_incorrect_status(&self) -> bool {
        self.code.starts_with("IncorrectInstanceStatus") || self.code.starts_with("IncorrectDiskStatus")
    }

    fn is_throttling(&self) -> bool {
        !self.transport && (self.code.starts_with("Throttling") || self.http_status == Some(429))
    }

    /// The driver error kind this failure belongs to.
    pub(crate) fn kind(&self) -> ErrorKind {
        if self.transport {
            return ErrorKind::Unavailable;
        }
        let code = self.code.as_str();
        if self.is_throttling()
            || code == "ServiceUnavailable"
            || self.is_incorrect_status()
            || code.starts_with("OperationConflict")
            || matches!(code, "LastTokenProcessing" | "IdempotentProcessing")
        {
            return ErrorKind::Unavailable;
        }
        if code == ARREARAGE {
            return ErrorKind::FailedPrecondition;
        }
        if EXHAUSTED_CODES.contains(&code)
            || code.starts_with("QuotaExceed")
            || code.contains("NoStock")
            || code.contains("StockNotEnough")
        {
            return ErrorKind::ResourceExhausted;
        }
        if code.starts_with("SignatureDoesNotMatch")
            || code.starts_with("InvalidAccessKeyId")
            || code.starts_with("InvalidAccessKeySecret")
            || code == "SignatureNonceUsed"
            || code.starts_with("InvalidTimeStamp")
        {
            return ErrorKind::Unauthenticated;
        }
        if code.starts_with("Forbidden") || code == "NoPermission" {
            return ErrorKind::PermissionDenied;
        }
        if code == IDEMPOTENT_PARAMETER_MISMATCH {
            return ErrorKind::FailedPrecondition;
        }
        // The VM or the image is missing; any other missing thing (vSwitch, security
        // group, key pair) is a wrong class.
        if matches!(code, "InvalidInstanceId.NotFound" | "InvalidImageId.NotFound") {
            return ErrorKind::NotFound;
        }
        if code.ends_with(".NotFound") {
            return ErrorKind::InvalidArgument;
        }
        match self.http_status {
            Some(s) if s >= 500 => ErrorKind::Unavailable,
            Some(400) => ErrorKind::InvalidArgument,
            Some(401) => ErrorKind::Unauthenticated,
            Some(404) => ErrorKind::NotFound,
            // ECS answers many state conflicts with 403: not a permission problem.
            Some(403) => ErrorKind::FailedPrecondition,
            _ => ErrorKind::Internal,
        }
    }

    /// The classified driver error for `what` (`ecs RunInstances`).
    pub(crate) fn driver_error(self, what: &str) -> DriverError {
        let kind = self.kind();
        let reason = if self.code.is_empty() {
            match self.http_status {
                Some(s) => machine_driver_api::reasons::http_status(s),
                None => machine_driver_api::reasons::TRANSPORT.to_string(),
            }
        } else {
            self.code.clone()
        };
        let mut message = cloud_failure_message(what, &reason, self.http_status, &self.message);
        if self.code == ARREARAGE {
            message = format!(
                "the Alibaba Cloud account has an unpaid bill: ECS creates nothing in any zone until it is \
                 settled; {message}"
            );
        }
        let err = DriverError::new(kind, reason, message);
        if kind == ErrorKind::Unavailable { err.with_retry_after(RETRY_SOON) } else { err }
    }
}

impl std::fmt::Display for EcsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({:?})", self.code, self.http_status)
    }
}

impl CloudFailure for EcsFailure {
    fn is_throttled(&self) -> bool {
        self.is_throttling()
    }

    fn into_driver_error(self, call: CloudCall) -> DriverError {
        self.driver_error(&call.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecs_codes_map_to_the_kinds_mcm_expects() {
        let kind = |status: u16, code: &str| EcsFailure::answered(status, code, "").kind();
        assert_eq!(kind(400, "Throttling.User"), ErrorKind::Unavailable);
        assert_eq!(kind(503, "ServiceUnavailable"), ErrorKind::Unavailable);
        assert_eq!(kind(403, "OperationDenied.NoStock"), ErrorKind::ResourceExhausted);
        assert_eq!(kind(403, "InvalidResourceType.NotSupported"), ErrorKind::ResourceExhausted);
        assert_eq!(kind(403, "QuotaExceed.ShareImageUser"), ErrorKind::ResourceExhausted);
        assert_eq!(kind(400, "SignatureDoesNotMatch"), ErrorKind::Unauthenticated);
        assert_eq!(kind(404, "InvalidAccessKeyId.NotFound"), ErrorKind::Unauthenticated);
        assert_eq!(kind(403, "Forbidden.RAM"), ErrorKind::PermissionDenied);
        assert_eq!(kind(400, "InvalidParameter"), ErrorKind::InvalidArgument);
        assert_eq!(kind(404, "InvalidInstanceId.NotFound"), ErrorKind::NotFound);
        assert_eq!(kind(403, "IncorrectInstanceStatus"), ErrorKind::Unavailable);
        assert_eq!(kind(403, "IncorrectDiskStatus"), ErrorKind::Unavailable);
        assert_eq!(kind(403, "InvalidDiskSize.TooSmall"), ErrorKind::FailedPrecondition);
        assert_eq!(kind(404, "InvalidVSwitchId.NotFound"), ErrorKind::InvalidArgument);
        assert_eq!(kind(403, "OperationConflict"), ErrorKind::Unavailable);
        assert_eq!(kind(403, "SomethingElse"), ErrorKind::FailedPrecondition);
        assert!(!EcsFailure::answered(404, "InvalidAccessKeyId.NotFound", "").is_not_found());
        assert!(EcsFailure::answered(404, "InvalidInstanceId.NotFound", "").is_not_found());
        assert!(EcsFailure::answered(400, "Throttling.User", "").is_throttled());
        assert!(EcsFailure::transport("x").driver_error("ecs DescribeInstances").retry_after().is_some());
    }

    #[test]
    fn every_cannot_place_it_here_code_is_resource_exhausted() {
        // The Go provider's list (pkg/alicloud/errors/codes.go, utils.go) ...
        let go = [
            "QuotaExceed.DiskCapacity",
            "QuotaExceed.ElasticQuota",
            "OperationDenied.ZoneSystemCategoryNotMatch",
            "OperationDenied.CloudSSDNotSupported",
            "OperationDenied.ZoneNotAllowed",
            "OperationDenied.NoStock",
            "Zone.NotOnSale",
            "Zone.NotOpen",
            "InvalidVpcZone.NotSupported",
            "InvalidZoneId.NotSupportShareEncryptedImage",
            "InvalidInstanceType.ZoneNotSupported",
            "ResourceNotAvailable",
        ];
        // ... and the rest of that kind in ECS's RunInstances error table.
        let ecs = [
            "InvalidResourceType.NotSupported",
            "CategoryNotSupported",
            "OperationDenied.ResourceControl",
            "QuotaExceeded.PrivateIpAddress",
            "QuotaExceeded",
            "InstanceType.StockNotEnough",
        ];
        for code in go.iter().chain(&ecs) {
            for status in [400, 403] {
                let err = EcsFailure::answered(status, *code, "m").driver_error("ecs RunInstances");
                assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{code} ({status})");
                assert_eq!(err.reason(), *code);
                assert_eq!(err.retry_after(), None);
            }
        }
        // An unpaid bill is not a place problem: another zone or pool does not help.
        assert!(!EXHAUSTED_CODES.contains(&ARREARAGE));
        // Refusals of the class itself stay as they were.
        assert_eq!(EcsFailure::answered(400, "InvalidSpotPriceLimit", "").kind(), ErrorKind::InvalidArgument);
        assert_eq!(
            EcsFailure::answered(400, "InvalidInstanceType.ValueNotSupported", "").kind(),
            ErrorKind::InvalidArgument
        );
    }

    #[test]
    fn an_unpaid_bill_is_failed_precondition_and_says_so() {
        for status in [400, 403] {
            let err = EcsFailure::answered(status, "Account.Arrearage", "Your account has an outstanding payment.")
                .driver_error("ecs RunInstances");
            assert_eq!(err.kind(), ErrorKind::FailedPrecondition, "HTTP {status}");
            assert_eq!(err.reason(), "Account.Arrearage");
            assert_eq!(err.retry_after(), None);
            assert!(err.message().starts_with("the Alibaba Cloud account has an unpaid bill"), "{err}");
            assert!(err.message().contains("ecs RunInstances failed: Account.Arrearage"), "{err}");
            assert!(err.message().ends_with("Your account has an outstanding payment."), "{err}");
        }
        // Only that code gets the note.
        let other = EcsFailure::answered(403, "SomethingElse", "m").driver_error("ecs RunInstances");
        assert!(!other.message().contains("unpaid bill"), "{other}");
    }
}
