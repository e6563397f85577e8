//! The secret's Azure credentials and the access tokens made from them.
//!
//! Keys as the Go provider reads them (first alias found wins, values
//! trimmed): `clientID`|`azureClientId`, `clientSecret`|`azureClientSecret`
//! or `workloadIdentityTokenFile`, `tenantID`|`azureTenantId`,
//! `subscriptionID`|`azureSubscriptionId`.
//!
//! [`AadToken`] is the client-credentials token of one service principal,
//! cached until five minutes before it expires and fetched by the driver's
//! own request to the Entra ID token endpoint (no `azure_identity`). A
//! workload identity's projected token file is read again at every fetch, so
//! a rotated service-account token is picked up (the 0.21 SDK credential reads
//! it once). [`crate::clients::Api`] refreshes the token through the kit's
//! caller before a request needs it, so each token request is counted and
//! bounded like any cloud call.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use azure_core::auth::{AccessToken, Secret, TokenCredential};
use azure_core::{HttpClient, Method, Request, Url};
use machine_driver_api::{DriverError, SecretData};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::errors::{ArmFailure, TransportProblem};

/// Client id aliases.
pub(crate) const CLIENT_ID_KEYS: &[&str] = &["clientID", "azureClientId"];
/// Client secret aliases.
pub(crate) const CLIENT_SECRET_KEYS: &[&str] = &["clientSecret", "azureClientSecret"];
/// The workload identity token file (instead of a client secret).
pub(crate) const TOKEN_FILE_KEYS: &[&str] = &["workloadIdentityTokenFile"];
/// Tenant id aliases.
pub(crate) const TENANT_ID_KEYS: &[&str] = &["tenantID", "azureTenantId"];
/// Subscription id aliases.
pub(crate) const SUBSCRIPTION_ID_KEYS: &[&str] = &["subscriptionID", "azureSubscriptionId"];

/// A token is renewed when less than this is left of its lifetime.
const RENEW_BEFORE_EXPIRY: Duration = Duration::from_secs(300);

/// How a service principal proves itself.
#[derive(Clone, PartialEq, Eq)]
enum ClientProof {
    /// A client secret.
    Secret(String),
    /// A federated token, read from this file at every token request.
    TokenFile(PathBuf),
}

/// The Azure credentials of one secret.
#[derive(Clone)]
pub(crate) struct AzureCredentials {
    /// Entra ID tenant.
    pub(crate) tenant_id: String,
    /// Application (client) id.
    pub(crate) client_id: String,
    /// Subscription the machines live in.
    pub(crate) subscription_id: String,
    proof: ClientProof,
    /// Hash of everything above: the client cache key.
    pub(crate) fingerprint: [u8; 32],
}

impl std::fmt::Debug for AzureCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AzureCredentials")
            .field("tenant_id", &self.tenant_id)
            .field("client_id", &self.client_id)
            .field("subscription_id", &self.subscription_id)
            .field("proof", &"***")
            .finish()
    }
}

impl AzureCredentials {
    /// Reads the credentials; `field` names the secret in errors (`secret`, `ownerSecret`).
    pub(crate) fn from_secret(secret: &SecretData, field: &str) -> Result<Self, DriverError> {
        let value = |keys: &[&str]| -> Result<Option<String>, DriverError> {
            Ok(secret
                .first_str(keys)
                .map_err(|_| DriverError::invalid_argument(format!("{field}.{}", keys[0]), "is not UTF-8"))?
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()))
        };
        let required = |keys: &[&str]| -> Result<String, DriverError> {
            value(keys)?.ok_or_else(|| DriverError::invalid_argument(format!("{field}.{}", keys[0]), "is required"))
        };
        let client_id = required(CLIENT_ID_KEYS)?;
        let tenant_id = required(TENANT_ID_KEYS)?;
        let subscription_id = required(SUBSCRIPTION_ID_KEYS)?;
        // Both go into URLs: a tenant of `//host` would send the token request elsewhere.
        if !tenant_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') {
            return Err(DriverError::invalid_argument(
                format!("{field}.tenantID"),
                "must be a tenant id or domain name",
            ));
        }
        if !subscription_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(DriverError::invalid_argument(format!("{field}.subscriptionID"), "must be a subscription id"));
        }
        let proof = match (value(CLIENT_SECRET_KEYS)?, value(TOKEN_FILE_KEYS)?) {
            (Some(s), None) => ClientProof::Secret(s),
            (None, Some(path)) => ClientProof::TokenFile(PathBuf::from(path)),
            (Some(_), Some(_)) => {
                return Err(DriverError::invalid_argument(
                    format!("{field}.workloadIdentityTokenFile"),
                    "set either clientSecret or workloadIdentityTokenFile, not both",
                ));
            }
            (None, None) => {
                return Err(DriverError::invalid_argument(
                    format!("{field}.clientSecret"),
                    "is required (or workloadIdentityTokenFile for a workload identity)",
                ));
            }
        };
        let mut hash = Sha256::new();
        for part in [&tenant_id, &client_id, &subscription_id] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        match &proof {
            ClientProof::Secret(s) => hash.update(s.as_bytes()),
            ClientProof::TokenFile(p) => hash.update(p.to_string_lossy().as_bytes()),
        }
        Ok(Self { tenant_id, client_id, subscription_id, proof, fingerprint: hash.finalize().into() })
    }
}

/// The body of a successful token answer.
#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    expires_in: u64,
}

/// The body of a refused token request.
#[derive(Deserialize, Default)]
struct TokenRefusal {
    #[serde(default)]
    error: String,
    #[serde(default)]
    error_description: String,
}

/// The cached access token of one service principal for one cloud.
pub(crate) struct AadToken {
    http: std::sync::Arc<dyn HttpClient>,
    token_url: Url,
    scope: String,
    client_id: String,
    proof: ClientProof,
    cached: Mutex<Option<(Secret, Instant)>>,
    /// One token request at a time: concurrent RPCs wait for it instead of each sending one.
    refreshing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for AadToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AadToken")
            .field("token_url", &self.token_url.as_str())
            .field("client_id", &self.client_id)
            .finish()
    }
}

impl AadToken {
    /// Tokens for `creds` from the authority `authority` (`https://login.microsoftonline.com`) for `scope`.
    pub(crate) fn new(
        http: std::sync::Arc<dyn HttpClient>,
        authority: &Url,
        scope: &str,
        creds: &AzureCredentials,
    ) -> Result<Self, DriverError> {
        let mut token_url = authority.clone();
        token_url
            .path_segments_mut()
            .map_err(|_| DriverError::internal("the token authority is not a base URL"))?
            .pop_if_empty()
            .extend([creds.tenant_id.as_str(), "oauth2", "v2.0", "token"]);
        if token_url.origin() != authority.origin() {
            return Err(DriverError::invalid_argument("secret.tenantID", "must be a tenant id or domain name"));
        }
        Ok(Self {
            http,
            token_url,
            scope: scope.to_string(),
            client_id: creds.client_id.clone(),
            proof: creds.proof.clone(),
            cached: Mutex::new(None),
            refreshing: tokio::sync::Mutex::new(()),
        })
    }

    /// True when the cached token is good for a while yet.
    pub(crate) fn is_fresh(&self) -> bool {
        self.current().is_some()
    }

    fn current(&self) -> Option<Secret> {
        let cached = self.cached.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        cached.as_ref().filter(|(_, expires)| Instant::now() + RENEW_BEFORE_EXPIRY < *expires).map(|(t, _)| t.clone())
    }

    /// Forgets the cached token (after ARM refused it).
    pub(crate) fn forget(&self) {
        *self.cached.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// Requests a new token and caches it, unless a concurrent refresh just did.
    pub(crate) async fn refresh(&self) -> Result<(), ArmFailure> {
        let _one_at_a_time = self.refreshing.lock().await;
        if self.is_fresh() {
            return Ok(());
        }
        let proof = match &self.proof {
            ClientProof::Secret(s) => ("client_secret", s.clone()),
            ClientProof::TokenFile(path) => {
                let token = tokio::fs::read_to_string(path).await.map_err(|e| {
                    ArmFailure::transport(
                        TransportProblem::Credentials,
                        format!("reading the workload identity token file failed: {}", e.kind()),
                    )
                })?;
                ("client_assertion", token.trim().to_string())
            }
        };
        let mut form = vec![
            ("grant_type", "client_credentials".to_string()),
            ("client_id", self.client_id.clone()),
            ("scope", self.scope.clone()),
            (proof.0, proof.1),
        ];
        if matches!(self.proof, ClientProof::TokenFile(_)) {
            form.push(("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into()));
        }
        let body = form.iter().map(|(k, v)| format!("{k}={}", form_encode(v))).collect::<Vec<_>>().join("&");
        let mut req = Request::new(self.token_url.clone(), Method::Post);
        req.insert_header("content-type", "application/x-www-form-urlencoded");
        req.set_body(body);
        let response = self
            .http
            .execute_request(&req)
            .await
            .map_err(|_| ArmFailure::transport(TransportProblem::Network, "the token endpoint did not answer"))?;
        let status = u16::from(response.status());
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|_| ArmFailure::transport(TransportProblem::Network, "reading the token answer failed"))?;
        if !(200..300).contains(&status) {
            let refusal: TokenRefusal = serde_json::from_slice(&bytes).unwrap_or_default();
            // Entra ID appends trace and correlation ids and a timestamp: keep the first sentence.
            let first = refusal.error_description.split(['.', '\r', '\n']).next().unwrap_or("").trim().to_string();
            // A refused client (400/401 with an AADSTS code) is an authentication failure;
            // throttling (429) and timeouts (408) keep their status and stay retryable.
            let status = if matches!(status, 400 | 401) { 401 } else { status };
            return Err(ArmFailure::http(status, Some(refusal.error).filter(|e| !e.is_empty()), first));
        }
        let answer: TokenAnswer = serde_json::from_slice(&bytes)
            .map_err(|_| ArmFailure::transport(TransportProblem::Decode, "the token answer is not a token"))?;
        // A lifetime shorter than the renewal margin would never be fresh; a huge one would overflow.
        let lifetime = Duration::from_secs(answer.expires_in.clamp(RENEW_BEFORE_EXPIRY.as_secs() + 60, 86_400));
        let expires = Instant::now() + lifetime;
        *self.cached.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((Secret::new(answer.access_token), expires));
        Ok(())
    }
}

#[async_trait::async_trait]
impl TokenCredential for AadToken {
    async fn get_token(&self, _scopes: &[&str]) -> azure_core::Result<AccessToken> {
        if self.current().is_none() {
            // Normally refreshed (and counted) by `Api` before the request; this covers a race with expiry.
            self.refresh().await.map_err(|f| {
                azure_core::Error::message(
                    azure_core::error::ErrorKind::Credential,
                    format!("token request failed: {:?}", f.code),
                )
            })?;
        }
        let token = self.current().ok_or_else(|| {
            azure_core::Error::message(azure_core::error::ErrorKind::Credential, "the token expired at once")
        })?;
        Ok(AccessToken::new(token, time::OffsetDateTime::now_utc() + time::Duration::minutes(5)))
    }

    async fn clear_cache(&self) -> azure_core::Result<()> {
        self.forget();
        Ok(())
    }
}

/// `application/x-www-form-urlencoded` encoding of one value.
fn form_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn secret(pairs: &[(&str, &str)]) -> SecretData {
        SecretData::new(pairs.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect::<BTreeMap<_, _>>())
    }

    #[test]
    fn keys_and_aliases_as_the_go_provider_reads_them() {
        let c = AzureCredentials::from_secret(
            &secret(&[
                ("azureClientId", " c "),
                ("clientSecret", "s"),
                ("tenantID", "t"),
                ("azureSubscriptionId", "sub"),
            ]),
            "secret",
        )
        .unwrap();
        assert_eq!((c.client_id.as_str(), c.tenant_id.as_str(), c.subscription_id.as_str()), ("c", "t", "sub"));
        assert!(!format!("{c:?}").contains("\"s\""));
        let missing = AzureCredentials::from_secret(&secret(&[("clientID", "c"), ("tenantID", "t")]), "secret");
        assert_eq!(missing.unwrap_err().field(), Some("secret.subscriptionID"));
        let both = AzureCredentials::from_secret(
            &secret(&[
                ("clientID", "c"),
                ("clientSecret", "s"),
                ("workloadIdentityTokenFile", "/f"),
                ("tenantID", "t"),
                ("subscriptionID", "x"),
            ]),
            "secret",
        );
        assert_eq!(both.unwrap_err().field(), Some("secret.workloadIdentityTokenFile"));
    }

    #[test]
    fn form_values_are_encoded() {
        assert_eq!(form_encode("a b&c=d/.default"), "a+b%26c%3Dd%2F.default");
    }
}
