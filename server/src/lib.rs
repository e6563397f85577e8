#![doc = include_str!("../README.md")]

mod admission;
mod authority;
mod call;
mod config;
mod convert;
mod error;
mod identity;
mod io_delegate;
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

use admission::{Admission, Limits};

pub use config::{CloudArgs, Endpoint, LogFormat, ServerArgs, parse_duration, parse_size};
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
    /// Checks every server flag: the endpoint, the transport limits, the registry configuration file.
    fn check(args: &ServerArgs) -> Result<Self, ServeError> {
        let endpoint = Endpoint::parse(&args.endpoint).map_err(ServeError::Config)?;
        let at_least_one = [
            ("--max-concurrent-calls", args.max_concurrent_calls),
            ("--max-connections", args.max_connections),
            ("--max-streams-per-connection", args.max_streams_per_connection as usize),
        ];
        for (flag, value) in at_least_one {
            if value == 0 {
                return Err(ServeError::Config(format!("{flag} must be at least 1")));
            }
            if value > tokio::sync::Semaphore::MAX_PERMITS {
                return Err(ServeError::Config(format!("{flag} is too large")));
            }
        }
        if args.request_body_timeout.is_zero() {
            return Err(ServeError::Config("--request-body-timeout must be longer than 0".into()));
        }
        if !args.http2_keepalive_interval.is_zero() && args.http2_keepalive_timeout.is_zero() {
            return Err(ServeError::Config("--http2-keepalive-timeout must be longer than 0".into()));
        }
        let budget = args.max_buffered_request_bytes;
        if !(Limits::MIN_BYTE_BUDGET..=tokio::sync::Semaphore::MAX_PERMITS).contains(&budget) {
            return Err(ServeError::Config(format!(
                "--max-buffered-request-bytes must hold at least one largest request ({} bytes)",
                Limits::MIN_BYTE_BUDGET
            )));
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

    // The driver service's calls take a call slot once their request has
    // arrived (`admission`); health checks and Identity take none, so that
    // they answer while every slot is taken. Both get the request body timeout.
    let calls =
        Arc::new(Limits::calls(args.max_concurrent_calls, args.max_buffered_request_bytes, args.request_body_timeout));
    let light = Arc::new(Limits::light(args.request_body_timeout));
    let keepalive = Some(args.http2_keepalive_interval).filter(|i| !i.is_zero());
    // No server-wide timeout layer: every handler takes its deadline from
    // `call::context` (the caller's, capped at `call::LONGEST_CALL`) and
    // answers DEADLINE_EXCEEDED itself.
    let router = tonic::transport::Server::builder()
        // Streams a connection may have open at once (HTTP/2 SETTINGS): a
        // client beyond it queues its calls on its side instead of flooding
        // the connection with streams the server cannot take yet.
        .max_concurrent_streams(args.max_streams_per_connection)
        // A peer that stops answering PINGs (gone without closing) loses its connection.
        .http2_keepalive_interval(keepalive)
        .http2_keepalive_timeout(Some(args.http2_keepalive_timeout))
        .add_service(Admission::new(health_service, light.clone()))
        .add_service(reflection().build_v1().map_err(|e| ServeError::Config(e.to_string()))?)
        .add_service(reflection().build_v1alpha().map_err(|e| ServeError::Config(e.to_string()))?)
        .add_service(Admission::new(
            IdentityServiceServer::new(identity).max_decoding_message_size(admission::MAX_LIGHT_REQUEST),
            light,
        ))
        .add_service(Admission::new(
            MachineDriverServiceServer::new(driver_service).max_decoding_message_size(admission::MAX_REQUEST_MESSAGE),
            calls,
        ));
    let connections = Arc::new(listener::ConnectionSlots::new(args.max_connections));

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
                let incoming = UnixListenerStream::new(l)
                    .try_filter_map(move |io| std::future::ready(Ok(connections.admit(io))))
                    .map_ok(authority::AuthorityFix::new);
                let r = router.serve_with_incoming_shutdown(incoming, server_stop).await;
                drop(guard);
                r
            }
            listener::Bound::Tcp(l) => {
                let incoming =
                    TcpListenerStream::new(l).try_filter_map(move |io| std::future::ready(Ok(connections.admit(io))));
                router.serve_with_incoming_shutdown(incoming, server_stop).await
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        server: ServerArgs,
    }

    fn args(flags: &[&str]) -> ServerArgs {
        let argv = std::iter::once("driver").chain(flags.iter().copied());
        <Cli as clap::Parser>::try_parse_from(argv).expect("flags parse").server
    }

    #[test]
    fn transport_limits_are_checked_before_anything_is_bound() {
        assert!(Preflight::check(&args(&[])).is_ok(), "the defaults pass");
        let bad: [&[&str]; 6] = [
            &["--max-concurrent-calls", "0"],
            &["--max-connections", "0"],
            &["--max-streams-per-connection", "0"],
            &["--request-body-timeout", "0s"],
            &["--max-buffered-request-bytes", "1MiB"],
            &["--http2-keepalive-timeout", "0s"],
        ];
        for flags in bad {
            let err = Preflight::check(&args(flags)).expect_err(flags[0]);
            assert!(err.to_string().contains(flags[0]), "{err}");
        }
        assert!(
            Preflight::check(&args(&["--http2-keepalive-interval", "0s", "--http2-keepalive-timeout", "0s"])).is_ok()
        );
    }
}
