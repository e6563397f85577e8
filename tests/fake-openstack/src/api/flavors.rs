//! Nova flavors: `GET /flavors`, `GET /flavors/detail`, `GET /flavors/{id}`.

use axum::Json;
use axum::http::Method;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::Call;
use crate::error::{ApiError, ApiResult, Service};
use crate::state::compute::{FLAVORS, Flavor, flavor};

/// The operation of a flavor path.
pub(crate) fn operation(method: &Method, path: &[&str]) -> Option<&'static str> {
    match (method.as_str(), path) {
        ("GET", ["flavors"] | ["flavors", "detail"]) => Some("flavors.list"),
        ("GET", ["flavors", _]) => Some("flavors.get"),
        _ => None,
    }
}

fn links(call: &Call, id: &str) -> Value {
    json!([
        {"rel": "self", "href": format!("{}/compute/v2.1/flavors/{id}", call.base)},
        {"rel": "bookmark", "href": format!("{}/compute/flavors/{id}", call.base)},
    ])
}

fn detail(call: &Call, (id, name, vcpus, ram, disk): Flavor) -> Value {
    let mut body = json!({
        "id": id,
        "name": name,
        "vcpus": vcpus,
        "ram": ram,
        "disk": disk,
        "OS-FLV-EXT-DATA:ephemeral": 0,
        "OS-FLV-DISABLED:disabled": false,
        "swap": if call.at_least(2, 75) { json!(0) } else { json!("") },
        "rxtx_factor": 1.0,
        "os-flavor-access:is_public": true,
        "links": links(call, id),
    });
    if call.at_least(2, 55) {
        body["description"] = Value::Null;
    }
    if call.at_least(2, 61) {
        body["extra_specs"] = json!({});
    }
    body
}

/// Dispatches a flavor operation.
pub(crate) fn handle(call: &Call, operation: &str) -> ApiResult {
    match operation {
        "flavors.list" => {
            let items: Vec<Value> = FLAVORS
                .iter()
                .map(|f| {
                    if call.seg(1) == "detail" {
                        detail(call, *f)
                    } else {
                        json!({"id": f.0, "name": f.1, "links": links(call, f.0)})
                    }
                })
                .collect();
            Ok(Json(json!({"flavors": items})).into_response())
        }
        _ => {
            let id = call.seg(1);
            let found = flavor(id)
                .ok_or_else(|| ApiError::not_found(Service::Nova, format!("Flavor {id} could not be found.")))?;
            Ok(Json(json!({"flavor": detail(call, found)})).into_response())
        }
    }
}
