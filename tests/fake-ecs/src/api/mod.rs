//! The RPC request pipeline: parameters (query + form body), action and version routing,
//! authentication (V3 or V1 signature, clock window, nonce replay), then the admin call
//! gate ([`fake_cloud_support::Admin::begin_call`]) and the action handlers.
//!
//! Requests refused before the gate (routing and authentication errors) are not counted
//! in `/_admin/calls`; `GET /_admin/ecs/refused` counts them by error code.

mod disks;
mod images;
mod instances;
mod sts;
mod tags;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use axum::body::Body;
use axum::extract::Request;
use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use fake_cloud_support::Admin;

use crate::error::{EcsError, STS_HOST, ecs_host};
use crate::hooks::{ECS_ACTIONS, STS_ACTIONS};
use crate::params::Params;
use crate::signing::{self, Identity, Signed, V3Authorization};
use crate::{ECS_VERSION, REGION, STS_VERSION};
use fake_cloud_support::wire::parse_form;

/// What every handler needs: the shared admin machinery and the cloud state.
#[derive(Clone)]
pub(crate) struct Ctx {
    /// Counters, faults, latency, rate limit, consistency, timing.
    pub(crate) admin: Admin,
    /// The cloud state.
    pub(crate) store: Arc<crate::state::Store>,
}

/// One authenticated call.
#[derive(Debug)]
pub(crate) struct Call {
    /// The account the AccessKey belongs to.
    pub(crate) account: &'static str,
    /// Query and form parameters merged.
    pub(crate) params: Params,
}

/// Which API a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Product {
    Ecs,
    Sts,
}

impl Product {
    fn host(self) -> String {
        match self {
            Self::Ecs => ecs_host(),
            Self::Sts => STS_HOST.to_owned(),
        }
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

/// The action name and product of a request, or the routing error.
fn route(action: Option<&str>, version: Option<&str>) -> Result<(&'static str, Product), (EcsError, Product)> {
    let product_of = |version: &str| match version {
        ECS_VERSION => Some(Product::Ecs),
        STS_VERSION => Some(Product::Sts),
        _ => None,
    };
    let guess = version.and_then(product_of).unwrap_or(Product::Ecs);
    let Some(action) = action else {
        return Err((EcsError::missing("Action"), guess));
    };
    let known = |table: &[(&'static str, fake_cloud_support::OpClass)]| {
        table.iter().map(|(name, _)| *name).find(|name| *name == action)
    };
    let (name, product) = match (known(ECS_ACTIONS), known(STS_ACTIONS)) {
        (Some(name), _) => (name, Product::Ecs),
        (None, Some(name)) => (name, Product::Sts),
        (None, None) => return Err((EcsError::action_not_found(action), guess)),
    };
    let Some(version) = version else {
        return Err((EcsError::missing("Version"), product));
    };
    if product_of(version) != Some(product) {
        return Err((EcsError::invalid_version(version), product));
    }
    Ok((name, product))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty())
}

async fn handle(ctx: Ctx, request: Request<Body>) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, 4 << 20).await else {
        return EcsError::bad_request("InvalidParameter", "The request body could not be read.").into_response();
    };
    let query = parse_form(parts.uri.query().unwrap_or(""));
    let is_form = header(&parts.headers, CONTENT_TYPE.as_str())
        .is_some_and(|ct| ct.to_ascii_lowercase().starts_with("application/x-www-form-urlencoded"));
    let form = if is_form { parse_form(&String::from_utf8_lossy(&body)) } else { Vec::new() };
    let params = Params::from_pairs(query.iter().chain(&form).cloned());

    let v3 = header(&parts.headers, AUTHORIZATION.as_str()).map(V3Authorization::parse);
    let (action, version) = if v3.is_some() {
        (
            header(&parts.headers, "x-acs-action").or_else(|| params.get("Action")),
            header(&parts.headers, "x-acs-version").or_else(|| params.get("Version")),
        )
    } else {
        (params.get("Action"), params.get("Version"))
    };
    let (action, product) = match route(action, version) {
        Ok(routed) => routed,
        Err((error, product)) => return refuse(&ctx, error, product),
    };
    let signed = Signed {
        method: parts.method.as_str(),
        path: parts.uri.path(),
        query: &query,
        form: &form,
        headers: &parts.headers,
        body: &body,
    };
    let identity = match v3 {
        Some(Ok(auth)) => authenticate_v3(&ctx, &signed, &auth),
        Some(Err(error)) => Err(error),
        None => authenticate_v1(&ctx, &signed, &params),
    };
    let identity = match identity {
        Ok(identity) => identity,
        Err(error) => return refuse(&ctx, error, product),
    };
    let guard = match ctx.admin.begin_call(action).await {
        Ok(guard) => guard,
        Err(rejection) => return rejection.into_response(),
    };
    let call = Call { account: identity.account, params };
    let result = match action {
        "RunInstances" => instances::run(&ctx, &call),
        "DescribeInstances" => instances::describe(&ctx, &call),
        "DeleteInstance" => instances::delete(&ctx, &call),
        "DescribeDisks" => disks::describe_disks(&ctx, &call),
        "ResizeDisk" => disks::resize_disk(&ctx, &call),
        "DescribeNetworkInterfaces" => disks::describe_network_interfaces(&ctx, &call),
        "ModifyInstanceAttribute" => disks::modify_instance_attribute(&ctx, &call),
        "TagResources" => tags::tag(&ctx, &call),
        "UntagResources" => tags::untag(&ctx, &call),
        "DescribeImages" => images::describe(&ctx, &call),
        "ModifyImageSharePermission" => images::modify_share(&ctx, &call),
        "DescribeImageSharePermission" => images::describe_share(&ctx, &call),
        "GetCallerIdentity" => Ok(sts::caller_identity(&call)),
        other => Err(EcsError::action_not_found(other)),
    };
    let host = product.host();
    let response = result.unwrap_or_else(|error| error.with_host(&host).into_response());
    guard.finish(response)
}

fn refuse(ctx: &Ctx, error: EcsError, product: Product) -> Response {
    tracing::debug!(code = %error.code, message = %error.message, "fake-ecs refuses request");
    ctx.store.count_refused(&error.code);
    error.with_host(&product.host()).into_response()
}

fn record_nonce(ctx: &Ctx, access_key_id: &str, nonce: &str) -> Result<(), EcsError> {
    if ctx.store.nonces().record(access_key_id, nonce, Instant::now()) { Ok(()) } else { Err(EcsError::nonce_used()) }
}

fn authenticate_v3(ctx: &Ctx, req: &Signed<'_>, auth: &V3Authorization) -> Result<Identity, EcsError> {
    let date = header(req.headers, "x-acs-date").ok_or_else(|| EcsError::missing("x-acs-date"))?;
    signing::check_time(date, SystemTime::now())?;
    let identity = signing::identity(&auth.access_key_id).ok_or_else(EcsError::access_key_not_found)?;
    let nonce =
        header(req.headers, "x-acs-signature-nonce").ok_or_else(|| EcsError::missing("x-acs-signature-nonce"))?;
    signing::verify_v3(req, auth, identity.secret)?;
    record_nonce(ctx, identity.access_key_id, nonce)?;
    Ok(identity)
}

fn authenticate_v1(ctx: &Ctx, req: &Signed<'_>, params: &Params) -> Result<Identity, EcsError> {
    let access_key_id = params.required("AccessKeyId")?;
    let signature = params.required("Signature")?;
    let method = params.get("SignatureMethod").unwrap_or("HMAC-SHA1");
    if method != "HMAC-SHA1" {
        return Err(EcsError::incomplete_signature(&format!(
            "SignatureMethod \"{method}\" is not supported; use HMAC-SHA1."
        )));
    }
    let timestamp = params.required("Timestamp")?;
    signing::check_time(timestamp, SystemTime::now())?;
    let identity = signing::identity(access_key_id).ok_or_else(EcsError::access_key_not_found)?;
    let nonce = params.required("SignatureNonce")?;
    signing::verify_v1(req, signature, identity.secret)?;
    record_nonce(ctx, identity.access_key_id, nonce)?;
    Ok(identity)
}

/// Checks `RegionId` (mandatory when `required`): only [`REGION`] exists.
pub(crate) fn check_region(params: &Params, required: bool) -> Result<(), EcsError> {
    match params.get("RegionId") {
        None if required => Err(EcsError::missing("RegionId")),
        Some(region) if region != REGION => Err(EcsError::region_not_found()),
        _ => Ok(()),
    }
}

/// Classic paging: `PageSize` (1..=`max`, default 10) and `PageNumber` (from 1).
pub(crate) fn page_params(params: &Params, max: u64) -> Result<(usize, usize), EcsError> {
    let size = params.int("PageSize", 10, 1..=max)?;
    let number = params.int("PageNumber", 1, 1..=u64::from(u32::MAX))?;
    Ok((usize::try_from(size).unwrap_or(10), usize::try_from(number).unwrap_or(1)))
}

/// The `[start, end)` window of page `number` of `size` over `total` items.
pub(crate) fn page_window(total: usize, size: usize, number: usize) -> (usize, usize) {
    let start = size.saturating_mul(number.saturating_sub(1)).min(total);
    (start, start.saturating_add(size).min(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_checks_action_then_version() {
        assert_eq!(route(Some("RunInstances"), Some(ECS_VERSION)).ok(), Some(("RunInstances", Product::Ecs)));
        assert_eq!(route(Some("GetCallerIdentity"), Some(STS_VERSION)).ok(), Some(("GetCallerIdentity", Product::Sts)));
        let code = |r: Result<(&str, Product), (EcsError, Product)>| r.err().map(|(e, _)| e.code);
        assert_eq!(code(route(None, Some(ECS_VERSION))), Some("MissingParameter".into()));
        assert_eq!(code(route(Some("StopInstance"), Some(ECS_VERSION))), Some("InvalidAction.NotFound".into()));
        assert_eq!(code(route(Some("GetCallerIdentity"), Some(ECS_VERSION))), Some("InvalidVersion".into()));
        assert_eq!(code(route(Some("RunInstances"), Some("2016-11-11"))), Some("InvalidVersion".into()));
        assert_eq!(code(route(Some("RunInstances"), None)), Some("MissingParameter".into()));
    }

    #[test]
    fn page_windows() {
        assert_eq!(page_window(5, 2, 1), (0, 2));
        assert_eq!(page_window(5, 2, 3), (4, 5));
        assert_eq!(page_window(5, 2, 9), (5, 5));
    }
}
