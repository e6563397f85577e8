//! The HTTP entry point: one POST `/` for every EC2 and STS action, dispatched on `Action`.

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use fake_cloud_support::{Admin, FaultKind, Rejection, admin_router};

use crate::actions::{Ctx, dispatch};
use crate::caller::Caller;
use crate::errors::{Ec2Error, xml_response};
use crate::query::Params;
use crate::store::Store;
use crate::sts::{self, StsSettings};
use crate::xml::ec2_document;

/// Shared state of the HTTP handlers.
#[derive(Clone)]
struct App {
    admin: Admin,
    store: Arc<Store>,
}

/// The fake's full router: the Query API on `/` and the admin API on `/_admin/*`.
pub(crate) fn router() -> Router {
    let store = Arc::new(Store::new());
    let admin = Admin::new(store.clone());
    let app = App { admin: admin.clone(), store };
    Router::new()
        .route("/", any(handle))
        .route("/_admin/sts", get(sts_settings).post(configure_sts))
        .with_state(app)
        .merge(admin_router(admin))
}

/// `GET /_admin/sts`: the session length override and the sessions issued.
async fn sts_settings(State(app): State<App>) -> Json<StsSettings> {
    Json(app.store.sessions.settings())
}

/// `POST /_admin/sts` with `{"sessionSeconds": 4}`: every new role session lasts that long;
/// with `"forgetSessions": true` the sessions handed out so far are forgotten (their keys refused).
async fn configure_sts(State(app): State<App>, Json(settings): Json<StsSettings>) -> Json<StsSettings> {
    app.store.sessions.configure(&settings);
    Json(app.store.sessions.settings())
}

async fn handle(State(app): State<App>, RawQuery(query): RawQuery, headers: HeaderMap, body: Bytes) -> Response {
    let request_id = uuid::Uuid::new_v4().to_string();
    let raw = if body.is_empty() { query.unwrap_or_default() } else { String::from_utf8_lossy(&body).into_owned() };
    let params = Params::parse(&raw);
    let action = params.get("Action").unwrap_or("").to_owned();
    let guard = match app.admin.begin_call(&action).await {
        Ok(guard) => guard,
        Err(rejection) => return answer_for(rejection, &action, &params, &headers, &request_id),
    };
    if action == "AssumeRoleWithWebIdentity" {
        // Unsigned, as in AWS: the web identity token is the credential.
        return guard.finish(app.store.sessions.assume_role_with_web_identity(&params, &request_id));
    }
    let Some(mut caller) = Caller::from_headers(&headers) else {
        let error = Ec2Error::auth_failure("AWS was not able to validate the provided access credentials");
        return guard.finish(error.to_response(&request_id));
    };
    let session_token = headers.get("x-amz-security-token").and_then(|v| v.to_str().ok());
    if let Err(refusal) = app.store.sessions.authorize(&mut caller, session_token) {
        return guard.finish(refusal.to_response(&action, &request_id));
    }
    tracing::debug!(action = %action, account = %caller.account, "fake-ec2 request");
    let response = if action == "GetCallerIdentity" {
        sts::get_caller_identity(&caller, &request_id)
    } else if action.is_empty() {
        Ec2Error::client("MissingAction", "The request must contain the parameter Action").to_response(&request_id)
    } else {
        let ctx = Ctx {
            caller: &caller,
            now: Instant::now(),
            timing: app.admin.timing(),
            consistency: app.admin.consistency(),
        };
        let answer = {
            let mut world = app.store.world();
            dispatch(&mut world, &ctx, &action, &params)
        };
        match answer {
            Ok(body) => xml_response(StatusCode::OK, &request_id, ec2_document(&action, &request_id, &body.finish())),
            Err(error) => error.to_response(&request_id),
        }
    };
    match guard.after_fault() {
        Some(rejection) => answer_for(rejection, &action, &params, &headers, &request_id),
        None => response,
    }
}

/// The answer to a refused call: the hooks' error for its fault kind, except a
/// placement fault on RunInstances, which EC2 answers naming the request's
/// instance type and Availability Zone ([`Ec2Error::placement`]).
fn answer_for(rejection: Rejection, action: &str, params: &Params, headers: &HeaderMap, request_id: &str) -> Response {
    if rejection.kind != FaultKind::Placement || action != "RunInstances" {
        return rejection.into_response();
    }
    let region = Caller::from_headers(headers).map_or_else(|| "us-east-1".to_owned(), |c| c.region);
    let (instance_type, zone) = crate::actions::run::requested_placement(params, &region);
    Ec2Error::placement(&instance_type, &zone, &region).to_response(request_id)
}
