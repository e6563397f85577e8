//! ARM's error body and the constructors for every error the fake answers with:
//! `{"error": {"code": "ResourceNotFound", "message": "...", "details": []}}`
//! (plus `target` where ARM sets it).

use axum::Json;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::TENANT_ID;

/// One ARM error: HTTP status, `code`, message, optional `target` and extra headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ArmError {
    /// HTTP status code of the answer.
    pub(crate) status: StatusCode,
    /// ARM's error code (`ResourceNotFound`, `InvalidParameter`, ...).
    pub(crate) code: String,
    /// The human message.
    pub(crate) message: String,
    /// The request field the error is about (`vmSize`, `customData`, ...).
    pub(crate) target: Option<String>,
    /// Extra response headers (`Retry-After`, `WWW-Authenticate`).
    pub(crate) headers: Vec<(HeaderName, String)>,
}

impl ArmError {
    /// An error with status, code and message.
    pub(crate) fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self { status, code: code.to_owned(), message: message.into(), target: None, headers: Vec::new() }
    }

    /// Sets `target`.
    pub(crate) fn with_target(mut self, target: &str) -> Self {
        self.target = Some(target.to_owned());
        self
    }

    fn with_header(mut self, name: HeaderName, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// 400 `MissingApiVersionParameter`.
    pub(crate) fn missing_api_version() -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        )
    }

    /// 401 `InvalidAuthenticationToken` with ARM's `WWW-Authenticate` challenge.
    pub(crate) fn invalid_token(detail: &str) -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "InvalidAuthenticationToken",
            format!("The access token is invalid. {detail}").trim_end().to_owned(),
        )
        .with_challenge("invalid_token", detail)
    }

    /// 401 `ExpiredAuthenticationToken`.
    pub(crate) fn expired_token(expired_at: &str, now: &str) -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "ExpiredAuthenticationToken",
            format!("The access token expiry UTC time '{expired_at}' is earlier than current UTC time '{now}'."),
        )
        .with_challenge("invalid_token", "The access token has expired.")
    }

    fn with_challenge(self, error: &str, description: &str) -> Self {
        self.with_header(
            header::WWW_AUTHENTICATE,
            format!(
                "Bearer authorization_uri=\"https://login.windows.net/{TENANT_ID}\", error=\"{error}\", error_description=\"{}\"",
                description.replace('"', "'")
            ),
        )
    }

    /// 403 `AuthorizationFailed` for `action` on `scope`.
    pub(crate) fn authorization_failed(client_id: &str, action: &str, scope: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "AuthorizationFailed",
            format!(
                "The client '{client_id}' with object id '{client_id}' does not have authorization to perform action \
                 '{action}' over scope '{scope}' or the scope is invalid. If access was recently granted, please refresh your credentials."
            ),
        )
    }

    /// 403 `LinkedAuthorizationFailed`: a referenced resource in a scope the caller may not read.
    pub(crate) fn linked_authorization_failed(client_id: &str, action: &str, scope: &str, linked: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "LinkedAuthorizationFailed",
            format!(
                "The client '{client_id}' with object id '{client_id}' has permission to perform action '{action}' on scope \
                 '{scope}'; however, it does not have permission to perform action(s) \
                 'Microsoft.Compute/galleries/images/versions/read' on the linked scope(s) '{linked}' (respectively) or the linked scope(s) are invalid."
            ),
        )
    }

    /// 404 `ResourceNotFound` for `Namespace/type/name` under a resource group.
    pub(crate) fn resource_not_found(typed_name: &str, rg: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "ResourceNotFound",
            format!(
                "The Resource '{typed_name}' under resource group '{rg}' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix"
            ),
        )
    }

    /// 404 `ResourceGroupNotFound`.
    pub(crate) fn resource_group_not_found(rg: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, "ResourceGroupNotFound", format!("Resource group '{rg}' could not be found."))
    }

    /// 404 `NotFound`, as the network resource provider words a missing subnet.
    pub(crate) fn network_not_found(typed_name: &str, rg: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("Resource '{typed_name}' under resource group '{rg}' was not found."),
        )
    }

    /// 404 `InvalidResourceType` for an unknown type in a namespace.
    pub(crate) fn invalid_resource_type(resource_type: &str, namespace: &str, api_version: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "InvalidResourceType",
            format!(
                "The resource type '{resource_type}' could not be found in the namespace '{namespace}' for api version '{api_version}'."
            ),
        )
    }

    /// 404 `InvalidResourceNamespace`.
    pub(crate) fn invalid_namespace(namespace: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "InvalidResourceNamespace",
            format!("The resource namespace '{namespace}' is invalid."),
        )
    }

    /// 405 for a method the resource does not support.
    pub(crate) fn method_not_allowed(method: &str) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "HttpMethodNotAllowed",
            format!("The HTTP method '{method}' is not supported for this resource."),
        )
    }

    /// 400 `InvalidParameter` with a target.
    pub(crate) fn invalid_parameter(message: impl Into<String>, target: &str) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "InvalidParameter", message).with_target(target)
    }

    /// 400 `InvalidParameter`: `Required parameter 'x' is missing (null).`
    pub(crate) fn required(parameter: &str) -> Self {
        Self::invalid_parameter(format!("Required parameter '{parameter}' is missing (null)."), parameter)
    }

    /// 400 `InvalidRequestContent` for a body that is not the expected JSON.
    pub(crate) fn invalid_content(detail: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "InvalidRequestContent",
            format!("The request content was invalid and could not be deserialized: '{detail}'."),
        )
    }

    /// 400 `InvalidResourceReference`: a referenced resource does not exist.
    pub(crate) fn invalid_reference(referenced: &str, by: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "InvalidResourceReference",
            format!(
                "Resource {referenced} referenced by resource {by} was not found. Please make sure that the referenced resource exists, and that both resources are in the same region."
            ),
        )
    }

    /// 400 `NicInUse`: the NIC is attached to a VM.
    pub(crate) fn nic_in_use(nic: &str, vm: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "NicInUse",
            format!(
                "Network Interface {nic} is used by existing resource {vm}. In order to delete the network interface, it must be dissociated from the resource. To learn more, see aka.ms/deletenic."
            ),
        )
    }

    /// 400 `NicReservedForAnotherVm`: the NIC is reserved after a failed or deleted VM.
    pub(crate) fn nic_reserved(vm: &str, seconds: u64) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "NicReservedForAnotherVm",
            format!(
                "Nic(s) in request is reserved for another Virtual Machine for {seconds} seconds. Please provide another nic(s) or retry after {seconds} seconds. Reserved VM: {vm}"
            ),
        )
    }

    /// 409 `OperationNotAllowed` with a message.
    pub(crate) fn operation_not_allowed(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "OperationNotAllowed", message)
    }

    /// 409 `PropertyChangeNotAllowed`.
    pub(crate) fn property_change_not_allowed(property: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "PropertyChangeNotAllowed",
            format!("Changing property '{property}' is not allowed."),
        )
        .with_target(property)
    }

    /// 412 `PreconditionFailed`: a PUT with `If-None-Match: *` of a resource that exists.
    /// (The status is HTTP's; the code and message are this fake's, not read from Azure.)
    pub(crate) fn precondition_failed(resource_id: &str) -> Self {
        Self::new(
            StatusCode::PRECONDITION_FAILED,
            "PreconditionFailed",
            format!("The resource {resource_id} already exists and the request carries If-None-Match: *."),
        )
    }

    /// 409 `AnotherOperationInProgress`: the resource (or a dependent) is being changed.
    pub(crate) fn another_operation_in_progress(resource_id: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "AnotherOperationInProgress",
            format!(
                "Another operation on this or dependent resource is in progress. To retrieve status of the operation use uri: {resource_id}"
            ),
        )
    }

    /// 429 `TooManyRequests` with `Retry-After: 1`.
    pub(crate) fn throttled() -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyRequests",
            "The request is being throttled as the limit has been reached for operation type - Write_ObservationWindow_00:01:00. For more information, see - https://aka.ms/throttling",
        )
        .with_header(header::RETRY_AFTER, "1")
    }

    /// 409 `OperationNotAllowed`: the cores quota would be exceeded.
    pub(crate) fn quota_exceeded() -> Self {
        Self::operation_not_allowed(
            "Operation could not be completed as it results in exceeding approved standardDSv3Family Cores quota. \
             Additional details - Deployment Model: Resource Manager, Location: westeurope, Current Limit: 10, Current Usage: 10, \
             Additional Required: 2, (Minimum) New Limit Required: 12. Submit a request for Quota increase at \
             https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/UsageAndQuota.ReactView by specifying parameters listed \
             in the 'Details' section for deployment to succeed. Please read more about quota limits at \
             https://docs.microsoft.com/en-us/azure/azure-supportability/per-vm-quota-requests",
        )
    }

    /// 409 `SkuNotAvailable`: the size (or a feature it asks for) is not offered in
    /// the location or zone, with Compute's message (e.g. Azure-Samples/azuresandbox#70:
    /// "unexpected status 409 (409 Conflict) with error: SkuNotAvailable: The requested VM
    /// size for resource 'Following SKUs have failed for Capacity Restrictions: ...'").
    pub(crate) fn sku_not_available(location: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "SkuNotAvailable",
            format!(
                "The requested VM size for resource 'Following SKUs have failed for Capacity Restrictions' is currently \
                 not available in location '{location}'. Please try another size or deploy to a different location or \
                 different zone. See https://aka.ms/azureskunotavailable for details."
            ),
        )
    }

    /// 400 `MissingIdentityIds`: a `UserAssigned` identity without ids (ARM's check of every
    /// resource's identity; hashicorp/terraform-provider-azurerm#17082).
    pub(crate) fn missing_identity_ids() -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "MissingIdentityIds",
            "The identity ids must not be null or empty for 'UserAssigned' identity type.",
        )
    }

    /// 400 `InvalidIdentityId`: an identity id that is not a user-assigned identity's ARM id
    /// (as `VirtualMachinesClient#CreateOrUpdate` gets it: Azure/aad-pod-identity#230,
    /// MicrosoftDocs/azure-docs#48229).
    pub(crate) fn invalid_identity_ids(ids: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "InvalidIdentityId",
            format!(
                "The identity ids '{ids}' are invalid. It must be of the following format: \
                 '/subscriptions/{{subscriptionId}}/resourceGroups/{{resourceGroupName}}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{{resourceName}}'."
            ),
        )
    }

    /// 400 `ResourcePurchaseValidationFailed`: a VM of a marketplace image whose plan's terms
    /// the subscription has not accepted (the VM PUT's synchronous answer:
    /// PaloAltoNetworks/terraform-templates#14; the message as nforgeio/neonKUBE#1673 got it).
    pub(crate) fn terms_not_accepted(sub: &str, publisher: &str, offer: &str, sku: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "ResourcePurchaseValidationFailed",
            format!(
                "User failed validation to purchase resources. Error message: 'You have not accepted the legal terms on \
                 this subscription: '{sub}' for this plan. Before the subscription can be used, you need to accept the \
                 legal terms of the image. To read and accept legal terms, use the Azure CLI commands described at \
                 https://go.microsoft.com/fwlink/?linkid=2110637 or the PowerShell commands available at \
                 https://go.microsoft.com/fwlink/?linkid=862451. Alternatively, deploying via the Azure portal provides a \
                 UI experience for reading and accepting the legal terms. Offer details: publisher='{publisher}' offer = \
                 '{offer}', sku = '{sku}', Correlation Id: '{}'.'",
                uuid::Uuid::new_v4()
            ),
        )
    }

    /// 503 `ServiceUnavailable`.
    pub(crate) fn unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "The server is currently unable to handle the request. Please retry your request.",
        )
        .with_header(header::RETRY_AFTER, "1")
    }

    /// 500 `InternalServerError`.
    pub(crate) fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            "Encountered internal server error. Please try again.",
        )
    }

    /// The JSON body ARM sends with this error.
    pub(crate) fn body(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message, "details": []});
        if let Some(target) = &self.target {
            error["target"] = json!(target);
        }
        json!({ "error": error })
    }
}

impl IntoResponse for ArmError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        for (name, value) in &self.headers {
            if let Ok(value) = HeaderValue::from_str(value) {
                response.headers_mut().insert(name.clone(), value);
            }
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_has_arm_shape() {
        let body = ArmError::invalid_parameter("bad size", "vmSize").body();
        assert_eq!(body["error"]["code"], "InvalidParameter");
        assert_eq!(body["error"]["target"], "vmSize");
        assert_eq!(body["error"]["details"], json!([]));
        let throttled = ArmError::throttled().into_response();
        assert_eq!(throttled.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(throttled.headers().get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()), Some("1"));
    }
}
