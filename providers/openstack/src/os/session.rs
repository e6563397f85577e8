//! One Keystone session per credentials: the HTTP client (with the secret's
//! TLS settings), the discovered v3 root, and the cached token, fetched once
//! at a time, kept until shortly before it expires, and fetched anew when a
//! service refuses it (401). Nothing is cached on disk.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use machine_driver_api::{CallFailure, CloudCaller};
use reqwest::Method;

use crate::credentials::OsCredentials;
use crate::errors::OsFailure;
use crate::os::keystone::{self, Token};
use crate::os::request::{Reply, send};

/// The Keystone session of one set of credentials.
pub(crate) struct Session {
    http: reqwest::Client,
    creds: OsCredentials,
    /// `--cloud-endpoint`, used instead of the secret's `authURL`.
    auth_override: Option<String>,
    identity: tokio::sync::OnceCell<String>,
    current: Mutex<Option<Arc<Token>>>,
    refresh: tokio::sync::Mutex<()>,
    fetches: AtomicU64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("creds", &self.creds).finish_non_exhaustive()
    }
}

impl Session {
    /// A session of `creds` over `http`.
    pub(crate) fn new(http: reqwest::Client, creds: OsCredentials, auth_override: Option<String>) -> Self {
        Self {
            http,
            creds,
            auth_override,
            identity: tokio::sync::OnceCell::new(),
            current: Mutex::new(None),
            refresh: tokio::sync::Mutex::new(()),
            fetches: AtomicU64::new(0),
        }
    }

    /// The HTTP client of the session.
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The fingerprint of the session's credentials (Keystone, the user or
    /// application credential, the project scope, TLS settings).
    pub(crate) fn fingerprint(&self) -> [u8; 32] {
        self.creds.fingerprint
    }

    fn cached(&self) -> Option<Arc<Token>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner).clone().filter(|t| t.is_fresh())
    }

    /// A fresh token: the cached one, or one fetched now (one fetch at a time;
    /// concurrent callers wait for it). The bool is true when this call fetched it.
    pub(crate) async fn token(&self, caller: &CloudCaller<'_>) -> Result<(Arc<Token>, bool), CallFailure<OsFailure>> {
        if let Some(t) = self.cached() {
            return Ok((t, false));
        }
        let _one_at_a_time = self.refresh.lock().await;
        if let Some(t) = self.cached() {
            return Ok((t, false));
        }
        let token = Arc::new(self.fetch(caller).await?);
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&token));
        Ok((token, true))
    }

    /// Forgets the token of `generation` (a service answered 401 for it).
    pub(crate) fn invalidate(&self, generation: u64) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_some_and(|t| t.generation == generation) {
            *current = None;
        }
    }

    async fn fetch(&self, caller: &CloudCaller<'_>) -> Result<Token, CallFailure<OsFailure>> {
        let root = self.identity_root(caller).await?;
        let url = format!("{root}/auth/tokens");
        let body = serde_json::to_vec(&self.creds.token_request()).unwrap_or_default();
        let reply: Reply = caller
            .send(
                "identity",
                "tokens.create",
                || send(&self.http, Method::POST, &url, None, &[], Some((&body, "application/json")), &[]),
                |f| f,
            )
            .await?;
        let value = reply.header("x-subject-token").map(str::to_string).unwrap_or_default();
        let generation = self.fetches.fetch_add(1, Ordering::Relaxed) + 1;
        let call =
            machine_driver_api::CloudCall { provider: "openstack", service: "identity", operation: "tokens.create" };
        if value.is_empty() {
            return Err(CallFailure::Cloud(call, OsFailure::transport("Keystone answered without X-Subject-Token")));
        }
        Token::from_answer(value, &reply.body, tokio::time::Instant::now(), generation)
            .map_err(|f| CallFailure::Cloud(call, f))
    }

    /// Keystone's v3 root: the `authURL` when it names v3, else found by
    /// version discovery (once per session).
    async fn identity_root(&self, caller: &CloudCaller<'_>) -> Result<String, CallFailure<OsFailure>> {
        let auth_url = self.auth_override.as_deref().unwrap_or(&self.creds.auth_url).trim_end_matches('/').to_string();
        if keystone::is_v3(&auth_url) {
            return Ok(auth_url);
        }
        self.identity
            .get_or_try_init(|| async {
                let reply = caller
                    .send(
                        "identity",
                        "versions",
                        || send(&self.http, Method::GET, &auth_url, None, &[], None, &[]),
                        |f| f,
                    )
                    .await;
                reply.map(|r| keystone::v3_from_discovery(&auth_url, &r.body))
            })
            .await
            .cloned()
    }
}
