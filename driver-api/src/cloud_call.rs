//! The one way provider code calls a cloud: [`CloudCaller::send`].
//!
//! Every request waits for its account's client-side [`RateLimiter`], is
//! counted, timed and traced (`cloud_call` span), is bounded by the deadline
//! of the RPC it serves, and fails with the provider's own classification of
//! the SDK error ([`CloudFailure`]), source kept. A request the cloud
//! throttled had no effect; it is sent once more after the limiter
//! resynchronised, and when no time is left for that resend the throttle is
//! the answer (retryable, with a delay), not DEADLINE_EXCEEDED. No other
//! failure is resent here.
//!
//! Metric names and labels are the ones MCM's metrics package declares and its
//! dashboards use: `mcm_cloud_api_requests_total{provider,service}`,
//! `mcm_cloud_api_requests_failed_total{provider,service}` and the histogram
//! `mcm_cloud_api_api_request_duration_seconds{provider,service}` (successful
//! calls only, as the Go providers record it). `service` names the cloud call,
//! `<service>.<operation>` (`ec2.DescribeInstances`, `compute.instances.get`);
//! spans carry service and operation apart. They go through the `metrics`
//! facade; the server installs the Prometheus recorder.

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::{CallContext, DriverError, RateLimiter};

/// Labels of one cloud API call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloudCall {
    /// Cloud: the `<cloud>` of `providers/<cloud>`.
    pub provider: &'static str,
    /// Cloud service (`ec2`, `sts`, `compute`).
    pub service: &'static str,
    /// API operation (`RunInstances`, `instances.get`).
    pub operation: &'static str,
}

impl fmt::Display for CloudCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.service, self.operation)
    }
}

/// Runs one cloud API call, counting it, timing it and tracing it in a
/// `cloud_call` span. The error is returned unchanged for the provider to
/// classify. Provider code uses [`CloudCaller::send`], which adds the rate
/// limiter, the deadline and the throttle rule; this is its innermost layer.
pub async fn cloud_call<T, E, F>(call: CloudCall, fut: F) -> Result<T, E>
where
    F: Future<Output = Result<T, E>>,
{
    let span = tracing::debug_span!(
        "cloud_call",
        provider = call.provider,
        service = call.service,
        operation = call.operation,
        ok = tracing::field::Empty,
    );
    let labels = [("provider", call.provider.to_string()), ("service", format!("{}.{}", call.service, call.operation))];
    metrics::counter!("mcm_cloud_api_requests_total", &labels).increment(1);
    let started = Instant::now();
    let result = fut.instrument(span.clone()).await;
    span.record("ok", result.is_ok());
    if result.is_ok() {
        metrics::histogram!("mcm_cloud_api_api_request_duration_seconds", &labels)
            .record(started.elapsed().as_secs_f64());
    } else {
        metrics::counter!("mcm_cloud_api_requests_failed_total", &labels).increment(1);
    }
    result
}

/// A provider's classification of one failed cloud request.
///
/// Each provider implements it once, for the type its SDK errors are
/// classified into (`errors.rs`); call sites decide on the typed failure
/// (not found? already exists?), never on reason strings.
pub trait CloudFailure: fmt::Debug + Send + Sized + 'static {
    /// True when the cloud refused the request because of throttling: the
    /// request had no effect, so sending it again is safe.
    fn is_throttled(&self) -> bool;

    /// The driver error this failure of `call` answers with (deterministic
    /// message, source kept for logs).
    fn into_driver_error(self, call: CloudCall) -> DriverError;
}

/// Why a cloud request gave no answer: the cloud failed it, or the RPC's
/// deadline came first.
#[derive(Debug)]
pub enum CallFailure<F> {
    /// The cloud (or the connection to it) failed; classified by the provider.
    Cloud(CloudCall, F),
    /// No answer before the deadline of the RPC.
    Deadline(CloudCall),
}

impl<F: CloudFailure> CallFailure<F> {
    /// The cloud's failure, when it was one.
    pub fn cloud(&self) -> Option<&F> {
        match self {
            Self::Cloud(_, f) => Some(f),
            Self::Deadline(_) => None,
        }
    }

    /// The call that failed.
    pub fn call(&self) -> CloudCall {
        match self {
            Self::Cloud(c, _) | Self::Deadline(c) => *c,
        }
    }

    /// The driver error this failure answers with.
    pub fn into_driver_error(self) -> DriverError {
        match self {
            Self::Cloud(call, f) => f.into_driver_error(call),
            Self::Deadline(call) => {
                DriverError::deadline_exceeded(format!("{call} did not answer before the call's deadline"))
            }
        }
    }
}

impl<F: CloudFailure> From<CallFailure<F>> for DriverError {
    fn from(failure: CallFailure<F>) -> Self {
        failure.into_driver_error()
    }
}

/// The rate limiter and deadline the requests of one RPC (or of one batch
/// made on behalf of several RPCs) are sent under.
#[derive(Debug, Clone, Copy)]
pub struct CloudCaller<'a> {
    provider: &'static str,
    limiter: &'a RateLimiter,
    deadline: tokio::time::Instant,
}

impl<'a> CloudCaller<'a> {
    /// Requests of `provider` under `limiter`, bounded by `ctx`'s deadline.
    pub fn new(provider: &'static str, limiter: &'a RateLimiter, ctx: &CallContext) -> Self {
        Self { provider, limiter, deadline: ctx.deadline() }
    }

    /// Time left before the deadline.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(tokio::time::Instant::now())
    }

    /// Sends one request of `service`/`operation`.
    ///
    /// `request` makes the SDK future (`|| client.op()....send()`), so that
    /// nothing is sent before the limiter's token is taken and a throttled
    /// request can be made again; `classify` turns the SDK's error into the
    /// provider's [`CloudFailure`].
    pub async fn send<T, E, Fut, R, F>(
        &self,
        service: &'static str,
        operation: &'static str,
        mut request: R,
        classify: impl Fn(E) -> F,
    ) -> Result<T, CallFailure<F>>
    where
        R: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        F: CloudFailure,
    {
        let call = CloudCall { provider: self.provider, service, operation };
        let limiter = self.limiter;
        // Boxed: SDK request futures are large and deeply nested; keeping them
        // off the RPC future's layout keeps that small.
        let first = Box::pin(async {
            limiter.acquire().await;
            cloud_call(call, request()).await
        });
        let throttle = match tokio::time::timeout_at(self.deadline, first).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => classify(e),
            Err(_) => return Err(CallFailure::Deadline(call)),
        };
        if !throttle.is_throttled() {
            return Err(CallFailure::Cloud(call, throttle));
        }
        tracing::debug!(service, operation, "the cloud throttled the request; resending it once");
        let resend = Box::pin(async {
            limiter.penalize().await;
            limiter.acquire().await;
            cloud_call(call, request()).await
        });
        match tokio::time::timeout_at(self.deadline, resend).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(CallFailure::Cloud(call, classify(e))),
            // No time left for the resend: the throttle is the better answer (retryable, with a delay).
            Err(_) => Err(CallFailure::Cloud(call, throttle)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::ErrorKind;

    #[derive(Debug, PartialEq)]
    enum Failure {
        Throttled,
        Broken,
    }

    impl CloudFailure for Failure {
        fn is_throttled(&self) -> bool {
            *self == Failure::Throttled
        }
        fn into_driver_error(self, call: CloudCall) -> DriverError {
            match self {
                Failure::Throttled => {
                    DriverError::unavailable("Throttled", format!("{call} throttled"), Duration::from_secs(5))
                }
                Failure::Broken => DriverError::internal(format!("{call} broken")),
            }
        }
    }

    fn identity(f: Failure) -> Failure {
        f
    }

    async fn run(
        answers: &[Result<u32, Failure>],
        timeout: Duration,
        limiter: &RateLimiter,
    ) -> (Result<u32, CallFailure<Failure>>, u32) {
        let sent = AtomicU32::new(0);
        let ctx = CallContext::with_timeout("Test", timeout);
        let caller = CloudCaller::new("test", limiter, &ctx);
        let result = caller
            .send(
                "svc",
                "Op",
                || {
                    let n = sent.fetch_add(1, Ordering::SeqCst) as usize;
                    let answer = match &answers[n.min(answers.len() - 1)] {
                        Ok(v) => Ok(*v),
                        Err(Failure::Throttled) => Err(Failure::Throttled),
                        Err(Failure::Broken) => Err(Failure::Broken),
                    };
                    async move { answer }
                },
                identity,
            )
            .await;
        (result, sent.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_throttled_request_is_resent_once() {
        let limiter = RateLimiter::new(1000.0, 10);
        let (r, sent) = run(&[Err(Failure::Throttled), Ok(7)], Duration::from_secs(5), &limiter).await;
        assert_eq!((r.ok(), sent), (Some(7), 2));

        let (r, sent) = run(&[Err(Failure::Throttled)], Duration::from_secs(5), &limiter).await;
        assert_eq!(sent, 2, "resent once, not more");
        let e = r.err().map(CallFailure::into_driver_error);
        assert_eq!(e.as_ref().map(DriverError::kind), Some(ErrorKind::Unavailable));
    }

    #[tokio::test]
    async fn other_failures_are_not_resent() {
        let limiter = RateLimiter::new(1000.0, 10);
        let (r, sent) = run(&[Err(Failure::Broken), Ok(1)], Duration::from_secs(5), &limiter).await;
        assert_eq!(sent, 1);
        assert!(matches!(r, Err(CallFailure::Cloud(_, Failure::Broken))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttle_with_no_time_left_for_the_resend_answers_with_the_throttle() {
        // Unlimited limiter: penalize pauses UNLIMITED_THROTTLE_PAUSE (250 ms), longer than the 100 ms left.
        let limiter = RateLimiter::new(0.0, 0);
        let (r, sent) = run(&[Err(Failure::Throttled), Ok(1)], Duration::from_millis(100), &limiter).await;
        assert_eq!(sent, 1);
        let e = r.err().map(CallFailure::into_driver_error);
        assert_eq!(e.as_ref().map(|e| (e.kind(), e.reason())), Some((ErrorKind::Unavailable, "Throttled")));
    }

    #[tokio::test(start_paused = true)]
    async fn no_answer_before_the_deadline_is_deadline_exceeded_naming_the_call() {
        let limiter = RateLimiter::new(0.0, 0);
        let ctx = CallContext::with_timeout("Test", Duration::from_millis(50));
        let r: Result<(), _> = CloudCaller::new("test", &limiter, &ctx)
            .send("svc", "Op", std::future::pending::<Result<(), Failure>>, identity)
            .await;
        let e = r.err().map(CallFailure::into_driver_error);
        assert_eq!(e.as_ref().map(DriverError::kind), Some(ErrorKind::DeadlineExceeded));
        assert_eq!(
            e.map(|e| e.message().to_string()).as_deref(),
            Some("svc Op did not answer before the call's deadline")
        );
    }
}
