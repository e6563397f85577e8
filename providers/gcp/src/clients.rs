//! Compute API clients, cached per service account key or workload identity
//! configuration, one client-side rate limiter per project, and the handle
//! every Compute call goes through.
//!
//! The clients of one set of credentials share one `google-cloud-auth`
//! credentials object, whose token cache makes one token request for all
//! concurrent calls and renews the token before it expires. A call refused
//! for its credentials (no token could be made, or Compute answered 401)
//! marks the clients stale: the next call builds them again, so a workload
//! identity whose exchange failed (the SDK keeps such an error for good) is
//! exchanged anew, re-reading its token file. Builds are serialized, so
//! concurrent calls that find no clients wait for one build and one exchange.
//!
//! The SDK's own retry loop is switched off (`NeverRetry`): every Compute
//! request is sent through the kit's [`CloudCaller`] (limiter, metrics,
//! deadline, one resend after a throttle), failures are classified once into
//! [`GceFailure`] and the machine-controller's backoff decides when to try
//! again. Each call is bounded by the RPC's remaining deadline, or, for a call
//! made on behalf of several RPCs ([`SharedApi`]), by a deadline of its own.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use google_cloud_auth::credentials::Credentials;
use google_cloud_compute_v1::client::{Disks, Images, Instances, ZoneOperations};
use google_cloud_gax::error::Error as GaxError;
use google_cloud_gax::retry_policy::NeverRetry;
use machine_driver_api::{CallContext, CallFailure, CloudCaller, DriverError, KeyedCache, RateLimiter};

use crate::credentials::{GcpCredentials, WorkloadIdentity};
use crate::errors::GceFailure;

/// What a Compute request answers: the output, or the failure (which converts
/// into a `DriverError` with `?`).
pub(crate) type Answer<T> = Result<T, CallFailure<GceFailure>>;

/// Most cached client sets (rotated keys leave old entries behind).
const MAX_CACHED_CLIENT_SETS: usize = 64;
/// Most rate limiters (one per project).
const MAX_LIMITERS: usize = 1024;

/// Where Compute requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ComputeEndpoint {
    /// Google's default endpoint with service account credentials.
    Google,
    /// An override over HTTPS (private endpoint) with service account credentials.
    Secure(String),
    /// An override over plain HTTP (a fake): principal-header credentials for
    /// service account keys; workload identity exchanges tokens with the fake.
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
    /// disks.* (UpdateMachine's disk labels, size and performance)
    pub(crate) disks: Disks,
    /// The workload identity token file behind these clients' credentials.
    token_file: Option<PathBuf>,
    /// Set when a call was refused for its credentials: build new clients.
    stale: AtomicBool,
    /// Which build of the credentials' clients these are (unique in the process).
    pub(crate) generation: u64,
}

/// Builds of client sets so far (their generations).
static GENERATIONS: AtomicU64 = AtomicU64::new(0);

impl ComputeClients {
    /// A failed call's answer, after marking these clients stale when the
    /// failure was one of credentials; a workload identity's failure to make
    /// a token is explained (an unusable token file, named; or the token
    /// endpoint's refusal).
    fn after_failure(&self, failure: CallFailure<GceFailure>) -> CallFailure<GceFailure> {
        let CallFailure::Cloud(call, f) = failure else {
            return failure;
        };
        // A token endpoint that failed for a passing reason is UNAVAILABLE,
        // but the SDK keeps any failed exchange: these clients are rebuilt too.
        if !f.is_unauthenticated() && !f.is_credentials_problem() {
            return CallFailure::Cloud(call, f);
        }
        self.stale.store(true, Ordering::Relaxed);
        let Some(file) = self.token_file.as_deref().filter(|_| f.is_credentials_problem()) else {
            return CallFailure::Cloud(call, f);
        };
        let f = match WorkloadIdentity::token_file_problem(file) {
            Some(why) => f.explained(
                machine_driver_api::reasons::WORKLOAD_IDENTITY_TOKEN_UNREADABLE,
                format!("workload identity token file {}: {why}", file.display()),
            ),
            None => {
                let refusal = f.token_endpoint_refusal();
                let why = refusal.map_or_else(
                    || "the token endpoint could not be reached or refused it".to_string(),
                    |r| format!("the token endpoint refused it ({r})"),
                );
                f.explained(
                    crate::errors::WORKLOAD_IDENTITY_EXCHANGE_FAILED,
                    format!(
                        "the workload identity token of {} was not exchanged for an access token: {why}",
                        file.display()
                    ),
                )
            }
        };
        tracing::warn!(reason = ?f.reason, message = %f.message, "workload identity credentials made no token");
        CallFailure::Cloud(call, f)
    }
}

/// Client cache and rate limiters of one driver.
#[derive(Debug)]
pub(crate) struct ClientPool {
    endpoint: ComputeEndpoint,
    rate: f64,
    burst: u32,
    clients: KeyedCache<[u8; 32], ComputeClients>,
    limiters: KeyedCache<String, RateLimiter>,
    /// Held while clients are built: one build (and one token exchange) at a time.
    building: tokio::sync::Mutex<()>,
}

impl ClientPool {
    /// A pool sending to `endpoint`, limiting each project to `rate`/s with `burst`.
    pub(crate) fn new(endpoint: ComputeEndpoint, rate: f64, burst: u32) -> Self {
        Self {
            endpoint,
            rate,
            burst,
            clients: KeyedCache::new(MAX_CACHED_CLIENT_SETS),
            limiters: KeyedCache::new(MAX_LIMITERS),
            building: tokio::sync::Mutex::new(()),
        }
    }

    /// A handle for the calls of one RPC made with `creds`.
    pub(crate) async fn api<'a>(&self, creds: &GcpCredentials, ctx: &'a CallContext) -> Result<Api<'a>, DriverError> {
        Ok(Api { clients: self.clients_for(creds).await?, limiter: self.limiter(&creds.project_id), ctx })
    }

    async fn clients_for(&self, creds: &GcpCredentials) -> Result<Arc<ComputeClients>, DriverError> {
        let fresh = |c: &Arc<ComputeClients>| !c.stale.load(Ordering::Relaxed);
        if let Some(c) = self.clients.get(&creds.fingerprint).filter(fresh) {
            return Ok(c);
        }
        let _building = self.building.lock().await;
        if let Some(c) = self.clients.get(&creds.fingerprint).filter(fresh) {
            return Ok(c);
        }
        let auth = match &self.endpoint {
            ComputeEndpoint::Insecure(url) => creds.fake_endpoint_credentials(url)?,
            _ => creds.google_credentials()?,
        };
        let built = Arc::new(self.build(auth, creds.token_file().map(PathBuf::from)).await?);
        self.clients.insert(creds.fingerprint, Arc::clone(&built));
        Ok(built)
    }

    async fn build(&self, creds: Credentials, token_file: Option<PathBuf>) -> Result<ComputeClients, DriverError> {
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
            disks: client!(Disks),
            token_file,
            stale: AtomicBool::new(false),
            generation: GENERATIONS.fetch_add(1, Ordering::Relaxed),
        })
    }

    fn limiter(&self, project: &str) -> Arc<RateLimiter> {
        self.limiters.get_or_insert_with(&project.to_string(), || RateLimiter::new(self.rate, self.burst))
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

impl Api<'_> {
    /// Sends one Compute request through the kit's [`CloudCaller`]: the
    /// project's rate limiter, counted and timed, bounded by the RPC's
    /// deadline, resent once after a throttle.
    ///
    /// `request` makes the request's future (`|| client.op()....send()`), so
    /// that nothing is sent before the limiter's token is taken and a
    /// throttled request can be made again.
    pub(crate) async fn call<T, F, R>(&self, operation: &'static str, request: R) -> Answer<T>
    where
        R: FnMut() -> F,
        F: Future<Output = Result<T, GaxError>>,
    {
        CloudCaller::new("gcp", &self.limiter, self.ctx)
            .send("compute", operation, request, GceFailure::classify)
            .await
            .map_err(|failure| self.clients.after_failure(failure))
    }

    /// The clients and limiter of this handle, detached from the RPC's deadline.
    pub(crate) fn shared(&self) -> SharedApi {
        SharedApi { clients: Arc::clone(&self.clients), limiter: Arc::clone(&self.limiter) }
    }

    /// Time left in this RPC.
    pub(crate) fn remaining(&self) -> std::time::Duration {
        self.ctx.remaining()
    }

    /// The RPC's context (its deadline).
    pub(crate) fn context(&self) -> &CallContext {
        self.ctx
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
