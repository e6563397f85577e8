//! The one way this crate calls AWS: the kit's [`CloudCaller`] with the
//! account's rate limiter, classifying SDK failures into [`AwsFailure`].

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use machine_driver_api::{CallContext, CallFailure, CloudCaller, RateLimiter};

use crate::clients::AwsClients;
use crate::errors::AwsFailure;

/// What an AWS request answers: the output, or the failure (which converts
/// into a `DriverError` with `?`).
pub(crate) type Answer<T> = Result<T, CallFailure<AwsFailure>>;

/// Sends one AWS request of `service`/`operation` under the account's rate
/// limiter and the RPC's deadline ([`CloudCaller::send`]). `request` makes the
/// SDK future (`|| client.op()....send()`), so nothing is sent before the
/// limiter's token is taken and a throttled request can be resent.
pub(crate) async fn call<T, E, F, R>(
    ctx: &CallContext,
    limiter: &RateLimiter,
    service: &'static str,
    operation: &'static str,
    request: R,
) -> Answer<T>
where
    R: FnMut() -> F,
    F: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    CloudCaller::new("aws", limiter, ctx)
        .send(service, operation, request, |e| AwsFailure::from_sdk(service, operation, e))
        .await
}

/// Shorthand for an EC2 request with `clients`' limiter.
pub(crate) async fn ec2<T, E, F, R>(
    ctx: &CallContext,
    clients: &AwsClients,
    operation: &'static str,
    request: R,
) -> Answer<T>
where
    R: FnMut() -> F,
    F: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    noting_refusal(call(ctx, &clients.limiter, "ec2", operation, request).await, &clients.credentials_refused)
}

/// `answer`, after raising `refused` when AWS refused the credentials: a role
/// session's clients so marked are replaced by a new AssumeRoleWithWebIdentity
/// on the next call ([`crate::clients`]), rather than used until they expire.
pub(crate) fn noting_refusal<T>(answer: Answer<T>, refused: &AtomicBool) -> Answer<T> {
    if let Err(CallFailure::Cloud(_, f)) = &answer
        && f.is_credentials_refusal()
    {
        refused.store(true, Ordering::Relaxed);
    }
    answer
}
