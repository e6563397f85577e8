//! Merging rendered files into user data in the format it already has.

mod cloud_config;
mod detect;
pub(crate) mod gzip;
mod ignition;
mod mime;

use crate::error::BootstrapError;
use crate::render::RenderedFile;
use detect::Format;
use mime::{MERGE_TYPE, Part};

/// User data with the files merged in.
pub(crate) struct Merged {
    pub(crate) bytes: Vec<u8>,
    /// Whether the consumer (cloud-init) accepts the result gzip-compressed.
    pub(crate) compressible: bool,
}

/// Merges `files` into uncompressed user data `data`.
pub(crate) fn merge(data: &[u8], files: &[RenderedFile]) -> Result<Merged, BootstrapError> {
    let cloud_init = |bytes| Merged { bytes, compressible: true };
    match detect::detect(data)? {
        Format::Empty => Ok(cloud_init(cloud_config::fresh(files).into_bytes())),
        Format::CloudConfig => match cloud_config::merge(data, files)? {
            Some(bytes) => Ok(cloud_init(bytes)),
            None => Ok(cloud_init(wrap(data, "text/cloud-config", "user-data.cfg", files))),
        },
        Format::Script => Ok(cloud_init(wrap(data, "text/x-shellscript", "user-data.sh", files))),
        Format::Multipart(multipart) => {
            let ours = cloud_config::fresh(files);
            Ok(cloud_init(mime::append_part(data, &multipart, &our_part(&ours))))
        }
        Format::Ignition => Ok(Merged { bytes: ignition::merge(data, files)?, compressible: false }),
    }
}

/// A new multipart message: the original as one part, our cloud-config as
/// another. The original comes first so our part merges into it.
fn wrap(original: &[u8], content_type: &str, filename: &str, files: &[RenderedFile]) -> Vec<u8> {
    let ours = cloud_config::fresh(files);
    let original = Part { content_type, filename, merge_type: None, body: original };
    mime::build(&[original, our_part(&ours)])
}

fn our_part(cloud_config: &str) -> Part<'_> {
    Part {
        content_type: "text/cloud-config",
        filename: "machine-driver-registry.cfg",
        merge_type: Some(MERGE_TYPE),
        body: cloud_config.as_bytes(),
    }
}
