//! The secret's access key pair: `alicloudAccessKeyID`|`accessKeyID` and
//! `alicloudAccessKeySecret`|`accessKeySecret` (first alias present wins,
//! values trimmed), as the Go provider reads them.

use machine_driver_api::{DriverError, SecretData};
use sha2::{Digest, Sha256};

/// Access key id aliases.
pub(crate) const ACCESS_KEY_ID_KEYS: &[&str] = &["alicloudAccessKeyID", "accessKeyID"];
/// Access key secret aliases.
pub(crate) const ACCESS_KEY_SECRET_KEYS: &[&str] = &["alicloudAccessKeySecret", "accessKeySecret"];

/// One access key pair.
#[derive(Clone)]
pub(crate) struct AccessKey {
    /// The key id (not secret; it names the key in logs).
    pub(crate) id: String,
    /// The secret.
    pub(crate) secret: String,
    /// SHA-256 of both: the client cache key.
    pub(crate) fingerprint: [u8; 32],
}

impl std::fmt::Debug for AccessKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessKey").field("id", &self.id).field("secret", &"***").finish()
    }
}

impl AccessKey {
    /// Reads the key pair; `field` names the secret in errors (`secret`, `ownerSecret`).
    pub(crate) fn from_secret(secret: &SecretData, field: &str) -> Result<Self, DriverError> {
        let read = |keys: &[&str]| -> Result<String, DriverError> {
            secret
                .first_str(keys)
                .map_err(|_| DriverError::invalid_argument(format!("{field}.{}", keys[0]), "is not UTF-8"))?
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .ok_or_else(|| DriverError::invalid_argument(format!("{field}.{}", keys[0]), "is required"))
        };
        let id = read(ACCESS_KEY_ID_KEYS)?;
        let secret = read(ACCESS_KEY_SECRET_KEYS)?;
        let mut hash = Sha256::new();
        hash.update(id.as_bytes());
        hash.update([0]);
        hash.update(secret.as_bytes());
        Ok(Self { id, secret, fingerprint: hash.finalize().into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_and_missing_keys() {
        let secret = SecretData::new(
            [("accessKeyID", " AK "), ("alicloudAccessKeySecret", "SK")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                .collect(),
        );
        let key = AccessKey::from_secret(&secret, "secret").unwrap();
        assert_eq!(key.id, "AK");
        assert!(!format!("{key:?}").contains("SK"));
        let empty = SecretData::new(Default::default());
        assert_eq!(AccessKey::from_secret(&empty, "secret").unwrap_err().field(), Some("secret.alicloudAccessKeyID"));
    }
}
