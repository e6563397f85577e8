//! Keystone sessions cached per credentials, one client-side rate limiter per
//! credentials and region, and the handle every OpenStack request goes
//! through (the kit's [`CloudCaller`]: limiter, metrics, deadline, one resend
//! after a throttle), adding the token, the region's endpoint from the
//! catalog, Nova's microversion, and one re-authentication when a service
//! refuses the token (401).

use std::sync::Arc;

use machine_driver_api::{
    CallContext, CallFailure, CloudCall, CloudCaller, DriverError, KeyedCache, PageTokens, RateLimiter,
};
use reqwest::Method;
use serde::de::DeserializeOwned;

use crate::credentials::{OsCredentials, TlsSettings};
use crate::errors::OsFailure;
use crate::os::keystone::Service;
use crate::os::model::{Link, next_link};
use crate::os::request::{NOVA_MICROVERSION_HEADERS, Reply, send};
use crate::os::session::Session;

/// What a request answers: the output, or the failure (which converts into a
/// `DriverError` with `?`).
pub(crate) type Answer<T> = Result<T, CallFailure<OsFailure>>;

/// Most cached sessions (rotated credentials leave old entries behind).
const MAX_SESSIONS: usize = 256;
/// Most rate limiters.
const MAX_LIMITERS: usize = 1024;
/// How long a connection may take to open.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Sessions and rate limiters of one driver.
#[derive(Debug)]
pub(crate) struct ClientPool {
    /// The HTTP client of credentials without TLS settings of their own.
    http: Option<reqwest::Client>,
    /// `--cloud-endpoint`: Keystone's URL instead of each secret's `authURL`.
    auth_override: Option<String>,
    rate: f64,
    burst: u32,
    sessions: KeyedCache<[u8; 32], Session>,
    limiters: KeyedCache<([u8; 32], String), RateLimiter>,
}

impl ClientPool {
    /// A pool limiting each credentials and region to `rate`/s with `burst`.
    pub(crate) fn new(auth_override: Option<String>, rate: f64, burst: u32) -> Self {
        Self {
            http: http_client(&TlsSettings::default()).ok(),
            auth_override,
            rate,
            burst,
            sessions: KeyedCache::new(MAX_SESSIONS),
            limiters: KeyedCache::new(MAX_LIMITERS),
        }
    }

    /// A handle for the calls of one RPC made with `creds` in `region`.
    pub(crate) fn api<'a>(
        &self,
        creds: &OsCredentials,
        region: &str,
        ctx: &'a CallContext,
    ) -> Result<Api<'a>, DriverError> {
        let session = match self.sessions.get(&creds.fingerprint) {
            Some(s) => s,
            None => {
                let http = if creds.tls.is_default() {
                    self.http.clone().ok_or_else(|| DriverError::internal("building the HTTP client failed"))?
                } else {
                    http_client(&creds.tls)?
                };
                let session = Session::new(http, creds.clone(), self.auth_override.clone());
                self.sessions.insert_if_absent(creds.fingerprint, Arc::new(session))
            }
        };
        let limiter = self
            .limiters
            .get_or_insert_with(&(creds.fingerprint, region.to_string()), || RateLimiter::new(self.rate, self.burst));
        Ok(Api { shared: SharedApi { session, limiter, region: Arc::from(region) }, ctx })
    }
}

/// An HTTP client with the secret's TLS settings.
fn http_client(tls: &TlsSettings) -> Result<reqwest::Client, DriverError> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        // A redirect would resend the token elsewhere.
        .redirect(reqwest::redirect::Policy::none())
        .danger_accept_invalid_certs(tls.insecure);
    if let Some(pem) = &tls.ca_cert {
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|_| DriverError::invalid_argument("secret.caCert", "is not a PEM certificate bundle"))?;
        if certs.is_empty() {
            return Err(DriverError::invalid_argument("secret.caCert", "holds no certificate"));
        }
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    if let Some(pem) = &tls.client_identity {
        let identity = reqwest::Identity::from_pem(pem).map_err(|_| {
            DriverError::invalid_argument("secret.clientCert", "and clientKey are not a PEM certificate and key")
        })?;
        builder = builder.identity(identity);
    }
    builder.build().map_err(|_| DriverError::invalid_argument("secret.caCert", "the TLS settings are not usable"))
}

/// The session, limiter and region without a deadline: for calls made on
/// behalf of several RPCs (coalesced status reads).
#[derive(Debug, Clone)]
pub(crate) struct SharedApi {
    session: Arc<Session>,
    limiter: Arc<RateLimiter>,
    region: Arc<str>,
}

impl SharedApi {
    /// A call handle bounded by `ctx`'s deadline.
    pub(crate) fn bind<'a>(&self, ctx: &'a CallContext) -> Api<'a> {
        Api { shared: self.clone(), ctx }
    }
}

/// The session, rate limiter, region and deadline of one RPC.
#[derive(Debug, Clone)]
pub(crate) struct Api<'a> {
    shared: SharedApi,
    ctx: &'a CallContext,
}

/// A request of one service.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'r> {
    /// The service.
    pub(crate) service: Service,
    /// The operation's name in metrics and the fake's counters (`servers.get`).
    pub(crate) operation: &'static str,
    /// The method.
    pub(crate) method: Verb,
    /// The path below the service's API root (`/servers/{id}`).
    pub(crate) path: &'r str,
}

/// The HTTP methods the driver uses (`Copy`, unlike reqwest's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    /// GET.
    Get,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
}

impl Verb {
    fn reqwest(self) -> Method {
        match self {
            Self::Get => Method::GET,
            Self::Post => Method::POST,
            Self::Put => Method::PUT,
            Self::Patch => Method::PATCH,
            Self::Delete => Method::DELETE,
        }
    }
}

impl<'r> Call<'r> {
    /// A GET.
    pub(crate) fn get(service: Service, operation: &'static str, path: &'r str) -> Self {
        Self { service, operation, method: Verb::Get, path }
    }

    /// A call with `method`.
    pub(crate) fn new(service: Service, operation: &'static str, method: Verb, path: &'r str) -> Self {
        Self { service, operation, method, path }
    }
}

/// A machine uid or server id under the credentials and region a request
/// used: what this process remembers of its creates is keyed so, so that a
/// request with other credentials (another project, user or Keystone) or in
/// another region never gets an answer or a record kept for another's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Scoped {
    /// The credentials' fingerprint ([`OsCredentials::fingerprint`]).
    fingerprint: [u8; 32],
    /// The region.
    region: Arc<str>,
    /// The machine uid or server id.
    key: String,
}

impl Api<'_> {
    /// The region of this handle.
    pub(crate) fn region(&self) -> &str {
        &self.shared.region
    }

    /// `key` (a machine uid or server id) under this handle's credentials and region.
    pub(crate) fn scoped(&self, key: &str) -> Scoped {
        Scoped {
            fingerprint: self.shared.session.fingerprint(),
            region: Arc::clone(&self.shared.region),
            key: key.to_string(),
        }
    }

    /// The RPC's context.
    pub(crate) fn context(&self) -> &CallContext {
        self.ctx
    }

    /// The session, limiter and region of this handle, detached from the RPC's deadline.
    pub(crate) fn shared(&self) -> SharedApi {
        self.shared.clone()
    }

    /// The project the credentials' token is scoped to (a token fetch at most).
    pub(crate) async fn project_id(&self) -> Answer<String> {
        let caller = CloudCaller::new("openstack", &self.shared.limiter, self.ctx);
        Ok(self.shared.session.token(&caller).await?.0.project_id.clone())
    }

    /// Sends `call` with `query` and a JSON `body`; the JSON answer.
    pub(crate) async fn json<T: DeserializeOwned>(
        &self,
        call: Call<'_>,
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
    ) -> Answer<T> {
        let bytes = body.map(|b| serde_json::to_vec(b).unwrap_or_default());
        let reply = self.raw(call, query, bytes.as_deref().map(|b| (b, "application/json"))).await?;
        parse(call, &reply)
    }

    /// Sends `call` with a body of `content_type`; the raw answer.
    pub(crate) async fn raw(
        &self,
        call: Call<'_>,
        query: &[(&str, String)],
        body: Option<(&[u8], &str)>,
    ) -> Answer<Reply> {
        self.raw_with(call, query, body, &[]).await
    }

    /// [`Api::raw`] with further request headers.
    pub(crate) async fn raw_with(
        &self,
        call: Call<'_>,
        query: &[(&str, String)],
        body: Option<(&[u8], &str)>,
        headers: &[(&str, &str)],
    ) -> Answer<Reply> {
        let caller = CloudCaller::new("openstack", &self.shared.limiter, self.ctx);
        let session = &self.shared.session;
        let cloud_call = CloudCall { provider: "openstack", service: call.service.label(), operation: call.operation };
        let mut reauthenticated = false;
        loop {
            let (token, fetched_now) = session.token(&caller).await?;
            let root =
                token.endpoint(call.service, &self.shared.region).map_err(|f| CallFailure::Cloud(cloud_call, f))?;
            let url = format!("{root}{}", call.path);
            let mut extra: Vec<(&str, &str)> = headers.to_vec();
            if call.service == Service::Compute {
                extra.extend_from_slice(NOVA_MICROVERSION_HEADERS);
            }
            let method = call.method;
            let answer = caller
                .send(
                    call.service.label(),
                    call.operation,
                    || send(session.http(), method.reqwest(), &url, Some(&token.value), query, body, &extra),
                    |f| f,
                )
                .await;
            match answer {
                // A token Keystone revoked or expired early: fetch a new one, once.
                Err(CallFailure::Cloud(_, f)) if f.is_unauthorized() && !fetched_now && !reauthenticated => {
                    tracing::debug!(
                        service = call.service.label(),
                        operation = call.operation,
                        "token refused; authenticating again"
                    );
                    session.invalidate(token.generation);
                    reauthenticated = true;
                }
                other => return other,
            }
        }
    }

    /// Every item of a paged list (`limit`/`marker`), following `next` links
    /// by their marker against this handle's endpoint (never to the link's
    /// own host), with the kit's [`PageTokens`]: a page cap, and a marker
    /// handed out twice stops the read (a list the orphan collector acts on
    /// must be whole, so either is an error, not a short list).
    pub(crate) async fn all_pages<P: DeserializeOwned, T>(
        &self,
        call: Call<'_>,
        query: &[(&str, String)],
        split: impl Fn(P) -> (Vec<T>, Vec<Link>),
    ) -> Result<Vec<T>, DriverError> {
        self.all_pages_by(call, query, |page: P| {
            let (items, links) = split(page);
            (items, next_link(&links).map(str::to_string))
        })
        .await
    }

    /// [`Api::all_pages`] for a list whose page names its next page as one
    /// link (`split` answers the items and that link, Glance's `next`).
    pub(crate) async fn all_pages_by<P: DeserializeOwned, T>(
        &self,
        call: Call<'_>,
        query: &[(&str, String)],
        split: impl Fn(P) -> (Vec<T>, Option<String>),
    ) -> Result<Vec<T>, DriverError> {
        let mut out = Vec::new();
        let mut tokens = PageTokens::new(call.operation);
        let mut marker: Option<String> = None;
        loop {
            let mut q = query.to_vec();
            if let Some(m) = marker.take() {
                q.push(("marker", m));
            }
            let (items, next) = split(self.json::<P>(call, &q, None).await?);
            out.extend(items);
            let next = match next {
                Some(href) => {
                    Some(marker_of(&href).ok_or_else(|| broken(call, "answered a next link without a marker"))?)
                }
                None => None,
            };
            match tokens.next(next.as_deref())? {
                Some(m) => marker = Some(m),
                None => return Ok(out),
            }
        }
    }
}

fn broken(call: Call<'_>, what: &str) -> CallFailure<OsFailure> {
    let cloud_call = CloudCall { provider: "openstack", service: call.service.label(), operation: call.operation };
    CallFailure::Cloud(cloud_call, OsFailure::transport(what.to_string()))
}

/// The `marker` query parameter of a `next` link (absolute, as Nova and
/// Neutron give it, or a path, as Glance does).
fn marker_of(href: &str) -> Option<String> {
    let base = reqwest::Url::parse("http://next.invalid/").ok()?;
    let url = base.join(href).ok()?;
    url.query_pairs().find(|(k, _)| k == "marker").map(|(_, v)| v.into_owned())
}

/// The JSON answer of `call` (an empty body reads as `null`).
fn parse<T: DeserializeOwned>(call: Call<'_>, reply: &Reply) -> Answer<T> {
    let body: &[u8] = if reply.body.is_empty() { b"null" } else { &reply.body };
    serde_json::from_slice(body)
        .map_err(|_| broken(call, &format!("answered HTTP {} with a body that is not the expected JSON", reply.status)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_of_next_links() {
        assert_eq!(marker_of("http://nova/v2.1/servers/detail?limit=2&marker=abc&name=x").as_deref(), Some("abc"));
        assert_eq!(marker_of("http://nova/v2.1/servers/detail?limit=2"), None);
        assert_eq!(marker_of("/v2/images?limit=25&marker=i-2&name=x").as_deref(), Some("i-2"));
    }
}
