//! ECS's error body and the constructors for every error the fake answers with:
//! `{"RequestId", "HostId", "Code", "Message", "Recommend"}` with ECS's HTTP status.

use axum::Json;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::wire::request_id;

/// `HostId` of ECS answers.
pub(crate) fn ecs_host() -> String {
    format!("ecs.{}.aliyuncs.com", crate::REGION)
}

/// `HostId` of STS answers.
pub(crate) const STS_HOST: &str = "sts.aliyuncs.com";

/// One ECS (or STS) error: HTTP status, `Code` and `Message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EcsError {
    /// HTTP status code of the answer.
    pub(crate) status: StatusCode,
    /// ECS's error code (`InvalidInstanceId.NotFound`, ...).
    pub(crate) code: String,
    /// The human message.
    pub(crate) message: String,
    /// `HostId` (the endpoint host); ECS's unless set.
    pub(crate) host: Option<String>,
}

impl EcsError {
    /// An error with status, code and message.
    pub(crate) fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self { status, code: code.to_owned(), message: message.into(), host: None }
    }

    /// Sets the `HostId`.
    pub(crate) fn with_host(mut self, host: &str) -> Self {
        self.host = Some(host.to_owned());
        self
    }

    /// 400 `MissingParameter` for a mandatory parameter.
    pub(crate) fn missing(parameter: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "MissingParameter",
            format!(
                "The input parameter \"{parameter}\" that is mandatory for processing this request is not supplied."
            ),
        )
    }

    /// 400 `InvalidParameter` naming the parameter.
    pub(crate) fn invalid_parameter(parameter: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "InvalidParameter",
            format!("The specified parameter \"{parameter}\" is not valid."),
        )
    }

    /// 400 with a code and message.
    pub(crate) fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 403 with a code and message.
    pub(crate) fn forbidden(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, code, message)
    }

    /// 404 with a code and message.
    pub(crate) fn not_found(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    /// 404 `InvalidAccessKeyId.NotFound`.
    pub(crate) fn access_key_not_found() -> Self {
        Self::not_found("InvalidAccessKeyId.NotFound", "Specified access key is not found.")
    }

    /// 400 `SignatureDoesNotMatch` with the server's string to sign (never the secret).
    pub(crate) fn signature_mismatch(detail: &str) -> Self {
        Self::bad_request(
            "SignatureDoesNotMatch",
            format!("Specified signature is not matched with our calculation. {detail}"),
        )
    }

    /// 400 `IncompleteSignature`.
    pub(crate) fn incomplete_signature(detail: &str) -> Self {
        Self::bad_request(
            "IncompleteSignature",
            format!("The request signature does not conform to Aliyun standards. {detail}").trim_end().to_owned(),
        )
    }

    /// 400 `SignatureNonceUsed`.
    pub(crate) fn nonce_used() -> Self {
        Self::bad_request("SignatureNonceUsed", "Specified signature nonce was used already.")
    }

    /// 400 `InvalidTimeStamp.Expired`.
    pub(crate) fn timestamp_expired(sent: &str, now: &str) -> Self {
        Self::bad_request(
            "InvalidTimeStamp.Expired",
            format!(
                "Specified time stamp or date value is expired. The request time {sent} is more than 15 minutes away from the server time {now}."
            ),
        )
    }

    /// 400 `InvalidTimeStamp.Format`.
    pub(crate) fn timestamp_format() -> Self {
        Self::bad_request("InvalidTimeStamp.Format", "Specified time stamp or date value is not well formatted.")
    }

    /// 404 `InvalidAction.NotFound`.
    pub(crate) fn action_not_found(action: &str) -> Self {
        Self::not_found(
            "InvalidAction.NotFound",
            format!("Specified api is not found, please check your url and method. (action: {action})"),
        )
    }

    /// 400 `InvalidVersion`.
    pub(crate) fn invalid_version(version: &str) -> Self {
        Self::bad_request("InvalidVersion", format!("Specified parameter Version is not valid. (version: {version})"))
    }

    /// 404 `InvalidRegionId.NotFound`.
    pub(crate) fn region_not_found() -> Self {
        Self::not_found("InvalidRegionId.NotFound", "The specified RegionId does not exist.")
    }

    /// 404 `InvalidInstanceId.NotFound`.
    pub(crate) fn instance_not_found() -> Self {
        Self::not_found("InvalidInstanceId.NotFound", "The specified InstanceId does not exist.")
    }

    /// 403 `IncorrectInstanceStatus`.
    pub(crate) fn incorrect_instance_status() -> Self {
        Self::forbidden(
            "IncorrectInstanceStatus",
            "The current status of the resource does not support this operation.",
        )
    }

    /// 404 `InvalidImageId.NotFound`.
    pub(crate) fn image_not_found() -> Self {
        Self::not_found("InvalidImageId.NotFound", "The specified ImageId does not exist.")
    }

    /// 400 `IdempotentParameterMismatch`.
    pub(crate) fn idempotent_mismatch() -> Self {
        Self::bad_request(
            "IdempotentParameterMismatch",
            "Request uses a client token in a previous request but is not identical to that request.",
        )
    }

    /// 400 `Throttling.User`.
    pub(crate) fn throttled() -> Self {
        Self::bad_request("Throttling.User", "Request was denied due to user flow control.")
    }

    /// 403 `OperationDenied.NoStock`.
    pub(crate) fn no_stock() -> Self {
        Self::forbidden(
            "OperationDenied.NoStock",
            "The requested resource is sold out in the specified zone; try other types of resources or other regions and zones.",
        )
    }

    /// 403 `Zone.NotOnSale` (ECS API reference, RunInstances error codes): the
    /// zone sells the requested resource no longer, the "cannot place it here" of ECS.
    pub(crate) fn zone_not_on_sale() -> Self {
        Self::forbidden(
            "Zone.NotOnSale",
            "The resource in the specified zone is no longer available for sale. Please try other regions and zones.",
        )
    }

    /// 503 `ServiceUnavailable`.
    pub(crate) fn unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "The request has failed due to a temporary failure of the server.",
        )
    }

    /// 500 `InternalError`.
    pub(crate) fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            "The request processing has failed due to some unknown error, exception or failure.",
        )
    }

    /// 403 `Forbidden.RAM`.
    pub(crate) fn forbidden_ram() -> Self {
        Self::forbidden(
            "Forbidden.RAM",
            "User not authorized to operate on the specified resource, or this API doesn't support RAM.",
        )
    }

    /// The JSON body ECS sends with this error, with request id `id`.
    pub(crate) fn body(&self, id: &str) -> Value {
        let host = self.host.clone().unwrap_or_else(ecs_host);
        let product = if host == STS_HOST { "Sts" } else { "Ecs" };
        json!({
            "RequestId": id,
            "HostId": host,
            "Code": self.code,
            "Message": self.message,
            "Recommend": format!("https://api.aliyun.com/troubleshoot?q={}&product={product}&requestId={id}", self.code),
        })
    }
}

impl IntoResponse for EcsError {
    fn into_response(self) -> Response {
        let id = request_id();
        let mut response = (self.status, Json(self.body(&id))).into_response();
        if let Ok(value) = HeaderValue::from_str(&id) {
            response.headers_mut().insert("x-acs-request-id", value);
        }
        response
    }
}

/// A 200 answer: `body` (an object) plus `RequestId`, and the `x-acs-request-id` header.
pub(crate) fn ok(mut body: Value) -> Response {
    let id = request_id();
    if let Some(map) = body.as_object_mut() {
        map.insert("RequestId".to_owned(), json!(id));
    }
    let mut response = (StatusCode::OK, Json(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-acs-request-id", value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_has_ecs_shape() {
        let body = EcsError::instance_not_found().body("ABC");
        assert_eq!(body["Code"], "InvalidInstanceId.NotFound");
        assert_eq!(body["Message"], "The specified InstanceId does not exist.");
        assert_eq!(body["HostId"], "ecs.eu-central-1.aliyuncs.com");
        assert_eq!(body["RequestId"], "ABC");
        assert_eq!(
            body["Recommend"],
            "https://api.aliyun.com/troubleshoot?q=InvalidInstanceId.NotFound&product=Ecs&requestId=ABC"
        );
        let sts = EcsError::throttled().with_host(STS_HOST).body("X");
        assert_eq!(sts["HostId"], "sts.aliyuncs.com");
        assert!(sts["Recommend"].as_str().unwrap_or("").contains("product=Sts"));
        assert_eq!(EcsError::throttled().into_response().status(), StatusCode::BAD_REQUEST);
    }
}
