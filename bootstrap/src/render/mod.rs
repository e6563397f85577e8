//! The files a machine needs for the registry configuration, independent of
//! the user-data format they are delivered in.

mod containerd;
mod credentials;

use crate::error::BootstrapError;
use crate::validate::ValidConfig;

/// One file to create on the machine, owned by root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RenderedFile {
    /// Absolute path.
    pub(crate) path: String,
    /// Permission bits, e.g. `0o644`.
    pub(crate) mode: u32,
    pub(crate) content: Vec<u8>,
}

impl RenderedFile {
    /// The mode as cloud-init writes it: four octal digits, e.g. `0644`.
    pub(crate) fn octal_mode(&self) -> String {
        format!("{:04o}", self.mode)
    }
}

/// Renders every file for `config`, in a stable order.
pub(crate) fn render_files(config: &ValidConfig) -> Result<Vec<RenderedFile>, BootstrapError> {
    let mut files = containerd::render(config)?;
    files.extend(credentials::render(config)?);
    Ok(files)
}
