//! The Compute Engine error body and the constructors for every error the fake
//! answers with:
//! `{"error": {"code": 404, "message": "...", "errors": [{"message": "...", "domain": "global", "reason": "notFound"}]}}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// One Compute Engine API error: HTTP status, `reason` and human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GceError {
    /// HTTP status code of the answer.
    pub(crate) status: StatusCode,
    /// The `errors[].reason` word (`notFound`, `alreadyExists`, `invalid`, ...).
    pub(crate) reason: &'static str,
    /// The human message; never carries credentials or user data.
    pub(crate) message: String,
}

impl GceError {
    fn new(status: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        Self { status, reason, message: message.into() }
    }

    /// 404 `notFound` for a resource path such as `projects/p/zones/z/instances/x`.
    pub(crate) fn not_found(resource: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, "notFound", format!("The resource '{resource}' was not found"))
    }

    /// 409 `alreadyExists` for a resource path.
    pub(crate) fn already_exists(resource: &str) -> Self {
        Self::new(StatusCode::CONFLICT, "alreadyExists", format!("The resource '{resource}' already exists"))
    }

    /// 400 `invalid`: `Invalid value for field 'FIELD': 'VALUE'. DETAIL`.
    pub(crate) fn invalid_field(field: &str, value: &str, detail: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid",
            format!("Invalid value for field '{field}': '{value}'. {detail}").trim_end().to_string(),
        )
    }

    /// 400 `invalid` for a machine type the zone does not offer, as
    /// `instances.insert` answers it at once: `Invalid value for field
    /// 'resource.machineType': 'zones/Z/machineTypes/T'. Machine type with name
    /// 'T' does not exist in zone 'Z'.` (`machine_type` as the request gave it).
    pub(crate) fn not_offered_in_zone(machine_type: &str, zone: &str) -> Self {
        let name = machine_type.rsplit('/').next().unwrap_or_default();
        Self::invalid_field(
            "resource.machineType",
            machine_type,
            &format!("Machine type with name '{name}' does not exist in zone '{zone}'."),
        )
    }

    /// 400 `resourceNotReady`: the resource is in a state the call cannot act
    /// on (starting an instance that is being deleted).
    pub(crate) fn not_ready(resource: &str) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "resourceNotReady", format!("The resource '{resource}' is not ready"))
    }

    /// 400 `invalid` with a free message.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid", message)
    }

    /// 400 `required`: `Required field 'FIELD' not specified`.
    pub(crate) fn required(field: &str) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "required", format!("Required field '{field}' not specified"))
    }

    /// 400 `parseError` for a body that is not the expected JSON.
    pub(crate) fn parse_error(detail: &str) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "parseError", format!("Invalid JSON payload received. {detail}"))
    }

    /// 400 `invalidResourceUsage`, as GCE answers deleting a deletion-protected instance.
    pub(crate) fn deletion_protected() -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalidResourceUsage",
            "Invalid resource usage: 'Resource cannot be deleted if it's protected against deletion.'.",
        )
    }

    /// 403 `forbidden`: `Required 'PERMISSION' permission for 'RESOURCE'`.
    pub(crate) fn permission_denied(permission: &str, resource: &str) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", format!("Required '{permission}' permission for '{resource}'"))
    }

    /// 412 `conditionNotMet`: a stale IAM policy etag.
    pub(crate) fn stale_etag() -> Self {
        Self::new(
            StatusCode::PRECONDITION_FAILED,
            "conditionNotMet",
            "There were concurrent policy changes. Please retry the whole read-modify-write with exponential backoff.",
        )
    }

    /// 412 `conditionNotMet`: the fingerprint a `setLabels`/`setTags` sent
    /// is not the resource's current one (or none was sent). GCE answers
    /// `{"code": 412, "message": "Labels fingerprint either invalid or
    /// resource labels have changed", "errors": [{"reason":
    /// "conditionNotMet", "location": "If-Match"}]}` for labels
    /// (googleapis/google-cloud-go issue 7802 shows the body) and "Supplied
    /// fingerprint does not match current fingerprint." for tags.
    pub(crate) fn fingerprint_mismatch(message: &str) -> Self {
        Self::new(StatusCode::PRECONDITION_FAILED, "conditionNotMet", message)
    }

    /// 429 `rateLimitExceeded`, GCE's throttling answer.
    pub(crate) fn rate_limited() -> Self {
        Self::new(StatusCode::TOO_MANY_REQUESTS, "rateLimitExceeded", "Rate Limit Exceeded")
    }

    /// 403 `quotaExceeded`: the project's CPU quota would be exceeded.
    pub(crate) fn quota_exceeded() -> Self {
        Self::new(StatusCode::FORBIDDEN, "quotaExceeded", "Quota 'CPUS_ALL_REGIONS' exceeded.  Limit: 32.0 globally.")
    }

    /// 503 `backendError`.
    pub(crate) fn backend_error() -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "backendError", "The service is currently unavailable.")
    }

    /// 500 `internalError`.
    pub(crate) fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internalError",
            "Internal error. Please try again or contact Google Support.",
        )
    }

    /// 401 `authError`.
    pub(crate) fn unauthenticated() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "authError",
            "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
        )
    }

    /// 403 `forbidden` for an injected permission fault.
    pub(crate) fn forbidden(operation: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("The caller does not have permission to call {operation}"),
        )
    }

    /// The JSON body GCE sends with this error.
    pub(crate) fn body(&self) -> serde_json::Value {
        json!({
            "error": {
                "code": self.status.as_u16(),
                "message": self.message,
                "errors": [{
                    "message": self.message,
                    "domain": if self.reason == "rateLimitExceeded" { "usageLimits" } else { "global" },
                    "reason": self.reason,
                }],
            }
        })
    }
}

impl IntoResponse for GceError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_body_has_gce_shape() {
        let body = GceError::not_found("projects/p/zones/z/instances/x").body();
        assert_eq!(body["error"]["code"], 404);
        assert_eq!(body["error"]["message"], "The resource 'projects/p/zones/z/instances/x' was not found");
        assert_eq!(body["error"]["errors"][0]["reason"], "notFound");
        assert_eq!(body["error"]["errors"][0]["domain"], "global");
    }
}
