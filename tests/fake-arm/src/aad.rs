//! The AAD v2 token endpoint: `POST /{tenant}/oauth2/v2.0/token` (client credentials with a
//! client secret or a federated `client_assertion`), and the tenant's OpenID Connect discovery
//! document `GET /{tenant}/v2.0/.well-known/openid-configuration` that MSAL-based clients
//! (azidentity) read the token endpoint from. Token requests are not ARM calls: they bypass
//! the admin call gate and are counted separately (`GET /_admin/azure/tokens`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use serde_json::json;

use crate::state::{Store, Token};
use crate::wire::{base_url, timestamp};
use crate::{
    CLIENT_ID, CLIENT_SECRET, FEDERATED_TOKEN, OWNER_CLIENT_ID, OWNER_CLIENT_SECRET, OWNER_SUBSCRIPTION_ID,
    SUBSCRIPTION_ID, TENANT_ID,
};

/// The scopes an ARM token may be requested for: `/.default` of the Azure Resource
/// Manager's application ID URIs, with or without the trailing slash of the resource
/// (Entra ID takes both `https://management.azure.com/.default`, which this project's
/// driver sends, and `https://management.core.windows.net//.default`, which azcore's
/// `cloud.AzurePublic` audience gives).
const ARM_SCOPES: [&str; 4] = [
    "https://management.azure.com/.default",
    "https://management.azure.com//.default",
    "https://management.core.windows.net/.default",
    "https://management.core.windows.net//.default",
];
const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// The token route.
pub(crate) fn routes(store: Arc<Store>) -> Router {
    Router::new()
        .route("/{tenant}/oauth2/v2.0/token", post(token))
        .route("/{tenant}/v2.0/.well-known/openid-configuration", get(openid_configuration))
        .with_state(store)
}

/// The scopes Entra ID ignores in a client-credentials request (MSAL adds them to every
/// request; only the one resource scope counts).
const OIDC_SCOPES: [&str; 4] = ["openid", "offline_access", "profile", "email"];

/// Whether `scope` (space-separated) asks for exactly one resource, an ARM one, as a
/// client-credentials request must.
fn arm_scope(scope: &str) -> bool {
    let resources: Vec<&str> = scope.split_whitespace().filter(|s| !OIDC_SCOPES.contains(s)).collect();
    matches!(resources.as_slice(), [one] if ARM_SCOPES.contains(one))
}

/// `GET /{tenant}/v2.0/.well-known/openid-configuration`: Entra's discovery document of the
/// tenant, its endpoints on this listener's authority (`Host`, and `X-Forwarded-Proto` behind
/// a TLS proxy). An unknown tenant is 400 `invalid_tenant` (AADSTS90002).
async fn openid_configuration(Path(tenant): Path<String>, headers: HeaderMap) -> Response {
    if !tenant.eq_ignore_ascii_case(TENANT_ID) {
        return aad_error(
            StatusCode::BAD_REQUEST,
            "invalid_tenant",
            90002,
            &format!(
                "Tenant '{tenant}' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud."
            ),
        );
    }
    let base = base_url(&headers);
    let at = |path: &str| format!("{base}/{TENANT_ID}/{path}");
    Json(json!({
        "token_endpoint": at("oauth2/v2.0/token"),
        "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
        "jwks_uri": at("discovery/v2.0/keys"),
        "response_modes_supported": ["query", "fragment", "form_post"],
        "subject_types_supported": ["pairwise"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
        "scopes_supported": ["openid", "profile", "email", "offline_access"],
        "issuer": at("v2.0"),
        "request_uri_parameter_supported": false,
        "authorization_endpoint": at("oauth2/v2.0/authorize"),
        "device_authorization_endpoint": at("oauth2/v2.0/devicecode"),
        "end_session_endpoint": at("oauth2/v2.0/logout"),
        "http_logout_supported": true,
        "frontchannel_logout_supported": true,
        "tenant_region_scope": "EU",
        "cloud_instance_name": "microsoftonline.com",
    }))
    .into_response()
}

/// `(client id, secret, subscription)` of every seeded identity.
const IDENTITIES: &[(&str, &str, &str)] =
    &[(CLIENT_ID, CLIENT_SECRET, SUBSCRIPTION_ID), (OWNER_CLIENT_ID, OWNER_CLIENT_SECRET, OWNER_SUBSCRIPTION_ID)];

fn aad_error(status: StatusCode, error: &str, code: u32, description: &str) -> Response {
    let trace = uuid::Uuid::new_v4().to_string();
    let correlation = uuid::Uuid::new_v4().to_string();
    let now = SystemTime::now();
    let body = json!({
        "error": error,
        "error_description": format!(
            "AADSTS{code}: {description} Trace ID: {trace} Correlation ID: {correlation} Timestamp: {}",
            timestamp(now)
        ),
        "error_codes": [code],
        "timestamp": timestamp(now),
        "trace_id": trace,
        "correlation_id": correlation,
        "error_uri": format!("https://login.microsoftonline.com/error?code={code}"),
    });
    (status, Json(body)).into_response()
}

async fn token(
    State(store): State<Arc<Store>>,
    Path(tenant): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if !tenant.eq_ignore_ascii_case(TENANT_ID) {
        return aad_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            90002,
            &format!(
                "Tenant '{tenant}' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud."
            ),
        );
    }
    let get = |name: &str| form.get(name).map(String::as_str).unwrap_or("");
    if get("grant_type") != "client_credentials" {
        return aad_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            70003,
            "The app requested an unsupported grant type.",
        );
    }
    let client_id = get("client_id");
    let Some((id, secret, subscription)) = IDENTITIES.iter().find(|(id, _, _)| id.eq_ignore_ascii_case(client_id))
    else {
        return aad_error(
            StatusCode::BAD_REQUEST,
            "unauthorized_client",
            700016,
            &format!(
                "Application with identifier '{client_id}' was not found in the directory '{TENANT_ID}'. This can happen if the application has not been installed by the administrator of the tenant or consented to by any user in the tenant."
            ),
        );
    };
    if !arm_scope(get("scope")) {
        return aad_error(
            StatusCode::BAD_REQUEST,
            "invalid_scope",
            1002012,
            &format!(
                "The provided value for scope {} is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI).",
                get("scope")
            ),
        );
    }
    if let Some(assertion) = form.get("client_assertion") {
        if get("client_assertion_type") != ASSERTION_TYPE {
            return aad_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                50027,
                "JWT token is invalid or malformed (client_assertion_type must be urn:ietf:params:oauth:client-assertion-type:jwt-bearer).",
            );
        }
        if assertion != FEDERATED_TOKEN {
            return aad_error(
                StatusCode::UNAUTHORIZED,
                "invalid_client",
                70021,
                "No matching federated identity record found for presented assertion.",
            );
        }
    } else if get("client_secret") != *secret {
        return aad_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            7000215,
            &format!(
                "Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '{id}'."
            ),
        );
    }
    let access_token = format!("fake-arm.{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    let mut state = store.lock_at(Instant::now());
    let lifetime = state.token_lifetime;
    state.tokens.insert(
        access_token.clone(),
        Token {
            client_id: (*id).to_owned(),
            subscription: (*subscription).to_owned(),
            expires_at: SystemTime::now() + lifetime,
        },
    );
    state.tokens_issued += 1;
    drop(state);
    let seconds = lifetime.as_secs();
    Json(json!({
        "token_type": "Bearer",
        "expires_in": seconds,
        "ext_expires_in": seconds,
        "access_token": access_token,
    }))
    .into_response()
}
