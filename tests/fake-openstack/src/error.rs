//! The services' real error answers: Keystone and keystonemiddleware (`{"error": ...}`),
//! Nova and Cinder (`{"<fault name>": {"code", "message"}}`), Neutron
//! (`{"NeutronError": {"type", "message", "detail"}}`) and Glance (webob plain text).

use axum::Json;
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The message of every 401.
pub(crate) const UNAUTHORIZED_MESSAGE: &str = "The request you have made requires authentication.";

/// Which service answers (decides the error body style).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Service {
    /// Keystone identity v3.
    Keystone,
    /// Nova compute v2.1.
    Nova,
    /// Neutron networking v2.0.
    Neutron,
    /// Glance images v2.
    Glance,
    /// Cinder block storage v3.
    Cinder,
}

/// One error answer of one service.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    /// The answering service.
    pub(crate) service: Service,
    /// HTTP status.
    pub(crate) status: StatusCode,
    /// Neutron's `type` (ignored by the other services).
    pub(crate) kind: &'static str,
    /// The human readable message.
    pub(crate) message: String,
    /// `WWW-Authenticate: Keystone uri=...` value for 401s (the identity URL).
    pub(crate) identity_uri: Option<String>,
}

impl ApiError {
    /// An error of `service` with `status` and `message`.
    pub(crate) fn new(service: Service, status: StatusCode, message: impl Into<String>) -> Self {
        Self { service, status, kind: "", message: message.into(), identity_uri: None }
    }

    /// A Neutron error with its `type`.
    pub(crate) fn neutron(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Self { kind, ..Self::new(Service::Neutron, status, message) }
    }

    /// 400 of `service`.
    pub(crate) fn bad_request(service: Service, message: impl Into<String>) -> Self {
        let mut error = Self::new(service, StatusCode::BAD_REQUEST, message);
        error.kind = "HTTPBadRequest";
        error
    }

    /// 403 of `service`.
    pub(crate) fn forbidden(service: Service, message: impl Into<String>) -> Self {
        let mut error = Self::new(service, StatusCode::FORBIDDEN, message);
        error.kind = "HTTPForbidden";
        error
    }

    /// 404 of `service`.
    pub(crate) fn not_found(service: Service, message: impl Into<String>) -> Self {
        let mut error = Self::new(service, StatusCode::NOT_FOUND, message);
        error.kind = "HTTPNotFound";
        error
    }

    /// 409 of `service`.
    pub(crate) fn conflict(service: Service, message: impl Into<String>) -> Self {
        let mut error = Self::new(service, StatusCode::CONFLICT, message);
        error.kind = "HTTPConflict";
        error
    }

    /// The 401 keystonemiddleware (or Keystone) answers, with `WWW-Authenticate`.
    pub(crate) fn unauthorized(service: Service, identity_uri: &str) -> Self {
        Self {
            identity_uri: Some(identity_uri.to_owned()),
            ..Self::new(service, StatusCode::UNAUTHORIZED, UNAUTHORIZED_MESSAGE)
        }
    }

    /// A 404 for a path the service does not serve.
    pub(crate) fn no_route(service: Service) -> Self {
        Self::not_found(service, "The resource could not be found.")
    }

    /// 405 for a known path with an unsupported method.
    pub(crate) fn method_not_allowed(service: Service) -> Self {
        let mut error =
            Self::new(service, StatusCode::METHOD_NOT_ALLOWED, "The method is not allowed for the requested URL.");
        error.kind = "HTTPMethodNotAllowed";
        error
    }

    fn keystone_title(&self) -> &'static str {
        match self.status.as_u16() {
            400 => "Bad Request",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "Not Found",
            409 => "Conflict",
            429 => "Too Many Requests",
            503 => "Service Unavailable",
            _ => "Internal Server Error",
        }
    }

    /// Nova's and Cinder's fault wrapper names by status.
    fn fault_name(&self) -> &'static str {
        match (self.service, self.status.as_u16()) {
            (_, 400) => "badRequest",
            (_, 401) => "unauthorized",
            (_, 403) => "forbidden",
            (_, 404) => "itemNotFound",
            (_, 405) => "badMethod",
            (_, 406) => "notAcceptable",
            (_, 409) => "conflictingRequest",
            (_, 413 | 429) => "overLimit",
            (_, 415) => "badMediaType",
            (_, 503) => "serviceUnavailable",
            _ => "computeFault",
        }
    }

    fn glance_body(&self) -> String {
        let reason = self.status.canonical_reason().unwrap_or("Error");
        format!("{} {reason}\n\n{}\n\n   ", self.status.as_u16(), self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = self.status.as_u16();
        let mut response = if self.status == StatusCode::UNAUTHORIZED || self.service == Service::Keystone {
            let body = json!({"error": {"code": code, "title": self.keystone_title(), "message": self.message}});
            (self.status, Json(body)).into_response()
        } else {
            match self.service {
                Service::Nova | Service::Cinder | Service::Keystone => {
                    let mut fault = json!({"code": code, "message": self.message});
                    if code == 429 {
                        fault["retryAfter"] = json!("1");
                    }
                    (self.status, Json(json!({ self.fault_name(): fault }))).into_response()
                }
                Service::Neutron => {
                    let body = json!({"NeutronError": {"type": self.kind, "message": self.message, "detail": ""}});
                    (self.status, Json(body)).into_response()
                }
                Service::Glance => {
                    let mut response = (self.status, self.glance_body()).into_response();
                    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=UTF-8"));
                    response
                }
            }
        };
        if code == 429 {
            response.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if let Some(uri) = &self.identity_uri
            && let Ok(value) = HeaderValue::from_str(&format!("Keystone uri=\"{uri}\""))
        {
            response.headers_mut().insert(WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// Result of a handler.
pub(crate) type ApiResult = Result<Response, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_names_follow_nova() {
        let error = ApiError::conflict(Service::Nova, "x");
        assert_eq!(error.fault_name(), "conflictingRequest");
        let error = ApiError::new(Service::Nova, StatusCode::TOO_MANY_REQUESTS, "x");
        assert_eq!(error.fault_name(), "overLimit");
    }

    #[test]
    fn glance_errors_are_plain_text() {
        let error = ApiError::not_found(Service::Glance, "No image found with ID x");
        assert_eq!(error.glance_body(), "404 Not Found\n\nNo image found with ID x\n\n   ");
    }
}
