//! Checks a [`RegistryConfig`] and turns it into parsed, normalised endpoints.

use std::collections::BTreeMap;

use url::Url;

use crate::config::{Credentials, Endpoint, RegistryConfig};
use crate::error::BootstrapError;

/// A registry configuration that passed every check.
#[derive(Debug)]
pub(crate) struct ValidConfig {
    pub(crate) mirror: Option<ValidEndpoint>,
    pub(crate) registries: Vec<ValidEndpoint>,
}

impl ValidConfig {
    /// The mirror first, then the registries, in configuration order.
    pub(crate) fn endpoints(&self) -> impl Iterator<Item = &ValidEndpoint> {
        self.mirror.iter().chain(self.registries.iter())
    }
}

/// One endpoint with its URL parsed and its CA normalised.
#[derive(Debug)]
pub(crate) struct ValidEndpoint {
    /// `mirror` or `registries[i]`, for messages.
    pub(crate) field: String,
    pub(crate) url: Url,
    /// `host` or `host:port`, the containerd `certs.d` directory and the credential key.
    pub(crate) host: String,
    /// The certificates re-encoded as PEM with LF line endings.
    pub(crate) ca_pem: Option<String>,
    pub(crate) credentials: Option<Credentials>,
}

/// Validates `config`: URLs, certificates, credentials, and per-host consistency.
pub(crate) fn validate(config: &RegistryConfig) -> Result<ValidConfig, BootstrapError> {
    let mirror = config.mirror.as_ref().map(|m| validate_endpoint("mirror", m, true)).transpose()?;
    let registries = config
        .registries
        .iter()
        .enumerate()
        .map(|(i, r)| validate_endpoint(&format!("registries[{i}]"), r, false))
        .collect::<Result<Vec<_>, _>>()?;
    let valid = ValidConfig { mirror, registries };
    check_hosts_consistent(&valid)?;
    Ok(valid)
}

fn validate_endpoint(field: &str, endpoint: &Endpoint, path_allowed: bool) -> Result<ValidEndpoint, BootstrapError> {
    let url_field = format!("{field}.url");
    let url = parse_url(&url_field, &endpoint.url, path_allowed)?;
    let host = host_key(&url).ok_or_else(|| BootstrapError::field(&url_field, "a host is required"))?;
    let ca_pem = endpoint.ca_pem.as_deref().map(|pem| normalize_ca(&format!("{field}.ca"), pem)).transpose()?;
    if let Some(c) = &endpoint.credentials {
        validate_credentials(&format!("{field}.credentials"), c)?;
    }
    Ok(ValidEndpoint { field: field.to_owned(), url, host, ca_pem, credentials: endpoint.credentials.clone() })
}

fn parse_url(field: &str, raw: &str, path_allowed: bool) -> Result<Url, BootstrapError> {
    if raw.trim() != raw || raw.is_empty() {
        return Err(BootstrapError::field(field, "must be a non-empty URL without surrounding whitespace"));
    }
    let url = Url::parse(raw).map_err(|e| BootstrapError::field(field, format!("not a valid URL ({e})")))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(BootstrapError::field(field, "scheme must be http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(BootstrapError::field(field, "a host is required"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(BootstrapError::field(field, "must not contain user info; use credentials"));
    }
    if url.query().is_some() {
        return Err(BootstrapError::field(field, "must not have a query"));
    }
    if url.fragment().is_some() {
        return Err(BootstrapError::field(field, "must not have a fragment"));
    }
    if !path_allowed && url.path() != "/" {
        return Err(BootstrapError::field(
            field,
            "must not have a path: CA certificates and credentials apply to the whole host",
        ));
    }
    Ok(url)
}

/// `host` or `host:port` (the port only when it is not the scheme's default).
fn host_key(url: &Url) -> Option<String> {
    let host = url.host_str()?;
    Some(match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
}

fn normalize_ca(field: &str, pem_bytes: &[u8]) -> Result<String, BootstrapError> {
    let blocks = pem::parse_many(pem_bytes).map_err(|_| BootstrapError::field(field, "not valid PEM"))?;
    if blocks.is_empty() {
        return Err(BootstrapError::field(field, "contains no PEM CERTIFICATE block"));
    }
    for (i, block) in blocks.iter().enumerate() {
        if block.tag() != "CERTIFICATE" {
            return Err(BootstrapError::field(field, format!("PEM block {i} is not a CERTIFICATE block")));
        }
        // A DER certificate is an ASN.1 SEQUENCE.
        if block.contents().first() != Some(&0x30) {
            return Err(BootstrapError::field(field, format!("PEM block {i} does not hold a DER certificate")));
        }
    }
    let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
    Ok(pem::encode_many_config(&blocks, config))
}

fn validate_credentials(field: &str, c: &Credentials) -> Result<(), BootstrapError> {
    if c.username.is_empty() {
        return Err(BootstrapError::field(format!("{field}.username"), "must not be empty"));
    }
    if c.username.contains(':') {
        return Err(BootstrapError::field(format!("{field}.username"), "must not contain ':'"));
    }
    if c.username.chars().any(char::is_control) {
        return Err(BootstrapError::field(format!("{field}.username"), "must not contain control characters"));
    }
    if c.password.is_empty() {
        return Err(BootstrapError::field(format!("{field}.password"), "must not be empty"));
    }
    Ok(())
}

/// Two entries for one host must agree on their CA and on their credentials.
fn check_hosts_consistent(config: &ValidConfig) -> Result<(), BootstrapError> {
    let mut cas: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    let mut creds: BTreeMap<&str, (&str, &Credentials)> = BTreeMap::new();
    for e in config.endpoints() {
        if let Some(ca) = &e.ca_pem {
            match cas.get(e.host.as_str()) {
                Some((first, other)) if *other != ca.as_str() => {
                    return Err(BootstrapError::ConflictingCa {
                        host: e.host.clone(),
                        first: (*first).to_owned(),
                        second: e.field.clone(),
                    });
                }
                Some(_) => {}
                None => {
                    cas.insert(&e.host, (&e.field, ca));
                }
            }
        }
        if let Some(c) = &e.credentials {
            match creds.get(e.host.as_str()) {
                Some((first, other)) if *other != c => {
                    return Err(BootstrapError::field(
                        format!("{}.credentials", e.field),
                        format!("`{first}` names the same host `{}` with different credentials", e.host),
                    ));
                }
                Some(_) => {}
                None => {
                    creds.insert(&e.host, (&e.field, c));
                }
            }
        }
    }
    Ok(())
}
