//! The `/_admin/*` HTTP routes; a cloud fake merges them into its own router.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::admin::Admin;
use crate::counters::CallCounts;
use crate::faults::FaultSpec;
use crate::hooks::{Inventory, Reclaim};
use crate::plant::{PlantError, PlantRequest};
use crate::settings::{Consistency, LatencySpec, RateLimitSpec, Timing};

/// The path prefix of the admin API.
pub const ADMIN_PREFIX: &str = "/_admin";

/// Routes for every endpoint of `docs/fake-admin-api.md`, with full `/_admin/...` paths.
pub fn admin_router(admin: Admin) -> Router {
    Router::new()
        .route("/_admin/calls", get(calls))
        .route("/_admin/calls/reset", post(reset_calls))
        .route("/_admin/faults", post(add_fault).delete(clear_faults))
        .route("/_admin/latency", post(latency))
        .route("/_admin/rate-limit", post(rate_limit))
        .route("/_admin/consistency", post(consistency))
        .route("/_admin/timing", post(timing))
        .route("/_admin/inventory", get(inventory))
        .route("/_admin/reset", post(reset))
        .route("/_admin/instances", post(plant))
        .route("/_admin/instances/{id}/terminate", post(terminate))
        .route("/_admin/instances/{id}/reclaim", post(reclaim))
        .with_state(admin)
}

async fn calls(State(admin): State<Admin>) -> Json<CallCounts> {
    Json(admin.counts())
}

async fn reset_calls(State(admin): State<Admin>) -> Json<Value> {
    admin.reset_counts();
    Json(json!({}))
}

async fn add_fault(State(admin): State<Admin>, Json(spec): Json<FaultSpec>) -> Json<Value> {
    Json(json!({ "id": admin.add_fault(&spec) }))
}

async fn clear_faults(State(admin): State<Admin>) -> Json<Value> {
    admin.clear_faults();
    Json(json!({}))
}

async fn latency(State(admin): State<Admin>, Json(spec): Json<LatencySpec>) -> Json<Value> {
    admin.set_latency(&spec);
    Json(json!({}))
}

async fn rate_limit(State(admin): State<Admin>, Json(spec): Json<RateLimitSpec>) -> Json<Value> {
    admin.set_rate_limit(&spec);
    Json(json!({}))
}

async fn consistency(State(admin): State<Admin>, Json(spec): Json<Consistency>) -> Json<Value> {
    admin.set_consistency(spec);
    Json(json!({}))
}

async fn timing(State(admin): State<Admin>, Json(spec): Json<Timing>) -> Json<Value> {
    admin.set_timing(spec);
    Json(json!({}))
}

async fn inventory(State(admin): State<Admin>) -> Json<Inventory> {
    Json(admin.inventory())
}

async fn reset(State(admin): State<Admin>) -> Json<Value> {
    admin.reset();
    Json(json!({}))
}

async fn terminate(State(admin): State<Admin>, Path(id): Path<String>) -> (StatusCode, Json<Value>) {
    if admin.hooks().terminate(&id) {
        (StatusCode::OK, Json(json!({})))
    } else {
        (StatusCode::NOT_FOUND, Json(json!({ "error": format!("no live instance {id}") })))
    }
}

async fn reclaim(State(admin): State<Admin>, Path(id): Path<String>) -> (StatusCode, Json<Value>) {
    match admin.hooks().reclaim(&id) {
        Reclaim::Reclaimed(shown) => (StatusCode::OK, Json(json!({ "reclaimed": id, "shown": shown }))),
        Reclaim::NotFound => (StatusCode::NOT_FOUND, Json(json!({ "error": format!("no live instance {id}") }))),
        Reclaim::NotSpot => (StatusCode::CONFLICT, Json(json!({ "error": format!("instance {id} is not a Spot VM") }))),
        Reclaim::Unsupported => {
            (StatusCode::NOT_IMPLEMENTED, Json(json!({ "error": "this cloud fake has no Spot VMs to reclaim" })))
        }
    }
}

async fn plant(State(admin): State<Admin>, Json(request): Json<PlantRequest>) -> (StatusCode, Json<Value>) {
    match admin.hooks().plant(&request) {
        Ok(planted) => (StatusCode::OK, Json(json!(planted))),
        Err(error) => {
            let status = match error {
                PlantError::Unsupported => StatusCode::NOT_IMPLEMENTED,
                PlantError::Invalid(_) => StatusCode::BAD_REQUEST,
                PlantError::Conflict(_) => StatusCode::CONFLICT,
            };
            (status, Json(json!({ "error": error.to_string() })))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::{Body, to_bytes};
    use axum::http::{Method, Request, StatusCode};
    use axum::response::{IntoResponse, Response};
    use tower::ServiceExt;

    use super::*;
    use crate::faults::FaultKind;
    use crate::hooks::{CloudHooks, InventoryInstance};
    use crate::operations::OpClass;

    struct Hooks;

    impl CloudHooks for Hooks {
        fn operation_class(&self, _operation: &str) -> Option<OpClass> {
            Some(OpClass::Create)
        }
        fn fault_response(&self, _kind: FaultKind, _operation: &str) -> Response {
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
        fn inventory(&self) -> Inventory {
            Inventory {
                instances: vec![InventoryInstance {
                    id: "i-1".into(),
                    name: "m".into(),
                    state: "running".into(),
                    live: true,
                    tags: [("Name".to_owned(), "m".to_owned())].into(),
                    extra: serde_json::Map::new(),
                }],
                images: vec![],
                dependents: vec![],
            }
        }
        fn reset(&self) {}
        fn terminate(&self, id: &str) -> bool {
            id == "i-1"
        }
    }

    async fn call(router: &Router, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
            .expect("request");
        let response = router.clone().oneshot(request).await.expect("infallible");
        let status = response.status();
        let bytes = to_bytes(response.into_body(), 1 << 20).await.expect("body");
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    #[tokio::test]
    async fn endpoints_speak_the_documented_json() {
        let admin = Admin::new(Arc::new(Hooks));
        let router = admin_router(admin.clone());
        let (status, body) = call(
            &router,
            Method::POST,
            "/_admin/faults",
            Some(json!({"operation": "create", "kind": "throttle", "times": 1})),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert!(body["id"].is_string());
        assert!(admin.begin_call("RunInstances").await.is_err());
        assert!(admin.begin_call("RunInstances").await.is_ok());

        let (_, body) = call(&router, Method::GET, "/_admin/calls", None).await;
        assert_eq!(
            body,
            json!({
                "calls": {"RunInstances": 2}, "classes": {"create": 2}, "total": 2, "throttled": 0,
                "injected": {"throttle": 1}, "lost_answers": 0
            })
        );
        call(&router, Method::POST, "/_admin/calls/reset", None).await;
        let (_, body) = call(&router, Method::GET, "/_admin/calls", None).await;
        assert_eq!(body["total"], 0);

        call(&router, Method::POST, "/_admin/faults", Some(json!({"operation": "*", "kind": "auth"}))).await;
        call(&router, Method::DELETE, "/_admin/faults", None).await;
        assert!(admin.begin_call("X").await.is_ok());

        call(&router, Method::POST, "/_admin/timing", Some(json!({"boot_ms": 5, "stop_ms": 6}))).await;
        assert_eq!(admin.timing().boot_ms, 5);
        call(&router, Method::POST, "/_admin/consistency", Some(json!({"invisible_ms": 700}))).await;
        assert_eq!(admin.consistency().invisible_ms, 700);
        call(&router, Method::POST, "/_admin/rate-limit", Some(json!({"per_second": 1, "burst": 1}))).await;
        assert!(admin.begin_call("X").await.is_ok());
        assert!(admin.begin_call("X").await.is_err());

        let (_, body) = call(&router, Method::GET, "/_admin/inventory", None).await;
        assert_eq!(body["instances"][0]["id"], "i-1");
        assert_eq!(body["instances"][0]["live"], true);

        let (status, _) = call(&router, Method::POST, "/_admin/instances/i-1/terminate", None).await;
        assert_eq!(status, StatusCode::OK);
        let (status, body) = call(&router, Method::POST, "/_admin/instances/i-2/terminate", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body["error"], "no live instance i-2");

        let (status, _) = call(&router, Method::POST, "/_admin/reset", None).await;
        assert_eq!(status, StatusCode::OK);
        assert!(admin.begin_call("X").await.is_ok(), "reset removes the rate limit");

        let (status, _) =
            call(&router, Method::POST, "/_admin/faults", Some(json!({"operation": "*", "kind": "nope"}))).await;
        assert!(status.is_client_error());

        let (status, body) = call(&router, Method::POST, "/_admin/instances", Some(json!({"name": "m"}))).await;
        assert_eq!(status, StatusCode::NOT_IMPLEMENTED);
        assert_eq!(body["error"], "this fake cannot plant instances");
    }

    /// Plants `m` in its default region, refuses `taken` as a conflict and anything else as invalid.
    struct Planting;

    impl CloudHooks for Planting {
        fn operation_class(&self, _operation: &str) -> Option<OpClass> {
            None
        }
        fn fault_response(&self, _kind: FaultKind, _operation: &str) -> Response {
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
        fn inventory(&self) -> Inventory {
            Inventory::default()
        }
        fn reset(&self) {}
        fn terminate(&self, _id: &str) -> bool {
            false
        }
        fn plant(&self, request: &PlantRequest) -> Result<crate::plant::Planted, PlantError> {
            request.check_scope_keys(&["region"])?;
            match request.name.as_str() {
                "m" => Ok(crate::plant::Planted {
                    id: format!("i-{}", request.tags.len()),
                    name: request.name.clone(),
                    scope: [("region".to_owned(), request.scope_or("region", "r-1"))].into(),
                    attached: Vec::new(),
                }),
                "taken" => Err(PlantError::Conflict("instance taken exists".into())),
                other => Err(PlantError::Invalid(format!("bad name {other}"))),
            }
        }
    }

    #[tokio::test]
    async fn planting_answers_the_documented_json_and_codes() {
        let router = admin_router(Admin::new(Arc::new(Planting)));
        let body = json!({"name": "m", "tags": {"a": "1", "b": ""}, "network_tags": [], "scope": {}});
        let (status, answer) = call(&router, Method::POST, "/_admin/instances", Some(body)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(answer, json!({"id": "i-2", "name": "m", "scope": {"region": "r-1"}}));
        let (status, answer) = call(&router, Method::POST, "/_admin/instances", Some(json!({"name": "taken"}))).await;
        assert_eq!((status, answer["error"].as_str()), (StatusCode::CONFLICT, Some("instance taken exists")));
        let (status, _) = call(&router, Method::POST, "/_admin/instances", Some(json!({"name": "x"}))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let (status, answer) =
            call(&router, Method::POST, "/_admin/instances", Some(json!({"name": "m", "scope": {"zone": "z"}}))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(answer["error"].as_str().is_some_and(|e| e.contains("zone")), "{answer}");
        let (status, _) =
            call(&router, Method::POST, "/_admin/instances", Some(json!({"name": "m", "labels": {}}))).await;
        assert!(status.is_client_error(), "unknown fields are refused");
    }
}
