//! The optional HTTP listener: Prometheus `/metrics` and a `/healthz` for kubelet.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;

use crate::error::ServeError;

/// Binds `addr` and serves `/metrics` and `/healthz` until the process ends.
/// `/healthz` answers 200 while the driver is ready and 503 once shutdown began;
/// it makes no cloud call.
pub(crate) async fn spawn(
    addr: SocketAddr,
    prometheus: Option<PrometheusHandle>,
    ready: Arc<AtomicBool>,
) -> Result<SocketAddr, ServeError> {
    let listener = TcpListener::bind(addr).await.map_err(|e| ServeError::Bind(format!("http://{addr}"), e))?;
    let local = listener.local_addr().map_err(|e| ServeError::Bind(format!("http://{addr}"), e))?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let prometheus = prometheus.clone();
            let ready = ready.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let prometheus = prometheus.clone();
                    let ready = ready.clone();
                    async move { Ok::<_, Infallible>(answer(req.uri().path(), prometheus.as_ref(), &ready)) }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    });
    Ok(local)
}

fn answer(path: &str, prometheus: Option<&PrometheusHandle>, ready: &AtomicBool) -> Response<Full<Bytes>> {
    let (status, body) = match path {
        "/metrics" => match prometheus {
            Some(p) => (StatusCode::OK, p.render()),
            None => (StatusCode::NOT_FOUND, "metrics recorder not installed\n".to_string()),
        },
        "/healthz" if ready.load(Ordering::Relaxed) => (StatusCode::OK, "ok\n".to_string()),
        "/healthz" => (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n".to_string()),
        _ => (StatusCode::NOT_FOUND, "not found\n".to_string()),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp
}
