//! Cinder's volumes.

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime};

/// Where a volume is in its life.
#[derive(Debug, Clone, Copy)]
pub(crate) enum VolumePhase {
    /// `creating` until the instant.
    Creating(Instant),
    /// `available` or `in-use` (when attached).
    Ready,
    /// `deleting` until the instant, then gone.
    Deleting(Instant),
}

/// A volume attachment.
#[derive(Debug, Clone)]
pub(crate) struct Attachment {
    /// The server.
    pub(crate) server_id: String,
    /// The attachment id.
    pub(crate) attachment_id: String,
    /// Device path.
    pub(crate) device: String,
}

/// One Cinder volume.
#[derive(Debug, Clone)]
pub(crate) struct Volume {
    /// Creation order.
    pub(crate) seq: u64,
    /// UUID.
    pub(crate) id: String,
    /// Owning project.
    pub(crate) project_id: String,
    /// Name ("" for Nova-made volumes).
    pub(crate) name: String,
    /// Description.
    pub(crate) description: Option<String>,
    /// Size in GiB.
    pub(crate) size: u64,
    /// Volume type.
    pub(crate) volume_type: String,
    /// Availability zone.
    pub(crate) availability_zone: String,
    /// Made from an image.
    pub(crate) image_id: Option<String>,
    /// Metadata.
    pub(crate) metadata: BTreeMap<String, String>,
    /// Lifecycle.
    pub(crate) phase: VolumePhase,
    /// The attachment, if any.
    pub(crate) attachment: Option<Attachment>,
    /// Deleted with its server (block device mapping).
    pub(crate) delete_on_termination: bool,
    /// Created.
    pub(crate) created: SystemTime,
    /// Updated.
    pub(crate) updated: SystemTime,
}

impl Volume {
    /// Cinder's `status`.
    pub(crate) fn status(&self) -> &'static str {
        match self.phase {
            VolumePhase::Creating(_) => "creating",
            VolumePhase::Deleting(_) => "deleting",
            VolumePhase::Ready if self.attachment.is_some() => "in-use",
            VolumePhase::Ready => "available",
        }
    }

    /// `bootable` as Cinder spells it.
    pub(crate) fn bootable(&self) -> &'static str {
        if self.image_id.is_some() { "true" } else { "false" }
    }
}
