//! Glance's images with their members and visibility rules.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::Value;

/// One image member.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    /// The member project.
    pub(crate) project_id: String,
    /// `pending`, `accepted` or `rejected`.
    pub(crate) status: String,
    /// Created.
    pub(crate) created: SystemTime,
    /// Updated.
    pub(crate) updated: SystemTime,
}

/// One Glance image.
#[derive(Debug, Clone)]
pub(crate) struct Image {
    /// UUID.
    pub(crate) id: String,
    /// Name.
    pub(crate) name: String,
    /// Owner project.
    pub(crate) owner: String,
    /// `public`, `community`, `shared` or `private`.
    pub(crate) visibility: String,
    /// Members.
    pub(crate) members: Vec<Member>,
    /// Size in bytes.
    pub(crate) size: u64,
    /// MD5 checksum (hex).
    pub(crate) checksum: String,
    /// Tags.
    pub(crate) tags: Vec<String>,
    /// `min_disk`.
    pub(crate) min_disk: u64,
    /// `min_ram`.
    pub(crate) min_ram: u64,
    /// `protected`.
    pub(crate) protected: bool,
    /// `os_hidden`.
    pub(crate) os_hidden: bool,
    /// Additional properties.
    pub(crate) properties: BTreeMap<String, Value>,
    /// Created.
    pub(crate) created: SystemTime,
    /// Updated.
    pub(crate) updated: SystemTime,
}

impl Image {
    /// The membership of `project`, if any.
    pub(crate) fn member(&self, project: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.project_id == project)
    }

    /// Whether `project` may see the image: owner, public/community, or a member (any status) of a shared image.
    pub(crate) fn visible_to(&self, project: &str) -> bool {
        self.owner == project
            || matches!(self.visibility.as_str(), "public" | "community")
            || (self.visibility == "shared" && self.member(project).is_some())
    }

    /// Whether the default image list of `project` shows it (accepted memberships only).
    pub(crate) fn listed_by_default(&self, project: &str) -> bool {
        self.owner == project
            || self.visibility == "public"
            || (self.visibility == "shared" && self.member(project).is_some_and(|m| m.status == "accepted"))
    }
}
