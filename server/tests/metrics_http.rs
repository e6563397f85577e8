//! The optional HTTP listener: Prometheus `/metrics` with per-RPC series, and
//! `/healthz` that turns 503 when shutdown begins. Own test binary: it installs
//! the global metrics recorder.

mod support;

use std::time::Duration;

use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.expect("read");
    let status = buf.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, buf)
}

#[tokio::test]
async fn metrics_and_healthz() {
    let prometheus = machine_driver_server::install_prometheus().expect("recorder");
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
    let addr = free.local_addr().expect("addr");
    drop(free);

    let socket = socket_path("metrics");
    let mut a = args(&socket);
    a.metrics_listen = Some(addr);
    a.shutdown_grace = Duration::from_millis(800);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(machine_driver_server::serve(
        a,
        TestDriver::default(),
        async {
            let _ = rx.await;
        },
        Some(prometheus),
    ));
    for _ in 0..200 {
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut c = client(&socket).await;
    c.create_machine(create("m1")).await.expect("ok call");
    // The test driver's machines are never initialized: as MCM's Go providers
    // do, that answer counts as a failure with MCM's code 17 (Uninitialized).
    c.get_machine_status(status("m1")).await.expect("uninitialized answer");
    c.get_machine_status(status("err-throttle")).await.expect_err("failing call");

    let (code, body) = get(addr, "/metrics").await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("mcm_cloud_api_driver_request_duration_seconds_bucket"), "{body}");
    assert!(body.contains(r#"operation="create_machine""#), "{body}");
    assert!(
        body.contains(r#"mcm_cloud_api_driver_requests_failed_total{provider="test",operation="get_machine_status",error_code="17"} 1"#),
        "{body}"
    );
    assert!(
        !body.contains(
            r#"mcm_cloud_api_driver_request_duration_seconds_count{provider="test",operation="get_machine_status"}"#
        ),
        "an uninitialized status records no duration: {body}"
    );
    assert!(
        body.contains(r#"mcm_cloud_api_driver_requests_failed_total{provider="test",operation="get_machine_status",error_code="14"} 1"#),
        "{body}"
    );
    assert_eq!(get(addr, "/healthz").await.0, 200);
    assert_eq!(get(addr, "/nope").await.0, 404);

    // Shutdown with a call in flight: /healthz reports 503 while it finishes.
    let mut c2 = client(&socket).await;
    let slow = tokio::spawn(async move { c2.get_machine_status(status("slow-400")).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = tx.send(());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(get(addr, "/healthz").await.0, 503);
    assert!(slow.await.expect("join").is_ok());
    server.await.expect("join").expect("clean stop");
}
