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
//! missing owner secret is the kit's FAILED_PRECONDITION
//! ([`ShareImage::owner_secret_required`]); the per-image share quota is RESOURCE_EXHAUSTED (`QuotaExceed.ShareImageUser`).
//!
//! Request data is checked against ECS's syntax before any call (INVALID_ARGUMENT
//! naming the field): the image id, the region (part of the ECS host name) and
//! a given consumer account (digits); each goes to ECS as its own parameter.

use machine_driver_api::{
    CallContext, DriverError, ImageShares, ListImageShares, PageTokens, RevokeImageShare, RevokedImageShare,
    ShareImage, SharedImage,
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
    let (image, region) = image_and_region(&req.image, req.region.as_deref())?;
    let consumer = AccessKey::from_secret(&req.consumer_secret, "consumerSecret")?;
    let consumer_api = pool.api(&consumer, &region, ctx)?;
    let given_account = consumer_account(req.consumer_account.as_deref())?;

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

    // The owner key is checked before any call made for it.
    let owner = AccessKey::from_secret(req.owner_secret_required()?, "ownerSecret")?;
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
    req: RevokeImageShare,
) -> Result<RevokedImageShare, DriverError> {
    let (image, region) = image_and_region(&req.image, req.region.as_deref())?;
    let owner = AccessKey::from_secret(&req.owner_secret, "ownerSecret")?;
    let account = match consumer_account(req.consumer_account.as_deref())? {
        Some(a) => a,
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

/// Longest image id or name ECS takes.
const MAX_IMAGE_ID: usize = 128;
/// Longest account id (Alibaba Cloud account UIDs are 16 digits).
const MAX_ACCOUNT_ID: usize = 32;
/// Accounts per `DescribeImageSharePermission` page (ECS's largest).
const SHARES_PAGE_SIZE: u64 = 100;

/// The request's image id and region, checked against ECS's syntax: an image
/// id (`m-...`) or a public image's name (`ubuntu_24_04_x64_20G_alibase_20250101.vhd`)
/// is ASCII letters, digits, `_`, `-` and `.`; the region becomes part of a host name.
fn image_and_region(image: &str, region: Option<&str>) -> Result<(String, String), DriverError> {
    let image = image.trim().to_string();
    let image_ok = !image.is_empty()
        && image.len() <= MAX_IMAGE_ID
        && image.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !image_ok {
        return Err(DriverError::invalid_argument("image", format!("{image:?} is not one ECS image id")));
    }
    let region = region
        .map(str::trim)
        .filter(|r| crate::naming::is_region(r))
        .ok_or_else(|| DriverError::invalid_argument("region", "is required: a region id (ECS images are regional)"))?
        .to_string();
    Ok((image, region))
}

/// The request's consumer account, when given: an Alibaba Cloud account id (digits only).
fn consumer_account(given: Option<&str>) -> Result<Option<String>, DriverError> {
    let Some(account) = given.map(str::trim).filter(|a| !a.is_empty()) else {
        return Ok(None);
    };
    if account.len() > MAX_ACCOUNT_ID || !account.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DriverError::invalid_argument(
            "consumerAccount",
            format!("{account:?} is not an Alibaba Cloud account id (digits only)"),
        ));
    }
    Ok(Some(account.to_string()))
}

/// ListImageShares: the owner's `DescribeImageSharePermission` (1 call).
pub(crate) async fn list_image_shares(
    pool: &ClientPool,
    ctx: &CallContext,
    req: ListImageShares,
) -> Result<ImageShares, DriverError> {
    let (image, region) = image_and_region(&req.image, req.region.as_deref())?;
    let owner = AccessKey::from_secret(&req.owner_secret, "ownerSecret")?;
    shares_of(&pool.api(&owner, &region, ctx)?, &region, &image).await
}

/// Who the owner's image is shared with: `DescribeImageSharePermission`, 100
/// accounts a page (1 call up to 100 accounts), every page: the next page
/// number is the token the kit's `PageTokens` follows.
async fn shares_of(owner_api: &crate::clients::Api<'_>, region: &str, image: &str) -> Result<ImageShares, DriverError> {
    let mut tokens = PageTokens::new("ecs.DescribeImageSharePermission");
    let mut shares = ImageShares { consumer_accounts: Vec::new(), public: false };
    let mut page: u64 = 1;
    loop {
        let mut p = Params::default();
        p.set("RegionId", region).set("ImageId", image).set("PageSize", SHARES_PAGE_SIZE).set("PageNumber", page);
        let answer: DescribeImageSharePermissionAnswer = owner_api.ecs("DescribeImageSharePermission", &p).await?;
        let more = !answer.accounts.account.is_empty() && page.saturating_mul(SHARES_PAGE_SIZE) < answer.total_count;
        shares.consumer_accounts.extend(answer.accounts.account.into_iter().map(|a| a.aliyun_id));
        shares.public |= answer.share_groups.share_group.iter().any(|g| g.group == "all");
        let next = more.then(|| (page + 1).to_string());
        match tokens.next(next.as_deref())? {
            Some(token) => {
                page = token.parse().map_err(|_| DriverError::internal("a page number did not round-trip"))?;
            }
            None => {
                shares.consumer_accounts.sort();
                return Ok(shares);
            }
        }
    }
}

/// The account of the caller's key (1 STS `GetCallerIdentity`).
async fn caller_account(api: &crate::clients::Api<'_>) -> Result<String, DriverError> {
    let me: CallerIdentity = api.sts("GetCallerIdentity", &Params::default()).await?;
    if me.account_id.is_empty() {
        return Err(DriverError::internal("sts GetCallerIdentity answered without an AccountId"));
    }
    Ok(me.account_id)
}
