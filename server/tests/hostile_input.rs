//! Hostile and heavy input at the socket: each case gets a clear error or a
//! closed connection, provider code does not run for it, the server stays up,
//! and other callers are served. Each test fails when its protection goes.

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Buf, BufMut};
use machine_driver_proto::v1 as pb;
use machine_driver_proto::v1::identity_service_client::IdentityServiceClient;
use prost::Message;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// Taken by the tests that time answers to the second and by the one that
/// loads the machine most, so that the load of one does not fail the timing of another.
static TIMED: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
    let _timed = TIMED.lock().await;
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

/// A raw HTTP/2 connection: the client to open streams with, and the handle
/// to PING the server with (a PONG means every frame sent before it was read).
struct RawH2 {
    client: h2::client::SendRequest<bytes::Bytes>,
    pings: h2::PingPong,
    task: tokio::task::JoinHandle<()>,
}

impl RawH2 {
    async fn connect(socket: &std::path::Path) -> RawH2 {
        let io = tokio::net::UnixStream::connect(socket).await.expect("connect");
        let (client, mut connection) = h2::client::handshake(io).await.expect("HTTP/2 handshake");
        let pings = connection.ping_pong().expect("ping handle");
        let task = tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut raw = RawH2 { client, pings, task };
        // The server's SETTINGS come before its PONG: the stream limit is known after it.
        raw.ping().await;
        raw
    }

    async fn ping(&mut self) {
        tokio::time::timeout(Duration::from_secs(10), self.pings.ping(h2::Ping::opaque()))
            .await
            .expect("PONG in time")
            .expect("PONG");
    }

    /// Opens a gRPC call to `path` whose HEADERS are sent and whose body never is.
    async fn stall(&mut self, path: &str) -> (h2::client::ResponseFuture, h2::SendStream<bytes::Bytes>) {
        let request = http::Request::builder()
            .method("POST")
            .uri(format!("http://localhost{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .expect("request");
        let client = self.client.clone().ready().await.expect("stream capacity");
        self.client = client;
        self.client.send_request(request, false).expect("HEADERS sent")
    }
}

const STATUS_PATH: &str = "/machinedriver.v1.MachineDriverService/GetMachineStatus";
const HEALTH_PATH: &str = "/grpc.health.v1.Health/Check";

fn health_request() -> tonic_health::pb::HealthCheckRequest {
    tonic_health::pb::HealthCheckRequest { service: "machinedriver.v1.MachineDriverService".into() }
}

/// Answers within a second, or fails the test naming `what`.
async fn within_a_second<T, E: std::fmt::Debug>(
    what: &str,
    call: impl std::future::Future<Output = Result<T, E>>,
) -> T {
    match tokio::time::timeout(Duration::from_secs(1), call).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => panic!("{what} failed: {e:?}"),
        Err(_) => panic!("{what} did not answer within a second"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_streams_hold_no_call_slot_and_are_answered_after_the_body_timeout() {
    let _timed = TIMED.lock().await;
    // The reproduction's numbers: 1,024 call slots, 512 streams per connection, two connections
    // of stalled streams; a short body timeout so that the test sees it strike.
    let body_timeout = Duration::from_secs(5);
    let mut srv = start("stalled", |a| {
        a.max_concurrent_calls = 1024;
        a.max_streams_per_connection = 512;
        a.request_body_timeout = body_timeout;
    })
    .await;
    let opened = std::time::Instant::now();
    let mut stalled = Vec::new();
    let mut connections = Vec::new();
    for _ in 0..2 {
        let mut raw = RawH2::connect(&srv.socket).await;
        assert_eq!(raw.client.current_max_send_streams(), 512, "the server's stream limit");
        for _ in 0..512 {
            stalled.push(raw.stall(STATUS_PATH).await);
        }
        raw.ping().await;
        connections.push(raw);
    }
    assert_eq!(stalled.len(), 1024);
    // Stalled health checks too, on a connection of their own.
    let mut raw = RawH2::connect(&srv.socket).await;
    for _ in 0..8 {
        stalled.push(raw.stall(HEALTH_PATH).await);
    }
    raw.ping().await;
    connections.push(raw);

    // Another connection is served at once: health, Identity, and a call that needs a call slot.
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel(&srv.socket).await);
    let h = within_a_second("health check", health.check(health_request())).await.into_inner();
    assert_eq!(h.status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);
    let mut id = IdentityServiceClient::new(channel(&srv.socket).await);
    assert!(within_a_second("Identity Probe", id.probe(pb::ProbeRequest {})).await.into_inner().ready);
    let mut c = client(&srv.socket).await;
    let (_, machine_class, secret) = parts("list");
    let list =
        within_a_second("ListMachines", c.list_machines(pb::ListMachinesRequest { machine_class, secret })).await;
    assert_eq!(list.into_inner().machines.len(), 1);
    assert!(opened.elapsed() < body_timeout, "the checks ran after the body timeout ({:?})", opened.elapsed());
    let mut early = 0;
    for (response, _) in stalled.iter_mut() {
        if futures::FutureExt::now_or_never(response).is_some() {
            early += 1;
        }
    }
    assert_eq!(early, 0, "stalled streams were answered before the body timeout");

    // The stalled streams are answered DEADLINE_EXCEEDED (and reset) once the body timeout is over.
    let answers = futures::future::join_all(stalled.into_iter().map(|(response, body)| async move {
        let r = tokio::time::timeout(body_timeout + Duration::from_secs(20), response).await;
        drop(body);
        (r, opened.elapsed())
    }))
    .await;
    for (answer, at) in answers {
        let response = answer.expect("a stalled stream was never answered").expect("an answer, not a reset");
        let status = response.headers().get("grpc-status").and_then(|v| v.to_str().ok()).map(str::to_string);
        assert_eq!(status.as_deref(), Some("4"), "DEADLINE_EXCEEDED: {:?}", response.headers());
        assert!(at >= body_timeout, "answered after {at:?}, before the {body_timeout:?} body timeout");
    }
    assert_eq!(srv.driver.seen.calls.load(Ordering::SeqCst), 1, "only ListMachines reached provider code");
    // The connections that stalled are still usable.
    for raw in &mut connections {
        raw.ping().await;
    }
    still_serves(&srv).await;
    srv.stop();
}

#[tokio::test]
async fn health_checks_and_identity_answer_while_every_call_slot_is_taken() {
    let _timed = TIMED.lock().await;
    let mut srv = start("saturated", |a| a.max_concurrent_calls = 2).await;
    let channel = channel(&srv.socket).await;
    let slow: Vec<_> = (0..4)
        .map(|_| {
            let mut c = pb::machine_driver_service_client::MachineDriverServiceClient::new(channel.clone());
            tokio::spawn(async move { c.get_machine_status(status("slow-2500")).await.map(|_| ()) })
        })
        .collect();
    for _ in 0..500 {
        if srv.driver.seen.in_flight.load(Ordering::SeqCst) == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(srv.driver.seen.in_flight.load(Ordering::SeqCst), 2, "both call slots taken");

    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    within_a_second("health check", health.check(health_request())).await;
    let mut id = IdentityServiceClient::new(channel.clone());
    within_a_second("Identity Probe", id.probe(pb::ProbeRequest {})).await;
    // The limit does hold: a driver call waits for a slot.
    let mut c = pb::machine_driver_service_client::MachineDriverServiceClient::new(channel.clone());
    let waited = tokio::time::timeout(Duration::from_millis(500), c.get_machine_status(status("fast"))).await;
    assert!(waited.is_err(), "a call was served while both slots were taken");
    for t in slow {
        t.await.expect("task").expect("slow call");
    }
    srv.stop();
}

#[tokio::test]
async fn a_connection_beyond_the_cap_is_closed_and_one_is_served_once_another_closes() {
    let mut srv = start("conn-cap", |a| a.max_connections = 2).await;
    let first = RawH2::connect(&srv.socket).await;
    let _second = RawH2::connect(&srv.socket).await;

    let mut third = tokio::net::UnixStream::connect(&srv.socket).await.expect("connect");
    let _ = third.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").await;
    let mut got = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), third.read_to_end(&mut got)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "the third connection was served: {closed:?}, {got:?}");

    // Closing one gives its slot back.
    first.task.abort();
    drop(first);
    let mut served = false;
    for _ in 0..100 {
        let mut probe = tokio::net::UnixStream::connect(&srv.socket).await.expect("connect");
        let _ = probe.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").await;
        let mut buf = [0u8; 9];
        if let Ok(Ok(9)) = tokio::time::timeout(Duration::from_secs(1), probe.read(&mut buf)).await {
            assert_eq!(buf[3], 0x4, "the server's SETTINGS");
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served, "no connection was served after one of the two closed");
    srv.stop();
}

#[tokio::test]
async fn the_default_limits_keep_one_connection_well_below_the_call_limit() {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        server: machine_driver_server::ServerArgs,
    }
    let defaults = <Cli as clap::Parser>::try_parse_from(["driver"]).expect("defaults parse").server;
    assert!(
        defaults.max_streams_per_connection as usize * 2 <= defaults.max_concurrent_calls,
        "{} streams per connection against {} calls",
        defaults.max_streams_per_connection,
        defaults.max_concurrent_calls
    );
    assert_eq!(defaults.request_body_timeout, Duration::from_secs(10));
    assert!(defaults.max_connections >= 4 && !defaults.http2_keepalive_interval.is_zero());

    let streams = defaults.max_streams_per_connection;
    let mut srv = start("default-streams", |a| a.max_streams_per_connection = streams).await;
    let raw = RawH2::connect(&srv.socket).await;
    assert_eq!(raw.client.current_max_send_streams(), streams as usize, "advertised in SETTINGS");
    srv.stop();
}

/// Does the HTTP/2 handshake by hand and then never answers anything (PINGs included).
async fn silent_peer(socket: &std::path::Path) -> tokio::net::UnixStream {
    let mut s = tokio::net::UnixStream::connect(socket).await.expect("connect");
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").await.expect("preface");
    s
}

/// Reads until the server closes `s`; `None` if it is still open after `wait`.
async fn closed_within(s: &mut tokio::net::UnixStream, wait: Duration) -> Option<Duration> {
    let started = std::time::Instant::now();
    let mut sink = Vec::new();
    match tokio::time::timeout(wait, s.read_to_end(&mut sink)).await {
        Ok(_) => Some(started.elapsed()),
        Err(_) => None,
    }
}

#[tokio::test]
async fn a_peer_that_does_not_answer_keepalive_pings_loses_its_connection() {
    let _timed = TIMED.lock().await;
    let mut srv = start("keepalive", |a| {
        a.http2_keepalive_interval = Duration::from_millis(300);
        a.http2_keepalive_timeout = Duration::from_millis(300);
    })
    .await;
    let mut silent = silent_peer(&srv.socket).await;
    let mut answering = RawH2::connect(&srv.socket).await;
    let closed = closed_within(&mut silent, Duration::from_secs(10)).await;
    assert!(closed.is_some(), "a peer that never answered a PING kept its connection");
    // A peer that answers PINGs (h2 does) keeps its connection meanwhile.
    answering.ping().await;
    assert!(!answering.task.is_finished(), "the answering peer's connection was closed");
    srv.stop();

    let mut off = start("keepalive-off", |a| a.http2_keepalive_interval = Duration::ZERO).await;
    let mut silent = silent_peer(&off.socket).await;
    assert_eq!(closed_within(&mut silent, Duration::from_millis(1500)).await, None, "closed without keepalive");
    off.stop();
}
