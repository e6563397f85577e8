//! Socket conventions and graceful shutdown of the real server.

mod support;

use std::time::Duration;

use machine_driver_server::ServeError;
use support::*;

#[tokio::test]
async fn stale_socket_is_replaced_and_removed_on_shutdown() {
    let path = socket_path("stale");
    drop(std::os::unix::net::UnixListener::bind(&path).expect("bind stale"));
    assert!(path.exists(), "stale socket file left behind");
    let driver = TestDriver::default();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let a = args(&path);
    let task = tokio::spawn(async move {
        machine_driver_server::serve(
            a,
            driver,
            async {
                let _ = rx.await;
            },
            None,
        )
        .await
    });
    let mut c = None;
    for _ in 0..200 {
        if std::os::unix::net::UnixStream::connect(&path).is_ok() {
            c = Some(client(&path).await);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut c = c.expect("server came up on the stale path");
    c.get_machine_status(status("m")).await.expect("served");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777, 0o660);
    let _ = tx.send(());
    task.await.expect("join").expect("clean stop");
    assert!(!path.exists(), "socket removed on shutdown");
}

#[tokio::test]
async fn refuses_to_replace_a_regular_file_or_a_live_socket() {
    let path = socket_path("file");
    std::fs::write(&path, b"precious").expect("write file");
    let err = machine_driver_server::serve(args(&path), TestDriver::default(), async {}, None)
        .await
        .expect_err("must refuse");
    assert!(matches!(err, ServeError::NotASocket(_)), "{err}");
    assert_eq!(std::fs::read(&path).expect("still there"), b"precious");
    std::fs::remove_file(&path).expect("cleanup");

    let mut live = start("live", |_| {}).await;
    let err = machine_driver_server::serve(args(&live.socket), TestDriver::default(), async {}, None)
        .await
        .expect_err("in use");
    assert!(matches!(err, ServeError::SocketInUse(_)), "{err}");
    live.stop();
}

#[tokio::test]
async fn bad_configuration_fails_before_binding() {
    let path = socket_path("badcfg");
    let mut a = args(&path);
    a.endpoint = "unix://relative.sock".into();
    let err = machine_driver_server::serve(a, TestDriver::default(), async {}, None).await.expect_err("bad endpoint");
    assert_eq!(err.exit_code(), 2, "{err}");
    assert!(!path.exists());
}

#[tokio::test]
async fn graceful_shutdown_finishes_in_flight_calls_and_refuses_new_ones() {
    let mut srv = start("graceful", |_| {}).await;
    let mut c = client(&srv.socket).await;
    let in_flight = tokio::spawn(async move { c.get_machine_status(status("slow-600")).await });
    tokio::time::sleep(Duration::from_millis(150)).await;
    srv.stop();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A new connection is not accepted once shutdown began.
    let refused = tokio::time::timeout(
        Duration::from_millis(500),
        tonic::transport::Endpoint::from_shared(format!("unix://{}", srv.socket.display())).expect("ep").connect(),
    )
    .await;
    assert!(!matches!(refused, Ok(Ok(_))), "new connection must not be served during shutdown");
    let answer = in_flight.await.expect("join");
    assert!(answer.is_ok(), "in-flight call finished: {answer:?}");
    (&mut srv.done).await.expect("join").expect("clean stop");
    assert!(!srv.socket.exists(), "socket removed");
}

#[tokio::test]
async fn grace_period_bounds_shutdown() {
    let mut srv = start("grace", |a| a.shutdown_grace = Duration::from_millis(200)).await;
    let mut c = client(&srv.socket).await;
    let in_flight = tokio::spawn(async move { c.get_machine_status(status("slow-5000")).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    srv.stop();
    (&mut srv.done).await.expect("join").expect("stop");
    assert!(started.elapsed() < Duration::from_secs(2), "shutdown took {:?}", started.elapsed());
    let abandoned = in_flight.await.expect("join").expect_err("abandoned call fails");
    assert_eq!(abandoned.code(), tonic::Code::Unavailable, "{abandoned:?}");
    assert!(!srv.socket.exists(), "socket removed after the grace period too");
}
