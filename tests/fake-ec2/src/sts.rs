//! The STS actions the driver uses (awsQuery protocol, STS namespace) and the
//! role sessions they create.
//!
//! `AssumeRoleWithWebIdentity` is unsigned, as in AWS: it checks that the token
//! is a JWT whose `exp` (when present) has not passed, and hands out temporary
//! keys (`ASIA...`) with a session token. Requests signed with such keys act in
//! the role's account; after the keys expire they are refused with
//! `RequestExpired`, and unknown `ASIA` keys or a wrong session token with
//! `AuthFailure`, as EC2 answers.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use fake_cloud_support::JwtRefusal;

use crate::caller::{AssumedRole, Caller};
use crate::clock::iso8601;
use crate::errors::{Ec2Error, StsError, xml_response};
use crate::query::Params;
use crate::xml::{STS_NAMESPACE, escape};

/// Whether `action` is an STS action (answered with STS documents and errors).
pub(crate) fn is_sts_action(action: &str) -> bool {
    matches!(action, "GetCallerIdentity" | "AssumeRoleWithWebIdentity")
}

/// Why a request signed with temporary keys is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Unknown keys or a session token that is not theirs.
    Unknown,
    /// The keys' session has ended.
    Expired,
}

impl Refusal {
    /// The answer of EC2 (or of STS for an STS `action`).
    pub(crate) fn to_response(self, action: &str, request_id: &str) -> Response {
        match (self, is_sts_action(action)) {
            (Refusal::Unknown, false) => {
                Ec2Error::auth_failure("AWS was not able to validate the provided access credentials")
                    .to_response(request_id)
            }
            (Refusal::Expired, false) => Ec2Error::client(
                "RequestExpired",
                "Request has expired: the temporary security credentials have expired.",
            )
            .to_response(request_id),
            (Refusal::Unknown, true) => StsError::new(
                StatusCode::FORBIDDEN,
                "InvalidClientTokenId",
                "The security token included in the request is invalid.",
            )
            .to_response(request_id),
            (Refusal::Expired, true) => StsError::new(
                StatusCode::BAD_REQUEST,
                "ExpiredToken",
                "The security token included in the request is expired",
            )
            .to_response(request_id),
        }
    }
}

/// The session length when the request names none (AWS's default).
const DEFAULT_SESSION: Duration = Duration::from_secs(3600);

/// One set of temporary keys.
#[derive(Debug, Clone)]
struct Session {
    secret_access_key: String,
    session_token: String,
    account: String,
    role_arn: String,
    assumed_role: AssumedRole,
    expires: SystemTime,
}

/// Role sessions handed out so far, by temporary access key id.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    sessions: Mutex<HashMap<String, Session>>,
    /// A session length that overrides the request's (`POST /_admin/sts`), so
    /// that tests see keys expire in seconds.
    session_override: Mutex<Option<Duration>>,
    /// Sessions created so far (`GET /_admin/sts`).
    issued: Mutex<u64>,
}

/// Body of `POST /_admin/sts` and `GET /_admin/sts`.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StsSettings {
    /// Length of every new session in seconds (absent or 0: as requested).
    #[serde(default)]
    pub(crate) session_seconds: Option<u64>,
    /// Sessions issued so far (answered by GET; ignored in POST).
    #[serde(default)]
    pub(crate) sessions_issued: u64,
    /// POST only: forget every session handed out so far: their keys are then
    /// unknown and refused with `AuthFailure`, as EC2 refuses keys it does not
    /// know. (IAM's "revoke active sessions" is another thing: a deny policy,
    /// `UnauthorizedOperation`; the fake does not model it.)
    #[serde(default, skip_serializing)]
    pub(crate) forget_sessions: bool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Sessions {
    /// Applies `POST /_admin/sts`.
    pub(crate) fn configure(&self, settings: &StsSettings) {
        *lock(&self.session_override) = settings.session_seconds.filter(|s| *s > 0).map(Duration::from_secs);
        if settings.forget_sessions {
            lock(&self.sessions).clear();
        }
    }

    /// Answers `GET /_admin/sts`.
    pub(crate) fn settings(&self) -> StsSettings {
        StsSettings {
            session_seconds: lock(&self.session_override).map(|d| d.as_secs()),
            sessions_issued: *lock(&self.issued),
            forget_sessions: false,
        }
    }

    /// Forgets every session (admin reset).
    pub(crate) fn reset(&self) {
        lock(&self.sessions).clear();
        *lock(&self.session_override) = None;
        *lock(&self.issued) = 0;
    }

    /// The account a request signed with temporary keys acts in; `caller` is
    /// what its `Authorization` header says, `session_token` its
    /// `X-Amz-Security-Token`.
    pub(crate) fn authorize(&self, caller: &mut Caller, session_token: Option<&str>) -> Result<(), Refusal> {
        if !caller.access_key_id.starts_with("ASIA") {
            return Ok(());
        }
        let sessions = lock(&self.sessions);
        let Some(session) =
            sessions.get(&caller.access_key_id).filter(|s| Some(s.session_token.as_str()) == session_token)
        else {
            return Err(Refusal::Unknown);
        };
        if SystemTime::now() >= session.expires {
            return Err(Refusal::Expired);
        }
        caller.account = session.account.clone();
        caller.assumed_role = Some(session.assumed_role.clone());
        Ok(())
    }

    /// STS AssumeRoleWithWebIdentity.
    pub(crate) fn assume_role_with_web_identity(&self, params: &Params, request_id: &str) -> Response {
        match self.assume(params) {
            Ok(body) => {
                xml_response(StatusCode::OK, request_id, document("AssumeRoleWithWebIdentity", request_id, &body))
            }
            Err(error) => error.to_response(request_id),
        }
    }

    fn assume(&self, params: &Params) -> Result<String, StsError> {
        let required = |name: &str| {
            params.get(name).ok_or_else(|| {
                StsError::new(
                    StatusCode::BAD_REQUEST,
                    "MissingParameter",
                    format!("The request must contain the parameter {name}"),
                )
            })
        };
        let role_arn = required("RoleArn")?;
        let session_name = required("RoleSessionName")?;
        let token = required("WebIdentityToken")?;
        let account =
            role_account(role_arn).ok_or_else(|| validation(format!("Request ARN is invalid: {role_arn}")))?;
        if session_name.len() < 2 || session_name.len() > 64 {
            return Err(validation("1 validation error detected: Value at 'roleSessionName' failed to satisfy constraint: Member must have length between 2 and 64".into()));
        }
        let requested = match params.get("DurationSeconds") {
            None => DEFAULT_SESSION,
            Some(raw) => match raw.parse::<u64>() {
                Ok(s) if (900..=43_200).contains(&s) => Duration::from_secs(s),
                _ => {
                    return Err(validation(format!(
                        "1 validation error detected: Value '{raw}' at 'durationSeconds' failed to satisfy constraint: Member must have value between 900 and 43200"
                    )));
                }
            },
        };
        let claims = check_token(token)?;
        let length = lock(&self.session_override).unwrap_or(requested);
        let now = SystemTime::now();
        let suffix = uuid::Uuid::new_v4().simple().to_string().to_uppercase();
        let access_key_id = format!("ASIA{}", &suffix[..16]);
        let role_name = role_arn.rsplit('/').next().unwrap_or_default();
        let session = Session {
            secret_access_key: uuid::Uuid::new_v4().simple().to_string(),
            session_token: URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes()),
            account: account.to_string(),
            role_arn: role_arn.to_string(),
            assumed_role: AssumedRole {
                arn: format!("arn:aws:sts::{account}:assumed-role/{role_name}/{session_name}"),
                id: format!("AROAFAKE:{session_name}"),
            },
            expires: now + length,
        };
        let body = format!(
            "<Credentials><AccessKeyId>{}</AccessKeyId><SecretAccessKey>{}</SecretAccessKey>\
             <SessionToken>{}</SessionToken><Expiration>{}</Expiration></Credentials>\
             <SubjectFromWebIdentityToken>{}</SubjectFromWebIdentityToken>\
             <AssumedRoleUser><Arn>{}</Arn><AssumedRoleId>{}</AssumedRoleId></AssumedRoleUser>\
             <Audience>{}</Audience><Provider>{}</Provider>",
            access_key_id,
            session.secret_access_key,
            session.session_token,
            iso8601(session.expires),
            escape(&claims.subject),
            escape(&session.assumed_role.arn),
            escape(&session.assumed_role.id),
            escape(&claims.audience),
            escape(&claims.provider(account)),
        );
        tracing::debug!(role_arn = %session.role_arn, "fake STS issued a role session");
        let mut sessions = lock(&self.sessions);
        // Sessions are forgotten an hour after they end (their keys then answer
        // AuthFailure, as unknown keys do), so short test sessions do not pile up.
        sessions.retain(|_, s| s.expires + Duration::from_secs(3600) > now);
        sessions.insert(access_key_id, session);
        drop(sessions);
        *lock(&self.issued) += 1;
        Ok(body)
    }
}

/// STS GetCallerIdentity: the IAM user of long-term keys, the assumed role of temporary ones.
pub(crate) fn get_caller_identity(caller: &Caller, request_id: &str) -> Response {
    let account = escape(&caller.account);
    let (arn, user_id) = match &caller.assumed_role {
        Some(role) => (escape(&role.arn), escape(&role.id)),
        None => (format!("arn:aws:iam::{account}:user/fake-user"), format!("AIDAFAKE{account}")),
    };
    let body = format!("<Arn>{arn}</Arn><UserId>{user_id}</UserId><Account>{account}</Account>");
    xml_response(StatusCode::OK, request_id, document("GetCallerIdentity", request_id, &body))
}

fn document(action: &str, request_id: &str, result: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{action}Response xmlns=\"{STS_NAMESPACE}\"><{action}Result>{result}</{action}Result>\
         <ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata></{action}Response>"
    )
}

fn validation(message: String) -> StsError {
    StsError::new(StatusCode::BAD_REQUEST, "ValidationError", message)
}

/// The account of `arn:aws:iam::<account>:role/<name>`.
fn role_account(arn: &str) -> Option<&str> {
    let parts: Vec<&str> = arn.split(':').collect();
    let [_, _, "iam", "", account, resource] = parts.as_slice() else {
        return None;
    };
    (account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit()) && resource.starts_with("role/"))
        .then_some(*account)
}

/// What an answer tells about the web identity token (its `sub`, `aud` and `iss` claims).
#[derive(Debug, Clone, PartialEq, Eq)]
struct TokenClaims {
    /// `SubjectFromWebIdentityToken`: the `sub` claim.
    subject: String,
    /// `Audience`: the `aud` claim (the first one when it is a list).
    audience: String,
    /// The `iss` claim.
    issuer: String,
}

impl TokenClaims {
    fn from_json(claims: &serde_json::Value) -> Self {
        let text = |name: &str| claims.get(name).and_then(serde_json::Value::as_str).unwrap_or_default().to_owned();
        let audience = match claims.get("aud") {
            Some(serde_json::Value::Array(list)) => list.iter().find_map(serde_json::Value::as_str).unwrap_or_default(),
            Some(aud) => aud.as_str().unwrap_or_default(),
            None => "",
        };
        Self { subject: text("sub"), audience: audience.to_owned(), issuer: text("iss") }
    }

    /// `Provider`: the ARN of the role account's OIDC provider for the issuer (what STS answers
    /// for OIDC tokens: `arn:aws:iam::<account>:oidc-provider/<issuer without https://>`).
    fn provider(&self, account: &str) -> String {
        let host = self.issuer.strip_prefix("https://").unwrap_or(&self.issuer);
        format!("arn:aws:iam::{account}:oidc-provider/{host}")
    }
}

/// A JWT (three base64url parts) whose payload's `exp`, when present, is in the future.
fn check_token(token: &str) -> Result<TokenClaims, StsError> {
    let invalid = || {
        StsError::new(
            StatusCode::BAD_REQUEST,
            "InvalidIdentityToken",
            "The ID Token provided is not a valid JWT. (You may see this error if you sent an Access Token)",
        )
    };
    match fake_cloud_support::unexpired_claims(token) {
        Ok(claims) => Ok(TokenClaims::from_json(&claims)),
        Err(JwtRefusal::Malformed) => Err(invalid()),
        Err(JwtRefusal::Expired { exp, now }) => Err(StsError::new(
            StatusCode::BAD_REQUEST,
            "ExpiredTokenException",
            format!("Token expired: current date/time {now} must be before the expiration date/time {exp}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    fn jwt(claims: serde_json::Value) -> String {
        format!("eyJhbGciOiJSUzI1NiJ9.{}.c2ln", URL_SAFE_NO_PAD.encode(claims.to_string()))
    }

    #[test]
    fn tokens_must_be_unexpired_jwts() {
        assert!(check_token(&jwt(serde_json::json!({"sub": "sa"}))).is_ok());
        let future = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() + 60;
        assert!(check_token(&jwt(serde_json::json!({"exp": future}))).is_ok());
        assert_eq!(check_token(&jwt(serde_json::json!({"exp": 1}))).unwrap_err().code, "ExpiredTokenException");
        assert_eq!(check_token("not-a-jwt").unwrap_err().code, "InvalidIdentityToken");
    }

    #[test]
    fn answers_carry_the_token_claims() {
        let claims = check_token(&jwt(serde_json::json!({
            "sub": "system:serviceaccount:ns:sa", "aud": ["sts.amazonaws.com", "other"], "iss": "https://oidc.example/id/1"
        })))
        .unwrap();
        assert_eq!(claims.subject, "system:serviceaccount:ns:sa");
        assert_eq!(claims.audience, "sts.amazonaws.com");
        assert_eq!(claims.provider("111111111111"), "arn:aws:iam::111111111111:oidc-provider/oidc.example/id/1");
        let single = check_token(&jwt(serde_json::json!({"aud": "client-id"}))).unwrap();
        assert_eq!((single.audience.as_str(), single.subject.as_str()), ("client-id", ""));
    }

    #[test]
    fn role_arns_name_their_account() {
        assert_eq!(role_account("arn:aws:iam::222222222222:role/mcm"), Some("222222222222"));
        assert_eq!(role_account("arn:aws:iam::222222222222:user/u"), None);
        assert_eq!(role_account("arn:aws:iam::2222:role/r"), None);
    }

    #[test]
    fn temporary_keys_act_in_the_role_account_until_they_expire() {
        let sessions = Sessions::default();
        let params = Params::parse(&format!(
            "Action=AssumeRoleWithWebIdentity&RoleArn=arn%3Aaws%3Aiam%3A%3A111111111111%3Arole%2Fr&RoleSessionName=s1&WebIdentityToken={}",
            jwt(serde_json::json!({"sub": "sa"}))
        ));
        let body = sessions.assume(&params).unwrap();
        let between = |open: &str, close: &str| {
            body.split(open).nth(1).and_then(|r| r.split(close).next()).unwrap_or_default().to_string()
        };
        let akid = between("<AccessKeyId>", "</AccessKeyId>");
        let token = between("<SessionToken>", "</SessionToken>");
        let mut caller = Caller {
            account: "222222222222".into(),
            access_key_id: akid.clone(),
            region: "eu-west-1".into(),
            assumed_role: None,
        };
        sessions.authorize(&mut caller, Some(&token)).unwrap();
        assert_eq!(caller.account, "111111111111");
        let role = caller.assumed_role.clone().expect("assumed role");
        assert_eq!(role.arn, "arn:aws:sts::111111111111:assumed-role/r/s1");
        assert_eq!(role.id, "AROAFAKE:s1");
        assert_eq!(sessions.authorize(&mut caller.clone(), Some("wrong")).unwrap_err(), Refusal::Unknown);
        lock(&sessions.sessions).get_mut(&akid).unwrap().expires = SystemTime::now() - Duration::from_secs(1);
        assert_eq!(sessions.authorize(&mut caller, Some(&token)).unwrap_err(), Refusal::Expired);
        assert_eq!(sessions.settings().sessions_issued, 1);
    }
}
