//! ShareImage: make a custom image of an image-owner account usable by the
//! cluster's account, as the Gardener Alicloud extension does it (the design
//! every provider's ShareImage follows).
//!
//! The server has already checked the operator's allow-list. First the
//! consumer's own view (`DescribeImages` with the consumer's key): a public
//! image, or one already shared, is done without owner credentials. Otherwise
//! the consumer's account id (the request's, or STS `GetCallerIdentity` with
//! the consumer's key) is added with the owner's key
//! (`ModifyImageSharePermission AddAccount.1`, a no-op when present). A
//! missing owner secret is FAILED_PRECONDITION naming what to configure; the
//! per-image share quota is RESOURCE_EXHAUSTED (`QuotaExceed.ShareImageUser`).

use machine_driver_api::{
    CallContext, DriverError, ErrorKind, ImageShares, RevokedImageShare, ShareImage, SharedImage,
};

use crate::clients::ClientPool;
use crate::credentials::AccessKey;
use crate::ecs::client::Params;
use crate::ecs::model::{CallerIdentity, DescribeImageSharePermissionAnswer, DescribeImagesAnswer, Empty};

/// ShareImage (see the module docs).
pub(crate) async fn share_image(
    pool: &ClientPool,
    ctx: &CallContext,
    req: ShareImage,
) -> Result<SharedImage, DriverError> {
    let (image, region) = image_and_region(&req)?;
    let consumer = AccessKey::from_secret(&req.consumer_secret, "consumerSecret")?;
    let consumer_api = pool.api(&consumer, &region, ctx)?;
    let given_account = req.consumer_account.as_deref().map(str::trim).filter(|a| !a.is_empty()).map(str::to_string);

    let mut p = Params::default();
    p.set("RegionId", &region).set("ImageId", &image);
    let seen: DescribeImagesAnswer = consumer_api.ecs("DescribeImages", &p).await?;
    if seen.total_count > 0 {
        let consumer_account = match given_account {
            Some(a) => a,
            None => caller_account(&consumer_api).await?,
        };
        return Ok(SharedImage { image_id: image, granted_now: false, consumer_account });
    }

    let Some(owner_secret) = &req.owner_secret else {
        return Err(DriverError::new(
            ErrorKind::FailedPrecondition,
            "OWNER_CREDENTIALS_REQUIRED",
            format!(
                "image {image} is not visible to the consumer account and no owner credentials were given: configure the image owner's access key to share it"
            ),
        ));
    };
    // The owner key is checked before any call made for it.
    let owner = AccessKey::from_secret(owner_secret, "ownerSecret")?;
    let account = match given_account {
        Some(a) => a,
        None => caller_account(&consumer_api).await?,
    };
    let owner_api = pool.api(&owner, &region, ctx)?;
    let mut p = Params::default();
    p.set("RegionId", &region).set("ImageId", &image).set("AddAccount.1", &account);
    owner_api.ecs::<Empty>("ModifyImageSharePermission", &p).await?;
    Ok(SharedImage { image_id: image, granted_now: true, consumer_account: account })
}

/// RevokeImageShare: the owner's key reads who the image is shared with
/// (`DescribeImageSharePermission`) and, when the consumer is among them,
/// removes it (`ModifyImageSharePermission RemoveAccount.1`). The consumer's
/// account is the request's, or STS `GetCallerIdentity` with the consumer's key.
pub(crate) async fn revoke_image_share(
    pool: &ClientPool,
    ctx: &CallContext,
    req: ShareImage,
) -> Result<RevokedImageShare, DriverError> {
    let (image, region) = image_and_region(&req)?;
    let owner_secret = req.owner_secret.as_ref().ok_or_else(|| {
        DriverError::new(
            ErrorKind::FailedPrecondition,
            "OWNER_CREDENTIALS_REQUIRED",
            "revoking a share needs the image owner's access key",
        )
    })?;
    let owner = AccessKey::from_secret(owner_secret, "ownerSecret")?;
    let account = match req.consumer_account.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
        Some(a) => a.to_string(),
        None => {
            let consumer = AccessKey::from_secret(&req.consumer_secret, "consumerSecret")?;
            caller_account(&pool.api(&consumer, &region, ctx)?).await?
        }
    };
    let owner_api = pool.api(&owner, &region, ctx)?;
    let shared = shares_of(&owner_api, &region, &image).await?;
    if !shared.consumer_accounts.contains(&account) {
        return Ok(RevokedImageShare { revoked_now: false, consumer_account: account });
    }
    let mut p = Params::default();
    p.set("RegionId", &region).set("ImageId", &image).set("RemoveAccount.1", &account);
    owner_api.ecs::<Empty>("ModifyImageSharePermission", &p).await?;
    Ok(RevokedImageShare { revoked_now: true, consumer_account: account })
}

/// The request's image id and region, checked (the region becomes part of a host name).
fn image_and_region(req: &ShareImage) -> Result<(String, String), DriverError> {
    let image = req.image.trim().to_string();
    if image.is_empty() || image.contains([',', ' ']) {
        return Err(DriverError::invalid_argument("image", format!("{image:?} is not one ECS image id")));
    }
    let region = req
        .region
        .as_deref()
        .map(str::trim)
        .filter(|r| crate::naming::is_region(r))
        .ok_or_else(|| DriverError::invalid_argument("region", "is required: a region id (ECS images are regional)"))?
        .to_string();
    Ok((image, region))
}

/// ListImageShares: the owner's `DescribeImageSharePermission` (1 call).
pub(crate) async fn list_image_shares(
    pool: &ClientPool,
    ctx: &CallContext,
    req: ShareImage,
) -> Result<ImageShares, DriverError> {
    let (image, region) = image_and_region(&req)?;
    let owner_secret = req.owner_secret.as_ref().ok_or_else(|| {
        DriverError::new(
            ErrorKind::FailedPrecondition,
            "OWNER_CREDENTIALS_REQUIRED",
            "listing shares needs the image owner's access key",
        )
    })?;
    let owner = AccessKey::from_secret(owner_secret, "ownerSecret")?;
    shares_of(&pool.api(&owner, &region, ctx)?, &region, &image).await
}

/// Who the owner's image is shared with (1 `DescribeImageSharePermission`, up to 100 accounts).
async fn shares_of(owner_api: &crate::clients::Api<'_>, region: &str, image: &str) -> Result<ImageShares, DriverError> {
    let mut p = Params::default();
    p.set("RegionId", region).set("ImageId", image).set("PageSize", 100);
    let shared: DescribeImageSharePermissionAnswer = owner_api.ecs("DescribeImageSharePermission", &p).await?;
    Ok(ImageShares {
        consumer_accounts: shared.accounts.account.into_iter().map(|a| a.aliyun_id).collect(),
        public: shared.share_groups.share_group.iter().any(|g| g.group == "all"),
    })
}

/// The account of the caller's key (1 STS `GetCallerIdentity`).
async fn caller_account(api: &crate::clients::Api<'_>) -> Result<String, DriverError> {
    let me: CallerIdentity = api.sts("GetCallerIdentity", &Params::default()).await?;
    if me.account_id.is_empty() {
        return Err(DriverError::internal("sts GetCallerIdentity answered without an AccountId"));
    }
    Ok(me.account_id)
}
