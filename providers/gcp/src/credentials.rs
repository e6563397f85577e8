//! The credentials a request's secret holds, and the `google-cloud-auth`
//! credentials built from them: a service account key (`serviceAccountJSON`),
//! or workload identity as Gardener writes it (`credentialsConfig`, an
//! external account configuration whose subject token is a projected
//! service account token file, plus `projectID`).
//!
//! Against Google a key becomes service account credentials and a workload
//! identity external account credentials: the SDK exchanges the token file's
//! token at Google's STS (and calls IAM Credentials `generateAccessToken` when
//! the configuration asks for service account impersonation), re-reading the
//! file at every exchange. Against a plain-HTTP endpoint (a fake Compute
//! Engine; Google's endpoints are always HTTPS) a key cannot mint a token, so
//! its requests carry `Authorization: Bearer sa:<client_email>` instead (the
//! fake uses that principal for image IAM checks); a workload identity uses
//! the same SDK credentials with the token and impersonation URLs moved to
//! that endpoint (fake-gce serves both), so the exchange is the real one.

use std::fmt;
use std::path::{Path, PathBuf};

use google_cloud_auth::credentials::{CacheableResource, Credentials, CredentialsProvider, EntityTag};
use google_cloud_auth::errors::CredentialsError;
use http::{Extensions, HeaderMap, HeaderValue};
use machine_driver_api::{DriverError, SecretData};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::naming::is_project_id;

/// Secret keys holding the service account key JSON (the Go provider's alias included).
pub(crate) const SERVICE_ACCOUNT_KEYS: &[&str] = &["serviceAccountJSON", "serviceaccount.json"];
/// Secret key holding the external account configuration JSON (workload identity).
pub(crate) const CREDENTIALS_CONFIG_KEYS: &[&str] = &["credentialsConfig"];
/// Secret key holding the project VMs are created in (workload identity).
pub(crate) const PROJECT_ID_KEYS: &[&str] = &["projectID"];

/// The credentials of one secret. `Debug` shows no key material.
#[derive(Clone, Debug)]
pub(crate) struct GcpCredentials {
    /// The project VMs are created in (the key's `project_id`, or `projectID`).
    pub(crate) project_id: String,
    /// SHA-256 of the key JSON or of the configuration: the key of the client cache.
    pub(crate) fingerprint: [u8; 32],
    /// The form.
    pub(crate) source: CredentialSource,
}

/// The two forms of credentials a secret may hold.
#[derive(Clone, Debug)]
pub(crate) enum CredentialSource {
    /// A service account key.
    Key(ServiceAccountKey),
    /// An external account configuration with a token file.
    WorkloadIdentity(WorkloadIdentity),
}

/// A parsed service account key. `Debug` shows the email only.
#[derive(Clone)]
pub(crate) struct ServiceAccountKey {
    /// `client_email`: the principal.
    pub(crate) client_email: String,
    json: Value,
}

impl fmt::Debug for ServiceAccountKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceAccountKey").field("client_email", &self.client_email).finish_non_exhaustive()
    }
}

/// A workload identity: the external account configuration, checked. `Debug`
/// shows the token file and the impersonated account only.
#[derive(Clone)]
pub(crate) struct WorkloadIdentity {
    /// `credential_source.file`: the projected token, re-read at every exchange.
    pub(crate) token_file: PathBuf,
    /// The service account of `service_account_impersonation_url`, if any.
    pub(crate) impersonated: Option<String>,
    json: Value,
}

impl fmt::Debug for WorkloadIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkloadIdentity")
            .field("token_file", &self.token_file)
            .field("impersonated", &self.impersonated)
            .finish_non_exhaustive()
    }
}

impl GcpCredentials {
    /// Reads the credentials from `secret`, the request field `what`
    /// (`secret`, `ownerSecret`, `consumerSecret`): a service account key
    /// when one is there (it wins), else a workload identity
    /// (`credentialsConfig` + `projectID`). Errors are INVALID_ARGUMENT naming
    /// the secret key (and the JSON field) and never quote its content.
    pub(crate) fn from_secret(secret: &SecretData, what: &str) -> Result<Self, DriverError> {
        let has_key = SERVICE_ACCOUNT_KEYS.iter().any(|k| secret.has(k));
        if !has_key && CREDENTIALS_CONFIG_KEYS.iter().any(|k| secret.has(k)) {
            return Self::workload_identity(secret, what);
        }
        let raw = secret.require_str(SERVICE_ACCOUNT_KEYS)?;
        let key = SERVICE_ACCOUNT_KEYS.iter().find(|k| secret.has(k)).copied().unwrap_or("serviceAccountJSON");
        let field = |sub: &str| format!("{what}.{key}{sub}");
        let json: Value = serde_json::from_str(raw)
            .map_err(|_| DriverError::invalid_argument(field(""), "is not a JSON service account key"))?;
        let text = |name: &str| -> Result<String, DriverError> {
            json.get(name)
                .and_then(|v| v.as_str())
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .ok_or_else(|| DriverError::invalid_argument(field(&format!(".{name}")), "is required"))
        };
        let project_id = text("project_id")?;
        let client_email = text("client_email")?;
        if !is_project_id(&project_id) {
            return Err(DriverError::invalid_argument(
                field(".project_id"),
                "is not a GCP project id (6 to 30 lowercase letters, digits and hyphens, starting with a letter)",
            ));
        }
        let fingerprint = Sha256::digest(raw.as_bytes()).into();
        Ok(Self { project_id, fingerprint, source: CredentialSource::Key(ServiceAccountKey { client_email, json }) })
    }

    fn workload_identity(secret: &SecretData, what: &str) -> Result<Self, DriverError> {
        let raw = secret.require_str(CREDENTIALS_CONFIG_KEYS)?;
        let identity = WorkloadIdentity::parse(raw, &format!("{what}.credentialsConfig"))?;
        let project_id = secret.require_str(PROJECT_ID_KEYS)?.trim().to_string();
        if !is_project_id(&project_id) {
            return Err(DriverError::invalid_argument(
                format!("{what}.projectID"),
                "is not a GCP project id (6 to 30 lowercase letters, digits and hyphens, starting with a letter)",
            ));
        }
        let mut digest = Sha256::new();
        digest.update(b"external_account\0");
        digest.update(raw.as_bytes());
        Ok(Self {
            project_id,
            fingerprint: digest.finalize().into(),
            source: CredentialSource::WorkloadIdentity(identity),
        })
    }

    /// The service account these credentials act as, for ShareImage's
    /// consumer: the key's `client_email`, or the impersonated account.
    /// `None` for a workload identity without impersonation (a federated
    /// principal has no email).
    pub(crate) fn service_account_email(&self) -> Option<&str> {
        match &self.source {
            CredentialSource::Key(k) => Some(&k.client_email),
            CredentialSource::WorkloadIdentity(w) => w.impersonated.as_deref(),
        }
    }

    /// The token file of a workload identity.
    pub(crate) fn token_file(&self) -> Option<&Path> {
        match &self.source {
            CredentialSource::Key(_) => None,
            CredentialSource::WorkloadIdentity(w) => Some(&w.token_file),
        }
    }

    /// Credentials for Google's endpoints (or an HTTPS override).
    pub(crate) fn google_credentials(&self) -> Result<Credentials, DriverError> {
        match &self.source {
            CredentialSource::Key(k) => k.google_credentials(),
            CredentialSource::WorkloadIdentity(w) => w.credentials(None),
        }
    }

    /// Credentials for a plain-HTTP (fake) endpoint at `endpoint`.
    pub(crate) fn fake_endpoint_credentials(&self, endpoint: &str) -> Result<Credentials, DriverError> {
        match &self.source {
            CredentialSource::Key(k) => k.fake_endpoint_credentials(),
            CredentialSource::WorkloadIdentity(w) => w.credentials(Some(endpoint)),
        }
    }
}

/// The `https://host/...` URL in `value`, or `None`.
fn https_url(value: &str) -> Option<&str> {
    let rest = value.strip_prefix("https://")?;
    let host = rest.split('/').next().unwrap_or_default();
    (!host.is_empty() && !value.contains(char::is_whitespace)).then_some(value)
}

/// `value` with its scheme and host replaced by `endpoint`'s.
fn moved_to(value: &str, endpoint: &str) -> String {
    let path = value.strip_prefix("https://").and_then(|r| r.find('/').map(|i| &r[i..])).unwrap_or("/");
    format!("{}{path}", endpoint.trim_end_matches('/'))
}

impl WorkloadIdentity {
    /// Checks an external account configuration; `field` names it in errors
    /// (`secret.credentialsConfig`), never its content.
    fn parse(raw: &str, field: &str) -> Result<Self, DriverError> {
        let invalid = |sub: &str, why: &str| DriverError::invalid_argument(format!("{field}{sub}"), why.to_string());
        let json: Value = serde_json::from_str(raw)
            .map_err(|_| invalid("", "is not JSON (an external account credentials configuration)"))?;
        if !json.is_object() {
            return Err(invalid("", "is not a JSON object (an external account credentials configuration)"));
        }
        let text = |name: &str| -> Result<&str, DriverError> {
            json.get(name)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| invalid(&format!(".{name}"), "is required"))
        };
        if text("type")? != "external_account" {
            return Err(invalid(".type", "must be \"external_account\""));
        }
        text("audience")?;
        text("subject_token_type")?;
        https_url(text("token_url")?).ok_or_else(|| invalid(".token_url", "must be an https:// URL"))?;
        let impersonated = match json.get("service_account_impersonation_url") {
            None | Some(Value::Null) => None,
            Some(_) => {
                let url = text("service_account_impersonation_url")?;
                let email = https_url(url)
                    .and_then(|u| u.rsplit('/').next())
                    .and_then(|last| last.strip_suffix(":generateAccessToken"))
                    .filter(|email| email.contains('@'));
                let email = email.ok_or_else(|| {
                    invalid(
                        ".service_account_impersonation_url",
                        "must be an https:// IAM Credentials URL ending in serviceAccounts/<email>:generateAccessToken",
                    )
                })?;
                Some(email.to_string())
            }
        };
        let source = json
            .get("credential_source")
            .filter(|s| s.is_object())
            .ok_or_else(|| invalid(".credential_source", "is required"))?;
        let file = source.get("file").and_then(Value::as_str).map(str::trim).filter(|f| !f.is_empty());
        let Some(file) = file else {
            return Err(invalid(
                ".credential_source.file",
                "is required (only a token file is supported as the credential source, as Gardener writes it)",
            ));
        };
        let token_file = PathBuf::from(file);
        if !token_file.is_absolute() {
            return Err(invalid(
                ".credential_source.file",
                "must be an absolute path (the token projected into the sidecar's container)",
            ));
        }
        let format = source.get("format").filter(|f| !f.is_null());
        if format.is_some_and(|f| f.get("type").and_then(Value::as_str).unwrap_or("text") != "text") {
            return Err(invalid(".credential_source.format.type", "must be \"text\" (the token file holds the token)"));
        }
        Ok(Self { token_file, impersonated, json })
    }

    /// External account credentials from the configuration; with `endpoint`
    /// (a plain-HTTP fake) the token and impersonation URLs point there.
    fn credentials(&self, endpoint: Option<&str>) -> Result<Credentials, DriverError> {
        let mut json = self.json.clone();
        if let Some(endpoint) = endpoint {
            for name in ["token_url", "service_account_impersonation_url"] {
                if let Some(url) = json.get(name).and_then(Value::as_str).map(|u| moved_to(u, endpoint)) {
                    json[name] = Value::String(url);
                }
            }
        }
        google_cloud_auth::credentials::external_account::Builder::new(json).build().map_err(|_| {
            DriverError::invalid_argument(
                "secret.credentialsConfig",
                "is not a usable external account configuration (audience, subject_token_type, token_url, credential_source)",
            )
        })
    }

    /// Why the token file cannot be used right now, if it cannot (missing,
    /// unreadable, not UTF-8, empty). Never says anything about the content.
    pub(crate) fn token_file_problem(path: &Path) -> Option<String> {
        match std::fs::read(path) {
            Err(e) => Some(e.kind().to_string()),
            Ok(bytes) => match String::from_utf8(bytes) {
                Err(_) => Some("is not UTF-8".into()),
                Ok(text) if text.trim().is_empty() => Some("is empty".into()),
                Ok(_) => None,
            },
        }
    }
}

impl ServiceAccountKey {
    /// Service account credentials for Google's endpoints.
    fn google_credentials(&self) -> Result<Credentials, DriverError> {
        google_cloud_auth::credentials::service_account::Builder::new(self.json.clone()).build().map_err(|_| {
            DriverError::invalid_argument(
                "secret.serviceAccountJSON",
                "is not a usable service account key (type, private_key, client_email)",
            )
        })
    }

    /// Credentials for a plain-HTTP (fake) endpoint: `Bearer sa:<client_email>`.
    fn fake_endpoint_credentials(&self) -> Result<Credentials, DriverError> {
        let value = HeaderValue::from_str(&format!("Bearer sa:{}", self.client_email)).map_err(|_| {
            DriverError::invalid_argument("secret.serviceAccountJSON.client_email", "is not a valid email")
        })?;
        let mut headers = HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, value);
        Ok(Credentials::from(PrincipalHeader { headers, tag: EntityTag::new() }))
    }
}

/// Sends a fixed principal header (fake endpoints only).
#[derive(Debug)]
struct PrincipalHeader {
    headers: HeaderMap,
    tag: EntityTag,
}

impl CredentialsProvider for PrincipalHeader {
    async fn headers(&self, extensions: Extensions) -> Result<CacheableResource<HeaderMap>, CredentialsError> {
        match extensions.get::<EntityTag>() {
            Some(tag) if *tag == self.tag => Ok(CacheableResource::NotModified),
            _ => Ok(CacheableResource::New { entity_tag: self.tag.clone(), data: self.headers.clone() }),
        }
    }

    async fn universe_domain(&self) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use machine_driver_api::ErrorKind;

    fn secret(json: &str) -> SecretData {
        [("serviceAccountJSON", json)].into_iter().collect()
    }

    const AUDIENCE: &str =
        "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/gardener/providers/shoot";

    fn config() -> Value {
        serde_json::json!({
            "type": "external_account",
            "audience": AUDIENCE,
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": "https://sts.googleapis.com/v1/token",
            "service_account_impersonation_url": "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/mcm@p-1.iam.gserviceaccount.com:generateAccessToken",
            "credential_source": {"file": "/var/run/secrets/gardener.cloud/workload-identity/token", "format": {"type": "text"}},
            "client_secret": "CANARY"
        })
    }

    fn wi(config: &Value, project: &str) -> SecretData {
        [("credentialsConfig", config.to_string()), ("projectID", project.to_string())].into_iter().collect()
    }

    fn wi_error(config: &Value) -> DriverError {
        let e = GcpCredentials::from_secret(&wi(config, "my-project"), "secret").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(!e.message().contains("CANARY"), "{}", e.message());
        assert!(!e.message().contains(AUDIENCE), "{}", e.message());
        e
    }

    #[test]
    fn reads_project_and_email_and_hides_the_key() {
        let s = secret(
            r#"{"type":"service_account","project_id":"proj-1","client_email":"a@p-1.iam.gserviceaccount.com","private_key":"CANARY"}"#,
        );
        let k = GcpCredentials::from_secret(&s, "secret").unwrap();
        assert_eq!(k.project_id, "proj-1");
        assert_eq!(k.service_account_email(), Some("a@p-1.iam.gserviceaccount.com"));
        assert_eq!(k.token_file(), None);
        assert!(!format!("{k:?}").contains("CANARY"));
    }

    #[test]
    fn the_alternative_key_name_works() {
        let s: SecretData =
            [("serviceaccount.json", r#"{"project_id":"proj-1","client_email":"a@b"}"#)].into_iter().collect();
        assert_eq!(GcpCredentials::from_secret(&s, "secret").unwrap().project_id, "proj-1");
    }

    #[test]
    fn bad_keys_name_the_field_without_quoting_it() {
        let e = GcpCredentials::from_secret(&secret("CANARY not json"), "secret").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(e.field(), Some("secret.serviceAccountJSON"));
        assert!(!e.message().contains("CANARY"));
        let e = GcpCredentials::from_secret(&secret(r#"{"client_email":"a@b"}"#), "secret").unwrap_err();
        assert_eq!(e.field(), Some("secret.serviceAccountJSON.project_id"));
        let e = GcpCredentials::from_secret(&secret(r#"{"project_id":"proj-1"}"#), "ownerSecret").unwrap_err();
        assert_eq!(e.field(), Some("ownerSecret.serviceAccountJSON.client_email"));
        // The project goes into every Compute URL: only a project id's syntax.
        for bad in ["../x", "p", "a/b:my-project", "my-project?x", "%2e%2e"] {
            let key = format!(r#"{{"project_id":"{bad}","client_email":"a@b"}}"#);
            let e = GcpCredentials::from_secret(&secret(&key), "secret").unwrap_err();
            assert_eq!(e.field(), Some("secret.serviceAccountJSON.project_id"), "{bad}");
        }
    }

    #[test]
    fn workload_identity_reads_the_token_file_project_and_impersonated_account() {
        let c = GcpCredentials::from_secret(&wi(&config(), "my-project"), "secret").unwrap();
        assert_eq!(c.project_id, "my-project");
        assert_eq!(c.token_file(), Some(Path::new("/var/run/secrets/gardener.cloud/workload-identity/token")));
        assert_eq!(c.service_account_email(), Some("mcm@p-1.iam.gserviceaccount.com"));
        assert!(!format!("{c:?}").contains("CANARY"));
        let mut direct = config();
        direct.as_object_mut().unwrap().remove("service_account_impersonation_url");
        let d = GcpCredentials::from_secret(&wi(&direct, "my-project"), "secret").unwrap();
        assert_eq!(d.service_account_email(), None);
        assert_ne!(c.fingerprint, d.fingerprint, "another configuration, other clients");
        let domain = GcpCredentials::from_secret(&wi(&direct, "example.com:my-project"), "secret").unwrap();
        assert_eq!(domain.project_id, "example.com:my-project");
    }

    #[test]
    fn a_service_account_key_wins_over_workload_identity() {
        let mut s = wi(&config(), "my-project");
        s.insert("serviceAccountJSON", r#"{"project_id":"key-project","client_email":"a@b"}"#);
        assert_eq!(GcpCredentials::from_secret(&s, "secret").unwrap().project_id, "key-project");
    }

    #[test]
    fn workload_identity_errors_name_the_field_without_quoting_it() {
        let s: SecretData = [("credentialsConfig", "CANARY {")].into_iter().collect();
        let e = GcpCredentials::from_secret(&s, "secret").unwrap_err();
        assert_eq!(e.field(), Some("secret.credentialsConfig"));
        assert!(!e.message().contains("CANARY"));
        let no_project: SecretData = [("credentialsConfig", config().to_string())].into_iter().collect();
        assert_eq!(GcpCredentials::from_secret(&no_project, "secret").unwrap_err().field(), Some("secret.projectID"));
        let e = GcpCredentials::from_secret(&wi(&config(), "CANARY_Project"), "secret").unwrap_err();
        assert_eq!(e.field(), Some("secret.projectID"));
        assert!(!e.message().contains("CANARY"));

        let cases: &[(&str, Value, &str)] = &[
            ("type", serde_json::json!("service_account"), "secret.credentialsConfig.type"),
            ("audience", Value::Null, "secret.credentialsConfig.audience"),
            ("subject_token_type", serde_json::json!(""), "secret.credentialsConfig.subject_token_type"),
            ("token_url", serde_json::json!("http://sts.example/v1/token"), "secret.credentialsConfig.token_url"),
            (
                "service_account_impersonation_url",
                serde_json::json!("https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/x"),
                "secret.credentialsConfig.service_account_impersonation_url",
            ),
            ("credential_source", Value::Null, "secret.credentialsConfig.credential_source"),
            (
                "credential_source",
                serde_json::json!({"url": "http://169.254.169.254/token"}),
                "secret.credentialsConfig.credential_source.file",
            ),
            (
                "credential_source",
                serde_json::json!({"file": "token"}),
                "secret.credentialsConfig.credential_source.file",
            ),
            (
                "credential_source",
                serde_json::json!({"file": "/t", "format": {"type": "json", "subject_token_field_name": "t"}}),
                "secret.credentialsConfig.credential_source.format.type",
            ),
        ];
        for (name, value, field) in cases {
            let mut c = config();
            if value.is_null() {
                c.as_object_mut().unwrap().remove(*name);
            } else {
                c[*name] = value.clone();
            }
            assert_eq!(wi_error(&c).field(), Some(*field), "{name} = {value}");
        }
        let e = GcpCredentials::from_secret(&wi(&config(), "p"), "ownerSecret").unwrap_err();
        assert_eq!(e.field(), Some("ownerSecret.projectID"));
    }

    #[test]
    fn fake_endpoints_get_the_token_urls_moved_to_them() {
        assert_eq!(
            moved_to("https://sts.googleapis.com/v1/token", "http://127.0.0.1:1/"),
            "http://127.0.0.1:1/v1/token"
        );
        assert_eq!(
            moved_to(
                "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/a@b:generateAccessToken",
                "http://f"
            ),
            "http://f/v1/projects/-/serviceAccounts/a@b:generateAccessToken"
        );
    }

    #[test]
    fn token_file_problems_never_show_the_content() {
        let dir = std::env::temp_dir().join(format!("gcp-wi-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        assert!(WorkloadIdentity::token_file_problem(&file).is_some());
        std::fs::write(&file, " \n").unwrap();
        assert_eq!(WorkloadIdentity::token_file_problem(&file).as_deref(), Some("is empty"));
        std::fs::write(&file, "CANARY.jwt.token").unwrap();
        assert_eq!(WorkloadIdentity::token_file_problem(&file), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn fake_endpoint_credentials_name_the_principal() {
        let k = GcpCredentials::from_secret(
            &secret(r#"{"project_id":"proj-1","client_email":"a@p.iam.gserviceaccount.com"}"#),
            "secret",
        )
        .unwrap();
        let creds = k.fake_endpoint_credentials("http://127.0.0.1:1").unwrap();
        let CacheableResource::New { data, .. } = creds.headers(Extensions::new()).await.unwrap() else {
            panic!("expected headers");
        };
        assert_eq!(data.get("authorization").unwrap(), "Bearer sa:a@p.iam.gserviceaccount.com");
    }
}
