//! Recognises the user-data formats cloud-init and Ignition accept.

use crate::error::BootstrapError;
use crate::formats::mime::{self, Multipart};

/// The format of (uncompressed) user data.
#[derive(Debug)]
pub(crate) enum Format {
    /// Empty or whitespace only.
    Empty,
    /// `#cloud-config` YAML.
    CloudConfig,
    /// A `#!` script.
    Script,
    /// A MIME multipart message.
    Multipart(Multipart),
    /// An Ignition 3.x JSON config.
    Ignition,
}

pub(crate) fn detect(data: &[u8]) -> Result<Format, BootstrapError> {
    if data.iter().all(u8::is_ascii_whitespace) {
        return Ok(Format::Empty);
    }
    let first_line = data.split(|b| *b == b'\n').next().unwrap_or_default();
    let first_line = first_line.trim_ascii_end();
    if first_line == b"#cloud-config" {
        return Ok(Format::CloudConfig);
    }
    if data.starts_with(b"#!") {
        return Ok(Format::Script);
    }
    if data.starts_with(b"#") {
        return Err(BootstrapError::unsupported(
            "a cloud-init format other than #cloud-config, #! scripts and MIME multipart",
        ));
    }
    if let Some(multipart) = mime::parse_top_level(data)? {
        return Ok(Format::Multipart(multipart));
    }
    if data.trim_ascii_start().starts_with(b"{") {
        return detect_json(data);
    }
    Err(BootstrapError::unsupported("not #cloud-config, a #! script, MIME multipart, Ignition 3.x JSON or gzip"))
}

fn detect_json(data: &[u8]) -> Result<Format, BootstrapError> {
    let value: serde_json::Value = serde_json::from_slice(data)
        .map_err(|e| BootstrapError::malformed("JSON", format!("line {} column {}", e.line(), e.column())))?;
    match value.pointer("/ignition/version").and_then(|v| v.as_str()) {
        Some(v) if v.starts_with("3.") => Ok(Format::Ignition),
        Some(_) => Err(BootstrapError::unsupported("Ignition spec version other than 3.x")),
        None => Err(BootstrapError::unsupported("JSON that is not an Ignition config")),
    }
}
