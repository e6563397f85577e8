//! `FakeHandle` serves a router on a real socket and stops on shutdown.

use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;
use fake_cloud_support::FakeHandle;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn get_root(addr: SocketAddr) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    Ok(answer)
}

#[tokio::test]
async fn serves_then_stops() {
    let router = Router::new().route("/", get(|| async { "hello" }));
    let handle = FakeHandle::serve("127.0.0.1:0".parse().expect("addr"), router).await.expect("bind");
    let addr = handle.local_addr();
    assert_eq!(handle.url(), format!("http://{addr}"));
    assert_eq!(handle.admin_url(), format!("http://{addr}/_admin"));
    let answer = get_root(addr).await.expect("request");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("hello"));
    handle.shutdown().await;
    assert!(get_root(addr).await.is_err(), "listener closed after shutdown");
}
