//! Static AWS credentials taken from a request's secret.

use machine_driver_api::{Result, SecretData};
use sha2::{Digest, Sha256};

/// Secret keys holding the access key id (aliases, Go provider names first).
pub const ACCESS_KEY_ID_KEYS: &[&str] = &["providerAccessKeyId", "accessKeyID"];
/// Secret keys holding the secret access key.
pub const SECRET_ACCESS_KEY_KEYS: &[&str] = &["providerSecretAccessKey", "secretAccessKey"];

/// An access key pair. `Debug` never prints the secret.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct StaticKeys {
    pub(crate) access_key_id: String,
    pub(crate) secret_access_key: String,
}

impl std::fmt::Debug for StaticKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticKeys").field("access_key_id", &self.access_key_id).finish_non_exhaustive()
    }
}

impl StaticKeys {
    /// Reads the key pair from `secret` (INVALID_ARGUMENT naming the key when missing).
    pub(crate) fn from_secret(secret: &SecretData) -> Result<Self> {
        Ok(Self {
            access_key_id: secret.require_str(ACCESS_KEY_ID_KEYS)?.to_string(),
            secret_access_key: secret.require_str(SECRET_ACCESS_KEY_KEYS)?.to_string(),
        })
    }

    /// A stable fingerprint of the secret part (cache keys; never the secret itself).
    pub(crate) fn secret_fingerprint(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.secret_access_key.as_bytes());
        hex::encode(h.finalize())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_aliases_and_hides_secret() {
        let s: SecretData =
            [("accessKeyID", "AKID"), ("providerSecretAccessKey", "CANARY-SECRET")].into_iter().collect();
        let k = StaticKeys::from_secret(&s).unwrap();
        assert_eq!(k.access_key_id, "AKID");
        assert_eq!(k.secret_access_key, "CANARY-SECRET");
        assert!(!format!("{k:?}").contains("CANARY"));
        assert!(!k.secret_fingerprint().contains("CANARY"));
        let missing: SecretData = [("accessKeyID", "AKID")].into_iter().collect();
        assert_eq!(StaticKeys::from_secret(&missing).unwrap_err().field(), Some("secret.providerSecretAccessKey"));
    }
}
