//! The error type of this crate.
//!
//! Messages name the offending field or the user-data format, never a
//! credential, certificate or user-data content.

/// Why user data could not be bootstrapped with the registry configuration.
///
/// Every variant except [`BootstrapError::ConfigFile`] is the caller's fault for
/// a `CreateMachine` request (an `INVALID_ARGUMENT`-class error);
/// `ConfigFile` is raised when the operator-wide default is loaded at startup.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// A registry configuration field is invalid; `field` is e.g. `registries[1].url`.
    #[error("invalid registry configuration field `{field}`: {reason}")]
    InvalidField {
        /// Path of the field, e.g. `mirror.credentials.username`.
        field: String,
        /// What is wrong with it (never the value itself).
        reason: String,
    },
    /// Two entries for the same registry host carry different CA certificates.
    #[error("`{first}` and `{second}` name the same registry host `{host}` with different CA certificates")]
    ConflictingCa {
        /// The host (with port, if any) both entries point to.
        host: String,
        /// Field path of the first entry.
        first: String,
        /// Field path of the second entry.
        second: String,
    },
    /// The user data is in a format this crate cannot merge into.
    #[error("user data: unsupported format ({reason}); registry configuration cannot be added")]
    UnsupportedUserData {
        /// Which format was detected or why none was.
        reason: String,
    },
    /// The user data claims a known format but is malformed.
    #[error("user data: malformed {format}: {reason}")]
    MalformedUserData {
        /// The format the user data claims to be (`cloud-config`, `MIME multipart`, ...).
        format: &'static str,
        /// What is wrong (position and parser description only, never content).
        reason: String,
    },
    /// The merged user data exceeds the provider's limit even after compression.
    #[error("user data with registry configuration is {size} bytes ({detail}); the limit is {limit} bytes")]
    TooLarge {
        /// Size in bytes of the smallest form that was produced.
        size: usize,
        /// The provider's limit in bytes.
        limit: usize,
        /// Whether `size` is after gzip compression, or why compression was not possible.
        detail: &'static str,
    },
    /// The operator configuration file could not be read or parsed.
    #[error("registry configuration file {path}: {reason}")]
    ConfigFile {
        /// Path of the file that failed (the config file or a file it references).
        path: String,
        /// What went wrong (location and field path only, never content).
        reason: String,
    },
}

impl BootstrapError {
    pub(crate) fn field(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidField { field: field.into(), reason: reason.into() }
    }

    pub(crate) fn malformed(format: &'static str, reason: impl Into<String>) -> Self {
        Self::MalformedUserData { format, reason: reason.into() }
    }

    pub(crate) fn unsupported(reason: impl Into<String>) -> Self {
        Self::UnsupportedUserData { reason: reason.into() }
    }
}
