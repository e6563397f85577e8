#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod authority;
mod call;
mod config;
mod convert;
mod error;
mod identity;
mod listener;
mod metrics_http;
mod provider_main;
mod service;
mod status;
mod telemetry;
mod user_data;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::TryStreamExt;
use machine_driver_api::Driver;
use machine_driver_proto::v1::identity_service_server::IdentityServiceServer;
use machine_driver_proto::v1::machine_driver_service_server::MachineDriverServiceServer;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
use tower::limit::GlobalConcurrencyLimitLayer;

pub use config::{CloudArgs, Endpoint, LogFormat, ServerArgs, parse_duration};
#[doc(hidden)]
pub mod fuzzing;
pub use error::ServeError;
pub use provider_main::{EmbeddedFake, StartFake, StartedFake, provider_main, run};
pub use status::{ERROR_DOMAIN, code_for, to_status};
pub use telemetry::{Telemetry, install_prometheus};

/// Serves `driver` on the configured endpoint until `shutdown` resolves, then
/// stops taking calls and lets in-flight calls finish within the grace period.
/// Checks every flag before binding anything.
pub async fn serve<D: Driver>(
    args: ServerArgs,
    driver: D,
    shutdown: impl Future<Output = ()>,
    prometheus: Option<PrometheusHandle>,
) -> Result<(), ServeError> {
    serve_checked(Preflight::check(&args)?, args, driver, shutdown, prometheus).await
}

/// What the flags give once checked, before anything is started or bound.
#[derive(Debug)]
struct Preflight {
    endpoint: Endpoint,
    user_data: user_data::UserDataPreparer,
}

impl Preflight {
    /// Checks every server flag: the endpoint, the call limit, the registry configuration file.
    fn check(args: &ServerArgs) -> Result<Self, ServeError> {
        let endpoint = Endpoint::parse(&args.endpoint).map_err(ServeError::Config)?;
        if args.max_concurrent_calls == 0 {
            return Err(ServeError::Config("--max-concurrent-calls must be at least 1".into()));
        }
        let user_data = user_data::UserDataPreparer::load(args.registry_config.as_deref())?;
        machine_driver_api::set_strict_provider_spec(args.strict_provider_spec);
        Ok(Self { endpoint, user_data })
    }
}

/// [`serve`] with flags already checked.
async fn serve_checked<D: Driver>(
    preflight: Preflight,
    args: ServerArgs,
    driver: D,
    shutdown: impl Future<Output = ()>,
    prometheus: Option<PrometheusHandle>,
) -> Result<(), ServeError> {
    let Preflight { endpoint, user_data } = preflight;
    let info = driver.info();
    let ready = Arc::new(AtomicBool::new(true));

    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<MachineDriverServiceServer<service::DriverService<D>>>().await;
    health.set_service_status("", tonic_health::ServingStatus::Serving).await;

    let (abandon_tx, abandon_rx) = tokio::sync::watch::channel(false);
    let driver_service = service::DriverService {
        driver: Arc::new(driver),
        info: info.clone(),
        settings: call::CallSettings {
            provider: info.provider,
            default_timeout: args.default_timeout,
            abandon: abandon_rx,
        },
        user_data,
        share_allow_list: args
            .share_image_allow_list
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    };
    let identity = identity::Identity { info: info.clone(), ready: ready.clone() };

    if let Some(addr) = args.metrics_listen {
        let local = metrics_http::spawn(addr, prometheus, ready.clone()).await?;
        tracing::info!(%local, "metrics and healthz listening");
    }

    // No server-wide timeout layer: every handler takes its deadline from
    // `call::context` (the caller's, capped at `call::LONGEST_CALL`) and
    // answers DEADLINE_EXCEEDED itself.
    let router = tonic::transport::Server::builder()
        // Streams a connection may have open at once (HTTP/2 SETTINGS): a
        // client beyond it queues its calls on its side instead of flooding
        // the connection with streams the server cannot take yet.
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
        .layer(GlobalConcurrencyLimitLayer::new(args.max_concurrent_calls))
        .add_service(health_service)
        .add_service(reflection().build_v1().map_err(|e| ServeError::Config(e.to_string()))?)
        .add_service(reflection().build_v1alpha().map_err(|e| ServeError::Config(e.to_string()))?)
        .add_service(IdentityServiceServer::new(identity))
        .add_service(MachineDriverServiceServer::new(driver_service));

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let bound = listener::bind(&endpoint, args.socket_mode).await?;
    tracing::info!(%endpoint, provider = info.provider, version = %info.version, "machine driver serving");

    let mut stop_for_server = stop_rx.clone();
    let server_stop = async move {
        let _ = stop_for_server.wait_for(|s| *s).await;
    };
    let serving = async move {
        match bound {
            listener::Bound::Unix(l, guard) => {
                let r = router
                    .serve_with_incoming_shutdown(
                        UnixListenerStream::new(l).map_ok(authority::AuthorityFix::new),
                        server_stop,
                    )
                    .await;
                drop(guard);
                r
            }
            listener::Bound::Tcp(l) => {
                router.serve_with_incoming_shutdown(TcpListenerStream::new(l), server_stop).await
            }
        }
    };
    let grace = args.shutdown_grace;
    let signal = async {
        shutdown.await;
        tracing::info!(
            grace_ms = grace.as_millis() as u64,
            "shutdown requested: refusing new calls, finishing in-flight calls"
        );
        ready.store(false, Ordering::Relaxed);
        health.set_not_serving::<MachineDriverServiceServer<service::DriverService<D>>>().await;
        health.set_service_status("", tonic_health::ServingStatus::NotServing).await;
        let _ = stop_tx.send(true);
        tokio::time::sleep(grace).await;
    };
    let mut serving = Box::pin(serving);
    tokio::select! {
        r = &mut serving => r?,
        () = signal => {
            tracing::warn!("shutdown grace period over: abandoning calls still in flight");
            let _ = abandon_tx.send(true);
            // Let the abandoned calls' UNAVAILABLE answers reach their callers.
            let _ = tokio::time::timeout(ABANDON_FLUSH, &mut serving).await;
        }
    }
    if let Endpoint::Unix(path) = &endpoint {
        // The guard inside `serving` removes the socket on a clean stop; after an
        // abandoned grace period the boxed future is dropped here, dropping the guard.
        drop(serving);
        tracing::info!(socket = %path.display(), "socket removed");
    }
    Ok(())
}

/// How long abandoned calls get to send their UNAVAILABLE answer.
const ABANDON_FLUSH: std::time::Duration = std::time::Duration::from_millis(200);

/// Most HTTP/2 streams one connection may have open at once. MCM runs up to
/// 50 calls at a time; beyond this a client waits for a stream to close. Without
/// it a client that opens thousands of streams at once had its connection
/// closed under it (broken pipe), every call on it lost (`hostile_input` tests).
/// 512 rather than 1,024: each admitted call holds its request, span and task,
/// and 10,000 concurrent AWS polls peaked at 72.6 MiB with 1,024 and 55-57 MiB
/// with 512, in as few cloud calls (52-59) and under 1 s at p99 (the bench's
/// 10,000 fleet, release build); 256 took 81 calls.
const MAX_STREAMS_PER_CONNECTION: u32 = 512;

/// Reflection serves the contract, health, and the `google.rpc` error
/// details the answers carry (ErrorInfo, RetryInfo, BadRequest), so that
/// grpcurl prints those decoded instead of as raw bytes.
fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(machine_driver_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET)
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}
