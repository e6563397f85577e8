//! gzip detection, bounded decompression and deterministic compression.

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use crate::error::BootstrapError;

/// Decompressed user data larger than this is refused (a gzip bomb guard).
const MAX_DECOMPRESSED: u64 = 16 * 1024 * 1024;

/// True when `data` starts with the gzip magic bytes.
pub(crate) fn is_gzip(data: &[u8]) -> bool {
    data.starts_with(&[0x1f, 0x8b])
}

pub(crate) fn decompress(data: &[u8]) -> Result<Vec<u8>, BootstrapError> {
    let mut out = Vec::new();
    GzDecoder::new(data)
        .take(MAX_DECOMPRESSED + 1)
        .read_to_end(&mut out)
        .map_err(|_| BootstrapError::malformed("gzip", "not a valid gzip stream"))?;
    if out.len() as u64 > MAX_DECOMPRESSED {
        return Err(BootstrapError::malformed("gzip", format!("decompresses to more than {MAX_DECOMPRESSED} bytes")));
    }
    Ok(out)
}

/// Compresses with a zero mtime, so equal input gives equal output.
pub(crate) fn compress(data: &[u8]) -> Result<Vec<u8>, BootstrapError> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::best());
    encoder
        .write_all(data)
        .and_then(|()| encoder.finish())
        .map_err(|_| BootstrapError::malformed("gzip", "compression failed"))
}
