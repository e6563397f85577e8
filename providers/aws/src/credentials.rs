//! AWS credentials taken from a request's secret: static keys, or workload
//! identity (a projected service account token exchanged for a role's
//! temporary keys, as Gardener provides them).

use std::path::PathBuf;

use machine_driver_api::{DriverError, Result, SecretData};
use sha2::{Digest, Sha256};

/// Secret keys holding the access key id (aliases, Go provider names first).
pub const ACCESS_KEY_ID_KEYS: &[&str] = &["providerAccessKeyId", "accessKeyID"];
/// Secret keys holding the secret access key.
pub const SECRET_ACCESS_KEY_KEYS: &[&str] = &["providerSecretAccessKey", "secretAccessKey"];
/// Secret key holding the path of the workload identity token file (read at
/// every exchange: the kubelet rotates the projected token).
pub const TOKEN_FILE_KEYS: &[&str] = &["workloadIdentityTokenFile"];
/// Secret key holding the ARN of the role the token is exchanged for.
pub const ROLE_ARN_KEYS: &[&str] = &["roleARN"];

/// The credentials a secret holds. Static keys win when both forms are present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AwsCredentials {
    /// An access key pair.
    Keys(StaticKeys),
    /// A token file and the role it is exchanged for (STS AssumeRoleWithWebIdentity).
    WebIdentity(WebIdentity),
}

/// Workload identity: where the token is and which role it assumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WebIdentity {
    /// `arn:aws:iam::<account>:role/<name>`.
    pub(crate) role_arn: String,
    /// Absolute path of the projected token.
    pub(crate) token_file: PathBuf,
}

impl AwsCredentials {
    /// Reads the credentials from `secret` (INVALID_ARGUMENT naming the key):
    /// static keys when both are there, else workload identity when its token
    /// file is named, else the static keys' missing key is named (the form the
    /// server's check, `SecretKeys`, accepts is the one used).
    pub(crate) fn from_secret(secret: &SecretData) -> Result<Self> {
        let has = |keys: &[&str]| keys.iter().any(|k| secret.has(k));
        let both_keys = has(ACCESS_KEY_ID_KEYS) && has(SECRET_ACCESS_KEY_KEYS);
        if both_keys || !has(TOKEN_FILE_KEYS) {
            return StaticKeys::from_secret(secret).map(Self::Keys);
        }
        WebIdentity::from_secret(secret).map(Self::WebIdentity)
    }
}

impl WebIdentity {
    fn from_secret(secret: &SecretData) -> Result<Self> {
        let token_file = PathBuf::from(secret.require_str(TOKEN_FILE_KEYS)?);
        if !token_file.is_absolute() {
            return Err(DriverError::invalid_argument(
                "secret.workloadIdentityTokenFile",
                "must be an absolute path (the token projected into the sidecar's container)",
            ));
        }
        let role_arn = secret.require_str(ROLE_ARN_KEYS)?.to_string();
        let is_role =
            role_arn.starts_with("arn:") && role_arn.split(':').nth(5).is_some_and(|r| r.starts_with("role/"));
        if !is_role {
            return Err(DriverError::invalid_argument(
                "secret.roleARN",
                format!("{role_arn:?} is not a role ARN (arn:aws:iam::<account>:role/<name>)"),
            ));
        }
        Ok(Self { role_arn, token_file })
    }

    /// The token, read now (the file is rotated by the kubelet). UNAUTHENTICATED
    /// naming the path when it cannot be read; never the content.
    pub(crate) fn read_token(&self) -> Result<String> {
        let unusable = |why: String| {
            DriverError::new(
                machine_driver_api::ErrorKind::Unauthenticated,
                machine_driver_api::reasons::WORKLOAD_IDENTITY_TOKEN_UNREADABLE,
                format!("workload identity token file {}: {why}", self.token_file.display()),
            )
        };
        let raw = std::fs::read(&self.token_file).map_err(|e| unusable(e.kind().to_string()))?;
        let token = String::from_utf8(raw).map_err(|_| unusable("is not UTF-8".into()))?;
        let token = token.trim();
        if token.is_empty() {
            return Err(unusable("is empty".into()));
        }
        Ok(token.to_string())
    }
}

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
    fn workload_identity_needs_an_absolute_path_and_a_role() {
        let wi = |file: &str, role: &str| -> SecretData {
            [("workloadIdentityTokenFile", file), ("roleARN", role)].into_iter().collect()
        };
        let AwsCredentials::WebIdentity(w) =
            AwsCredentials::from_secret(&wi("/var/run/token", "arn:aws:iam::123456789012:role/mcm")).unwrap()
        else {
            panic!("expected workload identity");
        };
        assert_eq!(w.role_arn, "arn:aws:iam::123456789012:role/mcm");
        let err = AwsCredentials::from_secret(&wi("token", "arn:aws:iam::1:role/r")).unwrap_err();
        assert_eq!(err.field(), Some("secret.workloadIdentityTokenFile"));
        let err = AwsCredentials::from_secret(&wi("/t", "arn:aws:iam::1:user/u")).unwrap_err();
        assert_eq!(err.field(), Some("secret.roleARN"));
        let no_role: SecretData = [("workloadIdentityTokenFile", "/t")].into_iter().collect();
        assert_eq!(AwsCredentials::from_secret(&no_role).unwrap_err().field(), Some("secret.roleARN"));
        let both: SecretData = [("accessKeyID", "AK"), ("secretAccessKey", "S"), ("workloadIdentityTokenFile", "/t")]
            .into_iter()
            .collect();
        assert!(matches!(AwsCredentials::from_secret(&both).unwrap(), AwsCredentials::Keys(_)));
        // A stray key id beside a complete workload identity: the server accepts
        // the workload identity form, and so does the provider.
        let stray: SecretData =
            [("accessKeyID", "AK"), ("workloadIdentityTokenFile", "/t"), ("roleARN", "arn:aws:iam::1:role/r")]
                .into_iter()
                .collect();
        assert!(matches!(AwsCredentials::from_secret(&stray).unwrap(), AwsCredentials::WebIdentity(_)));
    }

    #[test]
    fn an_unreadable_token_names_the_file_and_not_the_token() {
        let dir = std::env::temp_dir().join(format!("wi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        let w = WebIdentity { role_arn: "arn:aws:iam::1:role/r".into(), token_file: file.clone() };
        let err = w.read_token().unwrap_err();
        assert_eq!(err.kind(), machine_driver_api::ErrorKind::Unauthenticated);
        assert!(err.message().contains(&file.display().to_string()), "{}", err.message());
        std::fs::write(&file, "  CANARY.jwt.token\n").unwrap();
        assert_eq!(w.read_token().unwrap(), "CANARY.jwt.token");
        std::fs::write(&file, "").unwrap();
        assert!(!w.read_token().unwrap_err().message().contains("CANARY"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
