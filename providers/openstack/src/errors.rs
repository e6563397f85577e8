//! Classification of OpenStack failures into the driver's [`ErrorKind`]s.
//!
//! Each service writes its errors its own way: Nova and Cinder
//! `{"itemNotFound": {"code": 404, "message": ...}}`, Keystone
//! `{"error": {"code", "title", "message"}}`, Neutron
//! `{"NeutronError": {"type", "message", "detail"}}`, Glance plain text
//! (`404 Not Found\n\nNo image found with ID ...`). [`OsFailure::from_answer`]
//! reads all of them into one shape. The `reason` of a classified error is the
//! error's name (`itemNotFound`, `PortNotFound`) or `HTTP_<status>`; messages
//! name the call and carry the cloud's message, never a token or request id.

use std::time::Duration;

use machine_driver_api::{CloudCall, CloudFailure, DriverError, ErrorKind, cloud_failure_message};

/// The kit's retry delay for failures the cloud names none for.
pub(crate) use machine_driver_api::RETRY_SOON;

/// Reason RESOURCE_EXHAUSTED: the flavor is not offered (MCM treats it as out of capacity, like the Go provider's `ErrFlavorNotFound`).
pub(crate) const FLAVOR_NOT_FOUND: &str = "FlavorNotFound";
/// Reason UNAVAILABLE (retry soon): the boot volume the Go provider made cannot be deleted yet.
pub(crate) const GO_VOLUME_PENDING: &str = "GO_VOLUME_PENDING";
/// Reason UNAVAILABLE (retry soon): the server of a young machine has no pod-network ports attached yet.
pub(crate) const PORTS_NOT_ATTACHED: &str = "PORTS_NOT_ATTACHED";
/// Longest retry delay taken from a `Retry-After` header.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// A failed OpenStack request, reduced to what classification needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OsFailure {
    /// HTTP status, when there was an answer.
    pub(crate) http_status: Option<u16>,
    /// The error's name: Nova's top-level key, Neutron's `type`, Keystone's `title`.
    pub(crate) name: String,
    /// The service's message.
    pub(crate) message: String,
    /// `Retry-After` (or Nova's `retryAfter`), when given.
    pub(crate) retry_after: Option<Duration>,
    /// The failure is in the driver's setup (no endpoint in the catalog), not in a call.
    pub(crate) setup: bool,
}

impl OsFailure {
    /// An error answer (`status`, headers' `Retry-After`, body).
    pub(crate) fn from_answer(status: u16, retry_after: Option<&str>, body: &[u8]) -> Self {
        let (name, message, body_retry) = parse_body(body);
        let retry_after = retry_after
            .and_then(|v| v.trim().parse::<u64>().ok())
            .or(body_retry)
            .map(|s| Duration::from_secs(s).min(MAX_RETRY_AFTER));
        Self { http_status: Some(status), name, message, retry_after, setup: false }
    }

    /// No usable answer (connection refused, reset, timeout, a body that is not what the API answers).
    pub(crate) fn transport(message: impl Into<String>) -> Self {
        Self { http_status: None, name: String::new(), message: message.into(), retry_after: None, setup: false }
    }

    /// The driver cannot make the call (no endpoint for the service in the region's catalog).
    pub(crate) fn setup(name: &str, message: impl Into<String>) -> Self {
        Self { http_status: None, name: name.to_string(), message: message.into(), retry_after: None, setup: true }
    }

    /// 404: the addressed resource does not exist (or is not visible to the project).
    pub(crate) fn is_not_found(&self) -> bool {
        self.http_status == Some(404)
    }

    /// 409: a conflict (member exists, port in use).
    pub(crate) fn is_conflict(&self) -> bool {
        self.http_status == Some(409)
    }

    /// 401: the token was refused.
    pub(crate) fn is_unauthorized(&self) -> bool {
        self.http_status == Some(401)
    }

    /// Glance's 403 for the members of an image that is not `shared`
    /// ("Only shared images have members"): it has no member to revoke.
    pub(crate) fn is_not_a_shared_image(&self) -> bool {
        self.http_status == Some(403) && self.message.contains("Only shared images")
    }

    /// Neutron's 400 for a port create with `tags` (a cloud without the
    /// `standard-attr-tag` extension on ports): the tags go on with a second call.
    pub(crate) fn is_port_tags_refused(&self) -> bool {
        self.http_status == Some(400) && self.message.contains("tags")
    }

    fn mentions_quota(&self) -> bool {
        let m = self.message.to_ascii_lowercase();
        m.contains("quota") || m.contains("maximum:") || m.contains("limit exceeded for")
    }

    fn is_throttling(&self) -> bool {
        match self.http_status {
            Some(429) => true,
            Some(413) => !self.mentions_quota(),
            _ => false,
        }
    }

    /// The driver error kind of this failure.
    pub(crate) fn kind(&self) -> ErrorKind {
        if self.setup {
            return ErrorKind::FailedPrecondition;
        }
        let Some(status) = self.http_status else {
            return ErrorKind::Unavailable;
        };
        if self.is_throttling() {
            return ErrorKind::Unavailable;
        }
        if self.message.contains("No valid host was found")
            || (matches!(status, 403 | 409 | 413) && self.mentions_quota())
            || self.name == "IpAddressGenerationFailure"
        {
            return ErrorKind::ResourceExhausted;
        }
        match status {
            400 | 415 => ErrorKind::InvalidArgument,
            401 => ErrorKind::Unauthenticated,
            403 => ErrorKind::PermissionDenied,
            404 => ErrorKind::NotFound,
            // The class asks for what the network refuses (address pairs without port security).
            409 if self.name.contains("PortSecurity") => ErrorKind::FailedPrecondition,
            // A conflict with a resource's state (a port still in use, a volume still attached) passes.
            408 | 409 | 412 => ErrorKind::Unavailable,
            // The microversion is not served (a Nova older than Stein).
            406 => ErrorKind::FailedPrecondition,
            s if s >= 500 => ErrorKind::Unavailable,
            _ => ErrorKind::Internal,
        }
    }

    /// The classified driver error for `what` (`compute servers.create`).
    pub(crate) fn driver_error(&self, what: &str) -> DriverError {
        let kind = self.kind();
        let reason = match (self.name.is_empty(), self.http_status) {
            (false, _) => self.name.clone(),
            (true, Some(s)) => machine_driver_api::reasons::http_status(s),
            (true, None) => machine_driver_api::reasons::TRANSPORT.to_string(),
        };
        let message = cloud_failure_message(what, &reason, self.http_status, &self.message);
        let err = DriverError::new(kind, reason, message);
        if kind == ErrorKind::Unavailable { err.with_retry_after(self.retry_after.unwrap_or(RETRY_SOON)) } else { err }
    }
}

impl std::fmt::Display for OsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({:?})", self.name, self.http_status)
    }
}

impl CloudFailure for OsFailure {
    fn is_throttled(&self) -> bool {
        self.is_throttling()
    }

    fn into_driver_error(self, call: CloudCall) -> DriverError {
        self.driver_error(&call.to_string())
    }
}

/// (name, message, retryAfter) of an error body in any service's style.
fn parse_body(body: &[u8]) -> (String, String, Option<u64>) {
    if let Ok(serde_json::Value::Object(top)) = serde_json::from_slice::<serde_json::Value>(body) {
        let text = |v: Option<&serde_json::Value>| v.and_then(|v| v.as_str()).unwrap_or_default().to_string();
        // Neutron: {"NeutronError": {"type", "message"}}; Keystone: {"error": {"title", "message"}}.
        if let Some(e) = top.get("NeutronError") {
            return (text(e.get("type")), text(e.get("message")), None);
        }
        if let Some(e) = top.get("error").filter(|e| e.is_object()) {
            let title = text(e.get("title"));
            return (title, text(e.get("message")), None);
        }
        // Nova and Cinder: one key naming the error.
        if let Some((name, e)) = top.iter().find(|(_, v)| v.is_object()) {
            let retry = e.get("retryAfter").and_then(|r| r.as_str().and_then(|s| s.parse().ok()).or(r.as_u64()));
            return (name.clone(), text(e.get("message")), retry);
        }
        // Glance's JSON form: {"code", "title", "message"}.
        return (text(top.get("title")), text(top.get("message")), None);
    }
    // Glance (webob): "404 Not Found\n\n<message>\n\n   ".
    let text = String::from_utf8_lossy(body);
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default();
    let name = first.split_once(' ').map(|(_, n)| n.to_string()).unwrap_or_default();
    let message: Vec<&str> = lines.collect();
    if message.is_empty() { (String::new(), first.to_string(), None) } else { (name, message.join(" "), None) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(status: u16, body: &str) -> ErrorKind {
        OsFailure::from_answer(status, None, body.as_bytes()).kind()
    }

    #[test]
    fn every_service_style_is_read() {
        let nova = OsFailure::from_answer(
            404,
            None,
            br#"{"itemNotFound":{"code":404,"message":"Instance x could not be found."}}"#,
        );
        assert_eq!((nova.name.as_str(), nova.message.as_str()), ("itemNotFound", "Instance x could not be found."));
        let neutron = OsFailure::from_answer(
            404,
            None,
            br#"{"NeutronError":{"type":"PortNotFound","message":"Port p could not be found.","detail":""}}"#,
        );
        assert_eq!(neutron.name, "PortNotFound");
        let keystone = OsFailure::from_answer(
            401,
            None,
            br#"{"error":{"code":401,"title":"Unauthorized","message":"The request you have made requires authentication."}}"#,
        );
        assert_eq!(keystone.name, "Unauthorized");
        let glance = OsFailure::from_answer(404, None, b"404 Not Found\n\nNo image found with ID i\n\n   ");
        assert_eq!((glance.name.as_str(), glance.message.as_str()), ("Not Found", "No image found with ID i"));
        let limited =
            OsFailure::from_answer(429, None, br#"{"overLimit":{"code":429,"message":"x","retryAfter":"7"}}"#);
        assert_eq!(limited.retry_after, Some(Duration::from_secs(7)));
        assert_eq!(OsFailure::from_answer(429, Some("2"), b"").retry_after, Some(Duration::from_secs(2)));
    }

    #[test]
    fn kinds_are_the_ones_mcm_expects() {
        assert_eq!(kind(429, ""), ErrorKind::Unavailable);
        assert_eq!(kind(413, r#"{"overLimit":{"code":413,"message":"Over limit"}}"#), ErrorKind::Unavailable);
        assert_eq!(
            kind(413, r#"{"overLimit":{"code":413,"message":"VolumeSizeExceedsAvailableQuota: quota"}}"#),
            ErrorKind::ResourceExhausted
        );
        assert_eq!(
            kind(403, r#"{"forbidden":{"code":403,"message":"Quota exceeded for cores: Requested 4"}}"#),
            ErrorKind::ResourceExhausted
        );
        assert_eq!(
            kind(403, r#"{"forbidden":{"code":403,"message":"Policy doesn't allow x"}}"#),
            ErrorKind::PermissionDenied
        );
        assert_eq!(
            kind(500, r#"{"computeFault":{"code":500,"message":"No valid host was found. "}}"#),
            ErrorKind::ResourceExhausted
        );
        assert_eq!(kind(503, ""), ErrorKind::Unavailable);
        assert_eq!(kind(500, ""), ErrorKind::Unavailable);
        assert_eq!(
            kind(400, r#"{"badRequest":{"code":400,"message":"Invalid key_name provided."}}"#),
            ErrorKind::InvalidArgument
        );
        assert_eq!(kind(401, ""), ErrorKind::Unauthenticated);
        assert_eq!(kind(404, ""), ErrorKind::NotFound);
        assert_eq!(kind(409, ""), ErrorKind::Unavailable);
        let neutron = |t: &str, m: &str| {
            OsFailure::from_answer(
                409,
                None,
                format!(r#"{{"NeutronError":{{"type":"{t}","message":"{m}","detail":""}}}}"#).as_bytes(),
            )
            .kind()
        };
        assert_eq!(neutron("OverQuota", "Quota exceeded for resources: ['port']."), ErrorKind::ResourceExhausted);
        assert_eq!(
            neutron("IpAddressGenerationFailure", "No more IP addresses available on network x."),
            ErrorKind::ResourceExhausted
        );
        assert_eq!(
            neutron("AddressPairAndPortSecurityRequired", "Port Security must be enabled"),
            ErrorKind::FailedPrecondition
        );
        assert_eq!(kind(406, ""), ErrorKind::FailedPrecondition);
        assert!(OsFailure::from_answer(429, None, b"").is_throttled());
        assert!(!OsFailure::from_answer(403, None, b"").is_throttled());
        assert_eq!(OsFailure::transport("reset").kind(), ErrorKind::Unavailable);
        assert_eq!(OsFailure::setup("NoEndpoint", "x").kind(), ErrorKind::FailedPrecondition);
        let e = OsFailure::from_answer(429, Some("3"), b"").driver_error("compute servers.create");
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
    }
}
