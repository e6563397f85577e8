//! The AAD v2 token endpoint: `POST /{tenant}/oauth2/v2.0/token` (client credentials with a
//! client secret or a federated `client_assertion`). Token requests are not ARM calls: they
//! bypass the admin call gate and are counted separately (`GET /_admin/azure/tokens`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Form, Json, Router};
use serde_json::json;

use crate::state::{Store, Token};
use crate::wire::timestamp;
use crate::{
    CLIENT_ID, CLIENT_SECRET, FEDERATED_TOKEN, OWNER_CLIENT_ID, OWNER_CLIENT_SECRET, OWNER_SUBSCRIPTION_ID,
    SUBSCRIPTION_ID, TENANT_ID,
};

/// The scope ARM tokens must be requested for.
const ARM_SCOPE: &str = "https://management.azure.com/.default";
const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// The token route.
pub(crate) fn routes(store: Arc<Store>) -> Router {
    Router::new().route("/{tenant}/oauth2/v2.0/token", post(token)).with_state(store)
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
    if get("scope") != ARM_SCOPE {
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
