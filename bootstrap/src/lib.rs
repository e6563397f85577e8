//! Renders containerd registry-mirror, registry-CA and registry-credential
//! configuration into a new machine's user data, in whatever format that user
//! data already has (`#cloud-config`, `#!` script, MIME multipart,
//! Ignition 3.x, each optionally gzip-compressed).
//!
//! The server calls [`apply`] before a provider's `CreateMachine`; no provider
//! needs to know these formats. See README.md for the rendered file layout.

mod config;
mod error;
mod formats;
mod operator_config;
mod render;
mod validate;

pub use config::{Credentials, Endpoint, RegistryConfig, SizeLimit};
pub use error::BootstrapError;
pub use operator_config::{CredentialsFile, EndpointFile, RegistryConfigFile, ValueSource};

use formats::gzip;

/// Returns `user_data` with the files for `config` merged in.
///
/// With nothing configured the user data is returned unchanged, byte for
/// byte. gzip-compressed user data is decompressed, merged and compressed
/// again. When the result exceeds `limit` and the format allows it
/// (everything but Ignition), it is gzip-compressed; if it is still too
/// large, [`BootstrapError::TooLarge`] carries both sizes.
pub fn apply(user_data: &[u8], config: &RegistryConfig, limit: SizeLimit) -> Result<Vec<u8>, BootstrapError> {
    if config.is_empty() {
        return Ok(user_data.to_vec());
    }
    let valid = validate::validate(config)?;
    let files = render::render_files(&valid)?;

    if gzip::is_gzip(user_data) {
        let inner = gzip::decompress(user_data)?;
        if gzip::is_gzip(&inner) {
            return Err(BootstrapError::unsupported("gzip-compressed twice"));
        }
        let merged = gzip::compress(&formats::merge(&inner, &files)?.bytes)?;
        return within_limit(merged, limit, "gzip-compressed");
    }

    let merged = formats::merge(user_data, &files)?;
    if merged.bytes.len() <= limit.0 {
        return Ok(merged.bytes);
    }
    if !merged.compressible {
        return Err(BootstrapError::TooLarge {
            size: merged.bytes.len(),
            limit: limit.0,
            detail: "uncompressed; Ignition user data is not compressed",
        });
    }
    within_limit(gzip::compress(&merged.bytes)?, limit, "after gzip compression")
}

fn within_limit(bytes: Vec<u8>, limit: SizeLimit, detail: &'static str) -> Result<Vec<u8>, BootstrapError> {
    if bytes.len() <= limit.0 {
        Ok(bytes)
    } else {
        Err(BootstrapError::TooLarge { size: bytes.len(), limit: limit.0, detail })
    }
}
