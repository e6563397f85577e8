//! ECS clients cached per access key and region, one client-side rate limiter
//! per access key and region, and the handle every ECS and STS request goes
//! through (the kit's [`CloudCaller`]: limiter, metrics, deadline, one
//! resend after a throttle; each attempt is signed anew with a fresh nonce).

use std::sync::Arc;

use machine_driver_api::{CallContext, CallFailure, CloudCaller, DriverError, KeyedCache, RateLimiter};
use serde::de::DeserializeOwned;

use crate::credentials::AccessKey;
use crate::ecs::client::{EcsClient, Endpoints, Params, Service};
use crate::errors::EcsFailure;

/// What a request answers: the output, or the failure (which converts into a
/// `DriverError` with `?`).
pub(crate) type Answer<T> = Result<T, CallFailure<EcsFailure>>;

/// Most cached clients (rotated keys leave old entries behind).
const MAX_CLIENTS: usize = 256;
/// Most rate limiters.
const MAX_LIMITERS: usize = 1024;

/// Client cache and rate limiters of one driver.
#[derive(Debug)]
pub(crate) struct ClientPool {
    /// One HTTP client (connection pool, TLS) for every key pair.
    http: Option<reqwest::Client>,
    endpoints: Endpoints,
    rate: f64,
    burst: u32,
    clients: KeyedCache<([u8; 32], String), EcsClient>,
    limiters: KeyedCache<(String, String), RateLimiter>,
}

impl ClientPool {
    /// A pool sending to `endpoints`, limiting each key and region to `rate`/s with `burst`.
    pub(crate) fn new(endpoints: Endpoints, rate: f64, burst: u32) -> Self {
        Self {
            http: EcsClient::http().ok(),
            endpoints,
            rate,
            burst,
            clients: KeyedCache::new(MAX_CLIENTS),
            limiters: KeyedCache::new(MAX_LIMITERS),
        }
    }

    /// A handle for the calls of one RPC made with `key` in `region`.
    /// `region` becomes part of the ECS host name: anything but a region id is
    /// refused here too, whatever the caller checked.
    pub(crate) fn api<'a>(&self, key: &AccessKey, region: &str, ctx: &'a CallContext) -> Result<Api<'a>, DriverError> {
        if !crate::naming::is_region(region) {
            return Err(DriverError::invalid_argument(
                "region",
                format!("{region:?} is not a region id (eu-central-1)"),
            ));
        }
        let cache_key = (key.fingerprint, region.to_string());
        let client = match self.clients.get(&cache_key) {
            Some(c) => c,
            None => {
                let http = self.http.clone().ok_or_else(|| DriverError::internal("building the HTTP client failed"))?;
                let built = EcsClient::new(http, &self.endpoints, region, &key.id, &key.secret)
                    .map_err(|f| f.driver_error("building the ECS client"))?;
                self.clients.insert_if_absent(cache_key, Arc::new(built))
            }
        };
        let limiter = self
            .limiters
            .get_or_insert_with(&(key.id.clone(), region.to_string()), || RateLimiter::new(self.rate, self.burst));
        Ok(Api { client, limiter, ctx })
    }
}

/// The client, rate limiter and deadline of one RPC.
#[derive(Debug, Clone)]
pub(crate) struct Api<'a> {
    client: Arc<EcsClient>,
    limiter: Arc<RateLimiter>,
    ctx: &'a CallContext,
}

/// The client and limiter without a deadline: for calls made on behalf of
/// several RPCs (coalesced status reads).
#[derive(Debug, Clone)]
pub(crate) struct SharedApi {
    client: Arc<EcsClient>,
    limiter: Arc<RateLimiter>,
}

impl SharedApi {
    /// A call handle bounded by `ctx`'s deadline.
    pub(crate) fn bind<'a>(&self, ctx: &'a CallContext) -> Api<'a> {
        Api { client: Arc::clone(&self.client), limiter: Arc::clone(&self.limiter), ctx }
    }
}

impl Api<'_> {
    /// Sends one ECS action.
    pub(crate) async fn ecs<T: DeserializeOwned>(&self, action: &'static str, params: &Params) -> Answer<T> {
        self.send(Service::Ecs, "ecs", action, params).await
    }

    /// Sends one STS action.
    pub(crate) async fn sts<T: DeserializeOwned>(&self, action: &'static str, params: &Params) -> Answer<T> {
        self.send(Service::Sts, "sts", action, params).await
    }

    async fn send<T: DeserializeOwned>(
        &self,
        service: Service,
        label: &'static str,
        action: &'static str,
        params: &Params,
    ) -> Answer<T> {
        let client = &self.client;
        CloudCaller::new("alicloud", &self.limiter, self.ctx)
            .send(label, action, || client.call::<T>(service, action, &params.0), |f| f)
            .await
    }

    /// The client and limiter of this handle, detached from the RPC's deadline.
    pub(crate) fn shared(&self) -> SharedApi {
        SharedApi { client: Arc::clone(&self.client), limiter: Arc::clone(&self.limiter) }
    }

    /// The RPC's context.
    pub(crate) fn context(&self) -> &CallContext {
        self.ctx
    }
}
