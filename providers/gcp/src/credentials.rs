//! The secret's service account key and the credentials built from it.
//!
//! Against Google the key becomes `google-cloud-auth` service account
//! credentials. Against a plain-HTTP endpoint (a fake Compute Engine or a test
//! proxy; Google's endpoints are always HTTPS) no token can be minted, so the
//! requests carry `Authorization: Bearer sa:<client_email>` instead: the fake
//! ignores authentication but uses that principal for image IAM checks.

use std::fmt;

use google_cloud_auth::credentials::{CacheableResource, Credentials, CredentialsProvider, EntityTag};
use google_cloud_auth::errors::CredentialsError;
use http::{Extensions, HeaderMap, HeaderValue};
use machine_driver_api::{DriverError, SecretData};
use sha2::{Digest, Sha256};

/// Secret keys holding the service account key JSON (the Go provider's alias included).
pub(crate) const SERVICE_ACCOUNT_KEYS: &[&str] = &["serviceAccountJSON", "serviceaccount.json"];

/// A parsed service account key. `Debug` shows the project and email only.
#[derive(Clone)]
pub(crate) struct ServiceAccountKey {
    /// `project_id`: the project VMs are created in.
    pub(crate) project_id: String,
    /// `client_email`: the principal.
    pub(crate) client_email: String,
    /// SHA-256 of the key JSON: the key of the client cache.
    pub(crate) fingerprint: [u8; 32],
    json: serde_json::Value,
}

impl fmt::Debug for ServiceAccountKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceAccountKey")
            .field("project_id", &self.project_id)
            .field("client_email", &self.client_email)
            .finish_non_exhaustive()
    }
}

impl ServiceAccountKey {
    /// Reads the key from `secret` (`serviceAccountJSON` or `serviceaccount.json`).
    /// Errors name the secret key and never quote its content.
    pub(crate) fn from_secret(secret: &SecretData, what: &str) -> Result<Self, DriverError> {
        let raw = secret.require_str(SERVICE_ACCOUNT_KEYS)?;
        let key = SERVICE_ACCOUNT_KEYS.iter().find(|k| secret.has(k)).copied().unwrap_or("serviceAccountJSON");
        let field = |sub: &str| format!("{what}.{key}{sub}");
        let json: serde_json::Value = serde_json::from_str(raw)
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
        let fingerprint = Sha256::digest(raw.as_bytes()).into();
        Ok(Self { project_id, client_email, fingerprint, json })
    }

    /// Service account credentials for Google's endpoints.
    pub(crate) fn google_credentials(&self) -> Result<Credentials, DriverError> {
        google_cloud_auth::credentials::service_account::Builder::new(self.json.clone()).build().map_err(|_| {
            DriverError::invalid_argument(
                "secret.serviceAccountJSON",
                "is not a usable service account key (type, private_key, client_email)",
            )
        })
    }

    /// Credentials for a plain-HTTP (fake) endpoint: `Bearer sa:<client_email>`.
    pub(crate) fn fake_endpoint_credentials(&self) -> Result<Credentials, DriverError> {
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

    #[test]
    fn reads_project_and_email_and_hides_the_key() {
        let s = secret(
            r#"{"type":"service_account","project_id":"p-1","client_email":"a@p-1.iam.gserviceaccount.com","private_key":"CANARY"}"#,
        );
        let k = ServiceAccountKey::from_secret(&s, "secret").unwrap();
        assert_eq!(k.project_id, "p-1");
        assert_eq!(k.client_email, "a@p-1.iam.gserviceaccount.com");
        assert!(!format!("{k:?}").contains("CANARY"));
    }

    #[test]
    fn the_alternative_key_name_works() {
        let s: SecretData =
            [("serviceaccount.json", r#"{"project_id":"p","client_email":"a@b"}"#)].into_iter().collect();
        assert_eq!(ServiceAccountKey::from_secret(&s, "secret").unwrap().project_id, "p");
    }

    #[test]
    fn bad_keys_name_the_field_without_quoting_it() {
        let e = ServiceAccountKey::from_secret(&secret("CANARY not json"), "secret").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(e.field(), Some("secret.serviceAccountJSON"));
        assert!(!e.message().contains("CANARY"));
        let e = ServiceAccountKey::from_secret(&secret(r#"{"client_email":"a@b"}"#), "secret").unwrap_err();
        assert_eq!(e.field(), Some("secret.serviceAccountJSON.project_id"));
        let e = ServiceAccountKey::from_secret(&secret(r#"{"project_id":"p"}"#), "ownerSecret").unwrap_err();
        assert_eq!(e.field(), Some("ownerSecret.serviceAccountJSON.client_email"));
    }

    #[tokio::test]
    async fn fake_endpoint_credentials_name_the_principal() {
        let k = ServiceAccountKey::from_secret(
            &secret(r#"{"project_id":"p","client_email":"a@p.iam.gserviceaccount.com"}"#),
            "secret",
        )
        .unwrap();
        let creds = k.fake_endpoint_credentials().unwrap();
        let CacheableResource::New { data, .. } = creds.headers(Extensions::new()).await.unwrap() else {
            panic!("expected headers");
        };
        assert_eq!(data.get("authorization").unwrap(), "Bearer sa:a@p.iam.gserviceaccount.com");
    }
}
