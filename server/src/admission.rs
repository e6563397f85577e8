//! Admission of a call: its request must arrive in full, within the request
//! body timeout and the byte budget, before the call takes one of the server's
//! call slots.
//!
//! A stream whose HEADERS arrived but whose body did not holds no call slot:
//! a peer that opens streams and never sends (or never ends) their bodies
//! cannot starve the callers that do. Its streams are answered
//! DEADLINE_EXCEEDED once the body timeout is over (the stream is then reset),
//! so they do not hold their connection's stream slots for ever either.
//! The request bytes held (arriving, waiting for a slot, in the call) count
//! against one budget: a stream waits for budget before it reads more, and
//! HTTP/2 flow control holds its sender meanwhile.
//!
//! Health checks and `IdentityService` pass through here too (body timeout,
//! a small size limit), but take no call slot: they answer while every slot is
//! taken. Reflection is a bidirectional stream whose requests never "arrive in
//! full"; it is not wrapped.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tonic::body::Body;
use tonic::server::NamedService;
use tower::{Service, ServiceExt};

/// Why admission answered a stream itself, before any service ran (turned
/// into its gRPC status in `status.rs`, the one place statuses are built).
#[derive(Debug)]
pub(crate) enum Refused {
    /// The request did not arrive in full within the body timeout.
    BodyTimeout(Duration),
    /// The request is larger than the limit (bytes).
    TooLarge(usize),
    /// The request body failed while it was read (the peer reset it).
    Reading(String),
    /// The server is shutting down.
    ShuttingDown,
}

/// Largest request message the driver service decodes (tonic's default, set
/// explicitly on the service so that both stay in step).
pub(crate) const MAX_REQUEST_MESSAGE: usize = 4 * 1024 * 1024;

/// gRPC's message prefix: compression flag and length.
const GRPC_PREFIX: usize = 5;

/// Largest request body of a health check or an `IdentityService` call (a
/// service name at most): these take no call slot and no byte budget.
pub(crate) const MAX_LIGHT_REQUEST: usize = 4 * 1024;

/// When a call's request headers arrived: its deadline counts from here, so
/// that the time its body took and its wait for a call slot are part of it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arrival(pub(crate) Instant);

/// What every wrapped service of one server shares.
#[derive(Debug)]
pub(crate) struct Limits {
    /// Call slots; `None` for services that take none.
    calls: Option<Arc<Semaphore>>,
    /// Request bytes held at once; `None` for services without a budget.
    bytes: Option<Arc<Semaphore>>,
    /// Largest request body accepted.
    max_body: usize,
    /// How long a request body may take to arrive after its headers.
    body_timeout: Duration,
}

impl Limits {
    /// Limits of the driver service: `calls` slots, a budget of `bytes`, requests up to one message.
    pub(crate) fn calls(calls: usize, bytes: usize, body_timeout: Duration) -> Self {
        Self {
            calls: Some(Arc::new(Semaphore::new(calls))),
            bytes: Some(Arc::new(Semaphore::new(bytes))),
            max_body: MAX_REQUEST_MESSAGE + GRPC_PREFIX,
            body_timeout,
        }
    }

    /// Limits of health checks and `IdentityService`: no slot, no budget, small requests.
    pub(crate) fn light(body_timeout: Duration) -> Self {
        Self { calls: None, bytes: None, max_body: MAX_LIGHT_REQUEST, body_timeout }
    }

    /// The least `--max-buffered-request-bytes` may be: one largest request.
    pub(crate) const MIN_BYTE_BUDGET: usize = MAX_REQUEST_MESSAGE + GRPC_PREFIX;
}

/// A gRPC service whose calls are admitted by [`Limits`].
#[derive(Debug, Clone)]
pub(crate) struct Admission<S> {
    inner: S,
    limits: Arc<Limits>,
}

impl<S> Admission<S> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: S, limits: Arc<Limits>) -> Self {
        Self { inner, limits }
    }
}

impl<S: NamedService> NamedService for Admission<S> {
    const NAME: &'static str = S::NAME;
}

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S> Service<http::Request<Body>> for Admission<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Readiness is decided per call, after its body arrived (`oneshot` below).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        let limits = self.limits.clone();
        Box::pin(async move {
            let arrived = Instant::now();
            let (mut parts, body) = request.into_parts();
            let (body, bytes) = match tokio::time::timeout(limits.body_timeout, read_body(body, &limits)).await {
                Ok(Ok(read)) => read,
                Ok(Err(refused)) => return Ok(refused.into_status().into_http()),
                Err(_) => {
                    metrics::counter!("machine_driver_request_body_timeouts_total").increment(1);
                    tracing::debug!(path = parts.uri.path(), "request body did not arrive in time: stream answered");
                    return Ok(Refused::BodyTimeout(limits.body_timeout).into_status().into_http());
                }
            };
            let slot = match &limits.calls {
                Some(calls) => match calls.clone().acquire_owned().await {
                    Ok(slot) => Some(slot),
                    Err(_) => return Ok(Refused::ShuttingDown.into_status().into_http()),
                },
                None => None,
            };
            parts.extensions.insert(Arrival(arrived));
            let response = inner.oneshot(http::Request::from_parts(parts, Body::new(body))).await;
            drop((slot, bytes));
            response
        })
    }
}

/// Reads a request body to its end, within `limits` (size, byte budget).
async fn read_body(mut body: Body, limits: &Limits) -> Result<(Arrived, Option<OwnedSemaphorePermit>), Refused> {
    let mut arrived = Arrived::default();
    let mut total = 0usize;
    let mut held: Option<OwnedSemaphorePermit> = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Refused::Reading(e.to_string()))?;
        let data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    arrived.trailers = Some(trailers);
                }
                continue;
            }
        };
        if data.is_empty() {
            continue;
        }
        total = total.saturating_add(data.len());
        if total > limits.max_body {
            return Err(Refused::TooLarge(limits.max_body));
        }
        if let Some(budget) = &limits.bytes {
            // At most `max_body` (checked above), far below u32::MAX.
            let n = u32::try_from(data.len()).map_err(|_| Refused::TooLarge(limits.max_body))?;
            let permit = budget.clone().acquire_many_owned(n).await.map_err(|_| Refused::ShuttingDown)?;
            match held.as_mut() {
                Some(h) => h.merge(permit),
                None => held = Some(permit),
            }
        }
        arrived.chunks.push_back(data);
    }
    Ok((arrived, held))
}

/// A request body that has arrived in full, handed to the service as it came.
#[derive(Debug, Default)]
struct Arrived {
    chunks: VecDeque<Bytes>,
    trailers: Option<http::HeaderMap>,
}

impl HttpBody for Arrived {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if let Some(chunk) = this.chunks.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.chunks.iter().map(|c| c.len() as u64).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_is_handed_on_as_it_arrived() {
        let frames: Vec<Result<Frame<Bytes>, Infallible>> = vec![
            Ok(Frame::data(Bytes::from_static(b"ab"))),
            Ok(Frame::data(Bytes::new())),
            Ok(Frame::data(Bytes::from_static(b"cd"))),
        ];
        let body = Body::new(http_body_util::StreamBody::new(futures::stream::iter(frames)));
        let limits = Limits::calls(1, 8, Duration::from_secs(1));
        let (arrived, held) = read_body(body, &limits).await.expect("read");
        assert_eq!(held.as_ref().map(OwnedSemaphorePermit::num_permits), Some(4));
        assert_eq!(limits.bytes.as_ref().map(|b| b.available_permits()), Some(4), "held against the budget");
        let collected = Body::new(arrived).collect().await.expect("collect").to_bytes();
        assert_eq!(&collected[..], b"abcd");
        drop(held);
        assert_eq!(limits.bytes.as_ref().map(|b| b.available_permits()), Some(8), "given back");
    }

    #[tokio::test]
    async fn a_body_beyond_the_limit_is_out_of_range() {
        let body = Body::new(http_body_util::Full::new(Bytes::from(vec![0u8; MAX_LIGHT_REQUEST + 1])));
        let err = read_body(body, &Limits::light(Duration::from_secs(1))).await.expect_err("too large");
        assert_eq!(err.into_status().code(), tonic::Code::OutOfRange);
    }
}
