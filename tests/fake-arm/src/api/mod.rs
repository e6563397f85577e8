//! The ARM request pipeline: path parsing, the admin call gate, authentication,
//! `api-version`, subscription access, then the resource handlers.

mod disks;
mod galleries;
mod graph;
pub(crate) mod ids;
mod marketplace;
mod nics;
mod operations;
mod resources;
pub(crate) mod routes;
mod tags;
mod vms;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use fake_cloud_support::{Admin, FaultKind, Phase, RejectionCause};
use serde_json::Value;

use crate::error::ArmError;
use crate::state::{Key, State, Store};
use crate::wire::{base_url, strip_nulls, timestamp};
use routes::{Kind, Route, action_of};

/// What every handler needs: the shared admin machinery and the cloud state.
#[derive(Clone)]
pub(crate) struct Ctx {
    /// Counters, faults, latency, rate limit, consistency, timing.
    pub(crate) admin: Admin,
    /// The cloud state.
    pub(crate) store: Arc<Store>,
}

/// The authenticated caller.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    /// The client id the token was issued to.
    pub(crate) client_id: String,
    /// The subscription it may access.
    pub(crate) subscription: String,
}

/// One authenticated ARM request.
#[derive(Debug)]
pub(crate) struct Req {
    /// Query parameters (decoded).
    pub(crate) query: HashMap<String, String>,
    /// `http://HOST` for absolute URLs.
    pub(crate) base: String,
    /// The `api-version` sent (echoed into operation URLs).
    pub(crate) api_version: String,
    /// Who calls.
    pub(crate) caller: Caller,
    /// The raw body.
    pub(crate) body: Bytes,
    /// The request path.
    pub(crate) path: String,
    /// The `If-None-Match` header, when sent.
    pub(crate) if_none_match: Option<String>,
}

impl Req {
    /// A query parameter, by case-insensitive name.
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        query_param(&self.query, name)
    }

    /// The `Azure-AsyncOperation` and `Location` URLs of operation `id`.
    pub(crate) fn op_urls(&self, sub: &str, namespace: &str, location: &str, id: &str) -> (String, String) {
        let base = format!("{}/subscriptions/{sub}/providers/{namespace}/locations/{location}", self.base);
        let api = fake_cloud_support::wire::encode_component(&self.api_version);
        if namespace == "Microsoft.Network" {
            (
                format!("{base}/operations/{id}?api-version={api}"),
                format!("{base}/operationResults/{id}?api-version={api}"),
            )
        } else {
            (
                format!("{base}/operations/{id}?p=fake-arm&api-version={api}"),
                format!("{base}/operations/{id}?p=fake-arm&monitor=true&api-version={api}"),
            )
        }
    }

    /// The headers of a response whose work runs as operation `id`: `Azure-AsyncOperation`,
    /// and with `monitor` also the `Location` URL (ARM's two long-running-operation
    /// patterns, learn.microsoft.com/azure/azure-resource-manager/management/async-operations).
    pub(crate) fn op_headers(
        &self,
        sub: &str,
        namespace: &str,
        location: &str,
        id: &str,
        monitor: bool,
    ) -> Vec<(&'static str, String)> {
        let (async_url, location_url) = self.op_urls(sub, namespace, location, id);
        let mut headers = vec![("Azure-AsyncOperation", async_url)];
        if monitor {
            headers.push(("Location", location_url));
        }
        headers
    }

    /// Parses the JSON body (nulls removed); must be an object.
    pub(crate) fn json_body(&self) -> Result<Value, ArmError> {
        let value: Value = serde_json::from_slice(&self.body).map_err(|e| {
            ArmError::invalid_content(&format!("Invalid JSON at line {} column {}", e.line(), e.column()))
        })?;
        if !value.is_object() {
            return Err(ArmError::invalid_content("The request body must be a JSON object"));
        }
        Ok(strip_nulls(value))
    }
}

fn query_param<'a>(query: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    query.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// The query parameters, decoded as a form (`+` is a space); a repeated name keeps its last value.
fn parse_query(raw: Option<&str>) -> HashMap<String, String> {
    fake_cloud_support::wire::parse_form(raw.unwrap_or("")).into_iter().collect()
}

/// A JSON answer with extra headers.
pub(crate) fn respond(status: StatusCode, body: Option<Value>, headers: &[(&str, String)]) -> Response {
    let mut response = match body {
        Some(body) => (status, Json(body)).into_response(),
        None => status.into_response(),
    };
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) =
            (axum::http::HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value))
        {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// The `location` of a PUT body: 400 `LocationRequired` when it is missing or empty
/// (the same answer for every resource type ARM requires a location of).
pub(crate) fn body_location(body: &Value) -> Result<String, ArmError> {
    crate::wire::field(body, "location")
        .and_then(Value::as_str)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| {
            ArmError::new(
                StatusCode::BAD_REQUEST,
                "LocationRequired",
                "The location property is required for this definition.",
            )
        })
}

/// `GET` of a resource group's collection: 404 `ResourceGroupNotFound` without the group,
/// else 200 with the page the `$skiptoken` asks for of the `records` in `sub`/`rg` that
/// `keep` lets through, ordered by lowercase name, each rendered by `render`.
pub(crate) fn list_in_group<T>(
    st: &State,
    req: &Req,
    (sub, rg): (&str, &str),
    records: &BTreeMap<Key, T>,
    keep: impl Fn(&T) -> bool,
    render: impl FnMut(&T) -> Value,
) -> Result<Response, ArmError> {
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let (s, r) = (sub.to_ascii_lowercase(), rg.to_ascii_lowercase());
    let items: Vec<(String, &T)> = records
        .iter()
        .filter(|((ks, kr, _), record)| *ks == s && *kr == r && keep(record))
        .map(|((_, _, name), record)| (name.clone(), record))
        .collect();
    let body = crate::paging::page(
        items,
        req.param("$skiptoken"),
        st.page_size,
        &format!("{}{}", req.base, req.path),
        &[],
        &req.api_version,
        render,
    );
    Ok(respond(StatusCode::OK, Some(body), &[]))
}

/// Adds `x-ms-request-id` and `x-ms-correlation-request-id` to every response.
pub(crate) async fn request_ids(request: Request, next: Next) -> Response {
    let correlation = request
        .headers()
        .get("x-ms-correlation-request-id")
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
    let client_request = request.headers().get("x-ms-client-request-id").cloned();
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&uuid::Uuid::new_v4().to_string()) {
        headers.insert("x-ms-request-id", value);
    }
    if let Ok(value) = HeaderValue::from_str(&correlation) {
        headers.insert("x-ms-correlation-request-id", value);
    }
    if let Some(value) = client_request {
        headers.insert("x-ms-client-request-id", value);
    }
    response
}

type BoxedResponse = Pin<Box<dyn Future<Output = Response> + Send>>;

/// The fallback handler serving every ARM path.
pub(crate) fn fallback(ctx: Ctx) -> impl Fn(Request) -> BoxedResponse + Clone + Send + Sync + 'static {
    move |request: Request| {
        let ctx = ctx.clone();
        Box::pin(async move { handle(ctx, request).await })
    }
}

async fn handle(ctx: Ctx, request: Request<Body>) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, 16 << 20).await else {
        return ArmError::invalid_content("The request body could not be read").into_response();
    };
    let query = parse_query(parts.uri.query());
    let api_version = query_param(&query, "api-version").map(str::to_owned);
    let route = match routes::parse(parts.uri.path(), api_version.as_deref().unwrap_or("")) {
        Ok(route) => route,
        Err(error) => return error.into_response(),
    };
    let Some(operation) = route.operation(&parts.method) else {
        return ArmError::method_not_allowed(parts.method.as_str()).into_response();
    };
    let guard = match ctx.admin.begin_call(operation).await {
        Ok(guard) => guard,
        Err(rejection) => {
            if operation == "virtualMachines.createOrUpdate"
                && rejection.kind == FaultKind::Capacity
                && rejection.cause == RejectionCause::Injected(Phase::Before)
                && let Ok(caller) = authenticate(&ctx, &parts.headers)
                && let Route::Resource { sub, rg, name, .. } = &route
                && caller.subscription.eq_ignore_ascii_case(sub)
            {
                vms::reserve_on_refusal(&ctx, sub, rg, name, &body);
            }
            return rejection.into_response();
        }
    };
    let result = authenticate(&ctx, &parts.headers).and_then(|caller| {
        let Some(api_version) = api_version else {
            return Err(ArmError::missing_api_version());
        };
        // Resource Graph names its subscriptions in the body and skips those the caller may not read.
        if route != Route::Graph && !caller.subscription.eq_ignore_ascii_case(route.subscription()) {
            return Err(ArmError::authorization_failed(&caller.client_id, action_of(operation), parts.uri.path()));
        }
        let if_none_match =
            parts.headers.get("if-none-match").and_then(|v| v.to_str().ok()).map(|v| v.trim().to_owned());
        let req = Req {
            query,
            base: base_url(&parts.headers),
            api_version,
            caller,
            body,
            path: parts.uri.path().to_owned(),
            if_none_match,
        };
        dispatch(&ctx, &route, &parts.method, &req)
    });
    let response = result.unwrap_or_else(IntoResponse::into_response);
    guard.finish(response)
}

fn authenticate(ctx: &Ctx, headers: &HeaderMap) -> Result<Caller, ArmError> {
    let Some(header) = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return Err(ArmError::invalid_token("The authentication failed because of missing 'Authorization' header."));
    };
    let Some(token) = header.strip_prefix("Bearer ").or_else(|| header.strip_prefix("bearer ")).map(str::trim) else {
        return Err(ArmError::invalid_token("The 'Authorization' header is not a Bearer token."));
    };
    let state = ctx.store.lock_at(Instant::now());
    let Some(issued) = state.tokens.get(token) else {
        return Err(ArmError::invalid_token(
            "The access token could not be validated: it was not issued by this tenant.",
        ));
    };
    let now = SystemTime::now();
    if now >= issued.expires_at {
        return Err(ArmError::expired_token(&timestamp(issued.expires_at), &timestamp(now)));
    }
    Ok(Caller { client_id: issued.client_id.clone(), subscription: issued.subscription.clone() })
}

fn dispatch(ctx: &Ctx, route: &Route, method: &Method, req: &Req) -> Result<Response, ArmError> {
    match (route, method.as_str()) {
        (Route::Graph, _) => graph::query(ctx, req),
        (Route::ResourceGroup { sub, rg }, m) => resources::resource_group(ctx, sub, rg, m == "HEAD"),
        (Route::Resources { sub, rg }, _) => resources::list(ctx, req, sub, rg),
        (Route::Collection { sub, rg, kind: Kind::Vm }, _) => vms::list(ctx, req, sub, rg),
        (Route::Collection { sub, rg, kind: Kind::Nic }, _) => nics::list(ctx, req, sub, rg),
        (Route::Collection { sub, rg, kind: Kind::Disk }, _) => disks::list(ctx, req, sub, rg),
        (Route::Resource { sub, rg, kind: Kind::Vm, name }, "PUT") => vms::put(ctx, req, sub, rg, name),
        (Route::Resource { sub, rg, kind: Kind::Vm, name }, "PATCH") => vms::patch(ctx, req, sub, rg, name),
        (Route::Resource { sub, rg, kind: Kind::Vm, name }, "GET") => vms::get(ctx, req, sub, rg, name),
        (Route::Resource { sub, rg, kind: Kind::Vm, name }, _) => vms::delete(ctx, req, sub, rg, name),
        (Route::Resource { sub, rg, kind: Kind::Nic, name }, "PUT") => nics::put(ctx, req, sub, rg, name),
        (Route::Resource { sub, rg, kind: Kind::Nic, name }, "GET") => nics::get(ctx, sub, rg, name),
        (Route::Resource { sub, rg, kind: Kind::Nic, name }, _) => nics::delete(ctx, req, sub, rg, name),
        (Route::Resource { sub, rg, kind: Kind::Disk, name }, "PUT") => disks::put(ctx, req, sub, rg, name),
        (Route::Resource { sub, rg, kind: Kind::Disk, name }, "GET") => disks::get(ctx, sub, rg, name),
        (Route::Resource { sub, rg, kind: Kind::Disk, name }, "PATCH") => disks::patch(ctx, req, sub, rg, name),
        (Route::Resource { sub, rg, kind: Kind::Disk, name }, _) => disks::delete(ctx, req, sub, rg, name),
        (Route::Tags { sub, rg, kind, name }, m) => tags::at_scope(ctx, req, m, sub, rg, *kind, name),
        (Route::Subnet { sub, rg, vnet, name }, _) => nics::subnet(ctx, sub, rg, vnet, name),
        (Route::Gallery { sub, rg, gallery }, _) => galleries::get(ctx, sub, rg, gallery),
        (Route::GalleryShare { sub, rg, gallery }, _) => galleries::share(ctx, req, sub, rg, gallery),
        (Route::GalleryImage { sub, rg, gallery, image }, _) => galleries::image(ctx, sub, rg, gallery, image),
        (Route::GalleryImageVersion { sub, rg, gallery, image, version }, _) => {
            galleries::version(ctx, sub, rg, gallery, image, version)
        }
        (Route::Operation { sub, id, results }, _) => operations::get(ctx, req, sub, id, *results),
        (Route::SharedVersion { sub, location, gallery, image, version }, _) => {
            galleries::shared_version(ctx, sub, location, gallery, image, version)
        }
        (Route::VmImage { location, publisher, offer, sku, version, .. }, _) => {
            vms::marketplace_image(req, location, publisher, offer, sku, version)
        }
        (Route::CommunityVersion { location, gallery, image, version, .. }, _) => {
            galleries::community_version(ctx, location, gallery, image, version)
        }
        (Route::Agreement { sub, offer_type, publisher, offer, plan }, m) => {
            marketplace::agreement(ctx, req, m == "PUT", sub, offer_type, publisher, offer, plan)
        }
    }
}
