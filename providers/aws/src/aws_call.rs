//! The one way this crate calls AWS: rate limit, metrics/tracing, deadline, error mapping.

use std::future::Future;

use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use machine_driver_api::{CallContext, CloudCall, DriverError, RateLimiter, Result, cloud_call};

use crate::clients::AwsClients;
use crate::errors;

/// Runs one AWS request: waits for a token of the account's rate limiter,
/// counts and traces it as `aws/<service>/<operation>`, bounds it by the RPC's
/// deadline and classifies a failure. `request` makes the SDK future
/// (`|| client.op()....send()`), so nothing is sent before the token is taken.
/// A request the cloud throttles had no effect; it is sent once more after the
/// limiter resynchronised (the client-side limiter should have prevented it),
/// so that throttling reaches the caller only when it persists.
pub(crate) async fn call<T, E, F, R>(
    ctx: &CallContext,
    clients: &AwsClients,
    service: &'static str,
    operation: &'static str,
    request: R,
) -> Result<T>
where
    R: Fn() -> F,
    F: Future<Output = std::result::Result<T, SdkError<E, HttpResponse>>>,
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    call_limited(ctx, &clients.limiter, service, operation, request).await
}

/// [`call`] with an explicit rate limiter (for work not tied to one RPC, such
/// as a coalesced batch of status lookups).
pub(crate) async fn call_limited<T, E, F, R>(
    ctx: &CallContext,
    limiter: &RateLimiter,
    service: &'static str,
    operation: &'static str,
    request: R,
) -> Result<T>
where
    R: Fn() -> F,
    F: Future<Output = std::result::Result<T, SdkError<E, HttpResponse>>>,
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let mut attempts_left = THROTTLE_ATTEMPTS;
    let mut throttled: Option<DriverError> = None;
    loop {
        attempts_left -= 1;
        // Boxed: SDK request futures are large and deeply nested; keeping them
        // off the RPC future's layout keeps that small (and under rustc's query depth).
        let work = Box::pin(async {
            limiter.acquire().await;
            cloud_call(CloudCall { provider: "aws", service, operation }, request()).await
        });
        let err = match tokio::time::timeout(ctx.remaining(), work).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => errors::from_sdk(service, operation, e),
            // No time left for the resend: the throttle is the better answer (retryable, with a delay).
            Err(_) => {
                return Err(throttled.unwrap_or_else(|| {
                    DriverError::deadline_exceeded(format!("{service} {operation}: the call's deadline passed"))
                }));
            }
        };
        if attempts_left == 0 || !errors::is_throttling(err.reason()) {
            return Err(err);
        }
        throttled = Some(err);
        limiter.penalize().await;
    }
}

/// Sends of one request when the cloud throttles it (the first and one more).
const THROTTLE_ATTEMPTS: u32 = 2;

/// Shorthand for an EC2 request.
pub(crate) async fn ec2<T, E, F, R>(
    ctx: &CallContext,
    clients: &AwsClients,
    operation: &'static str,
    request: R,
) -> Result<T>
where
    R: Fn() -> F,
    F: Future<Output = std::result::Result<T, SdkError<E, HttpResponse>>>,
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    call(ctx, clients, "ec2", operation, request).await
}
