//! The request pipeline: version discovery documents (free, uncounted), Keystone's token
//! endpoint (counted separately), then for every other service: the `X-Auth-Token` check
//! (a 401 is no counted call), Nova's microversion, routing to an operation name, the
//! admin call gate ([`fake_cloud_support::Admin::begin_call`]) and the handlers. An
//! injected fault that Nova would not answer (`placement` on `servers.create`) is applied
//! as the scheduler's outcome for the server instead ([`crate::hooks::scheduling_outcome`]).

mod cinder;
mod discovery;
mod flavors;
mod glance;
mod keystone;
mod metadata;
mod networks;
mod paging;
mod ports;
/// Nova's servers; [`servers::nova_port`] is also how the planted server gets its port.
pub(crate) mod servers;
mod wire;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::header::{HOST, VARY, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use fake_cloud_support::{Admin, RejectionCause};
use serde_json::Value;

use crate::NOVA_MAX_MICROVERSION;
use crate::error::{ApiError, ApiResult, Service};
use crate::hooks::{schedules, scheduling_outcome};
use crate::state::Store;
use crate::state::compute::Scheduling;

/// What every handler needs: the shared admin machinery and the cloud state.
#[derive(Clone)]
pub(crate) struct Ctx {
    /// Counters, faults, latency, rate limit, consistency, timing.
    pub(crate) admin: Admin,
    /// The cloud state.
    pub(crate) store: Arc<Store>,
}

/// One request to a service, with the caller's token scope once authenticated.
#[derive(Debug)]
pub(crate) struct Call {
    /// HTTP method.
    pub(crate) method: Method,
    /// Path segments after the service's API root (percent-decoded).
    pub(crate) path: Vec<String>,
    /// Query parameters in order (percent-decoded).
    pub(crate) query: Vec<(String, String)>,
    /// Request headers.
    pub(crate) headers: HeaderMap,
    /// Request body.
    pub(crate) body: Bytes,
    /// `http://host:port` as the client addressed the fake.
    pub(crate) base: String,
    /// The token's project.
    pub(crate) project_id: String,
    /// The token's user.
    pub(crate) user_id: String,
    /// Nova microversion `(major, minor)` (2.1 elsewhere).
    pub(crate) microversion: (u32, u32),
}

impl Call {
    /// The first value of query parameter `name`.
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Every value of query parameter `name`.
    pub(crate) fn params(&self, name: &str) -> Vec<&str> {
        self.query.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect()
    }

    /// The body as JSON, or the service's 400.
    pub(crate) fn json(&self, service: Service) -> Result<Value, ApiError> {
        serde_json::from_slice(&self.body)
            .map_err(|error| ApiError::bad_request(service, format!("Malformed request body: {error}")))
    }

    /// Whether the Nova microversion is at least `major.minor`.
    pub(crate) fn at_least(&self, major: u32, minor: u32) -> bool {
        self.microversion >= (major, minor)
    }

    /// The path segment `index` (or "").
    pub(crate) fn seg(&self, index: usize) -> &str {
        self.path.get(index).map_or("", String::as_str)
    }
}

type BoxedResponse = Pin<Box<dyn Future<Output = Response> + Send>>;

/// The fallback handler serving every non-admin path.
pub(crate) fn fallback(ctx: Ctx) -> impl Fn(Request) -> BoxedResponse + Clone + Send + Sync + 'static {
    move |request: Request| {
        let ctx = ctx.clone();
        Box::pin(async move { handle(ctx, request).await })
    }
}

fn base_url(headers: &HeaderMap) -> String {
    let host = headers.get(HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
    format!("http://{host}")
}

async fn handle(ctx: Ctx, request: Request<Body>) -> Response {
    let (parts, body) = request.into_parts();
    let base = base_url(&parts.headers);
    let segs: Vec<String> =
        parts.uri.path().split('/').filter(|s| !s.is_empty()).map(fake_cloud_support::wire::decode_component).collect();
    let refs: Vec<&str> = segs.iter().map(String::as_str).collect();
    if let Some(answer) = discovery::answer(&parts.method, &refs, &base) {
        return answer;
    }
    let Ok(body) = axum::body::to_bytes(body, 4 << 20).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response();
    };
    let (service, skip) = match refs.as_slice() {
        ["identity", "v3", ..] => (Service::Keystone, 2),
        ["compute", "v2.1", ..] => (Service::Nova, 2),
        ["network", "v2.0", ..] => (Service::Neutron, 2),
        ["image", "v2", ..] => (Service::Glance, 2),
        ["volume", "v3", _, ..] => (Service::Cinder, 3),
        _ => {
            return (StatusCode::NOT_FOUND, "404 Not Found\n\nThe resource could not be found.\n\n   ").into_response();
        }
    };
    let call = Call {
        method: parts.method,
        path: segs.get(skip..).unwrap_or_default().to_vec(),
        query: fake_cloud_support::wire::parse_form(parts.uri.query().unwrap_or("")),
        headers: parts.headers,
        body,
        base,
        project_id: String::new(),
        user_id: String::new(),
        microversion: (2, 1),
    };
    if service == Service::Keystone {
        return keystone::handle(&ctx, call).await;
    }
    let path_project = if service == Service::Cinder { segs.get(2).cloned() } else { None };
    serve(&ctx, service, call, path_project).await
}

/// Authentication, routing, the call gate and the handler of one service request.
async fn serve(ctx: &Ctx, service: Service, mut call: Call, path_project: Option<String>) -> Response {
    let identity_uri = format!("{}/identity", call.base);
    let token = call.headers.get("x-auth-token").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let scope = {
        let mut auth = ctx.store.auth();
        let scope = auth.valid(&token, SystemTime::now()).map(|t| (t.project.id, t.user.id));
        if scope.is_none() {
            auth.unauthorized += 1;
        }
        scope
    };
    let Some((project_id, user_id)) = scope else {
        return decorate(ApiError::unauthorized(service, &identity_uri).into_response(), &call, service, &identity_uri);
    };
    call.project_id = project_id.to_owned();
    call.user_id = user_id.to_owned();
    if service == Service::Nova {
        match servers::microversion(&call.headers) {
            Ok(version) => call.microversion = version,
            Err(error) => return decorate(error.into_response(), &call, service, &identity_uri),
        }
    }
    let path: Vec<&str> = call.path.iter().map(String::as_str).collect();
    let operation = match service {
        Service::Nova => metadata::operation(&call.method, &path)
            .or_else(|| servers::operation(&call.method, &path))
            .or_else(|| flavors::operation(&call.method, &path)),
        Service::Neutron => ports::operation(&call.method, &path).or_else(|| networks::operation(&call.method, &path)),
        Service::Glance => glance::operation(&call.method, &path),
        Service::Cinder => cinder::operation(&call.method, &path),
        Service::Keystone => None,
    };
    let Some(operation) = operation else {
        return decorate(ApiError::no_route(service).into_response(), &call, service, &identity_uri);
    };
    // An injected fault that is a scheduling outcome (`placement` on `servers.create`)
    // is applied to the server the call makes, in either phase, instead of answered.
    let mut scheduling = Scheduling::Placed;
    let guard = match ctx.admin.begin_call(operation).await {
        Ok(guard) => Some(guard),
        Err(rejection) => match scheduling_outcome(rejection.kind, operation) {
            Some(outcome) if matches!(rejection.cause, RejectionCause::Injected(_)) => {
                scheduling = outcome;
                None
            }
            _ => return decorate(rejection.into_response(), &call, service, &identity_uri),
        },
    };
    // The `after` fault of an operation with scheduling outcomes is drawn before its
    // handler runs (the draw does not depend on the answer): a scheduling outcome shapes
    // the server, any other fault replaces the answer, as `CallGuard::finish` does.
    let (guard, lost_answer) = match guard {
        Some(guard) if schedules(operation) => match guard.after_fault() {
            Some(rejection) => match scheduling_outcome(rejection.kind, operation) {
                Some(outcome) => {
                    scheduling = outcome;
                    (None, None)
                }
                None => (None, Some(rejection)),
            },
            None => (None, None),
        },
        other => (other, None),
    };
    let result: ApiResult = if path_project.as_deref().is_some_and(|p| p != call.project_id) {
        Err(ApiError::forbidden(service, "Policy doesn't allow volume:get_all to be performed."))
    } else {
        match service {
            Service::Nova if operation.starts_with("flavors") => flavors::handle(&call, operation),
            Service::Nova if operation.starts_with("servers.metadata.") => metadata::handle(ctx, &call, operation),
            Service::Nova => servers::handle(ctx, &call, operation, scheduling),
            Service::Neutron if operation.starts_with("ports") => ports::handle(ctx, &call, operation),
            Service::Neutron => networks::handle(ctx, &call, operation),
            Service::Glance => glance::handle(ctx, &call, operation),
            Service::Cinder => cinder::handle(ctx, &call, operation),
            Service::Keystone => Err(ApiError::no_route(service)),
        }
    };
    let response = result.unwrap_or_else(IntoResponse::into_response);
    let response = match (lost_answer, guard) {
        (Some(rejection), _) => rejection.into_response(),
        (None, Some(guard)) => guard.finish(response),
        (None, None) => response,
    };
    decorate(response, &call, service, &identity_uri)
}

/// Adds the headers every answer of the service carries: Nova's microversion headers,
/// and the full Keystone URI on 401s.
fn decorate(mut response: Response, call: &Call, service: Service, identity_uri: &str) -> Response {
    let headers = response.headers_mut();
    if response_is_unauthorized(headers)
        && let Ok(value) = HeaderValue::from_str(&format!("Keystone uri=\"{identity_uri}\""))
    {
        headers.insert(WWW_AUTHENTICATE, value);
    }
    if service == Service::Nova {
        let (major, minor) = call.microversion;
        let version = format!("{major}.{minor}");
        if let Ok(value) = HeaderValue::from_str(&format!("compute {version}")) {
            headers.insert("openstack-api-version", value);
        }
        if let Ok(value) = HeaderValue::from_str(&version) {
            headers.insert("x-openstack-nova-api-version", value);
        }
        headers.insert(VARY, HeaderValue::from_static("OpenStack-API-Version, X-OpenStack-Nova-API-Version"));
    }
    response
}

fn response_is_unauthorized(headers: &HeaderMap) -> bool {
    headers.contains_key(WWW_AUTHENTICATE)
}

/// The highest Nova microversion as `(major, minor)`.
pub(crate) fn nova_max() -> (u32, u32) {
    wire::parse_version(NOVA_MAX_MICROVERSION).unwrap_or((2, 96))
}
