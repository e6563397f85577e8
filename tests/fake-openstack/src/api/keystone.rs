//! Keystone v3 `POST /identity/v3/auth/tokens`: password (user by id or by name and
//! domain) and application credential (by id, or by name and user) authentication,
//! project scope, the token body with its service catalog. Token requests are not
//! counted in `/_admin/calls`; only faults posted for the exact operation
//! `tokens.create` hit them.

use std::time::SystemTime;

use axum::Json;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use fake_cloud_support::Phase;
use serde_json::{Value, json};

use super::{Call, Ctx};
use crate::clock;
use crate::error::{ApiError, Service};
use crate::hooks::fault_error;
use crate::openstack_admin::TOKENS_CREATE;
use crate::state::identity::{self, APP_CREDENTIAL, Project, Token, User};
use crate::{DOMAIN_ID, DOMAIN_NAME, REGION};

fn unauthorized(call: &Call) -> ApiError {
    ApiError::unauthorized(Service::Keystone, &format!("{}/identity", call.base))
}

fn bad(message: &str) -> ApiError {
    ApiError::bad_request(Service::Keystone, message)
}

/// Serves Keystone paths (only the token endpoint is modelled).
pub(crate) async fn handle(ctx: &Ctx, call: Call) -> Response {
    let path: Vec<&str> = call.path.iter().map(String::as_str).collect();
    if path != ["auth", "tokens"] {
        return ApiError::no_route(Service::Keystone).into_response();
    }
    if call.method != Method::POST {
        return ApiError::method_not_allowed(Service::Keystone).into_response();
    }
    let identity_uri = format!("{}/identity", call.base);
    let strike = |phase: Phase| ctx.store.auth().faults.strike(TOKENS_CREATE, None, phase, rand::random::<f64>);
    if let Some(kind) = strike(Phase::Before) {
        return fault_error(kind, TOKENS_CREATE, &identity_uri).into_response();
    }
    let response = issue(ctx, &call).unwrap_or_else(IntoResponse::into_response);
    match strike(Phase::After) {
        Some(kind) => fault_error(kind, TOKENS_CREATE, &identity_uri).into_response(),
        None => response,
    }
}

fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// Whether a `{"domain": {"id"|"name"}}` reference names the one domain.
fn domain_ok(value: &Value) -> bool {
    let domain = value.get("domain").unwrap_or(&Value::Null);
    identity::is_domain(text(domain, "id"), text(domain, "name"))
}

/// Resolves a user reference (`{"id"}` or `{"name", "domain"}`).
fn user_ref(value: &Value) -> Option<User> {
    if let Some(id) = text(value, "id") {
        return identity::user_by_id(id);
    }
    let name = text(value, "name")?;
    if !domain_ok(value) {
        return None;
    }
    identity::user_by_name(name)
}

fn authenticate(call: &Call, body: &Value) -> Result<(User, Project, Vec<String>), ApiError> {
    let auth = body.get("auth").filter(|a| a.is_object()).ok_or_else(|| bad("Expecting to find auth in request."))?;
    let ident =
        auth.get("identity").filter(|i| i.is_object()).ok_or_else(|| bad("Expecting to find identity in auth."))?;
    let methods: Vec<String> = ident
        .get("methods")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("Expecting to find methods in identity."))?
        .iter()
        .filter_map(|m| m.as_str().map(str::to_owned))
        .collect();
    if methods.iter().any(|m| m == "application_credential") {
        let credential = ident
            .get("application_credential")
            .filter(|c| c.is_object())
            .ok_or_else(|| bad("Expecting to find application_credential in identity."))?;
        let secret =
            text(credential, "secret").ok_or_else(|| bad("Expecting to find secret in application_credential."))?;
        if auth.get("scope").is_some_and(|s| !s.is_null()) {
            return Err(unauthorized(call));
        }
        let (id, name, expected, user_id, project_id) = APP_CREDENTIAL;
        let matches = match text(credential, "id") {
            Some(given) => given == id,
            None => {
                let given = text(credential, "name")
                    .ok_or_else(|| bad("Expecting to find id or name in application_credential."))?;
                let user =
                    credential.get("user").ok_or_else(|| bad("Expecting to find user in application_credential."))?;
                given == name && user_ref(user).is_some_and(|u| u.id == user_id)
            }
        };
        let user = identity::user_by_id(user_id);
        let project = identity::project_by_id(project_id);
        return match (matches && secret == expected, user, project) {
            (true, Some(user), Some(project)) => Ok((user, project, vec!["application_credential".to_owned()])),
            _ => Err(unauthorized(call)),
        };
    }
    if !methods.iter().any(|m| m == "password") {
        return Err(unauthorized(call));
    }
    let user_value = ident
        .get("password")
        .and_then(|p| p.get("user"))
        .filter(|u| u.is_object())
        .ok_or_else(|| bad("Expecting to find user in password."))?;
    let password = text(user_value, "password").ok_or_else(|| bad("Expecting to find password in user."))?;
    let user = user_ref(user_value).filter(|u| u.password == password).ok_or_else(|| unauthorized(call))?;
    let project = match auth.get("scope").and_then(|s| s.get("project")) {
        None => identity::project_by_id(user.project_id),
        Some(project) => match text(project, "id") {
            Some(id) => identity::project_by_id(id),
            None => {
                let name = text(project, "name").ok_or_else(|| bad("Expecting to find id or name in project."))?;
                if domain_ok(project) { identity::project_by_name(name) } else { None }
            }
        },
    };
    let project = project.filter(|p| p.id == user.project_id).ok_or_else(|| unauthorized(call))?;
    Ok((user, project, vec!["password".to_owned()]))
}

fn endpoint(url: &str, interface: &str) -> Value {
    json!({
        "id": uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, format!("{interface}:{url}").as_bytes()).simple().to_string(),
        "interface": interface,
        "region": REGION,
        "region_id": REGION,
        "url": url,
    })
}

/// The service catalog, pointing at this listener.
pub(crate) fn catalog(base: &str, project_id: &str) -> Value {
    let volume = format!("{base}/volume/v3/{project_id}");
    let services = [
        ("identity", "keystone", format!("{base}/identity/v3")),
        ("compute", "nova", format!("{base}/compute/v2.1")),
        ("network", "neutron", format!("{base}/network")),
        ("image", "glance", format!("{base}/image")),
        ("volumev3", "cinderv3", volume.clone()),
        ("block-storage", "cinder", volume),
    ];
    Value::Array(
        services
            .iter()
            .map(|(kind, name, url)| {
                json!({
                    "id": uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, kind.as_bytes()).simple().to_string(),
                    "type": kind,
                    "name": name,
                    "endpoints": [endpoint(url, "public"), endpoint(url, "internal")],
                })
            })
            .collect(),
    )
}

fn issue(ctx: &Ctx, call: &Call) -> Result<Response, ApiError> {
    let body: Value = serde_json::from_slice(&call.body)
        .map_err(|_| bad("Expecting to find auth in request. The server could not comply with the request since it is either malformed or otherwise incorrect."))?;
    let (user, project, methods) = authenticate(call, &body)?;
    let now = SystemTime::now();
    let id = format!("gAAAAA{}", URL_SAFE_NO_PAD.encode(rand::random::<[u8; 48]>()));
    let audit_id = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>());
    let token = {
        let mut auth = ctx.store.auth();
        auth.prune(now);
        let token = Token { user, project, methods, issued_at: now, expires_at: now + auth.lifetime, audit_id };
        auth.tokens.insert(id.clone(), token.clone());
        auth.issued += 1;
        token
    };
    let domain = json!({"id": DOMAIN_ID, "name": DOMAIN_NAME});
    let mut answer = json!({"token": {
        "methods": token.methods,
        "user": {"id": token.user.id, "name": token.user.name, "domain": domain, "password_expires_at": null},
        "project": {"id": token.project.id, "name": token.project.name, "domain": domain},
        "roles": [
            {"id": "9fe2ff9ee4384b1894a90878d3e92bab", "name": "member"},
            {"id": "3a1b5c7d9e0f42a4b6c8d0e2f4a6b8c0", "name": "reader"},
        ],
        "catalog": catalog(&call.base, token.project.id),
        "is_domain": false,
        "issued_at": clock::micros(token.issued_at),
        "expires_at": clock::micros(token.expires_at),
        "audit_ids": [token.audit_id],
    }});
    if token.methods.iter().any(|m| m == "application_credential") {
        answer["token"]["application_credential"] =
            json!({"id": APP_CREDENTIAL.0, "name": APP_CREDENTIAL.1, "restricted": true});
    }
    let mut response = (StatusCode::CREATED, Json(answer)).into_response();
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-subject-token", value);
    }
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(response)
}
