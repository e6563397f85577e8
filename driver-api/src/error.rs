//! The one error type provider code returns.
//!
//! Providers classify cloud failures into an [`ErrorKind`] with a stable
//! `reason` (usually the cloud's own error code). The server turns it into a
//! gRPC status in exactly one place; no provider knows gRPC.

use std::fmt;
use std::time::Duration;

use crate::reasons;

/// Result alias for driver code.
pub type Result<T, E = DriverError> = std::result::Result<T, E>;

/// Classes of failure, each with a fixed meaning for the machine-controller's retry logic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Bad spec, secret or request field. Names the field.
    InvalidArgument,
    /// The VM (or image) does not exist.
    NotFound,
    /// A resource with the name exists but belongs to someone else.
    AlreadyExists,
    /// More than one live VM for one machine.
    Duplicate,
    /// Throttling, cloud 5xx, a VM not visible yet: retry soon.
    Unavailable,
    /// Quota or capacity exhausted.
    ResourceExhausted,
    /// Credentials rejected.
    Unauthenticated,
    /// Credentials lack a permission, or an operator policy refuses.
    PermissionDenied,
    /// The request is valid but the system is not in a state to serve it.
    FailedPrecondition,
    /// The call's deadline passed.
    DeadlineExceeded,
    /// The provider does not offer this RPC.
    Unimplemented,
    /// A bug or an answer the driver cannot understand.
    Internal,
}

/// Longest piece of a cloud's own message copied into a driver error message.
pub const MAX_CLOUD_MESSAGE: usize = 300;

/// The one form of a classified cloud failure's message:
/// `<what> failed: <reason> (HTTP <status>): <the cloud's message, cut>`.
/// `cloud_message` must already be free of volatile parts (request ids,
/// timestamps): the message ends up in the Machine's status.
pub fn cloud_failure_message(what: &str, reason: &str, http_status: Option<u16>, cloud_message: &str) -> String {
    let mut message = format!("{what} failed: {reason}");
    if let Some(s) = http_status {
        message.push_str(&format!(" (HTTP {s})"));
    }
    let cloud = cloud_message.trim();
    if !cloud.is_empty() {
        message.push_str(": ");
        message.extend(cloud.chars().take(MAX_CLOUD_MESSAGE));
    }
    message
}

/// The reason of [`DriverError::spot_reclaimed`] (the status's ErrorInfo
/// reason): GetMachineStatus of a machine whose Spot VM the cloud reclaimed.
pub const SPOT_RECLAIMED: &str = "SPOT_RECLAIMED";

/// The retry delay a provider suggests (RetryInfo) for throttling, 5xx and
/// transport failures, and resources not ready yet, when the cloud names none.
pub const RETRY_SOON: Duration = Duration::from_secs(5);

/// The reason of [`DriverError::owner_credentials_required`]: sharing,
/// revoking or listing the shares of an image needs the image owner's
/// credentials and the request has none.
pub const OWNER_CREDENTIALS_REQUIRED: &str = "OWNER_CREDENTIALS_REQUIRED";

/// A classified driver failure.
///
/// The `message` is deterministic and free of secrets and request ids: it ends
/// up in the Machine's status. Request ids and other volatile detail belong in logs.
#[derive(Debug, Clone)]
pub struct DriverError {
    kind: ErrorKind,
    reason: String,
    message: String,
    field: Option<String>,
    retry_after: Option<Duration>,
    source: Option<std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl DriverError {
    /// A new error of `kind` with a stable machine-readable `reason`
    /// (UPPER_SNAKE or the cloud's error code) and a human message.
    pub fn new(kind: ErrorKind, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self { kind, reason: reason.into(), message: message.into(), field: None, retry_after: None, source: None }
    }

    /// INVALID_ARGUMENT naming `field` (e.g. `providerSpec.networkInterfaces[0].subnetID`).
    pub fn invalid_argument(field: impl Into<String>, problem: impl fmt::Display) -> Self {
        let field = field.into();
        let mut e = Self::new(ErrorKind::InvalidArgument, reasons::INVALID_FIELD, format!("{field}: {problem}"));
        e.field = Some(field);
        e
    }

    /// NOT_FOUND for `what`.
    pub fn not_found(what: impl fmt::Display) -> Self {
        Self::new(ErrorKind::NotFound, reasons::NOT_FOUND, format!("{what} not found"))
    }

    /// FAILED_PRECONDITION [`OWNER_CREDENTIALS_REQUIRED`]: `message` says
    /// which image operation needs the owner's credentials.
    pub fn owner_credentials_required(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::FailedPrecondition, OWNER_CREDENTIALS_REQUIRED, message)
    }

    /// NOT_FOUND, reason [`SPOT_RECLAIMED`]: the cloud reclaimed the Spot
    /// (preemptible, low-priority) VM of the machine. `vm` names it (its id),
    /// `detail` says how the cloud shows it (e.g. EC2's state reason
    /// `Server.SpotInstanceTermination`, GCE's TERMINATED Spot instance). The
    /// one answer every provider gives GetMachineStatus for such a VM, so that
    /// MCM (and an operator reading the Machine's status) sees why the VM is
    /// gone; DeleteMachine still removes what is left of it.
    pub fn spot_reclaimed(vm: impl fmt::Display, detail: impl fmt::Display) -> Self {
        Self::new(ErrorKind::NotFound, SPOT_RECLAIMED, format!("the cloud reclaimed Spot VM {vm}: {detail}"))
    }

    /// UNAVAILABLE: transient, retry after `retry_after`.
    pub fn unavailable(reason: impl Into<String>, message: impl Into<String>, retry_after: Duration) -> Self {
        Self::new(ErrorKind::Unavailable, reason, message).with_retry_after(retry_after)
    }

    /// DEADLINE_EXCEEDED: the call's deadline passed before `message`'s work finished.
    pub fn deadline_exceeded(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::DeadlineExceeded, reasons::DEADLINE_EXCEEDED, message)
    }

    /// UNIMPLEMENTED for `rpc`.
    pub fn unimplemented(rpc: &str) -> Self {
        Self::new(ErrorKind::Unimplemented, reasons::UNIMPLEMENTED, format!("{rpc} is not offered by this driver"))
    }

    /// INTERNAL: a bug or an unexpected cloud answer.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, reasons::INTERNAL, message)
    }

    /// Sets the retry delay the caller should honour.
    pub fn with_retry_after(mut self, delay: Duration) -> Self {
        self.retry_after = Some(delay);
        self
    }

    /// Keeps the underlying error (for logs; never part of the message).
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(std::sync::Arc::new(source));
        self
    }

    /// The class of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Stable machine-readable reason.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The deterministic human message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The offending field, for INVALID_ARGUMENT.
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// The delay the caller should wait before retrying, when known.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DriverError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloud_failure_messages_have_one_form() {
        assert_eq!(
            cloud_failure_message("ecs RunInstances", "OperationDenied.NoStock", Some(403), " no stock "),
            "ecs RunInstances failed: OperationDenied.NoStock (HTTP 403): no stock"
        );
        assert_eq!(cloud_failure_message("x", "TRANSPORT", None, ""), "x failed: TRANSPORT");
        let long = "é".repeat(1000);
        assert_eq!(
            cloud_failure_message("x", "R", None, &long).chars().count(),
            "x failed: R: ".len() + MAX_CLOUD_MESSAGE
        );
    }
}
