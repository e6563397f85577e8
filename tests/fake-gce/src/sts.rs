//! Google's Security Token Service (`POST /v1/token`, RFC 8693 token
//! exchange, as `sts.googleapis.com` serves it) and IAM Credentials
//! `generateAccessToken` (`POST /v1/projects/-/serviceAccounts/EMAIL:generateAccessToken`,
//! as `iamcredentials.googleapis.com` serves it), and the access tokens they
//! hand out, which Compute requests must then carry.
//!
//! The exchange takes a workload identity pool provider `audience` and a
//! JWT-shaped `subject_token` whose `exp` (when present) has not passed; it
//! does not check signatures. The federated token acts as
//! `principal://iam.googleapis.com/<pool>/subject/<sub>`; a token from
//! `generateAccessToken` (called with a federated token) acts as
//! `serviceAccount:EMAIL`. Tokens expire after `expires_in` (3600 s unless
//! `POST /_admin/gce/sts {"tokenSeconds": N}` shortens it); a Compute request
//! with an unknown or expired bearer token gets 401 `authError`, as GCE answers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::json;

use fake_cloud_support::JwtRefusal;

use crate::error::GceError;

/// RFC 8693 grant type of a token exchange.
pub const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The token type STS issues (and the only one it may be asked for).
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// Subject token types of an OIDC workload identity provider.
const SUBJECT_TOKEN_TYPES: &[&str] =
    &["urn:ietf:params:oauth:token-type:jwt", "urn:ietf:params:oauth:token-type:id_token"];
/// Scopes that make an access token usable with Compute (or with IAM Credentials).
const USABLE_SCOPES: &[&str] = &[
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/compute",
    "https://www.googleapis.com/auth/iam",
];
/// Lifetime of issued tokens unless overridden (Google's: one hour).
const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);
/// Prefix of every access token the fake issues.
const TOKEN_PREFIX: &str = "ya29.fake-";

/// A JWT-shaped subject token, like a Kubernetes projected service account
/// token (unsigned: the fake checks shape and `exp` only), for tests:
/// `sub` = `subject`, `exp` = now + `valid_for_secs` (negative: already expired).
pub fn subject_token(subject: &str, valid_for_secs: i64) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() as i64;
    let claims =
        json!({"iss": "https://issuer.example", "sub": subject, "aud": ["gardener"], "exp": now + valid_for_secs});
    format!("eyJhbGciOiJSUzI1NiJ9.{}.c2lnbmF0dXJl", URL_SAFE_NO_PAD.encode(claims.to_string()))
}

/// One issued access token.
#[derive(Debug, Clone)]
struct Issued {
    /// `serviceAccount:EMAIL` or `principal://...`.
    principal: String,
    expires: Instant,
}

#[derive(Debug, Default)]
struct Inner {
    tokens: HashMap<String, Issued>,
    lifetime_override: Option<Duration>,
    exchanges: u64,
    refused: u64,
    impersonations: u64,
}

/// The tokens issued so far and the admin settings.
#[derive(Debug, Default)]
pub(crate) struct Tokens {
    inner: Mutex<Inner>,
}

/// Body of `POST /_admin/gce/sts` and answer of `GET /_admin/gce/sts`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StsSettings {
    /// Lifetime of every new token in seconds (absent, null or 0: 3600, or
    /// what `generateAccessToken` asks for).
    #[serde(default)]
    pub(crate) token_seconds: Option<u64>,
    /// Successful STS exchanges so far (answered by GET; ignored in POST).
    #[serde(default)]
    pub(crate) exchanges: u64,
    /// Exchanges STS refused (400) so far.
    #[serde(default)]
    pub(crate) refused: u64,
    /// Tokens issued by `generateAccessToken` so far.
    #[serde(default)]
    pub(crate) impersonations: u64,
}

/// Why a bearer token is not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Never issued.
    Unknown,
    /// Issued, and expired.
    Expired,
}

impl Tokens {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn configure(&self, settings: &StsSettings) -> StsSettings {
        self.lock().lifetime_override = settings.token_seconds.filter(|s| *s > 0).map(Duration::from_secs);
        self.settings()
    }

    fn settings(&self) -> StsSettings {
        let inner = self.lock();
        StsSettings {
            token_seconds: inner.lifetime_override.map(|d| d.as_secs()),
            exchanges: inner.exchanges,
            refused: inner.refused,
            impersonations: inner.impersonations,
        }
    }

    /// Forgets every token and setting (admin reset).
    pub(crate) fn reset(&self) {
        *self.lock() = Inner::default();
    }

    /// The principal of an access token the fake issued.
    pub(crate) fn principal(&self, token: &str) -> Result<String, Refusal> {
        let inner = self.lock();
        let issued = inner.tokens.get(token).ok_or(Refusal::Unknown)?;
        if Instant::now() >= issued.expires {
            return Err(Refusal::Expired);
        }
        Ok(issued.principal.clone())
    }

    fn issue(&self, principal: String, requested: Duration) -> (String, Duration) {
        let token = format!("{TOKEN_PREFIX}{:016x}{:016x}", rand::random::<u64>(), rand::random::<u64>());
        let mut inner = self.lock();
        let lifetime = inner.lifetime_override.unwrap_or(requested);
        inner.tokens.insert(token.clone(), Issued { principal, expires: Instant::now() + lifetime });
        (token, lifetime)
    }

    /// The token exchange: the access token and its lifetime, or STS's refusal.
    fn exchange(&self, form: &HashMap<String, String>) -> Result<serde_json::Value, StsError> {
        let field = |name: &str| form.get(name).map(String::as_str).filter(|v| !v.is_empty());
        let grant = field("grant_type").ok_or_else(|| StsError::request("Missing grant_type."))?;
        if grant != TOKEN_EXCHANGE_GRANT {
            return Err(StsError::new("unsupported_grant_type", format!("Invalid grant_type: {grant}.")));
        }
        let requested =
            field("requested_token_type").ok_or_else(|| StsError::request("Missing requested_token_type."))?;
        if requested != ACCESS_TOKEN_TYPE {
            return Err(StsError::request(format!("Invalid requested_token_type: {requested}.")));
        }
        let subject_type =
            field("subject_token_type").ok_or_else(|| StsError::request("Missing subject_token_type."))?;
        if !SUBJECT_TOKEN_TYPES.contains(&subject_type) {
            return Err(StsError::request(format!("Invalid subject_token_type: {subject_type}.")));
        }
        let audience = field("audience").ok_or_else(|| StsError::request("Missing audience."))?;
        let pool = pool_of(audience).ok_or_else(|| {
            StsError::new(
                "invalid_target",
                "The target service indicated by the \"audience\" parameters is invalid. This might either be because \
                 the pool or provider is disabled or deleted or because it doesn't exist.",
            )
        })?;
        let scope = field("scope").ok_or_else(|| StsError::new("invalid_scope", "Missing scope."))?;
        if !scope.split_whitespace().any(|s| USABLE_SCOPES.contains(&s)) {
            return Err(StsError::new("invalid_scope", "The scope does not allow access to Google Cloud APIs."));
        }
        let token = field("subject_token").ok_or_else(|| StsError::request("Missing subject_token."))?;
        let subject = check_subject_token(token)?;
        let principal = format!("principal://iam.googleapis.com/{pool}/subject/{subject}");
        let (access_token, lifetime) = self.issue(principal, DEFAULT_LIFETIME);
        self.lock().exchanges += 1;
        Ok(json!({
            "access_token": access_token,
            "issued_token_type": ACCESS_TOKEN_TYPE,
            "token_type": "Bearer",
            "expires_in": lifetime.as_secs(),
        }))
    }
}

/// `projects/N/locations/global/workloadIdentityPools/P` of a provider audience
/// `//iam.googleapis.com/projects/N/locations/global/workloadIdentityPools/P/providers/X`.
fn pool_of(audience: &str) -> Option<&str> {
    let path = audience.strip_prefix("//iam.googleapis.com/")?;
    let parts: Vec<&str> = path.split('/').collect();
    let ["projects", project, "locations", location, "workloadIdentityPools", pool, "providers", provider] =
        parts.as_slice()
    else {
        return None;
    };
    if [project, location, pool, provider].iter().any(|p| p.is_empty()) {
        return None;
    }
    let end = path.find("/providers/")?;
    Some(&path[..end])
}

/// The `sub` of a JWT-shaped subject token whose `exp`, when present, has not passed.
fn check_subject_token(token: &str) -> Result<String, StsError> {
    let unparsable = || StsError::new("invalid_grant", "Unable to parse the ID Token.");
    let claims = fake_cloud_support::unexpired_claims(token).map_err(|refusal| match refusal {
        JwtRefusal::Malformed => unparsable(),
        JwtRefusal::Expired { exp, now } => {
            StsError::new("invalid_grant", format!("ID Token expired at {exp}; the current time is {now}."))
        }
    })?;
    let subject = claims.get("sub").and_then(serde_json::Value::as_str).filter(|s| !s.is_empty());
    subject.map(str::to_string).ok_or_else(|| StsError::new("invalid_grant", "The ID Token has no subject (sub)."))
}

/// An STS refusal: 400 `{"error": CODE, "error_description": ...}` as Google's STS answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StsError {
    pub(crate) error: &'static str,
    pub(crate) description: String,
}

impl StsError {
    fn new(error: &'static str, description: impl Into<String>) -> Self {
        Self { error, description: description.into() }
    }

    fn request(description: impl Into<String>) -> Self {
        Self::new("invalid_request", description)
    }
}

impl IntoResponse for StsError {
    fn into_response(self) -> Response {
        (StatusCode::BAD_REQUEST, Json(json!({"error": self.error, "error_description": self.description})))
            .into_response()
    }
}

/// The STS, IAM Credentials and admin routes.
pub(crate) fn routes(tokens: Arc<Tokens>) -> Router {
    Router::new()
        .route("/v1/token", post(token))
        .route("/v1/projects/{project}/serviceAccounts/{action}", post(generate_access_token))
        .route("/_admin/gce/sts", get(sts_settings).post(configure_sts))
        .with_state(tokens)
}

async fn token(State(tokens): State<Arc<Tokens>>, Form(form): Form<HashMap<String, String>>) -> Response {
    match tokens.exchange(&form) {
        Ok(body) => Json(body).into_response(),
        Err(e) => {
            tokens.lock().refused += 1;
            tracing::debug!(error = e.error, "fake STS refused an exchange");
            e.into_response()
        }
    }
}

/// Body of `generateAccessToken`.
#[derive(Debug, Deserialize)]
struct GenerateAccessToken {
    #[serde(default)]
    scope: Vec<String>,
    #[serde(default)]
    lifetime: Option<String>,
}

/// An IAM Credentials error (the newer Google error body, with `status`).
fn iam_error(status: StatusCode, word: &str, message: &str) -> Response {
    let body = json!({"error": {"code": status.as_u16(), "message": message, "status": word}});
    (status, Json(body)).into_response()
}

async fn generate_access_token(
    State(tokens): State<Arc<Tokens>>,
    Path((_project, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(email) = action.strip_suffix(":generateAccessToken").filter(|e| e.contains('@')) else {
        return iam_error(StatusCode::NOT_FOUND, "NOT_FOUND", "Requested entity was not found.");
    };
    let caller = bearer(&headers).map(|t| tokens.principal(t));
    if !matches!(caller, Some(Ok(_))) {
        return iam_error(
            StatusCode::UNAUTHORIZED,
            "UNAUTHENTICATED",
            "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other \
             valid authentication credential.",
        );
    }
    let Ok(request) = serde_json::from_slice::<GenerateAccessToken>(&body) else {
        return iam_error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", "Invalid JSON payload received.");
    };
    if request.scope.is_empty() {
        return iam_error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", "Scope required.");
    }
    let requested = match request.lifetime.as_deref() {
        None => DEFAULT_LIFETIME,
        Some(l) => match l.strip_suffix('s').and_then(|s| s.parse::<f64>().ok()) {
            Some(secs) if (1.0..=43_200.0).contains(&secs) => Duration::from_secs_f64(secs),
            _ => return iam_error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", "Invalid lifetime."),
        },
    };
    let (access_token, lifetime) = tokens.issue(format!("serviceAccount:{email}"), requested);
    tokens.lock().impersonations += 1;
    let expire_time = crate::clock::rfc3339(SystemTime::now() + lifetime);
    Json(json!({"accessToken": access_token, "expireTime": expire_time})).into_response()
}

async fn sts_settings(State(tokens): State<Arc<Tokens>>) -> Json<StsSettings> {
    Json(tokens.settings())
}

async fn configure_sts(State(tokens): State<Arc<Tokens>>, Json(settings): Json<StsSettings>) -> Json<StsSettings> {
    Json(tokens.configure(&settings))
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers.get(AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ").map(str::trim)
}

/// Compute's authentication: a bearer token the fake issued is replaced by
/// the principal form the handlers read (`sa:EMAIL`, `principal://...`); an
/// unknown or expired one is refused with 401 `authError` (and GCE's
/// `WWW-Authenticate`). The test forms `sa:`/`user:`/`principal://` and
/// anonymous requests pass unchanged.
pub(crate) async fn authenticate(State(tokens): State<Arc<Tokens>>, mut request: Request, next: Next) -> Response {
    let Some(token) = bearer(request.headers()) else {
        return next.run(request).await;
    };
    if ["sa:", "user:", "principal://"].iter().any(|p| token.starts_with(p)) {
        return next.run(request).await;
    }
    match tokens.principal(token) {
        Ok(principal) => {
            let form = match principal.strip_prefix("serviceAccount:") {
                Some(email) => format!("Bearer sa:{email}"),
                None => format!("Bearer {principal}"),
            };
            if let Ok(value) = HeaderValue::from_str(&form) {
                request.headers_mut().insert(AUTHORIZATION, value);
            }
            next.run(request).await
        }
        Err(refusal) => {
            tracing::debug!(?refusal, "fake Compute refused a bearer token");
            let mut response = GceError::unauthenticated().into_response();
            response.headers_mut().insert(
                WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"https://accounts.google.com/\", error=\"invalid_token\""),
            );
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AUDIENCE: &str =
        "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/gardener/providers/shoot";

    fn form(subject_token: &str) -> HashMap<String, String> {
        [
            ("grant_type", TOKEN_EXCHANGE_GRANT),
            ("requested_token_type", ACCESS_TOKEN_TYPE),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:jwt"),
            ("audience", AUDIENCE),
            ("scope", "https://www.googleapis.com/auth/cloud-platform"),
            ("subject_token", subject_token),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    #[test]
    fn a_valid_jwt_is_exchanged_for_a_token_of_the_pool_subject() {
        let tokens = Tokens::default();
        let body = tokens.exchange(&form(&subject_token("system:serviceaccount:ns:mcm", 60))).unwrap();
        assert_eq!(body["token_type"], "Bearer");
        assert_eq!(body["issued_token_type"], ACCESS_TOKEN_TYPE);
        assert_eq!(body["expires_in"], 3600);
        let token = body["access_token"].as_str().unwrap();
        assert_eq!(
            tokens.principal(token).unwrap(),
            "principal://iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/gardener/subject/system:serviceaccount:ns:mcm"
        );
        assert_eq!(tokens.principal("ya29.other"), Err(Refusal::Unknown));
        assert_eq!(tokens.settings().exchanges, 1);
    }

    #[test]
    fn refusals_are_stss_and_never_quote_the_token() {
        let tokens = Tokens::default();
        let expired = subject_token("s", -10);
        let e = tokens.exchange(&form(&expired)).unwrap_err();
        assert_eq!(e.error, "invalid_grant");
        assert!(!e.description.contains(&expired));
        assert_eq!(tokens.exchange(&form("CANARY")).unwrap_err().error, "invalid_grant");
        let mut f = form(&subject_token("s", 60));
        f.insert("audience".into(), "//iam.googleapis.com/projects/123/providers/x".into());
        assert_eq!(tokens.exchange(&f).unwrap_err().error, "invalid_target");
        let mut f = form(&subject_token("s", 60));
        f.insert("grant_type".into(), "client_credentials".into());
        assert_eq!(tokens.exchange(&f).unwrap_err().error, "unsupported_grant_type");
        let mut f = form(&subject_token("s", 60));
        f.remove("scope");
        assert_eq!(tokens.exchange(&f).unwrap_err().error, "invalid_scope");
    }

    #[test]
    fn tokens_expire_after_the_configured_lifetime() {
        let tokens = Tokens::default();
        tokens.configure(&StsSettings { token_seconds: Some(1), ..Default::default() });
        let body = tokens.exchange(&form(&subject_token("s", 60))).unwrap();
        assert_eq!(body["expires_in"], 1);
        let token = body["access_token"].as_str().unwrap().to_string();
        tokens.lock().tokens.get_mut(&token).unwrap().expires = Instant::now() - Duration::from_millis(1);
        assert_eq!(tokens.principal(&token), Err(Refusal::Expired));
        tokens.reset();
        assert_eq!(tokens.settings().token_seconds, None);
        assert_eq!(tokens.principal(&token), Err(Refusal::Unknown));
    }
}
