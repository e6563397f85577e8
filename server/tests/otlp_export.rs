//! RPC spans reach an OTLP/gRPC collector, joined to the caller's W3C
//! `traceparent`, with no secret in them. Runs the real `run` entry point (the
//! one that installs telemetry) against an in-process fake collector, so it
//! lives in its own test binary: `run` installs the global subscriber and
//! metrics recorder, and is stopped by SIGTERM sent to this process.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use machine_driver_proto::v1 as pb;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use support::*;
use tonic::metadata::MetadataValue;

const CANARY: &str = "CANARY-0tlp-5e1f-DO-NOT-EXPORT";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN_ID: &str = "00f067aa0ba902b7";

/// A fake OTLP collector that keeps every export request it receives.
#[derive(Clone, Default)]
struct Collector(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.lock().map_err(|_| tonic::Status::internal("poisoned"))?.push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

impl Collector {
    fn requests(&self) -> Vec<ExportTraceServiceRequest> {
        self.0.lock().expect("collector lock").clone()
    }

    fn spans(&self) -> Vec<Span> {
        self.requests()
            .into_iter()
            .flat_map(|r| r.resource_spans)
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .collect()
    }
}

/// Starts the fake collector on an ephemeral port; returns its `http://` endpoint.
async fn start_collector(collector: Collector) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind collector");
    let addr = listener.local_addr().expect("collector addr");
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(collector))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    format!("http://{addr}")
}

fn string_attr(span: &Span, key: &str) -> Option<String> {
    span.attributes.iter().find(|kv| kv.key == key).and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
        Value::StringValue(s) => Some(s.clone()),
        _ => None,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Calls GetMachineStatus (with `traceparent`) and a failing CreateMachine, both
/// carrying the canary secret.
async fn drive_calls(socket: std::path::PathBuf) -> (pb::GetMachineStatusResponse, tonic::Status) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "server never listened on {}", socket.display());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut c = client(&socket).await;
    let secret = Some(pb::SecretData {
        data: [
            ("accessKeyID".to_string(), format!("{CANARY}-akid").into_bytes()),
            ("secretAccessKey".to_string(), format!("{CANARY}-sk").into_bytes()),
        ]
        .into_iter()
        .collect(),
    });
    let mut req = status("vm-traced");
    req.secret = secret.clone();
    let mut req = tonic::Request::new(req);
    let traceparent: MetadataValue<_> = format!("00-{TRACE_ID}-{PARENT_SPAN_ID}-01").parse().expect("traceparent");
    req.metadata_mut().insert("traceparent", traceparent);
    let ok = c.get_machine_status(req).await.expect("GetMachineStatus served").into_inner();

    let mut failing = create("err-internal");
    failing.secret = secret;
    let failed = c.create_machine(failing).await.expect_err("steered to fail");

    (ok, failed)
}

#[tokio::test(flavor = "multi_thread")]
async fn rpc_spans_reach_the_collector_joined_to_the_caller_without_secrets() {
    let collector = Collector::default();
    let endpoint = start_collector(collector.clone()).await;
    let socket = socket_path("otlp");
    let mut a = args(&socket);
    a.otlp_endpoint = Some(endpoint);
    let calls = tokio::spawn(drive_calls(socket.clone()));

    // As in a driver's `main`: `run` installs telemetry, serves until SIGTERM, and
    // flushes the batch exporter when it drops the telemetry on its way out.
    let started = Instant::now();
    let run = machine_driver_server::run::<TestDriver>(a, None);
    let mut run = std::pin::pin!(tokio::time::timeout(Duration::from_secs(20), run));
    // A failing call must fail the test now, not after the server's timeout.
    let (ok, failed) = tokio::select! {
        exit = &mut run => panic!("run stopped before the calls were made: {exit:?}"),
        calls = calls => calls.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic())),
    };
    // `serve` awaits the shutdown signal from its first poll, before answering
    // any call, so its SIGTERM handler is installed by now.
    let killed =
        std::process::Command::new("kill").args(["-TERM", &std::process::id().to_string()]).status().expect("run kill");
    assert!(killed.success(), "kill -TERM failed: {killed}");
    let exit = run.await.expect("run stopped after SIGTERM");
    assert_eq!(format!("{exit:?}"), format!("{:?}", std::process::ExitCode::SUCCESS));
    assert!(started.elapsed() < Duration::from_secs(10), "shutdown and flush took {:?}", started.elapsed());

    // Export finished before `run` returned; the short bounded wait only absorbs
    // the collector task storing what it was sent.
    let wait = Instant::now() + Duration::from_secs(2);
    let spans = loop {
        let spans = collector.spans();
        if spans.iter().any(|s| s.name == "CreateMachine") || Instant::now() > wait {
            break spans;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names.contains(&"GetMachineStatus") && names.contains(&"CreateMachine"),
        "both RPC spans exported; got {names:?}"
    );

    // Everything the collector got (names, attributes, events, resource), as text.
    let everything = format!("{:?}", collector.requests());
    assert!(everything.contains("machine-driver"), "service name exported");
    assert!(!everything.contains(CANARY), "canary secret exported:\n{everything}");

    assert_eq!(ok.node_name, "vm-traced");
    assert_eq!(failed.code(), tonic::Code::Internal);

    let status_span = spans.iter().find(|s| s.name == "GetMachineStatus").expect("status span");
    assert_eq!(hex(&status_span.trace_id), TRACE_ID, "span joined the caller's trace");
    assert_eq!(hex(&status_span.parent_span_id), PARENT_SPAN_ID, "parent is the caller's span");
    assert_eq!(string_attr(status_span, "rpc").as_deref(), Some("GetMachineStatus"));
    assert_eq!(string_attr(status_span, "machine").as_deref(), Some("vm-traced"));
    assert_eq!(string_attr(status_span, "code").as_deref(), Some("Ok"));

    // The provider's cloud call (a debug-level span) is exported at the default
    // `--log info`: traces have their own filter (`--trace-filter`).
    let cloud = spans.iter().find(|s| s.name == "cloud_call").expect("cloud_call span exported");
    assert_eq!(hex(&cloud.trace_id), TRACE_ID, "cloud call in the RPC's trace");
    assert_eq!(cloud.parent_span_id, status_span.span_id, "cloud call is a child of the RPC span");
    assert_eq!(string_attr(cloud, "operation").as_deref(), Some("GetInstance"));

    let create_span = spans.iter().find(|s| s.name == "CreateMachine").expect("create span");
    assert_eq!(string_attr(create_span, "code").as_deref(), Some("Internal"));
    assert_ne!(hex(&create_span.trace_id), TRACE_ID, "a call without traceparent starts its own trace");
    assert!(create_span.parent_span_id.is_empty(), "a call without traceparent is a root span");
    assert!(
        create_span.events.iter().any(|e| e.name.contains("rpc failed")),
        "the failure log line travels as a span event: {:?}",
        create_span.events
    );
}
