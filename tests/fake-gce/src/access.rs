//! Image IAM: which roles grant which image permission to a caller.

use crate::caller::Caller;
use crate::error::GceError;
use crate::state::ImageRecord;

/// Roles that include `compute.images.get`.
const READ_ROLES: &[&str] = &[
    "roles/compute.imageUser",
    "roles/owner",
    "roles/editor",
    "roles/viewer",
    "roles/compute.viewer",
    "roles/compute.admin",
    "roles/compute.storageAdmin",
];

/// Roles that include `compute.images.useReadOnly` (creating disks from the image).
const USE_ROLES: &[&str] =
    &["roles/compute.imageUser", "roles/owner", "roles/editor", "roles/compute.admin", "roles/compute.storageAdmin"];

/// Roles that include `compute.images.getIamPolicy` and `setIamPolicy`.
const ADMIN_ROLES: &[&str] = &["roles/owner", "roles/compute.admin", "roles/compute.storageAdmin"];

/// An image permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImagePermission {
    /// `compute.images.get`.
    Get,
    /// `compute.images.useReadOnly`.
    Use,
    /// `compute.images.getIamPolicy`.
    GetIamPolicy,
    /// `compute.images.setIamPolicy`.
    SetIamPolicy,
}

impl ImagePermission {
    fn name(self) -> &'static str {
        match self {
            Self::Get => "compute.images.get",
            Self::Use => "compute.images.useReadOnly",
            Self::GetIamPolicy => "compute.images.getIamPolicy",
            Self::SetIamPolicy => "compute.images.setIamPolicy",
        }
    }

    fn roles(self) -> &'static [&'static str] {
        match self {
            Self::Get => READ_ROLES,
            Self::Use => USE_ROLES,
            Self::GetIamPolicy | Self::SetIamPolicy => ADMIN_ROLES,
        }
    }
}

/// Fails with GCE's 403 `Required '<permission>' permission for '<image>'` unless granted.
pub(crate) fn check(
    image: &ImageRecord,
    project: &str,
    caller: &Caller,
    permission: ImagePermission,
) -> Result<(), GceError> {
    if image.policy.grants(caller.principal.as_deref(), permission.roles()) {
        Ok(())
    } else {
        Err(GceError::permission_denied(
            permission.name(),
            &format!("projects/{project}/global/images/{}", image.image.name),
        ))
    }
}
