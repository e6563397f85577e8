//! Hostile and heavy input at the socket: each case gets a clear error or a
//! closed connection, provider code does not run for it, the server stays up,
//! and other callers are served. Each test fails when its protection goes.

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Buf, BufMut};
use machine_driver_proto::v1 as pb;
use prost::Message;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// A status call that must work after the hostile one.
async fn still_serves(srv: &Running) {
    let mut c = client(&srv.socket).await;
    let answer = c.get_machine_status(status("after")).await.expect("the server still serves other callers");
    assert_eq!(answer.into_inner().node_name, "after");
}

#[tokio::test]
async fn a_message_beyond_the_limit_is_refused_without_reaching_the_provider() {
    let mut srv = start("oversized", |_| {}).await;
    let mut c = client(&srv.socket).await;
    let mut req = create("big");
    // 5 MiB in a secret key the server does not know: the message exceeds the 4 MiB decoding limit.
    req.secret.as_mut().expect("secret").data.insert("blob".into(), vec![b'x'; 5 << 20]);
    let err = c.create_machine(req).await.expect_err("oversized");
    assert!(matches!(err.code(), Code::OutOfRange | Code::ResourceExhausted), "{err:?}");
    assert_eq!(srv.driver.seen.calls.load(Ordering::SeqCst), 0);
    still_serves(&srv).await;
    srv.stop();
}

#[tokio::test]
async fn deeply_nested_and_huge_provider_specs_are_invalid_argument() {
    let mut srv = start("nested", |_| {}).await;
    let mut c = client(&srv.socket).await;

    let mut nested = create("nested");
    let depth = 100_000;
    nested.machine_class.as_mut().expect("class").provider_spec =
        format!("{{\"a\":{}{}}}", "[".repeat(depth), "]".repeat(depth));
    let err = c.create_machine(nested).await.expect_err("nested");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().starts_with("providerSpec"), "{}", err.message());

    // Three MiB of keys is a valid object: accepted as data, no crash, no quadratic blow-up.
    let mut huge = create("slow-0");
    let keys: Vec<String> = (0..100_000).map(|i| format!("\"k{i}\":\"{}\"", "v".repeat(16))).collect();
    huge.machine_class.as_mut().expect("class").provider_spec = format!("{{{}}}", keys.join(","));
    let started = std::time::Instant::now();
    c.create_machine(huge).await.expect("a large flat spec is accepted");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    still_serves(&srv).await;
    srv.stop();
}

#[tokio::test]
async fn thousands_of_secret_keys_are_served() {
    let mut srv = start("secret-keys", |_| {}).await;
    let mut c = client(&srv.socket).await;
    let mut req = create("many-keys");
    let data = &mut req.secret.as_mut().expect("secret").data;
    for i in 0..10_000 {
        data.insert(format!("key-{i}"), format!("value-{i}").into_bytes());
    }
    c.create_machine(req).await.expect("10,000 secret keys");
    assert_eq!(srv.driver.seen.calls.load(Ordering::SeqCst), 1);
    srv.stop();
}

/// Sends raw protobuf bytes and reads the raw answer.
#[derive(Debug, Clone, Default)]
struct RawCodec;

#[derive(Debug, Clone, Default)]
struct RawCoder;

impl Encoder for RawCoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCoder;
    type Decoder = RawCoder;
    fn encoder(&mut self) -> RawCoder {
        RawCoder
    }
    fn decoder(&mut self) -> RawCoder {
        RawCoder
    }
}

#[tokio::test]
async fn invalid_utf8_in_a_string_field_is_refused_without_reaching_the_provider() {
    let mut srv = start("utf8", |_| {}).await;
    let mut raw = create("marker-zzzz").encode_to_vec();
    let at = raw.windows(4).position(|w| w == b"zzzz").expect("name bytes");
    raw[at..at + 4].copy_from_slice(&[0xff, 0xfe, 0xfd, 0xfc]);

    let mut grpc = tonic::client::Grpc::new(channel(&srv.socket).await);
    grpc.ready().await.expect("ready");
    let path = http::uri::PathAndQuery::from_static("/machinedriver.v1.MachineDriverService/CreateMachine");
    let err = grpc.unary(tonic::Request::new(raw), path, RawCodec).await.expect_err("invalid UTF-8");
    assert!(matches!(err.code(), Code::Internal | Code::InvalidArgument), "{err:?}");
    assert!(err.message().contains("decode"), "{}", err.message());
    assert_eq!(srv.driver.seen.calls.load(Ordering::SeqCst), 0);
    // A well-formed message sent the same raw way is served: the codec is not what failed.
    grpc.ready().await.expect("ready");
    let ok = grpc
        .unary(
            tonic::Request::new(status("raw-ok").encode_to_vec()),
            http::uri::PathAndQuery::from_static("/machinedriver.v1.MachineDriverService/GetMachineStatus"),
            RawCodec,
        )
        .await
        .expect("raw well-formed call");
    assert_eq!(pb::GetMachineStatusResponse::decode(ok.into_inner().as_slice()).expect("answer").node_name, "raw-ok");
    srv.stop();
}

#[tokio::test]
async fn garbage_on_the_socket_closes_that_connection_only() {
    let mut srv = start("garbage", |_| {}).await;
    let mut stream = tokio::net::UnixStream::connect(&srv.socket).await.expect("connect");
    let mut garbage = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    garbage.extend((0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    let _ = stream.write_all(&garbage).await;
    let mut sink = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut sink)).await;
    assert!(closed.is_ok(), "the server kept a connection that sent garbage open");
    still_serves(&srv).await;
    srv.stop();
}

#[tokio::test]
async fn ten_thousand_concurrent_calls_wait_for_the_concurrency_limit_and_all_complete() {
    let mut srv = start("flood", |a| a.max_concurrent_calls = 16).await;
    let channel = channel(&srv.socket).await;
    let calls = 10_000;
    let tasks: Vec<_> = (0..calls)
        .map(|_| {
            let mut c = pb::machine_driver_service_client::MachineDriverServiceClient::new(channel.clone());
            tokio::spawn(async move { c.get_machine_status(status("slow-2")).await.map(|_| ()) })
        })
        .collect();
    let mut failed = Vec::new();
    for t in tasks {
        if let Err(e) = t.await.expect("task") {
            let mut chain = format!("{:?}: {}", e.code(), e.message());
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                chain.push_str(&format!(" <- {s}"));
                source = s.source();
            }
            failed.push(chain);
        }
    }
    assert!(failed.is_empty(), "{} of {calls} calls failed: {:?}", failed.len(), &failed[..failed.len().min(5)]);
    assert_eq!(srv.driver.seen.calls.load(Ordering::SeqCst), calls);
    let most = srv.driver.seen.max_in_flight.load(Ordering::SeqCst);
    assert!(most <= 16, "{most} calls ran in provider code at once; the limit is 16");
    assert!(most >= 8, "the limit was never approached ({most}): the test did not load the server");
    srv.stop();
}
