//! `images.get`, `images.getIamPolicy`, `images.setIamPolicy`, with IAM checks
//! against the caller principal (see `caller`).

use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;

use super::{Ctx, begin, parse_body, respond};
use crate::access::{self, ImagePermission};
use crate::caller::Caller;
use crate::error::GceError;
use crate::model::image::Image;
use crate::model::policy::{Binding, Policy, SetPolicyRequest};
use crate::state::{ImageRecord, State as CloudState};

/// Member prefixes IAM accepts in bindings.
const MEMBER_PREFIXES: &[&str] = &["user:", "serviceAccount:", "group:", "domain:", "principal:", "principalSet:"];

/// Finds an image and checks `permission` for the caller.
fn authorized<'a>(
    state: &'a mut CloudState,
    project: &str,
    image: &str,
    headers: &HeaderMap,
    permission: ImagePermission,
) -> Result<&'a mut ImageRecord, GceError> {
    let caller = Caller::from_headers(headers, state.default_caller.as_deref());
    let record = state
        .images
        .get_mut(&(project.to_string(), image.to_string()))
        .ok_or_else(|| GceError::not_found(&format!("projects/{project}/global/images/{image}")))?;
    access::check(record, project, &caller, permission)?;
    Ok(record)
}

/// `GET /compute/v1/projects/P/global/images/NAME`.
pub(crate) async fn get(
    State(ctx): State<Ctx>,
    Path((project, image)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let guard = match begin(&ctx, "images.get").await {
        Ok(guard) => guard,
        Err(rejection) => return rejection,
    };
    let mut state = ctx.store.lock_at(Instant::now());
    let result: Result<Image, GceError> =
        authorized(&mut state, &project, &image, &headers, ImagePermission::Get).map(|r| r.image.clone());
    drop(state);
    guard.finish(respond(result))
}

/// `GET .../global/images/NAME/getIamPolicy`.
pub(crate) async fn get_iam_policy(
    State(ctx): State<Ctx>,
    Path((project, image)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let guard = match begin(&ctx, "images.getIamPolicy").await {
        Ok(guard) => guard,
        Err(rejection) => return rejection,
    };
    let mut state = ctx.store.lock_at(Instant::now());
    let result =
        authorized(&mut state, &project, &image, &headers, ImagePermission::GetIamPolicy).map(|r| r.policy_with_etag());
    drop(state);
    guard.finish(respond(result))
}

/// `POST .../global/images/NAME/setIamPolicy` with `{"policy": {..., "etag"}}`:
/// a stale etag is 412 `conditionNotMet`; every accepted change bumps the etag.
pub(crate) async fn set_iam_policy(
    State(ctx): State<Ctx>,
    Path((project, image)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let guard = match begin(&ctx, "images.setIamPolicy").await {
        Ok(guard) => guard,
        Err(rejection) => return rejection,
    };
    let result = parse_body::<SetPolicyRequest>(&body).and_then(|request| {
        let mut state = ctx.store.lock_at(Instant::now());
        let record = authorized(&mut state, &project, &image, &headers, ImagePermission::SetIamPolicy)?;
        apply(record, request)
    });
    guard.finish(respond(result))
}

/// Applies a `setIamPolicy` request to an image record.
fn apply(record: &mut ImageRecord, request: SetPolicyRequest) -> Result<Policy, GceError> {
    let policy = request.policy.ok_or_else(|| GceError::required("policy"))?;
    let etag = policy.etag.clone().or(request.etag).filter(|e| !e.is_empty());
    if etag.is_some_and(|e| e != record.etag()) {
        return Err(GceError::stale_etag());
    }
    let bindings: Vec<Binding> = policy
        .bindings
        .into_iter()
        .chain(request.bindings.unwrap_or_default())
        .filter(|b| !b.members.is_empty())
        .collect();
    for binding in &bindings {
        if !binding.role.starts_with("roles/") {
            return Err(GceError::invalid_field(
                "policy.bindings.role",
                &binding.role,
                "Role must start with 'roles/'.",
            ));
        }
        let bad_member = binding.members.iter().find(|m| {
            !(m.as_str() == "allUsers"
                || m.as_str() == "allAuthenticatedUsers"
                || MEMBER_PREFIXES.iter().any(|p| m.strip_prefix(p).is_some_and(|rest| !rest.is_empty())))
        });
        if let Some(member) = bad_member {
            return Err(GceError::invalid_field("policy.bindings.members", member, "Invalid principal."));
        }
    }
    record.policy.bindings = bindings;
    record.policy_version += 1;
    Ok(record.policy_with_etag())
}
