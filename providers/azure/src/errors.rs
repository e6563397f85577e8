//! Classification of Azure Resource Manager failures (HTTP errors with ARM's
//! `{"error":{"code","message"}}` body, failed long-running operations,
//! transport and token failures) into the driver's [`ErrorKind`]s.
//!
//! The `reason` of a classified error is ARM's own error code when there is one
//! (`AllocationFailed`, `NicReservedForAnotherVm`, ...), otherwise the HTTP
//! status class. Messages name the ARM call and carry ARM's message, never
//! request ids or credentials, so they stay deterministic.

use std::sync::Arc;
use std::time::Duration;

use machine_driver_api::{CloudCall, CloudFailure, DriverError, ErrorKind, cloud_failure_message};

use crate::transport::ResponseMeta;

/// The kit's retry delay for failures the cloud names none for.
pub(crate) use machine_driver_api::RETRY_SOON;

/// Reason UNAVAILABLE (retry soon): a data disk of the VM is still being created.
pub(crate) const DISK_PROVISIONING: &str = "DISK_PROVISIONING";
/// Reason UNAVAILABLE (retry soon): a disk update of UpdateMachine is still running.
pub(crate) const DISK_UPDATING: &str = "DISK_UPDATING";
/// Reason FAILED_PRECONDITION: the marketplace image has no agreement in the subscription.
pub(crate) const MARKETPLACE_AGREEMENT_NOT_FOUND: &str = "MARKETPLACE_AGREEMENT_NOT_FOUND";
/// Reason PERMISSION_DENIED: the marketplace image's terms are not accepted and the credentials may not accept them.
pub(crate) const MARKETPLACE_TERMS_NOT_ACCEPTED: &str = "MARKETPLACE_TERMS_NOT_ACCEPTED";
/// Reason UNAVAILABLE: the machine's VM is being deleted; retry once it is gone.
pub(crate) const VM_DELETING: &str = "VM_DELETING";
/// Reason UNAVAILABLE: CreateMachine found the machine's Spot VM evicted and is deleting it before creating it again (not the kit's `SPOT_RECLAIMED`, which is GetMachineStatus's answer).
pub(crate) const SPOT_VM_RECLAIMED: &str = "SPOT_VM_RECLAIMED_DELETING";
/// Reason FAILED_PRECONDITION: the update plan would leave a resource with more tags than ARM keeps.
pub(crate) const TOO_MANY_TAGS: &str = "TOO_MANY_TAGS";
/// The reason of an ARM failure with neither a code, an HTTP status nor a transport problem (its kind is INTERNAL).
pub(crate) const OPERATION_FAILED: &str = "OPERATION_FAILED";
/// Reason UNAVAILABLE (retry soon): a share of the gallery image is still being applied.
pub(crate) const SHARING_IN_PROGRESS: &str = "SHARING_IN_PROGRESS";

/// How long Azure keeps a NIC reserved for the VM whose creation failed or
/// which was deleted (`NicReservedForAnotherVm`).
pub(crate) const NIC_RESERVATION: Duration = Duration::from_secs(180);

/// ARM codes that mean throttling: the request had no effect.
const THROTTLING_CODES: &[&str] = &["TooManyRequests", "SubscriptionRequestsThrottled", "OperationThrottled"];

/// ARM codes that mean capacity or quota is exhausted, or that Azure cannot
/// place the VM where it was asked (its size or a feature it asks for is not
/// offered in that location or zone): the Go provider's list
/// (pkg/azure/access/errors/errors.go `GetMatchingErrorCode`), plus the
/// overconstrained allocations. The machine-controller and the autoscaler
/// back off and try another pool or zone only for RESOURCE_EXHAUSTED.
const EXHAUSTED_CODES: &[&str] = &[
    "AllocationFailed",
    "ZonalAllocationFailed",
    "SkuNotAvailable",
    "ResourceQuotaExceeded",
    "QuotaExceeded",
    "OverconstrainedAllocationRequest",
    "OverconstrainedZonalAllocationRequest",
];

/// A failed ARM call or operation, reduced to what classification needs.
#[derive(Debug, Clone)]
pub(crate) struct ArmFailure {
    /// HTTP status of the answer, when there was one.
    pub(crate) http_status: Option<u16>,
    /// ARM's error code.
    pub(crate) code: Option<String>,
    /// ARM's message (never carries credentials).
    pub(crate) message: String,
    /// The `Retry-After` the answer carried.
    pub(crate) retry_after: Option<Duration>,
    /// What went wrong below HTTP.
    pub(crate) transport: Option<TransportProblem>,
    /// The SDK's error, kept as the driver error's source (for logs).
    source: Option<Arc<azure_core::Error>>,
}

/// Failures that happened before an HTTP answer arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransportProblem {
    /// Connect or I/O: transient.
    Network,
    /// No access token could be obtained for the credentials.
    Credentials,
    /// The answer could not be decoded: a bug or an incompatible endpoint.
    Decode,
}

impl ArmFailure {
    /// A failure with an HTTP status and ARM's code and message.
    pub(crate) fn http(status: u16, code: Option<String>, message: impl Into<String>) -> Self {
        Self {
            http_status: Some(status),
            code,
            message: message.into(),
            retry_after: None,
            transport: None,
            source: None,
        }
    }

    /// A failure before any answer.
    pub(crate) fn transport(problem: TransportProblem, message: impl Into<String>) -> Self {
        Self {
            http_status: None,
            code: None,
            message: message.into(),
            retry_after: None,
            transport: Some(problem),
            source: None,
        }
    }

    /// The failure a long-running operation ended with (`error{code,message}`).
    pub(crate) fn operation(code: Option<String>, message: impl Into<String>) -> Self {
        Self { http_status: None, code, message: message.into(), retry_after: None, transport: None, source: None }
    }

    /// Classifies an `azure_core` error, with the `Retry-After` of the answer it came from.
    pub(crate) fn classify(err: azure_core::Error, meta: ResponseMeta) -> Self {
        let mut failure = if let Some(http) = err.as_http_error() {
            Self::http(
                http.status() as u16,
                http.error_code().map(str::to_string),
                http.error_message().unwrap_or_default().to_string(),
            )
        } else {
            let problem = match err.kind() {
                azure_core::error::ErrorKind::Credential => TransportProblem::Credentials,
                azure_core::error::ErrorKind::DataConversion => TransportProblem::Decode,
                _ => TransportProblem::Network,
            };
            Self::transport(problem, String::new())
        };
        failure.retry_after = meta.retry_after;
        tracing::debug!(
            http_status = ?failure.http_status,
            code = ?failure.code,
            request_id = meta.request_id.as_deref().unwrap_or(""),
            "ARM call failed"
        );
        failure.source = Some(Arc::new(err));
        failure
    }

    fn code(&self) -> &str {
        self.code.as_deref().unwrap_or("")
    }

    /// True for HTTP 404 (resource, or its resource group, not there).
    pub(crate) fn is_not_found(&self) -> bool {
        self.http_status == Some(404)
    }

    /// 412: a create-only PUT (`If-None-Match: *`) found the resource there.
    pub(crate) fn is_precondition_failed(&self) -> bool {
        self.http_status == Some(412)
    }

    /// 401: the bearer token was refused (expired or revoked).
    pub(crate) fn is_unauthorized(&self) -> bool {
        self.http_status == Some(401)
    }

    /// 403: the identity may not make the call.
    pub(crate) fn is_forbidden(&self) -> bool {
        self.http_status == Some(403)
    }

    /// A write refused for the value it carried (400): the class field it came
    /// from is named as INVALID_ARGUMENT (Disks - Update: a size or
    /// performance out of the disk type's bounds, performance on a type
    /// without it).
    pub(crate) fn is_value_refused(&self) -> bool {
        self.transport.is_none() && self.http_status == Some(400)
    }

    /// Whether ARM's message names the request parameter `parameter`
    /// (`diskIOPSReadWrite`): which of a write's fields it refused.
    pub(crate) fn names_parameter(&self, parameter: &str) -> bool {
        self.message.to_ascii_lowercase().contains(&parameter.to_ascii_lowercase())
    }

    /// The NIC is reserved for another VM for up to 180 s after that VM failed or was deleted.
    pub(crate) fn is_nic_reserved(&self) -> bool {
        self.code() == "NicReservedForAnotherVm"
    }

    /// A VM PUT refused because the subscription has not accepted the
    /// marketplace terms of the image's plan (`ResourcePurchaseValidationFailed`
    /// for a VM PUT, `MarketplacePurchaseEligibilityFailed` through a deployment).
    pub(crate) fn is_terms_not_accepted(&self) -> bool {
        matches!(self.code(), "ResourcePurchaseValidationFailed" | "MarketplacePurchaseEligibilityFailed")
    }

    /// A VM PUT refused because its image is not there: a gallery image (version)
    /// not available in the VM's region (`GalleryImageNotFound`), an unknown
    /// platform image (`PlatformImageNotFound`) or managed image (`ImageNotFound`).
    pub(crate) fn is_image_not_found(&self) -> bool {
        matches!(self.code(), "GalleryImageNotFound" | "PlatformImageNotFound" | "ImageNotFound")
    }

    /// A create-only PUT (`If-None-Match: *`) refused because the resource
    /// exists (412), or a PUT refused as a conflicting update of an existing
    /// resource (409 that is not about quota: `PropertyChangeNotAllowed` when
    /// a re-PUT would change `customData`, `OperationNotAllowed` on a VM being
    /// deleted), which is how ARM answers should it ignore the condition.
    pub(crate) fn is_conflict_with_existing(&self) -> bool {
        match self.http_status {
            Some(412) => true,
            Some(409) => !self.is_exhausted() && !self.is_throttling(),
            _ => false,
        }
    }

    /// Quota or capacity exhausted, or the VM cannot be placed there (the Go
    /// provider's list; `OperationNotAllowed` about a quota; `BadRequest`
    /// saying the size or a feature is "not supported" in a zone, location or
    /// region: [`says_not_supported_there`]).
    pub(crate) fn is_exhausted(&self) -> bool {
        let code = self.code();
        let message = self.message.to_ascii_lowercase();
        EXHAUSTED_CODES.contains(&code)
            || (code == "OperationNotAllowed" && message.contains("quota"))
            || (code == "BadRequest" && says_not_supported_there(&message))
    }

    /// The driver error kind this failure belongs to.
    pub(crate) fn kind(&self) -> ErrorKind {
        if let Some(t) = self.transport {
            return match t {
                TransportProblem::Network => ErrorKind::Unavailable,
                TransportProblem::Credentials => ErrorKind::Unauthenticated,
                TransportProblem::Decode => ErrorKind::Internal,
            };
        }
        if self.is_throttling()
            || self.is_nic_reserved()
            || matches!(
                self.code(),
                "AnotherOperationInProgress" | "ReferencedResourceNotProvisioned" | "RetryableError"
            )
        {
            return ErrorKind::Unavailable;
        }
        if self.is_exhausted() {
            return ErrorKind::ResourceExhausted;
        }
        match self.http_status {
            Some(408 | 429) => ErrorKind::Unavailable,
            Some(s) if s >= 500 => ErrorKind::Unavailable,
            Some(401) => ErrorKind::Unauthenticated,
            Some(403) => ErrorKind::PermissionDenied,
            Some(400) => ErrorKind::InvalidArgument,
            Some(404) => ErrorKind::NotFound,
            Some(409) => ErrorKind::FailedPrecondition,
            Some(412) => ErrorKind::FailedPrecondition,
            // A failed operation without an HTTP status: Azure's internal failures.
            _ => ErrorKind::Internal,
        }
    }

    /// True when ARM throttled the request (429 or a throttling code).
    fn is_throttling(&self) -> bool {
        self.transport.is_none() && (self.http_status == Some(429) || THROTTLING_CODES.contains(&self.code()))
    }

    /// The stable reason reported with the driver error.
    fn reason_word(&self) -> String {
        if let Some(c) = self.code.as_ref().filter(|c| !c.is_empty()) {
            return c.clone();
        }
        match (self.transport, self.http_status) {
            (Some(TransportProblem::Network), _) => machine_driver_api::reasons::TRANSPORT.to_string(),
            (Some(TransportProblem::Credentials), _) => machine_driver_api::reasons::CREDENTIALS.to_string(),
            (Some(TransportProblem::Decode), _) => machine_driver_api::reasons::UNDECODABLE_RESPONSE.to_string(),
            (None, Some(s)) => machine_driver_api::reasons::http_status(s),
            (None, None) => OPERATION_FAILED.to_string(),
        }
    }

    /// The classified driver error for the ARM call or operation `what`
    /// (`compute virtualMachines.createOrUpdate`).
    pub(crate) fn driver_error(self, what: &str) -> DriverError {
        let kind = self.kind();
        let reason = self.reason_word();
        // ARM appends tracking and correlation ids and a timestamp to some messages
        // ("Diagnostic information: ..."): they would make the message change on every call.
        let message = cloud_failure_message(what, &reason, self.http_status, deterministic_part(&self.message));
        let mut err = DriverError::new(kind, reason, message);
        if kind == ErrorKind::Unavailable {
            let delay = if self.is_nic_reserved() { NIC_RESERVATION } else { self.retry_after.unwrap_or(RETRY_SOON) };
            err = err.with_retry_after(delay);
        }
        match self.source {
            Some(source) => err.with_source(SharedSource(source)),
            None => err,
        }
    }
}

/// A lowercase `BadRequest` message that says something is not supported in
/// a place: `(?i)not\s+supported` (the Go provider's `NotSupportedRegex`,
/// pkg/azure/access/errors/errors.go, which maps every such `BadRequest` to
/// ResourceExhausted) followed by a zone, location or region ("in zone '3'",
/// "in location 'eastus2'", "in this region", "for location 'westcentralus'",
/// "for this VM size in the location"). Go's rule alone also catches refusals
/// of the class itself ("Encryption Type ... is not supported for server
/// side encryption with customer managed key", "... is not supported for
/// this API version"), which no other pool or zone cures: those stay
/// INVALID_ARGUMENT, as every other 400.
fn says_not_supported_there(lowercase: &str) -> bool {
    not_supported_at(lowercase).is_some_and(|end| names_a_place(&lowercase[end..]))
}

/// Where the first `not\s+supported` of a lowercase message ends.
fn not_supported_at(lowercase: &str) -> Option<usize> {
    lowercase.match_indices("not").find_map(|(at, _)| {
        let rest = &lowercase[at + 3..];
        let trimmed = rest.trim_start();
        (trimmed.len() < rest.len() && trimmed.starts_with("supported"))
            .then(|| lowercase.len() - trimmed.len() + "supported".len())
    })
}

/// Whether `text` (lowercase) names a zone, location or region: `in` or
/// `for`, maybe an article (`the`, `this`, `that`, `current`, `availability`),
/// then `zone`, `location` or `region`.
fn names_a_place(text: &str) -> bool {
    const SKIPPED: &[&str] = &["the", "this", "that", "current", "availability", "requested", "selected"];
    const PLACES: &[&str] = &["zone", "location", "region"];
    let words: Vec<&str> = text.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
    words.iter().enumerate().filter(|(_, w)| matches!(**w, "in" | "for")).any(|(i, _)| {
        let mut next = words[i + 1..].iter().skip_while(|w| SKIPPED.contains(w));
        // "zone", "zones", "zone(s)" alike.
        next.next().is_some_and(|w| PLACES.contains(&w.strip_suffix('s').unwrap_or(w)))
    })
}

/// `message` up to the first volatile part (ids, timestamps) ARM appends.
fn deterministic_part(message: &str) -> &str {
    const VOLATILE: &[&str] = &[
        "Diagnostic information",
        "Tracking ID",
        "tracking id",
        "Correlation ID",
        "correlation id",
        "Trace ID",
        "Timestamp:",
    ];
    let cut = VOLATILE.iter().filter_map(|v| message.find(v)).min().unwrap_or(message.len());
    message[..cut].trim().trim_end_matches([',', ';'])
}

impl CloudFailure for ArmFailure {
    fn is_throttled(&self) -> bool {
        self.is_throttling()
    }

    fn into_driver_error(self, call: CloudCall) -> DriverError {
        self.driver_error(&call.to_string())
    }
}

/// The SDK error as a driver error's source (shared: a failure may be cloned).
#[derive(Debug)]
struct SharedSource(Arc<azure_core::Error>);

impl std::fmt::Display for SharedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The SDK's Display prints the whole answer (body and headers): the kind is enough here.
        write!(f, "azure_core error: {:?}", self.0.kind())
    }
}

impl std::error::Error for SharedSource {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_codes_map_to_the_kinds_mcm_expects() {
        let kind = |status: u16, code: &str, msg: &str| ArmFailure::http(status, Some(code.into()), msg).kind();
        assert_eq!(kind(429, "TooManyRequests", ""), ErrorKind::Unavailable);
        assert_eq!(kind(503, "ServiceUnavailable", ""), ErrorKind::Unavailable);
        assert_eq!(kind(409, "SkuNotAvailable", ""), ErrorKind::ResourceExhausted);
        assert_eq!(
            kind(409, "OperationNotAllowed", "results in exceeding approved standardDSv3Family Cores quota"),
            ErrorKind::ResourceExhausted
        );
        assert_eq!(kind(409, "OperationNotAllowed", "Disk is attached"), ErrorKind::FailedPrecondition);
        assert_eq!(kind(401, "InvalidAuthenticationToken", ""), ErrorKind::Unauthenticated);
        assert_eq!(kind(403, "AuthorizationFailed", ""), ErrorKind::PermissionDenied);
        assert_eq!(kind(400, "InvalidParameter", ""), ErrorKind::InvalidArgument);
        assert_eq!(kind(404, "ResourceNotFound", ""), ErrorKind::NotFound);
        assert_eq!(kind(400, "NicReservedForAnotherVm", ""), ErrorKind::Unavailable);
        assert_eq!(kind(409, "AnotherOperationInProgress", ""), ErrorKind::Unavailable);
        assert_eq!(ArmFailure::operation(Some("AllocationFailed".into()), "x").kind(), ErrorKind::ResourceExhausted);
        assert_eq!(ArmFailure::operation(Some("InternalExecutionError".into()), "x").kind(), ErrorKind::Internal);
    }

    /// "Cannot place it here" (Go provider #225 and its code list): RESOURCE_EXHAUSTED, so that
    /// the autoscaler tries another pool or zone; other refusals keep their kinds.
    #[test]
    fn cannot_place_it_here_is_resource_exhausted() {
        let kind = |status: u16, code: &str, msg: &str| ArmFailure::http(status, Some(code.into()), msg).kind();
        for (status, code) in [
            (409, "SkuNotAvailable"),
            (409, "ZonalAllocationFailed"),
            (409, "AllocationFailed"),
            (409, "OverconstrainedAllocationRequest"),
            (409, "OverconstrainedZonalAllocationRequest"),
        ] {
            assert_eq!(kind(status, code, "x"), ErrorKind::ResourceExhausted, "{code}");
            assert_eq!(ArmFailure::operation(Some(code.into()), "x").kind(), ErrorKind::ResourceExhausted, "{code}");
        }
        // A BadRequest saying it is not supported in a zone, location or region: exhausted.
        // Real ARM messages (Compute's `VMSizeNotSupported`, AKS's zone refusal, ACI's
        // location refusal, as users quote them) under the code Go reads.
        for there in [
            "Virtual Machine size: 'standard_dc16ads_cc_v5' is not supported in location 'eastus2'.",
            "The zone(s) '2' for resource 'defaultpool' is not supported in location 'eastus'",
            "Virtual network is not supported in location 'eastus' for container group 'appcontaineryaml'. \
             Please use one of the locations 'EastUS2EUAP,CentralUSEUAP,WestUS,WestCentralUS,NorthEurope,WestEurope'.",
            "The zone(s) '1' for resource 'Microsoft.Compute/virtualMachines/infra-1' is not supported. \
             The supported zones for location 'northcentralus' are ''",
            // Go's regex: any case, any white space.
            "Virtual Machine size: 'Standard_L8s_v3' is NOT\tSUPPORTED in location 'westeurope'.",
        ] {
            assert_eq!(kind(400, "BadRequest", there), ErrorKind::ResourceExhausted, "{there}");
        }
        // Not supported, but no place: the class's own error, which no other pool or zone
        // cures (real ARM messages: Compute's refusal of a disk encryption type, Spot's
        // refusals listed in Azure's Spot VM error table).
        for input in [
            "Encryption Type ConfidentialVmEncryptedWithCustomerKey is not supported for server side encryption \
             with customer managed key.  Target: '/subscriptions/7157c5e7-0f06-458b-8229-0a0f52209ee2/resourceGroups/\
             chkmarx-conf-compute-mvp/providers/Microsoft.Compute/disks/cc-win_OsDisk_1'.",
            "Azure Spot Virtual Machine is not supported for this API version.",
            "Azure Spot Virtual Machine is not supported for this VM size Standard_A0.",
        ] {
            assert_eq!(kind(400, "BadRequest", input), ErrorKind::InvalidArgument, "{input}");
        }
        // A place that is not what is "not supported" (before it) does not count.
        assert_eq!(
            kind(400, "BadRequest", "In location 'westeurope' the value of osDisk.caching is not supported."),
            ErrorKind::InvalidArgument
        );
        // Not "not supported": a plain bad request.
        assert_eq!(
            kind(400, "BadRequest", "The request is invalid: notsupported in zone 1"),
            ErrorKind::InvalidArgument
        );
        assert_eq!(kind(400, "BadRequest", "Bad value for vmSize."), ErrorKind::InvalidArgument);
        // Only BadRequest's message is read (Go's rule): another code saying so keeps its kind.
        assert_eq!(kind(400, "InvalidParameter", "is not supported"), ErrorKind::InvalidArgument);
        assert_eq!(kind(409, "OperationNotAllowed", "Disk is attached"), ErrorKind::FailedPrecondition);
        // A SkuNotAvailable 409 is no "conflict with an existing VM" to adopt.
        assert!(!ArmFailure::http(409, Some("SkuNotAvailable".into()), "x").is_conflict_with_existing());
    }

    #[test]
    fn retry_after_and_reservation_delay_travel_with_unavailable() {
        let mut throttled = ArmFailure::http(429, Some("TooManyRequests".into()), "slow down");
        throttled.retry_after = Some(Duration::from_secs(17));
        assert!(throttled.is_throttled());
        let err = throttled.driver_error("compute virtualMachines.get");
        assert_eq!(err.retry_after(), Some(Duration::from_secs(17)));
        assert!(err.message().starts_with("compute virtualMachines.get failed: TooManyRequests (HTTP 429)"));
        let internal = ArmFailure::http(
            500,
            Some("InternalServerError".into()),
            "Encountered internal server error. Diagnostic information: timestamp '20261130T235959Z', tracking id 'abc'.",
        )
        .driver_error("x");
        assert_eq!(internal.message(), "x failed: InternalServerError (HTTP 500): Encountered internal server error.");
        let reserved = ArmFailure::http(400, Some("NicReservedForAnotherVm".into()), "reserved").driver_error("x");
        assert_eq!(reserved.retry_after(), Some(NIC_RESERVATION));
    }
}
