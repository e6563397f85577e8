//! Preparing a new machine's user data: the secret's `userData` with the registry
//! configuration merged in (by the cloud-neutral `machine-bootstrap` crate),
//! checked against the cloud's size limit.

use std::path::Path;

use machine_bootstrap::{BootstrapError, Credentials, Endpoint, RegistryConfig, RegistryConfigFile, SizeLimit};
use machine_driver_api::{DriverError, SecretBytes, SecretData};
use machine_driver_proto::v1 as pb;

use crate::error::ServeError;

/// Secret key holding the bootstrap user data.
pub(crate) const USER_DATA_KEY: &str = "userData";

/// Field path of a class's registry configuration in requests.
const CLASS_CONFIG_FIELD: &str = "machine_class.registry_config";

/// Merges registry configuration into user data: a class's own configuration,
/// or else the operator-wide default loaded at start.
#[derive(Debug, Default)]
pub(crate) struct UserDataPreparer {
    default: Option<RegistryConfig>,
}

impl UserDataPreparer {
    /// Loads the operator default from `path` (YAML or JSON), when given.
    pub(crate) fn load(path: Option<&Path>) -> Result<Self, ServeError> {
        let default = match path {
            Some(p) => {
                let config =
                    RegistryConfigFile::load(p).map_err(|e| ServeError::Config(format!("--registry-config: {e}")))?;
                // Validate now so that a bad operator file fails at start, not on the first create.
                machine_bootstrap::apply(b"", &config, SizeLimit(usize::MAX))
                    .map_err(|e| ServeError::Config(format!("--registry-config {}: {e}", p.display())))?;
                Some(config)
            }
            None => None,
        };
        Ok(Self { default })
    }

    /// The user data to launch with.
    pub(crate) fn prepare(
        &self,
        secret: &SecretData,
        class_config: Option<&pb::RegistryConfig>,
        limit: usize,
    ) -> Result<SecretBytes, DriverError> {
        let raw = secret.get(USER_DATA_KEY).unwrap_or_default();
        let class_config = class_config.filter(|c| c.mirror.is_some() || !c.registries.is_empty());
        let (config, field_prefix) = match class_config {
            Some(c) => (resolve(c, secret)?, CLASS_CONFIG_FIELD),
            None => (self.default.clone().unwrap_or_default(), "--registry-config"),
        };
        if config.is_empty() {
            if limit > 0 && raw.len() > limit {
                return Err(too_large(raw.len(), limit, "no registry configuration merged"));
            }
            return Ok(SecretBytes(raw.to_vec()));
        }
        let limit = if limit == 0 { usize::MAX } else { limit };
        machine_bootstrap::apply(raw, &config, SizeLimit(limit))
            .map(SecretBytes)
            .map_err(|e| bootstrap_error(e, field_prefix))
    }
}

fn too_large(size: usize, limit: usize, detail: &str) -> DriverError {
    DriverError::invalid_argument(
        format!("secret.{USER_DATA_KEY}"),
        format!("is {size} bytes ({detail}), more than the cloud's limit of {limit} bytes"),
    )
}

fn bootstrap_error(e: BootstrapError, field_prefix: &str) -> DriverError {
    match e {
        BootstrapError::InvalidField { field, reason } => {
            DriverError::invalid_argument(format!("{field_prefix}.{field}"), reason)
        }
        BootstrapError::ConflictingCa { .. } => {
            DriverError::invalid_argument(format!("{field_prefix}.registries"), e.to_string())
        }
        BootstrapError::TooLarge { size, limit, detail } => too_large(size, limit, detail),
        other => DriverError::invalid_argument(format!("secret.{USER_DATA_KEY}"), other.to_string()),
    }
}

/// Turns the wire configuration into bootstrap input, reading CA and credential
/// content from the secret keys it names.
fn resolve(c: &pb::RegistryConfig, secret: &SecretData) -> Result<RegistryConfig, DriverError> {
    let mirror = c.mirror.as_ref().map(|m| endpoint(m, secret, &format!("{CLASS_CONFIG_FIELD}.mirror"))).transpose()?;
    let registries = c
        .registries
        .iter()
        .enumerate()
        .map(|(i, r)| endpoint(r, secret, &format!("{CLASS_CONFIG_FIELD}.registries[{i}]")))
        .collect::<Result<_, _>>()?;
    Ok(RegistryConfig { mirror, registries })
}

fn endpoint(e: &pb::RegistryEndpoint, secret: &SecretData, field: &str) -> Result<Endpoint, DriverError> {
    let lookup = |key: &str, what: &str| -> Result<Option<&[u8]>, DriverError> {
        if key.is_empty() {
            return Ok(None);
        }
        match secret.get(key).filter(|v| !v.is_empty()) {
            Some(v) => Ok(Some(v)),
            None => Err(DriverError::invalid_argument(
                format!("{field}.{what}"),
                format!("names secret key {key:?}, which is not set"),
            )),
        }
    };
    let ca_pem = lookup(&e.ca_secret_key, "ca_secret_key")?.map(<[u8]>::to_vec);
    let credentials = match lookup(&e.credentials_secret_key, "credentials_secret_key")? {
        None => None,
        Some(raw) => {
            let text = std::str::from_utf8(raw).map_err(|_| {
                DriverError::invalid_argument(format!("{field}.credentials_secret_key"), "value is not UTF-8")
            })?;
            let (username, password) = text.trim_end_matches(['\r', '\n']).split_once(':').ok_or_else(|| {
                DriverError::invalid_argument(
                    format!("{field}.credentials_secret_key"),
                    "value must have the form username:password",
                )
            })?;
            Some(Credentials { username: username.to_string(), password: password.to_string() })
        }
    };
    Ok(Endpoint { url: e.url.clone(), ca_pem, credentials })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(pairs: &[(&str, &str)]) -> SecretData {
        pairs.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect()
    }

    #[test]
    fn nothing_configured_passes_user_data_through() {
        let p = UserDataPreparer::default();
        let s = secret(&[("userData", "#!/bin/sh\necho hi\n")]);
        assert_eq!(p.prepare(&s, None, 100).expect("ok").0, b"#!/bin/sh\necho hi\n");
        let err = p.prepare(&s, None, 5).expect_err("too large");
        assert_eq!(err.field(), Some("secret.userData"));
    }

    #[test]
    fn operator_default_file_applies_unless_the_class_has_its_own() {
        let dir = std::env::temp_dir().join(format!("mds-regcfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("registry.yaml");
        std::fs::write(&file, "mirror:\n  url: https://operator-mirror.example.com\n").expect("write");
        let p = UserDataPreparer::load(Some(&file)).expect("loads");
        let s = secret(&[("userData", "#cloud-config\nruncmd: [echo]\n")]);
        let merged = String::from_utf8(p.prepare(&s, None, 16384).expect("merged").0).expect("utf8");
        assert!(merged.contains("/etc/containerd/certs.d/_default/hosts.toml"), "{merged}");

        std::fs::write(&file, "mirror:\n  url: ftp://bad.example.com\n").expect("write");
        let err = UserDataPreparer::load(Some(&file)).expect_err("bad operator file fails at start");
        assert!(err.to_string().contains("--registry-config"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn class_mirror_is_merged_and_missing_keys_named() {
        let p = UserDataPreparer::default();
        let config = pb::RegistryConfig {
            mirror: Some(pb::RegistryEndpoint { url: "https://mirror.example.com/proxy".into(), ..Default::default() }),
            registries: vec![],
        };
        let s = secret(&[("userData", "#cloud-config\nruncmd: [echo]\n")]);
        let merged = p.prepare(&s, Some(&config), 16384).expect("merged").0;
        let text = String::from_utf8(merged).expect("utf8");
        assert!(text.contains("/etc/containerd/certs.d/_default/hosts.toml"), "{text}");
        assert!(text.contains("runcmd"));

        let bad = pb::RegistryConfig {
            mirror: Some(pb::RegistryEndpoint {
                url: "https://m.example".into(),
                credentials_secret_key: "mirrorCreds".into(),
                ..Default::default()
            }),
            registries: vec![],
        };
        let err = p.prepare(&s, Some(&bad), 16384).expect_err("missing key");
        assert_eq!(err.field(), Some("machine_class.registry_config.mirror.credentials_secret_key"));

        let ftp = pb::RegistryConfig {
            mirror: Some(pb::RegistryEndpoint { url: "ftp://m.example".into(), ..Default::default() }),
            registries: vec![],
        };
        let err = p.prepare(&s, Some(&ftp), 16384).expect_err("bad scheme");
        assert!(err.field().is_some_and(|f| f.starts_with("machine_class.registry_config.mirror")), "{err:?}");
    }
}
