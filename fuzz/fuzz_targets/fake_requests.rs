//! Any request to any fake cloud (which fake, method, path, query, content
//! type and body taken from the input): the fake answers it, as the cloud
//! does, with an answer below 500 (no fault is injected, so a 5xx is a fake
//! bug), and never panics.
#![no_main]

use std::sync::OnceLock;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request};
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;

const METHODS: [Method; 5] = [Method::GET, Method::POST, Method::PUT, Method::DELETE, Method::PATCH];
const CONTENT_TYPES: [Option<&str>; 3] =
    [None, Some("application/x-www-form-urlencoded; charset=utf-8"), Some("application/json")];

/// One router per fake (EC2, GCE, ARM, ECS, OpenStack) and the runtime that drives them.
fn fakes() -> &'static (tokio::runtime::Runtime, Vec<(&'static str, Router)>) {
    static FAKES: OnceLock<(tokio::runtime::Runtime, Vec<(&'static str, Router)>)> = OnceLock::new();
    FAKES.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let routers = vec![
            ("fake-ec2", fake_ec2::router()),
            ("fake-gce", fake_gce::router()),
            ("fake-arm", fake_arm::router()),
            ("fake-ecs", fake_ecs::router()),
            ("fake-openstack", fake_openstack::router()),
        ];
        (runtime, routers)
    })
}

fuzz_target!(|data: &[u8]| {
    let [which, method, content_type, rest @ ..] = data else { return };
    let (runtime, routers) = fakes();
    let (name, router) = &routers[usize::from(*which) % routers.len()];
    let mut parts = rest.splitn(2, |b| *b == 0);
    let target = parts.next().unwrap_or_default();
    let body = parts.next().unwrap_or_default().to_vec();
    let Ok(target) = std::str::from_utf8(target) else { return };
    let uri = format!("/{}", target.trim_start_matches('/'));
    let mut request = Request::builder().method(METHODS[usize::from(*method) % METHODS.len()].clone()).uri(uri);
    if let Some(ct) = CONTENT_TYPES[usize::from(*content_type) % CONTENT_TYPES.len()] {
        request = request.header("content-type", ct);
    }
    let Ok(request) = request.body(Body::from(body)) else { return };
    let path = request.uri().path().to_string();
    if path.starts_with("/_admin") {
        return; // the test-only admin API (reset, faults) is not the cloud's surface
    }
    let response = runtime.block_on(router.clone().oneshot(request)).expect("infallible");
    assert!(response.status().as_u16() < 500, "{name} answered {} to {path}", response.status());
});
