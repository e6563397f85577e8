//! ARM clients cached per credentials and cloud, one client-side rate limiter
//! per subscription, and the handle every ARM request goes through.
//!
//! `azure_core`'s retry policy is off (`RetryOptions::none`): every request is
//! sent through the kit's [`CloudCaller`] (limiter, metrics, deadline, one
//! resend after a throttle), failures are classified once into
//! [`ArmFailure`], and the machine-controller's backoff decides when to try
//! again. Long-running operations are polled by the provider ([`crate::lro`]):
//! the SDK's own `.await` would re-send the whole PUT.

use std::future::Future;
use std::sync::Arc;

use azure_core::{HttpClient, Method, Request, RetryOptions, TransportOptions, Url};
use machine_driver_api::{CallContext, CallFailure, CloudCaller, DriverError, KeyedCache, RateLimiter};
use serde::Deserialize;

use crate::config::CloudEndpoints;
use crate::credentials::{AadToken, AzureCredentials};
use crate::errors::{ArmFailure, TransportProblem};
use crate::transport::{RecordingTransport, quota_resets_after, retry_after, with_meta};

/// What an ARM request answers: the output, or the failure (which converts
/// into a `DriverError` with `?`).
pub(crate) type Answer<T> = Result<T, CallFailure<ArmFailure>>;

/// The compute management client of the pinned API version (2024-07-01).
pub(crate) type ComputeClient = azure_mgmt_compute::package_2024_07_01::Client;
/// The network management client of the pinned API version (2024-03-01).
pub(crate) type NetworkClient = azure_mgmt_network::package_2024_03::Client;

/// Most cached client sets (rotated secrets leave old entries behind).
const MAX_CACHED_CLIENT_SETS: usize = 64;
/// Most rate limiters (one per subscription).
const MAX_LIMITERS: usize = 1024;

/// The clients of one set of credentials in one cloud.
pub(crate) struct ArmClients {
    /// Microsoft.Compute.
    pub(crate) compute: ComputeClient,
    /// Microsoft.Network.
    pub(crate) network: NetworkClient,
    /// The access token all of them use.
    token: Arc<AadToken>,
    /// The HTTP client, for the few requests made without the SDK.
    http: Arc<dyn HttpClient>,
    /// ARM's endpoint: requests the driver builds itself go nowhere else.
    arm: Url,
    /// The cloud's name (`AzurePublic`).
    cloud: &'static str,
}

impl std::fmt::Debug for ArmClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArmClients")
            .field("arm", &self.arm.as_str())
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

/// Client cache and rate limiters of one driver.
#[derive(Debug)]
pub(crate) struct ClientPool {
    endpoint_override: Option<Url>,
    rate: f64,
    burst: u32,
    clients: KeyedCache<([u8; 32], &'static str), ArmClients>,
    limiters: KeyedCache<String, RateLimiter>,
}

impl ClientPool {
    /// A pool sending to `endpoint_override` (every cloud) or to each cloud's
    /// own endpoints, limiting each subscription to `rate`/s with `burst`.
    pub(crate) fn new(endpoint_override: Option<Url>, rate: f64, burst: u32) -> Self {
        Self {
            endpoint_override,
            rate,
            burst,
            clients: KeyedCache::new(MAX_CACHED_CLIENT_SETS),
            limiters: KeyedCache::new(MAX_LIMITERS),
        }
    }

    /// A handle for the calls of one RPC made with `creds` in `cloud`
    /// (`cloudConfiguration.name`, `None` = AzurePublic).
    pub(crate) fn api<'a>(
        &self,
        creds: &AzureCredentials,
        cloud: Option<&str>,
        ctx: &'a CallContext,
    ) -> Result<Api<'a>, DriverError> {
        let endpoints = CloudEndpoints::resolve(cloud, self.endpoint_override.as_ref())?;
        let key = (creds.fingerprint, endpoints.name);
        let clients = match self.clients.get(&key) {
            Some(c) => c,
            None => self.clients.insert_if_absent(key, Arc::new(build(&endpoints, creds)?)),
        };
        let limiter =
            self.limiters.get_or_insert_with(&creds.subscription_id, || RateLimiter::new(self.rate, self.burst));
        Ok(Api { clients, limiter, ctx })
    }
}

fn build(endpoints: &CloudEndpoints, creds: &AzureCredentials) -> Result<ArmClients, DriverError> {
    let http: Arc<dyn HttpClient> = Arc::new(RecordingTransport::new());
    let token = Arc::new(AadToken::new(Arc::clone(&http), &endpoints.authority, &endpoints.scope, creds)?);
    let failed = |_| DriverError::internal("building the ARM client failed");
    let compute = ComputeClient::builder(token.clone())
        .endpoint(endpoints.arm.clone())
        .scopes(&[endpoints.scope.as_str()])
        .retry(RetryOptions::none())
        .transport(TransportOptions::new(Arc::clone(&http)))
        .build()
        .map_err(failed)?;
    let network = NetworkClient::builder(token.clone())
        .endpoint(endpoints.arm.clone())
        .scopes(&[endpoints.scope.as_str()])
        .retry(RetryOptions::none())
        .transport(TransportOptions::new(Arc::clone(&http)))
        .build()
        .map_err(failed)?;
    Ok(ArmClients { compute, network, token, http, arm: endpoints.arm.clone(), cloud: endpoints.name })
}

/// The clients, rate limiter and deadline of one RPC.
#[derive(Debug, Clone)]
pub(crate) struct Api<'a> {
    clients: Arc<ArmClients>,
    limiter: Arc<RateLimiter>,
    ctx: &'a CallContext,
}

/// The clients and rate limiter of one set of credentials without a deadline:
/// for calls made on behalf of several RPCs (coalesced status reads).
#[derive(Debug, Clone)]
pub(crate) struct SharedApi {
    clients: Arc<ArmClients>,
    limiter: Arc<RateLimiter>,
}

impl SharedApi {
    /// A call handle bounded by `ctx`'s deadline.
    pub(crate) fn bind<'a>(&self, ctx: &'a CallContext) -> Api<'a> {
        Api { clients: Arc::clone(&self.clients), limiter: Arc::clone(&self.limiter), ctx }
    }
}

/// A 2xx answer of a request the driver built itself.
#[derive(Debug)]
pub(crate) struct RawAnswer {
    /// HTTP status.
    pub(crate) status: u16,
    /// The body (empty for 204).
    pub(crate) body: Vec<u8>,
    /// The `Retry-After` ARM suggested (operation polls).
    pub(crate) retry_after: Option<std::time::Duration>,
}

/// ARM's error body.
#[derive(Deserialize, Default)]
struct ErrorBody {
    #[serde(default)]
    error: ErrorDetail,
}

#[derive(Deserialize, Default)]
struct ErrorDetail {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: String,
}

impl Api<'_> {
    /// The compute client.
    pub(crate) fn compute(&self) -> &ComputeClient {
        &self.clients.compute
    }

    /// The cloud these clients talk to (`AzurePublic`).
    pub(crate) fn cloud(&self) -> &'static str {
        self.clients.cloud
    }

    /// The network client.
    pub(crate) fn network(&self) -> &NetworkClient {
        &self.clients.network
    }

    /// Sends one SDK request through the kit's [`CloudCaller`]: the token
    /// refreshed first (itself a counted call, `aad.token`), the
    /// subscription's rate limiter, counted and timed, bounded by the RPC's
    /// deadline, resent once after a throttle.
    ///
    /// `request` makes the request's future (`|| client.op(..).send()`), so
    /// that nothing is sent before the limiter's token is taken.
    pub(crate) async fn call<T, F, R>(
        &self,
        service: &'static str,
        operation: &'static str,
        mut request: R,
    ) -> Answer<T>
    where
        R: FnMut() -> F,
        F: Future<Output = azure_core::Result<T>>,
    {
        self.fresh_token().await?;
        let answer = self
            .caller()
            .send(service, operation, || with_meta(request()), |(e, meta)| ArmFailure::classify(e, meta))
            .await;
        self.after(&answer);
        answer
    }

    /// GETs `url` (an ARM URL the driver built or ARM handed out: a next
    /// page, an operation) through the same caller; non-2xx answers are
    /// failures. URLs outside ARM's endpoint are refused: the token goes nowhere else.
    pub(crate) async fn get_raw(&self, service: &'static str, operation: &'static str, url: &Url) -> Answer<RawAnswer> {
        if url.origin() != self.clients.arm.origin() {
            return Err(CallFailure::Cloud(
                machine_driver_api::CloudCall { provider: "azure", service, operation },
                ArmFailure::transport(TransportProblem::Decode, "ARM handed out a URL on another host"),
            ));
        }
        self.fresh_token().await?;
        let answer =
            self.caller().send(service, operation, || self.send_raw(Method::Get, url.clone(), None, &[]), |f| f).await;
        self.after(&answer);
        answer
    }

    /// PUTs the JSON `body` to `url` on ARM's endpoint, with `headers`
    /// (`If-None-Match: *`), through the same caller as [`Api::get_raw`]. The
    /// driver's own request bodies go out as built, never through an SDK model
    /// (whose types drop what they cannot express: azure_mgmt_compute 0.21's
    /// `UserAssignedIdentities` is an empty struct, so a VM's identity ids
    /// would be lost).
    pub(crate) async fn put_raw(
        &self,
        service: &'static str,
        operation: &'static str,
        url: &Url,
        body: &[u8],
        headers: &[(&'static str, &'static str)],
    ) -> Answer<RawAnswer> {
        self.write_raw(Method::Put, service, operation, url, body, headers).await
    }

    /// PATCHes the JSON `body` to `url` on ARM's endpoint (the Tags API's
    /// merge), through the same caller as [`Api::put_raw`].
    pub(crate) async fn patch_raw(
        &self,
        service: &'static str,
        operation: &'static str,
        url: &Url,
        body: &[u8],
    ) -> Answer<RawAnswer> {
        self.write_raw(Method::Patch, service, operation, url, body, &[]).await
    }

    async fn write_raw(
        &self,
        method: Method,
        service: &'static str,
        operation: &'static str,
        url: &Url,
        body: &[u8],
        headers: &[(&'static str, &'static str)],
    ) -> Answer<RawAnswer> {
        if url.origin() != self.clients.arm.origin() {
            return Err(CallFailure::Cloud(
                machine_driver_api::CloudCall { provider: "azure", service, operation },
                ArmFailure::transport(TransportProblem::Decode, "a request URL on another host than ARM's"),
            ));
        }
        self.fresh_token().await?;
        let answer = self
            .caller()
            .send(service, operation, || self.send_raw(method, url.clone(), Some(body.to_vec()), headers), |f| f)
            .await;
        self.after(&answer);
        answer
    }

    /// POSTs the JSON `body` to `url` on ARM's endpoint (Resource Graph's
    /// query) through the same caller as [`Api::get_raw`]: token, limiter,
    /// counted and timed, one resend after a throttle (a 429 carries
    /// `Retry-After` or Resource Graph's `x-ms-user-quota-resets-after`).
    pub(crate) async fn post_raw(
        &self,
        service: &'static str,
        operation: &'static str,
        url: &Url,
        body: &[u8],
    ) -> Answer<RawAnswer> {
        self.write_raw(Method::Post, service, operation, url, body, &[]).await
    }

    /// A URL on ARM's endpoint: the path of `segments`, each percent-encoded
    /// as one segment (a `/` in one is `%2F`, a `.` or `..` is dropped, never
    /// resolved), plus `api-version`.
    pub(crate) fn arm_url(&self, segments: &[&str], api_version: &str) -> Url {
        let mut url = self.clients.arm.clone();
        url.set_query(None);
        if let Ok(mut path) = url.path_segments_mut() {
            path.clear().extend(segments);
        }
        url.query_pairs_mut().append_pair("api-version", api_version);
        url
    }

    async fn send_raw(
        &self,
        method: Method,
        url: Url,
        body: Option<Vec<u8>>,
        headers: &[(&'static str, &'static str)],
    ) -> Result<RawAnswer, ArmFailure> {
        use azure_core::auth::TokenCredential as _;
        let token =
            self.clients.token.get_token(&[]).await.map_err(|_| {
                ArmFailure::transport(TransportProblem::Credentials, "no access token for the credentials")
            })?;
        let mut req = Request::new(url, method);
        req.insert_header("authorization", format!("Bearer {}", token.token.secret()));
        for (name, value) in headers {
            req.insert_header(*name, *value);
        }
        if let Some(body) = body {
            req.insert_header("content-type", "application/json");
            req.set_body(body);
        }
        let response = self
            .clients
            .http
            .execute_request(&req)
            .await
            .map_err(|_| ArmFailure::transport(TransportProblem::Network, "ARM did not answer"))?;
        let (status, headers, body) = response.deconstruct();
        let status = u16::from(status);
        let body = body
            .collect()
            .await
            .map_err(|_| ArmFailure::transport(TransportProblem::Network, "reading ARM's answer failed"))?
            .to_vec();
        if (200..300).contains(&status) {
            return Ok(RawAnswer { status, body, retry_after: retry_after(&headers) });
        }
        let parsed: ErrorBody = serde_json::from_slice(&body).unwrap_or_default();
        let mut failure = ArmFailure::http(status, parsed.error.code, parsed.error.message);
        failure.retry_after = retry_after(&headers).or_else(|| quota_resets_after(&headers));
        Err(failure)
    }

    /// Refreshes the access token when it is about to expire, as a counted call.
    async fn fresh_token(&self) -> Answer<()> {
        if self.clients.token.is_fresh() {
            return Ok(());
        }
        let token = Arc::clone(&self.clients.token);
        self.caller()
            .send(
                "aad",
                "token",
                || {
                    let token = Arc::clone(&token);
                    async move { token.refresh().await }
                },
                |f| f,
            )
            .await
    }

    /// After a 401, the token is forgotten so that the next call fetches a new one.
    fn after<T>(&self, answer: &Answer<T>) {
        if let Err(CallFailure::Cloud(_, f)) = answer
            && f.is_unauthorized()
        {
            self.clients.token.forget();
        }
    }

    fn caller(&self) -> CloudCaller<'_> {
        CloudCaller::new("azure", &self.limiter, self.ctx)
    }

    /// The clients and limiter of this handle, detached from the RPC's deadline.
    pub(crate) fn shared(&self) -> SharedApi {
        SharedApi { clients: Arc::clone(&self.clients), limiter: Arc::clone(&self.limiter) }
    }

    /// The RPC's context (its deadline).
    pub(crate) fn context(&self) -> &CallContext {
        self.ctx
    }
}
