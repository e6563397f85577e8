//! ShareImage: make an allow-listed AMI of the image-owner account launchable
//! by the consumer account (the server checks the allow-list first).
//!
//! EC2/STS call cost: DescribeImages with the consumer's credentials; when the
//! image is visible (public or already shared) that is all, plus STS
//! GetCallerIdentity if no consumer account was given. Otherwise, with the
//! owner's credentials: DescribeImages, ModifyImageAttribute (launchPermission
//! add), one ModifySnapshotAttribute (createVolumePermission add) per EBS
//! snapshot of the image, and GetCallerIdentity (consumer) when the account is
//! not given. Grants are additive and idempotent in EC2. RevokeImageShare
//! removes the same permissions (see [`AwsDriver::revoke`]).

use aws_sdk_ec2::types::{
    CreateVolumePermission, CreateVolumePermissionModifications, Image, LaunchPermission,
    LaunchPermissionModifications, SnapshotAttributeName,
};
use machine_driver_api::{
    CallContext, DriverError, ImageShares, ListImageShares, Result, RevokeImageShare, RevokedImageShare, ShareImage,
    SharedImage,
};

use crate::clients::AwsClients;
use crate::driver::AwsDriver;
use crate::errors::AwsFailure;
use crate::{aws_call, provider_id};

impl AwsDriver {
    pub(crate) async fn share(&self, ctx: &CallContext, req: ShareImage) -> Result<SharedImage> {
        let (region, given_account) = checked(&req.image, req.region.as_deref(), req.consumer_account.as_deref())?;
        let consumer = self.clients(ctx, &req.consumer_secret, &region).await?;
        if describe_image(ctx, &consumer, &req.image).await?.is_some() {
            let consumer_account = self.consumer_account(ctx, &consumer, given_account.as_deref()).await?;
            return Ok(SharedImage { image_id: req.image, granted_now: false, consumer_account });
        }
        let owner = self.clients(ctx, req.owner_secret_required()?, &region).await?;
        let image = describe_image(ctx, &owner, &req.image)
            .await?
            .ok_or_else(|| DriverError::not_found(format!("image {} in the owner account", req.image)))?;
        let consumer_account = self.consumer_account(ctx, &consumer, given_account.as_deref()).await?;
        let grant = LaunchPermissionModifications::builder()
            .add(LaunchPermission::builder().user_id(&consumer_account).build())
            .build();
        let modify = owner.ec2.modify_image_attribute().image_id(&req.image).launch_permission(grant);
        aws_call::ec2(ctx, &owner, "ModifyImageAttribute", || modify.clone().send()).await?;
        modify_snapshots(ctx, &owner, &image, &consumer_account, Grant::Add).await?;
        tracing::info!(image = %req.image, consumer_account = %consumer_account, "image shared");
        Ok(SharedImage { image_id: req.image, granted_now: true, consumer_account })
    }

    /// RevokeImageShare: with the owner's credentials, DescribeImageAttribute
    /// (launchPermission); when the consumer account is among them,
    /// ModifyImageAttribute (launchPermission remove), DescribeImages for the
    /// image's snapshots and one ModifySnapshotAttribute (createVolumePermission
    /// remove) per EBS snapshot. The consumer is the request's account or STS
    /// GetCallerIdentity with the consumer's credentials.
    pub(crate) async fn revoke(&self, ctx: &CallContext, req: RevokeImageShare) -> Result<RevokedImageShare> {
        let (region, given_account) = checked(&req.image, req.region.as_deref(), req.consumer_account.as_deref())?;
        let owner = self.clients(ctx, &req.owner_secret, &region).await?;
        let consumer_account = match given_account {
            Some(a) => a,
            None => {
                let consumer = self.clients(ctx, &req.consumer_secret, &region).await?;
                self.consumer_account(ctx, &consumer, None).await?
            }
        };
        let granted = launch_permissions(ctx, &owner, &req.image)
            .await?
            .iter()
            .any(|p| p.user_id() == Some(consumer_account.as_str()));
        if !granted {
            return Ok(RevokedImageShare { revoked_now: false, consumer_account });
        }
        let take_back = LaunchPermissionModifications::builder()
            .remove(LaunchPermission::builder().user_id(&consumer_account).build())
            .build();
        let modify = owner.ec2.modify_image_attribute().image_id(&req.image).launch_permission(take_back);
        aws_call::ec2(ctx, &owner, "ModifyImageAttribute", || modify.clone().send()).await?;
        let image = describe_image(ctx, &owner, &req.image).await?;
        if let Some(image) = image {
            modify_snapshots(ctx, &owner, &image, &consumer_account, Grant::Remove).await?;
        }
        tracing::info!(image = %req.image, consumer_account = %consumer_account, "image share revoked");
        Ok(RevokedImageShare { revoked_now: true, consumer_account })
    }

    /// ListImageShares: DescribeImageAttribute (launchPermission) with the
    /// owner's credentials: the account ids, public when the group `all` is there.
    pub(crate) async fn list_shares(&self, ctx: &CallContext, req: ListImageShares) -> Result<ImageShares> {
        let (region, _) = checked(&req.image, req.region.as_deref(), None)?;
        let owner = self.clients(ctx, &req.owner_secret, &region).await?;
        let attribute = launch_permissions(ctx, &owner, &req.image).await?;
        Ok(ImageShares {
            consumer_accounts: attribute.iter().filter_map(|p| p.user_id().map(str::to_string)).collect(),
            public: attribute.iter().any(|p| p.group().is_some_and(|g| g.as_str() == "all")),
        })
    }

    async fn consumer_account(&self, ctx: &CallContext, consumer: &AwsClients, given: Option<&str>) -> Result<String> {
        if let Some(a) = given.filter(|a| !a.is_empty()) {
            return Ok(a.to_string());
        }
        let out = aws_call::call(ctx, &consumer.limiter, "sts", "GetCallerIdentity", || {
            consumer.sts.get_caller_identity().send()
        })
        .await;
        let out = aws_call::noting_refusal(out, &consumer.credentials_refused)?;
        out.account()
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .ok_or_else(|| DriverError::internal("sts GetCallerIdentity returned no account"))
    }
}

/// The region and the consumer account (when given) of an image request,
/// checked against AWS's syntax before anything reaches EC2: INVALID_ARGUMENT
/// naming `region`, `image` (an AMI id) or `consumer_account` (12 digits).
fn checked(image: &str, region: Option<&str>, consumer_account: Option<&str>) -> Result<(String, Option<String>)> {
    let region = region
        .filter(|r| !r.is_empty())
        .map(str::to_string)
        .ok_or_else(|| DriverError::invalid_argument("region", "is required for AWS images (AMIs are regional)"))?;
    provider_id::check_region("region", &region)?;
    if !crate::spec_validation::is_ami_id(image) {
        return Err(DriverError::invalid_argument(
            "image",
            "expected an AMI id (ami- followed by 8 or 17 lowercase hex digits)",
        ));
    }
    let account = consumer_account.map(str::trim).filter(|a| !a.is_empty());
    if let Some(a) = account.filter(|a| !provider_id::is_account_id(a)) {
        return Err(DriverError::invalid_argument(
            "consumer_account",
            format!("expected a 12-digit AWS account id, got {} characters", a.chars().count()),
        ));
    }
    Ok((region, account.map(str::to_string)))
}

/// The image's launch permissions (1 DescribeImageAttribute).
async fn launch_permissions(ctx: &CallContext, owner: &AwsClients, image_id: &str) -> Result<Vec<LaunchPermission>> {
    let attribute = aws_call::ec2(ctx, owner, "DescribeImageAttribute", || {
        owner
            .ec2
            .describe_image_attribute()
            .image_id(image_id)
            .attribute(aws_sdk_ec2::types::ImageAttributeName::LaunchPermission)
            .send()
    })
    .await?;
    Ok(attribute.launch_permissions().to_vec())
}

/// Whether a permission is given or taken back.
#[derive(Debug, Clone, Copy)]
enum Grant {
    Add,
    Remove,
}

/// One ModifySnapshotAttribute (createVolumePermission) per EBS snapshot of `image`.
async fn modify_snapshots(
    ctx: &CallContext,
    owner: &AwsClients,
    image: &Image,
    account: &str,
    grant: Grant,
) -> Result<()> {
    for snapshot in image.block_device_mappings().iter().filter_map(|m| m.ebs().and_then(|e| e.snapshot_id())) {
        let permission = CreateVolumePermission::builder().user_id(account).build();
        let change = match grant {
            Grant::Add => CreateVolumePermissionModifications::builder().add(permission),
            Grant::Remove => CreateVolumePermissionModifications::builder().remove(permission),
        }
        .build();
        let modify = owner
            .ec2
            .modify_snapshot_attribute()
            .snapshot_id(snapshot)
            .attribute(SnapshotAttributeName::CreateVolumePermission)
            .create_volume_permission(change);
        aws_call::ec2(ctx, owner, "ModifySnapshotAttribute", || modify.clone().send()).await?;
    }
    Ok(())
}

/// The image as these credentials see it; `None` when it is not visible to them.
async fn describe_image(ctx: &CallContext, c: &AwsClients, image_id: &str) -> Result<Option<Image>> {
    match aws_call::ec2(ctx, c, "DescribeImages", || c.ec2.describe_images().image_ids(image_id).send()).await {
        Ok(out) => Ok(out.images().iter().find(|i| i.image_id() == Some(image_id)).cloned()),
        Err(f) if f.cloud().is_some_and(AwsFailure::is_image_not_found) => Ok(None),
        Err(f) => Err(f.into()),
    }
}
