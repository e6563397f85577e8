//! ShareImage: make a custom image of an image-owner project usable by a
//! consumer service account, with an IAM binding `roles/compute.imageUser`.
//!
//! The server has already checked the operator's allow-list. First a
//! visibility check with the consumer's credentials (images.get): a public or
//! already shared image needs nothing, and no owner credentials. Otherwise the
//! owner's credentials read the image's IAM policy and write it back with the
//! member added, guarded by the policy's etag so that concurrent shares do not
//! drop each other's bindings (a stale etag is re-read and retried).

use google_cloud_compute_v1::model::{Binding, GlobalSetPolicyRequest, Policy};
use machine_driver_api::{
    CallContext, DriverError, ImageShares, ListImageShares, RevokeImageShare, RevokedImageShare, ShareImage,
    SharedImage,
};

use crate::clients::ClientPool;
use crate::credentials::GcpCredentials;
use crate::errors::{GceFailure, RETRY_SOON};
use crate::naming::{is_gce_name, is_project_id};

/// The role that lets a principal read an image and create disks from it.
pub(crate) const IMAGE_USER_ROLE: &str = "roles/compute.imageUser";

/// How often a setIamPolicy that lost an etag race is retried.
const MAX_POLICY_ATTEMPTS: usize = 5;

/// A global image: `projects/<project>/global/images/<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImageRef {
    /// Owner project.
    pub(crate) project: String,
    /// Image name.
    pub(crate) name: String,
}

impl ImageRef {
    /// Parses `projects/P/global/images/NAME`, also as a full Compute URL.
    /// Both parts go into Compute URL paths: the project must be a project id,
    /// the name a GCE resource name (INVALID_ARGUMENT naming `image` otherwise).
    pub(crate) fn parse(image: &str) -> Result<Self, DriverError> {
        let bad = || {
            DriverError::invalid_argument(
                "image",
                format!("{image:?} is not of the form projects/<project>/global/images/<name>"),
            )
        };
        let path = image.find("projects/").map(|i| &image[i..]).ok_or_else(bad)?;
        let parts: Vec<&str> = path.split('/').collect();
        match parts.as_slice() {
            ["projects", project, "global", "images", name] if is_project_id(project) && is_gce_name(name) => {
                Ok(Self { project: (*project).to_string(), name: (*name).to_string() })
            }
            _ => Err(bad()),
        }
    }

    /// The canonical reference.
    pub(crate) fn path(&self) -> String {
        format!("projects/{}/global/images/{}", self.project, self.name)
    }
}

/// The IAM member of a consumer account: `serviceAccount:<email>` for a bare email.
pub(crate) fn member_of(account: &str) -> String {
    if account.contains(':') { account.to_string() } else { format!("serviceAccount:{account}") }
}

/// Adds `member` to the unconditional `role` binding; false when it was already there.
pub(crate) fn add_member(policy: &mut Policy, role: &str, member: &str) -> bool {
    let existing = policy.bindings.iter_mut().find(|b| b.role.as_deref() == Some(role) && b.condition.is_none());
    match existing {
        Some(b) if b.members.iter().any(|m| m == member) => false,
        Some(b) => {
            b.members.push(member.to_string());
            true
        }
        None => {
            let mut b = Binding::new();
            b.role = Some(role.to_string());
            b.members = vec![member.to_string()];
            policy.bindings.push(b);
            true
        }
    }
}

/// The service account the consumer's credentials act as: the key's email or
/// the impersonated account; a federated workload identity has none, so the
/// request must name the account.
fn consumer_email(consumer: &GcpCredentials) -> Result<String, DriverError> {
    consumer.service_account_email().map(str::to_string).ok_or_else(|| {
        DriverError::invalid_argument(
            "consumer_account",
            "is required when the consumer secret is a workload identity without service account impersonation",
        )
    })
}

/// Runs ShareImage.
pub(crate) async fn share_image(
    pool: &ClientPool,
    ctx: &CallContext,
    req: ShareImage,
) -> Result<SharedImage, DriverError> {
    let image = ImageRef::parse(&req.image)?;
    let consumer = GcpCredentials::from_secret(&req.consumer_secret, "consumerSecret")?;
    let account = match req.consumer_account.clone().filter(|a| !a.trim().is_empty()) {
        Some(a) => a,
        None => consumer_email(&consumer)?,
    };
    let member = member_of(account.trim());
    let done = |granted_now| SharedImage { image_id: image.path(), granted_now, consumer_account: account.clone() };

    let api = pool.api(&consumer, ctx).await?;
    let visible = api
        .call("images.get", || api.clients.images.get().set_project(&image.project).set_image(&image.name).send())
        .await;
    match visible {
        Ok(_) => return Ok(done(false)),
        Err(f) if f.cloud().is_some_and(GceFailure::is_not_found_or_forbidden) => {}
        Err(f) => return Err(f.into_driver_error()),
    }

    let owner = GcpCredentials::from_secret(req.owner_secret_required()?, "ownerSecret")?;
    let api = pool.api(&owner, ctx).await?;
    let granted = change_policy(&api, &image, &member, add_member).await?;
    if granted {
        tracing::info!(image = %image.path(), member = %member, role = IMAGE_USER_ROLE, "image shared");
    }
    Ok(done(granted))
}

/// Runs RevokeImageShare: the owner's credentials take the consumer's member
/// out of the image's `roles/compute.imageUser` binding (etag-guarded, like
/// the grant). The consumer is the request's account or the consumer key's email.
pub(crate) async fn revoke_image_share(
    pool: &ClientPool,
    ctx: &CallContext,
    req: RevokeImageShare,
) -> Result<RevokedImageShare, DriverError> {
    let image = ImageRef::parse(&req.image)?;
    let account = match req.consumer_account.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
        Some(a) => a.to_string(),
        None => consumer_email(&GcpCredentials::from_secret(&req.consumer_secret, "consumerSecret")?)?,
    };
    let owner = GcpCredentials::from_secret(&req.owner_secret, "ownerSecret")?;
    let api = pool.api(&owner, ctx).await?;
    let member = member_of(&account);
    let revoked = change_policy(&api, &image, &member, remove_member).await?;
    if revoked {
        tracing::info!(image = %image.path(), member = %member, role = IMAGE_USER_ROLE, "image share revoked");
    }
    Ok(RevokedImageShare { revoked_now: revoked, consumer_account: account })
}

/// Runs ListImageShares: the members of the image's `roles/compute.imageUser`
/// binding (1 `images.getIamPolicy`), as ShareImage names them (a service
/// account by its email); public when `allUsers` or `allAuthenticatedUsers` is one.
pub(crate) async fn list_image_shares(
    pool: &ClientPool,
    ctx: &CallContext,
    req: ListImageShares,
) -> Result<ImageShares, DriverError> {
    let image = ImageRef::parse(&req.image)?;
    let owner = GcpCredentials::from_secret(&req.owner_secret, "ownerSecret")?;
    let api = pool.api(&owner, ctx).await?;
    let policy = api
        .call("images.getIamPolicy", || {
            api.clients.images.get_iam_policy().set_project(&image.project).set_resource(&image.name).send()
        })
        .await?;
    let members: Vec<&String> = policy
        .bindings
        .iter()
        .filter(|b| b.role.as_deref() == Some(IMAGE_USER_ROLE) && b.condition.is_none())
        .flat_map(|b| b.members.iter())
        .collect();
    let public = members.iter().any(|m| *m == "allUsers" || *m == "allAuthenticatedUsers");
    let consumer_accounts = members
        .into_iter()
        .filter(|m| *m != "allUsers" && *m != "allAuthenticatedUsers")
        .map(|m| m.strip_prefix("serviceAccount:").unwrap_or(m).to_string())
        .collect();
    Ok(ImageShares { consumer_accounts, public })
}

/// Reads the image's IAM policy, applies `edit` (false: nothing to change) and
/// writes it back guarded by its etag; a lost etag race is re-read, at most
/// [`MAX_POLICY_ATTEMPTS`] times. True when the policy was changed.
async fn change_policy(
    api: &crate::clients::Api<'_>,
    image: &ImageRef,
    member: &str,
    edit: fn(&mut Policy, &str, &str) -> bool,
) -> Result<bool, DriverError> {
    for _ in 0..MAX_POLICY_ATTEMPTS {
        let mut policy = api
            .call("images.getIamPolicy", || {
                api.clients.images.get_iam_policy().set_project(&image.project).set_resource(&image.name).send()
            })
            .await?;
        if !edit(&mut policy, IMAGE_USER_ROLE, member) {
            return Ok(false);
        }
        let mut body = GlobalSetPolicyRequest::new();
        body.policy = Some(policy);
        let set = api
            .call("images.setIamPolicy", || {
                api.clients
                    .images
                    .set_iam_policy()
                    .set_project(&image.project)
                    .set_resource(&image.name)
                    .set_body(body.clone())
                    .send()
            })
            .await;
        match set {
            Ok(_) => return Ok(true),
            Err(f) if f.cloud().is_some_and(|c| c.is_etag_conflict()) => {
                tracing::debug!(image = %image.path(), "IAM policy changed concurrently; re-reading");
            }
            Err(f) => return Err(f.into_driver_error()),
        }
    }
    Err(DriverError::unavailable(
        crate::errors::IAM_POLICY_CONFLICT,
        format!("the IAM policy of image {} kept changing concurrently", image.path()),
        RETRY_SOON,
    ))
}

/// Removes `member` from the unconditional `role` binding (dropping a binding
/// left empty); false when it was not there.
pub(crate) fn remove_member(policy: &mut Policy, role: &str, member: &str) -> bool {
    let mut removed = false;
    for b in policy.bindings.iter_mut().filter(|b| b.role.as_deref() == Some(role) && b.condition.is_none()) {
        let before = b.members.len();
        b.members.retain(|m| m != member);
        removed |= b.members.len() != before;
    }
    policy.bindings.retain(|b| !b.members.is_empty());
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references() {
        let want = ImageRef { project: "image-owner".into(), name: "img".into() };
        assert_eq!(ImageRef::parse("projects/image-owner/global/images/img").unwrap(), want);
        assert_eq!(
            ImageRef::parse("https://www.googleapis.com/compute/v1/projects/image-owner/global/images/img").unwrap(),
            want
        );
        for bad in [
            "img",
            "projects/image-owner/global/images/",
            "projects/image-owner/zones/z/disks/d",
            "projects//global/images/x",
            "projects/../global/images/x",
            "projects/image-owner/global/images/..",
            "projects/image-owner/global/images/img?alt=x",
            "projects/image-owner/global/images/%2e%2e",
        ] {
            assert_eq!(ImageRef::parse(bad).unwrap_err().field(), Some("image"), "{bad}");
        }
    }

    #[test]
    fn members_are_added_once() {
        assert_eq!(member_of("a@p.iam.gserviceaccount.com"), "serviceAccount:a@p.iam.gserviceaccount.com");
        assert_eq!(member_of("user:x@y"), "user:x@y");
        let mut p = Policy::new();
        assert!(add_member(&mut p, IMAGE_USER_ROLE, "serviceAccount:a@b"));
        assert!(!add_member(&mut p, IMAGE_USER_ROLE, "serviceAccount:a@b"));
        assert!(add_member(&mut p, IMAGE_USER_ROLE, "serviceAccount:c@d"));
        assert_eq!(p.bindings.len(), 1);
        assert_eq!(p.bindings[0].members, vec!["serviceAccount:a@b", "serviceAccount:c@d"]);
        assert!(remove_member(&mut p, IMAGE_USER_ROLE, "serviceAccount:a@b"));
        assert!(!remove_member(&mut p, IMAGE_USER_ROLE, "serviceAccount:a@b"));
        assert!(remove_member(&mut p, IMAGE_USER_ROLE, "serviceAccount:c@d"));
        assert!(p.bindings.is_empty(), "an emptied binding is dropped");
    }
}
