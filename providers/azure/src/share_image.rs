//! ShareImage: make a gallery image version of an image-owner subscription
//! usable by the cluster's subscription, with Compute Gallery direct sharing.
//!
//! The server has already checked the operator's allow-list. The input is the
//! owner-side ARM id of a gallery image version
//! (`/subscriptions/<owner>/resourceGroups/<rg>/providers/Microsoft.Compute/galleries/<g>/images/<def>/versions/<ver>`);
//! the answer is the id the consumer's classes use as `sharedGalleryImageID`
//! (`/SharedGalleries/<owner>-<G>/Images/<def>/Versions/<ver>`, the gallery's
//! unique name being the owner subscription and the upper-cased gallery name).
//!
//! First a visibility check with the consumer's credentials (the shared image
//! version as the consumer sees it, `sharedGalleryImageVersions.get`): an image
//! already shared needs nothing and no owner credentials. Otherwise the
//! owner's credentials add the consumer subscription to the gallery's sharing
//! groups (`gallerySharingProfile.update`, operation `Add`, idempotent on
//! ARM's side), and the operation is polled within the deadline.

use std::time::Duration;

use machine_driver_api::{
    CallContext, CallFailure, DriverError, ImageShares, ListImageShares, RevokeImageShare, RevokedImageShare,
    ShareImage, SharedImage,
};

use crate::clients::ClientPool;
use crate::credentials::AzureCredentials;
use crate::lro::{self, Outcome, Tracker};
use crate::naming::{check_arm_name, check_location, check_resource_group, check_subscription};

/// Time kept back from the deadline for answering after the last poll.
const ANSWER_MARGIN: Duration = Duration::from_secs(1);

/// A gallery image version in the owner's subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GalleryImageVersion {
    /// Owner subscription.
    pub(crate) subscription: String,
    /// Resource group of the gallery.
    pub(crate) resource_group: String,
    /// Gallery name.
    pub(crate) gallery: String,
    /// Image definition.
    pub(crate) image: String,
    /// Version.
    pub(crate) version: String,
}

impl GalleryImageVersion {
    /// Parses the owner-side ARM id (segment names matched case-insensitively, as ARM does).
    pub(crate) fn parse(id: &str) -> Result<Self, DriverError> {
        let bad = || {
            DriverError::invalid_argument(
                "image",
                format!(
                    "{id:?} is not of the form /subscriptions/<s>/resourceGroups/<rg>/providers/Microsoft.Compute/galleries/<g>/images/<def>/versions/<ver>"
                ),
            )
        };
        let parts: Vec<&str> = id.trim().trim_start_matches('/').split('/').collect();
        let [s, sub, r, rg, p, ns, g, gallery, i, image, v, version] = parts.as_slice() else { return Err(bad()) };
        let is = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
        let ok = is(s, "subscriptions")
            && is(r, "resourceGroups")
            && is(p, "providers")
            && is(ns, "Microsoft.Compute")
            && is(g, "galleries")
            && is(i, "images")
            && is(v, "versions")
            && [sub, rg, gallery, image, version].iter().all(|x| !x.is_empty());
        if !ok {
            return Err(bad());
        }
        // Each part goes into the owner's request paths: Azure's syntax, or refused.
        check_subscription("image", sub)?;
        check_resource_group("image", rg)?;
        check_arm_name("image", gallery, 80)?;
        check_arm_name("image", image, 80)?;
        check_arm_name("image", version, 64)?;
        Ok(Self {
            subscription: (*sub).to_string(),
            resource_group: (*rg).to_string(),
            gallery: (*gallery).to_string(),
            image: (*image).to_string(),
            version: (*version).to_string(),
        })
    }

    /// The gallery's unique name for direct sharing: `<subscription>-<GALLERY>`.
    pub(crate) fn unique_name(&self) -> String {
        format!("{}-{}", self.subscription, self.gallery.to_ascii_uppercase())
    }

    /// The id consumers boot from (`sharedGalleryImageID`).
    pub(crate) fn shared_id(&self) -> String {
        format!("/SharedGalleries/{}/Images/{}/Versions/{}", self.unique_name(), self.image, self.version)
    }
}

/// The request's consumer account (a subscription id: it goes into the
/// consumer's request path), `None` when not given.
fn consumer_account(given: Option<&str>) -> Result<Option<String>, DriverError> {
    let Some(account) = given.map(str::trim).filter(|a| !a.is_empty()) else {
        return Ok(None);
    };
    check_subscription("consumerAccount", account)?;
    Ok(Some(account.to_string()))
}

/// ShareImage (see the module docs).
pub(crate) async fn share_image(
    pool: &ClientPool,
    ctx: &CallContext,
    req: ShareImage,
) -> Result<SharedImage, DriverError> {
    let image = GalleryImageVersion::parse(&req.image)?;
    let location = req.region.as_deref().map(str::trim).filter(|r| !r.is_empty()).ok_or_else(|| {
        DriverError::invalid_argument("region", "is required: the location the consumer boots the image in")
    })?;
    check_location("region", location)?;
    let consumer = AzureCredentials::from_secret(&req.consumer_secret, "consumerSecret")?;
    let consumer_sub = match consumer_account(req.consumer_account.as_deref())? {
        Some(account) => account,
        None => consumer.subscription_id.clone(),
    };
    let answer =
        |granted_now| SharedImage { image_id: image.shared_id(), granted_now, consumer_account: consumer_sub.clone() };

    let consumer_api = pool.api(&consumer, None, ctx)?;
    let visible = consumer_api
        .call("compute", "sharedGalleryImageVersions.get", || {
            consumer_api
                .compute()
                .shared_gallery_image_versions_client()
                .get(&consumer_sub, location, image.unique_name(), &image.image, &image.version)
                .send()
        })
        .await;
    match visible {
        Ok(_) => return Ok(answer(false)),
        Err(CallFailure::Cloud(_, f)) if f.is_not_found() => {}
        Err(e) => return Err(e.into()),
    }

    let owner = AzureCredentials::from_secret(req.owner_secret_required()?, "ownerSecret")?;
    let owner_api = pool.api(&owner, None, ctx)?;
    update_sharing(&owner_api, &image, "Add", &consumer_sub).await?;
    Ok(answer(true))
}

/// RevokeImageShare: the owner's credentials read the gallery's sharing
/// groups (`galleries.get`) and, when the consumer subscription is among them,
/// remove it (`gallerySharingProfile.update` `Remove`), polled until done. The
/// consumer is the request's account or the consumer secret's subscription.
pub(crate) async fn revoke_image_share(
    pool: &ClientPool,
    ctx: &CallContext,
    req: RevokeImageShare,
) -> Result<RevokedImageShare, DriverError> {
    let image = GalleryImageVersion::parse(&req.image)?;
    let consumer_sub = match consumer_account(req.consumer_account.as_deref())? {
        Some(account) => account,
        None => AzureCredentials::from_secret(&req.consumer_secret, "consumerSecret")?.subscription_id,
    };
    let owner = AzureCredentials::from_secret(&req.owner_secret, "ownerSecret")?;
    let owner_api = pool.api(&owner, None, ctx)?;
    let shared = gallery_shares(&owner_api, &image).await?.consumer_accounts.contains(&consumer_sub);
    if !shared {
        return Ok(RevokedImageShare { revoked_now: false, consumer_account: consumer_sub });
    }
    update_sharing(&owner_api, &image, "Remove", &consumer_sub).await?;
    Ok(RevokedImageShare { revoked_now: true, consumer_account: consumer_sub })
}

/// ListImageShares: the owner's `galleries.get` (the gallery's sharing groups:
/// subscriptions, and tenants as `tenant:<id>`; public when the gallery is a
/// community gallery). Sharing is per gallery: every image in it has the same shares.
pub(crate) async fn list_image_shares(
    pool: &ClientPool,
    ctx: &CallContext,
    req: ListImageShares,
) -> Result<ImageShares, DriverError> {
    let image = GalleryImageVersion::parse(&req.image)?;
    let owner = AzureCredentials::from_secret(&req.owner_secret, "ownerSecret")?;
    gallery_shares(&pool.api(&owner, None, ctx)?, &image).await
}

/// The sharing groups of the image's gallery (1 `galleries.get`).
async fn gallery_shares(
    owner_api: &crate::clients::Api<'_>,
    image: &GalleryImageVersion,
) -> Result<ImageShares, DriverError> {
    let gallery = owner_api
        .call("compute", "galleries.get", || {
            owner_api
                .compute()
                .galleries_client()
                .get(&image.subscription, &image.resource_group, &image.gallery)
                .send()
        })
        .await?;
    let body = gallery
        .into_raw_response()
        .into_body()
        .collect()
        .await
        .map_err(|_| DriverError::internal("reading compute galleries.get's answer failed"))?;
    let gallery: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|_| DriverError::internal("compute galleries.get answered a body that is not a gallery"))?;
    let profile = gallery.pointer("/properties/sharingProfile");
    let mut consumer_accounts = Vec::new();
    for group in profile.and_then(|p| p["groups"].as_array()).into_iter().flatten() {
        let tenants = group["type"].as_str().is_some_and(|t| t.eq_ignore_ascii_case("AADTenants"));
        for id in group["ids"].as_array().into_iter().flatten().filter_map(serde_json::Value::as_str) {
            consumer_accounts.push(if tenants { format!("tenant:{id}") } else { id.to_string() });
        }
    }
    let public = profile.and_then(|p| p["permissions"].as_str()).is_some_and(|p| p.eq_ignore_ascii_case("Community"));
    Ok(ImageShares { consumer_accounts, public })
}

/// `gallerySharingProfile.update` with `operation` (`Add`, `Remove`) for the
/// consumer subscription, polled within the deadline.
async fn update_sharing(
    owner_api: &crate::clients::Api<'_>,
    image: &GalleryImageVersion,
    operation: &str,
    consumer_sub: &str,
) -> Result<(), DriverError> {
    let update: azure_mgmt_compute::package_2024_07_01::models::SharingUpdate =
        serde_json::from_value(serde_json::json!({
            "operationType": operation,
            "groups": [{"type": "Subscriptions", "ids": [consumer_sub]}]
        }))
        .map_err(|e| DriverError::internal(format!("building the sharing update failed: {e}")))?;
    let accepted = owner_api
        .call("compute", "gallerySharingProfile.update", || {
            owner_api
                .compute()
                .gallery_sharing_profile_client()
                .update(&image.subscription, &image.resource_group, &image.gallery, update.clone())
                .send()
        })
        .await?;
    if let Some(tracker) = Tracker::from_headers(accepted.as_raw_response().headers()) {
        match lro::wait(owner_api, "compute", &tracker, ANSWER_MARGIN).await? {
            Outcome::Succeeded => {}
            Outcome::Failed(f) => return Err(f.driver_error("compute gallerySharingProfile.update")),
            Outcome::Running => {
                return Err(DriverError::unavailable(
                    crate::errors::SHARING_IN_PROGRESS,
                    format!(
                        "changing the sharing of gallery {} with subscription {consumer_sub} is still in progress",
                        image.gallery
                    ),
                    Duration::from_secs(5),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_ids_parse_and_map_to_the_shared_id() {
        let v = GalleryImageVersion::parse(
            "/subscriptions/o-1/resourceGroups/images/providers/Microsoft.Compute/galleries/gardenlinux/images/gl/versions/1.0.0",
        )
        .unwrap();
        assert_eq!(v.shared_id(), "/SharedGalleries/o-1-GARDENLINUX/Images/gl/Versions/1.0.0");
        let lower = GalleryImageVersion::parse(
            "subscriptions/o-1/resourcegroups/images/providers/microsoft.compute/galleries/g/images/i/versions/v",
        );
        assert!(lower.is_ok());
        assert!(GalleryImageVersion::parse("/subscriptions/o-1/resourceGroups/images").is_err());
        assert_eq!(GalleryImageVersion::parse("m-123").unwrap_err().field(), Some("image"));
        for traversal in [
            "/subscriptions/o-1/resourceGroups/../providers/Microsoft.Compute/galleries/g/images/i/versions/1",
            "/subscriptions/../resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/i/versions/1",
            "/subscriptions/o-1/resourceGroups/rg/providers/Microsoft.Compute/galleries/../images/i/versions/1",
            "/subscriptions/o-1/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/i?x/versions/1",
            "/subscriptions/o-1/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/i/versions/..",
        ] {
            assert_eq!(GalleryImageVersion::parse(traversal).unwrap_err().field(), Some("image"), "{traversal}");
        }
    }
}
