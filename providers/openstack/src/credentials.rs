//! The secret's Keystone credentials, with the Go provider's keys: `authURL`;
//! `username` + `password`, or `applicationCredentialSecret` with
//! `applicationCredentialID` (or `applicationCredentialName` + `username`);
//! `domainName`|`domainID`, `tenantName`|`tenantID`,
//! `userDomainName`|`userDomainID`; `caCert`, `insecure`, `clientCert` +
//! `clientKey`. Ids work where the Go provider silently dropped them (it
//! passed only the domain and tenant names to gophercloud).

use machine_driver_api::{DriverError, SecretData};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The secret keys every request needs.
pub(crate) const AUTH_URL_KEYS: &[&str] = &["authURL"];

/// A domain, by id or name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DomainRef {
    /// `domainID` / `userDomainID`.
    Id(String),
    /// `domainName` / `userDomainName`.
    Name(String),
}

impl DomainRef {
    fn json(&self) -> Value {
        match self {
            Self::Id(id) => json!({"id": id}),
            Self::Name(name) => json!({"name": name}),
        }
    }
}

/// How the driver proves who it is.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum AuthMethod {
    /// `password` of the user `username` in the user domain, scoped to a project.
    Password { username: String, user_domain: DomainRef, password: String, project: ProjectScope },
    /// An application credential (bound to its project: no scope is sent).
    ApplicationCredential { id: Option<String>, name_and_user: Option<(String, String, DomainRef)>, secret: String },
}

/// The project a password token is scoped to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProjectScope {
    /// `tenantID`.
    Id(String),
    /// `tenantName` in the project domain (`domainName`|`domainID`).
    Name(String, DomainRef),
}

/// TLS settings of the secret.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    /// `caCert`: PEM certificates trusted besides the system's.
    pub(crate) ca_cert: Option<Vec<u8>>,
    /// `insecure: "true"`: certificates are not verified.
    pub(crate) insecure: bool,
    /// `clientCert` + `clientKey` (PEM), concatenated.
    pub(crate) client_identity: Option<Vec<u8>>,
}

impl TlsSettings {
    /// True when the default HTTP client serves these settings.
    pub(crate) fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// The Keystone credentials of one secret.
#[derive(Clone)]
pub(crate) struct OsCredentials {
    /// Keystone's URL (`authURL`), as written.
    pub(crate) auth_url: String,
    /// The authentication method and its secrets.
    pub(crate) method: AuthMethod,
    /// TLS settings.
    pub(crate) tls: TlsSettings,
    /// SHA-256 over everything above: the session cache key.
    pub(crate) fingerprint: [u8; 32],
}

impl std::fmt::Debug for OsCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let method = match &self.method {
            AuthMethod::Password { username, .. } => format!("password of {username}"),
            AuthMethod::ApplicationCredential { id: Some(id), .. } => format!("application credential {id}"),
            AuthMethod::ApplicationCredential { .. } => "application credential by name".to_string(),
        };
        f.debug_struct("OsCredentials").field("auth_url", &self.auth_url).field("method", &method).finish()
    }
}

impl OsCredentials {
    /// Reads the credentials; `field` names the secret in errors (`secret`, `ownerSecret`).
    pub(crate) fn from_secret(secret: &SecretData, field: &str) -> Result<Self, DriverError> {
        let read = |key: &str| -> Result<Option<String>, DriverError> {
            Ok(secret
                .first_str(&[key])
                .map_err(|_| DriverError::invalid_argument(format!("{field}.{key}"), "is not UTF-8"))?
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()))
        };
        fn need<T>(field: &str, key: &str, value: Option<T>) -> Result<T, DriverError> {
            value.ok_or_else(|| DriverError::invalid_argument(format!("{field}.{key}"), "is required"))
        }
        let required = |key: &str, value: Option<String>| need(field, key, value);
        let auth_url = required("authURL", read("authURL")?)?;
        if !(auth_url.starts_with("https://") || auth_url.starts_with("http://")) {
            return Err(DriverError::invalid_argument(
                format!("{field}.authURL"),
                "must be an http:// or https:// URL",
            ));
        }
        let domain = match (read("domainID")?, read("domainName")?) {
            (Some(id), _) => Some(DomainRef::Id(id)),
            (None, Some(name)) => Some(DomainRef::Name(name)),
            (None, None) => None,
        };
        let user_domain = match (read("userDomainID")?, read("userDomainName")?) {
            (Some(id), _) => Some(DomainRef::Id(id)),
            (None, Some(name)) => Some(DomainRef::Name(name)),
            (None, None) => domain.clone(),
        };
        let username = read("username")?;
        let password = read("password")?;
        let app_secret = read("applicationCredentialSecret")?;
        let method = match (password, app_secret) {
            (Some(_), Some(_)) => {
                return Err(DriverError::invalid_argument(
                    format!("{field}.applicationCredentialSecret"),
                    "and password exclude each other: give one",
                ));
            }
            (None, None) => {
                return Err(DriverError::invalid_argument(
                    format!("{field}.password"),
                    "is required (or applicationCredentialSecret)",
                ));
            }
            (Some(password), None) => {
                let username = required("username", username)?;
                let user_domain = need(field, "domainName", user_domain)?;
                let project = match (read("tenantID")?, read("tenantName")?) {
                    (Some(id), _) => ProjectScope::Id(id),
                    (None, Some(name)) => ProjectScope::Name(name, need(field, "domainName", domain)?),
                    (None, None) => {
                        return Err(DriverError::invalid_argument(format!("{field}.tenantName"), "is required"));
                    }
                };
                AuthMethod::Password { username, user_domain, password, project }
            }
            (None, Some(secret)) => match (read("applicationCredentialID")?, read("applicationCredentialName")?) {
                (Some(id), _) => AuthMethod::ApplicationCredential { id: Some(id), name_and_user: None, secret },
                (None, Some(name)) => {
                    let username = required("username", username)?;
                    let user_domain = need(field, "domainName", user_domain)?;
                    AuthMethod::ApplicationCredential {
                        id: None,
                        name_and_user: Some((name, username, user_domain)),
                        secret,
                    }
                }
                (None, None) => {
                    return Err(DriverError::invalid_argument(
                        format!("{field}.applicationCredentialID"),
                        "is required with applicationCredentialSecret (or applicationCredentialName and username)",
                    ));
                }
            },
        };
        let insecure = match read("insecure")?.map(|v| v.to_ascii_lowercase()) {
            None => false,
            Some(v) if v == "true" => true,
            Some(v) if v == "false" => false,
            Some(_) => {
                return Err(DriverError::invalid_argument(
                    format!("{field}.insecure"),
                    "must be \"true\" or \"false\"",
                ));
            }
        };
        let client_identity = match (read("clientCert")?, read("clientKey")?) {
            (Some(cert), Some(key)) => Some(format!("{cert}\n{key}\n").into_bytes()),
            (None, None) => None,
            (Some(_), None) => {
                return Err(DriverError::invalid_argument(format!("{field}.clientKey"), "is required with clientCert"));
            }
            (None, Some(_)) => {
                return Err(DriverError::invalid_argument(format!("{field}.clientCert"), "is required with clientKey"));
            }
        };
        let tls = TlsSettings { ca_cert: read("caCert")?.map(String::into_bytes), insecure, client_identity };
        let fingerprint = fingerprint(&auth_url, &method, &tls);
        Ok(Self { auth_url, method, tls, fingerprint })
    }

    /// The body of `POST /v3/auth/tokens`.
    pub(crate) fn token_request(&self) -> Value {
        match &self.method {
            AuthMethod::Password { username, user_domain, password, project } => {
                let scope = match project {
                    ProjectScope::Id(id) => json!({"project": {"id": id}}),
                    ProjectScope::Name(name, domain) => json!({"project": {"name": name, "domain": domain.json()}}),
                };
                json!({"auth": {
                    "identity": {"methods": ["password"], "password": {"user": {
                        "name": username, "domain": user_domain.json(), "password": password}}},
                    "scope": scope,
                }})
            }
            AuthMethod::ApplicationCredential { id, name_and_user, secret } => {
                let credential = match (id, name_and_user) {
                    (Some(id), _) => json!({"id": id, "secret": secret}),
                    (None, Some((name, user, domain))) => {
                        json!({"name": name, "secret": secret, "user": {"name": user, "domain": domain.json()}})
                    }
                    (None, None) => json!({"secret": secret}),
                };
                json!({"auth": {"identity": {"methods": ["application_credential"], "application_credential": credential}}})
            }
        }
    }
}

fn fingerprint(auth_url: &str, method: &AuthMethod, tls: &TlsSettings) -> [u8; 32] {
    let mut hash = Sha256::new();
    let mut add = |part: &[u8]| {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    };
    add(auth_url.as_bytes());
    let domain = |d: &DomainRef| match d {
        DomainRef::Id(id) => format!("id:{id}"),
        DomainRef::Name(n) => format!("name:{n}"),
    };
    match method {
        AuthMethod::Password { username, user_domain, password, project } => {
            add(b"password");
            add(username.as_bytes());
            add(domain(user_domain).as_bytes());
            add(password.as_bytes());
            match project {
                ProjectScope::Id(id) => add(format!("id:{id}").as_bytes()),
                ProjectScope::Name(n, d) => add(format!("name:{n}/{}", domain(d)).as_bytes()),
            }
        }
        AuthMethod::ApplicationCredential { id, name_and_user, secret } => {
            add(b"application_credential");
            add(id.as_deref().unwrap_or_default().as_bytes());
            if let Some((name, user, d)) = name_and_user {
                add(format!("{name}/{user}/{}", domain(d)).as_bytes());
            }
            add(secret.as_bytes());
        }
    }
    add(tls.ca_cert.as_deref().unwrap_or_default());
    add(&[u8::from(tls.insecure)]);
    add(tls.client_identity.as_deref().unwrap_or_default());
    hash.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(pairs: &[(&str, &str)]) -> SecretData {
        SecretData::new(pairs.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect())
    }

    const BASE: &[(&str, &str)] = &[("authURL", "https://keystone.example.com/v3"), ("domainName", "Default")];

    #[test]
    fn password_by_names_and_ids() {
        let mut pairs = BASE.to_vec();
        pairs.extend([("username", "u"), ("password", "p4ss"), ("tenantName", "proj")]);
        let c = OsCredentials::from_secret(&secret(&pairs), "secret").unwrap();
        let body = c.token_request();
        assert_eq!(body["auth"]["identity"]["password"]["user"]["domain"]["name"], "Default");
        assert_eq!(body["auth"]["scope"]["project"]["name"], "proj");
        assert_eq!(body["auth"]["scope"]["project"]["domain"]["name"], "Default");
        assert!(!format!("{c:?}").contains("p4ss"));

        let ids = secret(&[
            ("authURL", "https://k/v3"),
            ("domainID", "d-1"),
            ("userDomainID", "ud-1"),
            ("username", "u"),
            ("password", "p"),
            ("tenantID", "t-1"),
        ]);
        let body = OsCredentials::from_secret(&ids, "secret").unwrap().token_request();
        assert_eq!(body["auth"]["identity"]["password"]["user"]["domain"]["id"], "ud-1");
        assert_eq!(body["auth"]["scope"]["project"]["id"], "t-1");
    }

    #[test]
    fn application_credentials_carry_no_scope() {
        let s = secret(&[
            ("authURL", "https://k/v3"),
            ("applicationCredentialID", "ac"),
            ("applicationCredentialSecret", "s3cr3t"),
            ("tenantName", "ignored"),
        ]);
        let body = OsCredentials::from_secret(&s, "secret").unwrap().token_request();
        assert_eq!(body["auth"]["identity"]["application_credential"]["id"], "ac");
        assert!(body["auth"].get("scope").is_none());
    }

    #[test]
    fn refusals_name_the_key() {
        let field = |pairs: &[(&str, &str)]| {
            OsCredentials::from_secret(&secret(pairs), "secret").unwrap_err().field().map(str::to_string)
        };
        assert_eq!(field(&[]).as_deref(), Some("secret.authURL"));
        assert_eq!(field(&[("authURL", "ftp://x")]).as_deref(), Some("secret.authURL"));
        assert_eq!(field(BASE).as_deref(), Some("secret.password"));
        let mut both = BASE.to_vec();
        both.extend([("username", "u"), ("password", "p"), ("applicationCredentialSecret", "s")]);
        assert_eq!(field(&both).as_deref(), Some("secret.applicationCredentialSecret"));
        let mut no_tenant = BASE.to_vec();
        no_tenant.extend([("username", "u"), ("password", "p")]);
        assert_eq!(field(&no_tenant).as_deref(), Some("secret.tenantName"));
        let mut bad_insecure = no_tenant.clone();
        bad_insecure.extend([("tenantName", "t"), ("insecure", "yes")]);
        assert_eq!(field(&bad_insecure).as_deref(), Some("secret.insecure"));
        let mut half_cert = no_tenant;
        half_cert.extend([("tenantName", "t"), ("clientCert", "PEM")]);
        assert_eq!(field(&half_cert).as_deref(), Some("secret.clientKey"));
    }
}
