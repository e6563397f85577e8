//! Version discovery documents at every service root: not calls (never counted or
//! faulted) and no token needed, as on a real cloud.

use axum::Json;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::NOVA_MAX_MICROVERSION;

fn identity(base: &str) -> Value {
    json!({
        "id": "v3.14",
        "status": "stable",
        "updated": "2020-04-07T00:00:00Z",
        "links": [{"rel": "self", "href": format!("{base}/identity/v3/")}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}],
    })
}

fn compute(base: &str) -> Value {
    json!({
        "id": "v2.1",
        "status": "CURRENT",
        "version": NOVA_MAX_MICROVERSION,
        "min_version": "2.1",
        "updated": "2013-07-23T11:33:21Z",
        "links": [{"rel": "self", "href": format!("{base}/compute/v2.1/")}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"}],
    })
}

fn network(base: &str) -> Value {
    json!({"id": "v2.0", "status": "CURRENT", "links": [{"rel": "self", "href": format!("{base}/network/v2.0/")}]})
}

fn image(base: &str) -> Value {
    json!({"id": "v2.16", "status": "CURRENT", "links": [{"rel": "self", "href": format!("{base}/image/v2/")}]})
}

fn volume(base: &str) -> Value {
    json!({
        "id": "v3.0",
        "status": "CURRENT",
        "version": "3.70",
        "min_version": "3.0",
        "updated": "2023-08-31T00:00:00Z",
        "links": [{"rel": "self", "href": format!("{base}/volume/v3/")}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.volume+json;version=3"}],
    })
}

fn neutron_resources(base: &str) -> Value {
    let resource = |name: &str, collection: &str| json!({"name": name, "collection": collection, "links": [{"rel": "self", "href": format!("{base}/network/v2.0/{collection}")}]});
    json!({"resources": [
        resource("network", "networks"),
        resource("subnet", "subnets"),
        resource("port", "ports"),
        resource("security_group", "security-groups"),
    ]})
}

/// The discovery answer for `GET segments`, or `None` when the path is an API call.
pub(crate) fn answer(method: &Method, segments: &[&str], base: &str) -> Option<Response> {
    if method != Method::GET && method != Method::HEAD {
        return None;
    }
    let multiple = StatusCode::MULTIPLE_CHOICES;
    let (status, body) = match segments {
        [] | ["identity"] => (multiple, json!({"versions": {"values": [identity(base)]}})),
        ["identity", "v3"] => (StatusCode::OK, json!({"version": identity(base)})),
        ["compute"] => (StatusCode::OK, json!({"versions": [compute(base)]})),
        ["compute", "v2.1"] => (StatusCode::OK, json!({"version": compute(base)})),
        ["network"] => (StatusCode::OK, json!({"versions": [network(base)]})),
        ["network", "v2.0"] => (StatusCode::OK, neutron_resources(base)),
        ["image"] => (multiple, json!({"versions": [image(base)]})),
        ["image", "v2"] => (StatusCode::OK, json!({"versions": [image(base)]})),
        ["volume"] => (multiple, json!({"versions": [volume(base)]})),
        ["volume", "v3"] | ["volume", "v3", _] => (StatusCode::OK, json!({"version": volume(base)})),
        _ => return None,
    };
    Some((status, Json(body)).into_response())
}
