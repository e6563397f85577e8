//! Compute API clients, cached per service account key, one client-side rate
//! limiter per project, and the wrapper every Compute call goes through.
//!
//! The SDK's own retry loop is switched off (`NeverRetry`): every Compute
//! request the driver makes is one counted `cloud_call`, failures are classified
//! once and the machine-controller's backoff decides when to try again. The one
//! exception is throttling: a throttled request had no effect, so [`Api::call`]
//! sends it once more after the project's limiter resynchronised. Each call is
//! bounded by the RPC's remaining deadline, or, for a call made on behalf of
//! several RPCs ([`SharedApi`]), by a deadline of its own.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use google_cloud_auth::credentials::Credentials;
use google_cloud_compute_v1::client::{Images, Instances, ZoneOperations};
use google_cloud_gax::error::Error as GaxError;
use google_cloud_gax::retry_policy::NeverRetry;
use machine_driver_api::{CallContext, CloudCall, DriverError, RateLimiter, cloud_call};

use crate::credentials::ServiceAccountKey;
use crate::errors::{CloudFailure, deadline_exceeded};

/// More cached client sets than this and the cache starts over (rotated keys pile up otherwise).
const MAX_CACHED_CLIENT_SETS: usize = 64;

/// Where Compute requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ComputeEndpoint {
    /// Google's default endpoint with service account credentials.
    Google,
    /// An override over HTTPS (private endpoint) with service account credentials.
    Secure(String),
    /// An override over plain HTTP (a fake): principal-header credentials.
    Insecure(String),
}

impl ComputeEndpoint {
    /// Classifies `--cloud-endpoint`.
    pub(crate) fn from_override(endpoint: Option<&str>) -> Self {
        match endpoint.map(|e| e.trim().trim_end_matches('/')).filter(|e| !e.is_empty()) {
            None => Self::Google,
            Some(e) if e.starts_with("http://") => Self::Insecure(e.to_string()),
            Some(e) => Self::Secure(e.to_string()),
        }
    }
}

/// The Compute clients of one set of credentials.
#[derive(Debug)]
pub(crate) struct ComputeClients {
    /// instances.*
    pub(crate) instances: Instances,
    /// zoneOperations.*
    pub(crate) operations: ZoneOperations,
    /// images.*
    pub(crate) images: Images,
}

/// Client cache and rate limiters of one driver.
#[derive(Debug)]
pub(crate) struct ClientPool {
    endpoint: ComputeEndpoint,
    rate: f64,
    burst: u32,
    clients: Mutex<HashMap<[u8; 32], Arc<ComputeClients>>>,
    limiters: Mutex<HashMap<String, Arc<RateLimiter>>>,
}

impl ClientPool {
    /// A pool sending to `endpoint`, limiting each project to `rate`/s with `burst`.
    pub(crate) fn new(endpoint: ComputeEndpoint, rate: f64, burst: u32) -> Self {
        Self { endpoint, rate, burst, clients: Mutex::default(), limiters: Mutex::default() }
    }

    /// A handle for the calls of one RPC made with `key`'s credentials.
    pub(crate) async fn api<'a>(&self, key: &ServiceAccountKey, ctx: &'a CallContext) -> Result<Api<'a>, DriverError> {
        Ok(Api { clients: self.clients_for(key).await?, limiter: self.limiter(&key.project_id), ctx })
    }

    async fn clients_for(&self, key: &ServiceAccountKey) -> Result<Arc<ComputeClients>, DriverError> {
        if let Some(c) = self.clients.lock().unwrap_or_else(PoisonError::into_inner).get(&key.fingerprint) {
            return Ok(Arc::clone(c));
        }
        let creds = match &self.endpoint {
            ComputeEndpoint::Insecure(_) => key.fake_endpoint_credentials()?,
            _ => key.google_credentials()?,
        };
        let built = Arc::new(self.build(creds).await?);
        let mut cache = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= MAX_CACHED_CLIENT_SETS {
            cache.clear();
        }
        Ok(Arc::clone(cache.entry(key.fingerprint).or_insert(built)))
    }

    async fn build(&self, creds: Credentials) -> Result<ComputeClients, DriverError> {
        let url = match &self.endpoint {
            ComputeEndpoint::Google => None,
            ComputeEndpoint::Secure(u) | ComputeEndpoint::Insecure(u) => Some(u.clone()),
        };
        let failed = |_| DriverError::internal("building the Compute API client failed");
        macro_rules! client {
            ($t:ty) => {{
                let mut b = <$t>::builder().with_credentials(creds.clone()).with_retry_policy(NeverRetry);
                if let Some(u) = &url {
                    b = b.with_endpoint(u.clone());
                }
                b.build().await.map_err(failed)?
            }};
        }
        Ok(ComputeClients {
            instances: client!(Instances),
            operations: client!(ZoneOperations),
            images: client!(Images),
        })
    }

    fn limiter(&self, project: &str) -> Arc<RateLimiter> {
        let mut map = self.limiters.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(map.entry(project.to_string()).or_insert_with(|| Arc::new(RateLimiter::new(self.rate, self.burst))))
    }
}

/// The clients, rate limiter and deadline of one RPC.
#[derive(Debug, Clone)]
pub(crate) struct Api<'a> {
    /// The clients.
    pub(crate) clients: Arc<ComputeClients>,
    limiter: Arc<RateLimiter>,
    ctx: &'a CallContext,
}

/// The clients and rate limiter of one set of credentials, without a deadline:
/// for calls made on behalf of several RPCs (coalesced status reads), which
/// [`SharedApi::bind`] to a deadline of their own.
#[derive(Debug, Clone)]
pub(crate) struct SharedApi {
    clients: Arc<ComputeClients>,
    limiter: Arc<RateLimiter>,
}

impl SharedApi {
    /// A call handle with these clients and limiter, bounded by `ctx`'s deadline.
    pub(crate) fn bind<'a>(&self, ctx: &'a CallContext) -> Api<'a> {
        Api { clients: Arc::clone(&self.clients), limiter: Arc::clone(&self.limiter), ctx }
    }
}

/// A failed Compute call: classified cloud failure, or the RPC's deadline passed.
#[derive(Debug)]
pub(crate) enum CallFailure {
    /// The cloud (or the connection to it) failed.
    Cloud(CloudFailure),
    /// No answer before the deadline.
    Deadline,
}

impl CallFailure {
    /// The cloud failure, when it was one.
    pub(crate) fn cloud(&self) -> Option<&CloudFailure> {
        match self {
            Self::Cloud(c) => Some(c),
            Self::Deadline => None,
        }
    }

    /// The classified driver error of Compute call `operation`.
    pub(crate) fn into_driver_error(self, operation: &str) -> DriverError {
        match self {
            Self::Cloud(c) => c.into_driver_error(operation),
            Self::Deadline => deadline_exceeded(operation),
        }
    }
}

impl Api<'_> {
    /// Runs one Compute request: waits for the project's rate limiter, counts
    /// and times it (`cloud_call`), bounds it by the RPC's deadline.
    ///
    /// `request` makes the request's future (`|| client.op()....send()`), so
    /// that a throttled request can be sent again: a request Compute throttles
    /// had no effect, so it is resent once after the limiter resynchronised
    /// ([`RateLimiter::penalize`]), and throttling reaches the caller only when
    /// it persists. No other failure is resent.
    pub(crate) async fn call<T, F, R>(&self, operation: &'static str, mut request: R) -> Result<T, CallFailure>
    where
        R: FnMut() -> F,
        F: Future<Output = Result<T, GaxError>>,
    {
        match self.send_once(operation, request()).await {
            Err(CallFailure::Cloud(f)) if f.is_throttling() => {
                tracing::debug!(operation, reason = ?f.reason, "compute throttled the request; resending it once");
                self.limiter.penalize().await;
                match self.send_once(operation, request()).await {
                    // No time left for the resend: the throttle is the better answer (retryable, with a delay).
                    Err(CallFailure::Deadline) => Err(CallFailure::Cloud(f)),
                    answer => answer,
                }
            }
            answer => answer,
        }
    }

    /// Like [`Api::call`], converting every failure into a driver error.
    pub(crate) async fn call_or_fail<T, F, R>(&self, operation: &'static str, request: R) -> Result<T, DriverError>
    where
        R: FnMut() -> F,
        F: Future<Output = Result<T, GaxError>>,
    {
        self.call(operation, request).await.map_err(|f| f.into_driver_error(operation))
    }

    /// One counted, rate-limited attempt of `request`, bounded by the RPC's remaining time.
    async fn send_once<T, F>(&self, operation: &'static str, request: F) -> Result<T, CallFailure>
    where
        F: Future<Output = Result<T, GaxError>>,
    {
        let run = async {
            self.limiter.acquire().await;
            cloud_call(CloudCall { provider: "gcp", service: "compute", operation }, request).await
        };
        match tokio::time::timeout(self.ctx.remaining(), run).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                let failure = CloudFailure::from_gax(&e);
                tracing::debug!(operation, http_status = ?failure.http_status, reason = ?failure.reason, "compute call failed");
                Err(CallFailure::Cloud(failure))
            }
            Err(_) => Err(CallFailure::Deadline),
        }
    }

    /// The clients and limiter of this handle, detached from the RPC's deadline.
    pub(crate) fn shared(&self) -> SharedApi {
        SharedApi { clients: Arc::clone(&self.clients), limiter: Arc::clone(&self.limiter) }
    }

    /// Time left in this RPC.
    pub(crate) fn remaining(&self) -> std::time::Duration {
        self.ctx.remaining()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_override_classification() {
        assert_eq!(ComputeEndpoint::from_override(None), ComputeEndpoint::Google);
        assert_eq!(ComputeEndpoint::from_override(Some(" ")), ComputeEndpoint::Google);
        assert_eq!(
            ComputeEndpoint::from_override(Some("http://127.0.0.1:8089/")),
            ComputeEndpoint::Insecure("http://127.0.0.1:8089".into())
        );
        assert_eq!(
            ComputeEndpoint::from_override(Some("https://compute-private.p.rep.googleapis.com")),
            ComputeEndpoint::Secure("https://compute-private.p.rep.googleapis.com".into())
        );
    }
}
