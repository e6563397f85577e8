//! The operator-wide default registry configuration file (YAML or JSON),
//! where CA certificates and passwords are given inline or as file paths.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::config::{Credentials, Endpoint, RegistryConfig};
use crate::error::BootstrapError;

/// The file form of [`RegistryConfig`]; see README.md for an example.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RegistryConfigFile {
    /// The one global mirror.
    #[serde(default)]
    pub mirror: Option<EndpointFile>,
    /// Private registries.
    #[serde(default)]
    pub registries: Vec<EndpointFile>,
}

/// The file form of [`Endpoint`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EndpointFile {
    /// `http://` or `https://` URL.
    pub url: String,
    /// PEM CA certificate(s).
    #[serde(default)]
    pub ca: Option<ValueSource>,
    /// Pull credentials.
    #[serde(default)]
    pub credentials: Option<CredentialsFile>,
}

/// The file form of [`Credentials`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CredentialsFile {
    /// User name, inline.
    pub username: String,
    /// Password or token, inline or from a file (one trailing line break is dropped).
    pub password: ValueSource,
}

/// A value given inline or read from a file (`{file: PATH}` or
/// `{inline: VALUE}`); `Debug` never prints it.
#[derive(Deserialize)]
#[serde(try_from = "ValueSourceRepr")]
pub enum ValueSource {
    /// Path of a file holding the value; relative paths are relative to the config file.
    File(PathBuf),
    /// The value itself.
    Inline(String),
}

/// The YAML shape of [`ValueSource`]: a mapping with exactly one key.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ValueSourceRepr {
    file: Option<PathBuf>,
    inline: Option<String>,
}

impl TryFrom<ValueSourceRepr> for ValueSource {
    type Error = &'static str;

    fn try_from(r: ValueSourceRepr) -> Result<Self, Self::Error> {
        match (r.file, r.inline) {
            (Some(file), None) => Ok(Self::File(file)),
            (None, Some(inline)) => Ok(Self::Inline(inline)),
            _ => Err("exactly one of `file` and `inline` must be given"),
        }
    }
}

impl fmt::Debug for ValueSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(p) => f.debug_tuple("File").field(p).finish(),
            Self::Inline(_) => f.write_str("Inline(<redacted>)"),
        }
    }
}

impl RegistryConfigFile {
    /// Reads `path` and resolves every referenced file (relative to `path`'s directory).
    pub fn load(path: &Path) -> Result<RegistryConfig, BootstrapError> {
        let bytes = std::fs::read(path).map_err(|e| config_file_error(path, format!("cannot read: {}", e.kind())))?;
        let file = Self::parse(&bytes).map_err(|reason| config_file_error(path, reason))?;
        file.resolve(path.parent().unwrap_or(Path::new(".")))
    }

    /// Parses YAML or JSON. The error names the field path and position, never a value.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let de = serde_norway::Deserializer::from_slice(bytes);
        serde_path_to_error::deserialize(de).map_err(|e| {
            // Only these messages are kept: they quote field names, never values.
            let inner = e.inner().to_string();
            let what = ["missing field", "unknown field", "exactly one of"]
                .iter()
                .find_map(|p| inner.find(p))
                .map(|i| inner[i..].split(" at line ").next().unwrap_or_default().to_owned())
                .unwrap_or_else(|| "invalid value".to_owned());
            match e.inner().location() {
                Some(l) => format!("{what} at `{}` (line {}, column {})", e.path(), l.line(), l.column()),
                None => format!("{what} at `{}`", e.path()),
            }
        })
    }

    /// Reads the referenced files and builds the [`RegistryConfig`].
    pub fn resolve(&self, base_dir: &Path) -> Result<RegistryConfig, BootstrapError> {
        Ok(RegistryConfig {
            mirror: self.mirror.as_ref().map(|m| m.resolve(base_dir)).transpose()?,
            registries: self.registries.iter().map(|r| r.resolve(base_dir)).collect::<Result<_, _>>()?,
        })
    }
}

impl EndpointFile {
    fn resolve(&self, base_dir: &Path) -> Result<Endpoint, BootstrapError> {
        Ok(Endpoint {
            url: self.url.clone(),
            ca_pem: self.ca.as_ref().map(|ca| ca.read(base_dir)).transpose()?,
            credentials: self
                .credentials
                .as_ref()
                .map(|c| -> Result<Credentials, BootstrapError> {
                    let password = c.password.read(base_dir)?;
                    let password = String::from_utf8(strip_line_break(password))
                        .map_err(|_| BootstrapError::field("credentials.password", "is not UTF-8"))?;
                    Ok(Credentials { username: c.username.clone(), password })
                })
                .transpose()?,
        })
    }
}

impl ValueSource {
    fn read(&self, base_dir: &Path) -> Result<Vec<u8>, BootstrapError> {
        match self {
            Self::Inline(v) => Ok(v.clone().into_bytes()),
            Self::File(p) => {
                let path = base_dir.join(p);
                std::fs::read(&path).map_err(|e| config_file_error(&path, format!("cannot read: {}", e.kind())))
            }
        }
    }
}

fn strip_line_break(mut v: Vec<u8>) -> Vec<u8> {
    if v.ends_with(b"\n") {
        v.pop();
        if v.ends_with(b"\r") {
            v.pop();
        }
    }
    v
}

fn config_file_error(path: &Path, reason: String) -> BootstrapError {
    BootstrapError::ConfigFile { path: path.display().to_string(), reason }
}
