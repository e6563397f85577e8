//! The registry configuration a caller passes to [`crate::apply`], with every
//! secret already resolved to its content.

use std::fmt;

/// Registry configuration to render into a machine's user data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegistryConfig {
    /// The one global pull-through mirror for every registry; upstream stays the fallback.
    pub mirror: Option<Endpoint>,
    /// Private registries that need a CA certificate and/or credentials.
    pub registries: Vec<Endpoint>,
}

impl RegistryConfig {
    /// True when there is nothing to render, so user data passes through unchanged.
    pub fn is_empty(&self) -> bool {
        self.mirror.is_none() && self.registries.is_empty()
    }
}

/// One registry (or the mirror): its URL and optional CA and credentials.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// `http://` or `https://` URL; a path is allowed only for the mirror.
    pub url: String,
    /// PEM file content holding one or more `CERTIFICATE` blocks.
    pub ca_pem: Option<Vec<u8>>,
    /// Pull credentials, handed to kubelet's credential provider.
    pub credentials: Option<Credentials>,
}

/// A registry user name and password. `Debug` never prints the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Non-empty, without `:`.
    pub username: String,
    /// The password or token.
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials").field("username", &self.username).field("password", &"<redacted>").finish()
    }
}

/// The provider's user-data size limit in bytes (raw, before any base64 of the API).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeLimit(pub usize);

impl SizeLimit {
    /// EC2 `UserData`: 16 KiB.
    pub const EC2: Self = Self(16_384);
    /// GCE metadata value `user-data`: 256 KiB.
    pub const GCE: Self = Self(262_144);
    /// Azure `customData`: 64 KiB.
    pub const AZURE: Self = Self(65_536);
}
