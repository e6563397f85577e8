//! ShareImage: idempotency, visible images without owner credentials, the
//! allow-list; RevokeImageShare takes access back.

use futures::future::BoxFuture;
use machine_driver_proto::v1::{
    ListImageSharesRequest, RevokeImageShareRequest, RevokeImageShareResponse, ShareImageRequest, ShareImageResponse,
};
use tonic::{Code, Status};

use super::initialize::REFUSE_WRITES;
use crate::context::{Ctx, secret_data};
use crate::outcome::{StepResult, Stop};
use crate::settings::ShareImageInputs;
use crate::status_details::{describe, error_reason};
use crate::{ensure, fail, skip};

fn inputs(ctx: &Ctx) -> StepResult<ShareImageInputs> {
    match &ctx.settings.provider.share_image {
        Some(i) => Ok(i.clone()),
        None => skip!("no shareImage inputs (conformance.json next to --machine-class, or --config)"),
    }
}

async fn share(ctx: &Ctx, i: &ShareImageInputs, image: &str, with_owner: bool) -> Result<ShareImageResponse, Status> {
    let consumer = i.consumer_secret.as_ref().map(secret_data).unwrap_or_else(|| ctx.secret());
    let req = ShareImageRequest {
        image: image.to_string(),
        region: i.region.clone(),
        owner_secret: with_owner.then(|| secret_data(&i.owner_secret)),
        consumer_secret: Some(consumer),
        consumer_account: i.consumer_account.clone(),
    };
    Ok(ctx.conn.driver.clone().share_image(ctx.req(req)).await?.into_inner())
}

async fn refuse_writes(ctx: &Ctx) -> StepResult {
    match &ctx.fake {
        Some(f) => f.add_fault(REFUSE_WRITES).await.map_err(Stop::Fail),
        None => Ok(()),
    }
}

/// Sharing the allow-listed image works; every repeat answers granted_now = false with the
/// same image id and makes no cloud write.
pub(crate) fn idempotent(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let i = inputs(&ctx)?;
        let first = share(&ctx, &i, &i.allowed_image, true)
            .await
            .map_err(|s| Stop::Fail(format!("ShareImage of the allow-listed image: {}", describe(&s))))?;
        ensure!(!first.image_id.is_empty(), "ShareImage returned an empty image_id");
        refuse_writes(&ctx).await?;
        for n in 2..=ctx.settings.repeat.max(2) {
            let again = match share(&ctx, &i, &i.allowed_image, true).await {
                Ok(r) => r,
                Err(s) => fail!("repeated ShareImage (call {n}): {} (a cloud write would be refused)", describe(&s)),
            };
            ensure!(!again.granted_now, "repeated ShareImage (call {n}) answered granted_now = true");
            ensure!(again.image_id == first.image_id, "repeated ShareImage changed image_id");
        }
        Ok(())
    })
}

/// An image the consumer can already use needs no owner credentials and no write.
pub(crate) fn visible(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let i = inputs(&ctx)?;
        refuse_writes(&ctx).await?;
        for _ in 0..ctx.settings.repeat.clamp(1, 3) {
            match share(&ctx, &i, &i.visible_image, false).await {
                Ok(r) => ensure!(!r.granted_now, "ShareImage of a visible image answered granted_now = true"),
                Err(s) => fail!("ShareImage of a visible image without owner credentials: {}", describe(&s)),
            }
        }
        Ok(())
    })
}

/// An image off the allow-list: PERMISSION_DENIED with reason IMAGE_NOT_ALLOWED, no write.
pub(crate) fn not_allowed(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let i = inputs(&ctx)?;
        refuse_writes(&ctx).await?;
        match share(&ctx, &i, &i.not_allowed_image, true).await {
            Err(s) if s.code() == Code::PermissionDenied => {
                let reason = error_reason(&s);
                ensure!(
                    reason.as_deref() == Some("IMAGE_NOT_ALLOWED"),
                    "PERMISSION_DENIED with ErrorInfo reason {reason:?}, expected IMAGE_NOT_ALLOWED"
                );
                Ok(())
            }
            Err(s) => fail!("expected PERMISSION_DENIED (IMAGE_NOT_ALLOWED), got {}", describe(&s)),
            Ok(_) => fail!("ShareImage shared an image that is off the allow-list"),
        }
    })
}

async fn revoke(ctx: &Ctx, i: &ShareImageInputs, with_owner: bool) -> Result<RevokeImageShareResponse, Status> {
    let consumer = i.consumer_secret.as_ref().map(secret_data).unwrap_or_else(|| ctx.secret());
    let req = RevokeImageShareRequest {
        image: i.allowed_image.clone(),
        region: i.region.clone(),
        owner_secret: with_owner.then(|| secret_data(&i.owner_secret)),
        consumer_secret: Some(consumer),
        consumer_account: i.consumer_account.clone(),
    };
    Ok(ctx.conn.driver.clone().revoke_image_share(ctx.req(req)).await?.into_inner())
}

/// The accounts ListImageShares names for the allowed image.
async fn listed(ctx: &Ctx, i: &ShareImageInputs) -> StepResult<Vec<String>> {
    let req = ListImageSharesRequest {
        image: i.allowed_image.clone(),
        region: i.region.clone(),
        owner_secret: Some(secret_data(&i.owner_secret)),
    };
    match ctx.conn.driver.clone().list_image_shares(ctx.req(req)).await {
        Ok(r) => Ok(r.into_inner().consumer_accounts),
        Err(s) => fail!("ListImageShares: {}", describe(&s)),
    }
}

/// Revocation takes access back: after a share, RevokeImageShare answers
/// revoked_now = true; the consumer then needs the owner again
/// (ShareImage without owner credentials: FAILED_PRECONDITION
/// OWNER_CREDENTIALS_REQUIRED); a repeat answers revoked_now = false; without
/// owner credentials it is FAILED_PRECONDITION. ListImageShares names the
/// consumer account after the share and not after the revocation. The image
/// is shared again at the end, as the scenarios before found it.
pub(crate) fn revoke_takes_access_back(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let i = inputs(&ctx)?;
        let shared = share(&ctx, &i, &i.allowed_image, true)
            .await
            .map_err(|s| Stop::Fail(format!("ShareImage of the allow-listed image: {}", describe(&s))))?;
        let account = shared.consumer_account;
        let before = listed(&ctx, &i).await?;
        ensure!(before.contains(&account), "ListImageShares after ShareImage: {before:?} lacks {account:?}");
        match revoke(&ctx, &i, false).await {
            Err(s) if s.code() == Code::FailedPrecondition => {}
            other => fail!("RevokeImageShare without owner credentials: expected FAILED_PRECONDITION, got {other:?}"),
        }
        let first =
            revoke(&ctx, &i, true).await.map_err(|s| Stop::Fail(format!("RevokeImageShare: {}", describe(&s))))?;
        ensure!(first.revoked_now, "RevokeImageShare of a shared image answered revoked_now = false");
        match share(&ctx, &i, &i.allowed_image, false).await {
            Err(s) if s.code() == Code::FailedPrecondition => {}
            Err(s) => fail!(
                "ShareImage without owner after the revocation: expected FAILED_PRECONDITION, got {}",
                describe(&s)
            ),
            Ok(_) => fail!("after RevokeImageShare the consumer can still use the image without the owner"),
        }
        let again = revoke(&ctx, &i, true)
            .await
            .map_err(|s| Stop::Fail(format!("repeated RevokeImageShare: {}", describe(&s))))?;
        ensure!(!again.revoked_now, "repeated RevokeImageShare answered revoked_now = true");
        share(&ctx, &i, &i.allowed_image, true)
            .await
            .map_err(|s| Stop::Fail(format!("ShareImage after the revocation: {}", describe(&s))))?;
        Ok(())
    })
}

/// `patch` with every string `${IMAGE_ID}` replaced by `image_id`.
fn with_image(patch: &serde_json::Value, image_id: &str) -> serde_json::Value {
    match patch {
        serde_json::Value::String(s) if s == "${IMAGE_ID}" => serde_json::Value::String(image_id.to_string()),
        serde_json::Value::Array(items) => items.iter().map(|v| with_image(v, image_id)).collect(),
        serde_json::Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), with_image(v, image_id))).collect(),
        other => other.clone(),
    }
}

/// The consumer boots a machine from the image ShareImage shared (the class
/// patched with `shareImage.launchPatch`); after RevokeImageShare (when
/// advertised) a new machine from it is refused. The image is shared again at
/// the end.
pub(crate) fn shared_image_launches(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let i = inputs(&ctx)?;
        let Some(patch) = i.launch_patch.clone() else {
            skip!("no shareImage.launchPatch in the provider's conformance.json");
        };
        let shared = share(&ctx, &i, &i.allowed_image, true)
            .await
            .map_err(|s| Stop::Fail(format!("ShareImage of the allow-listed image: {}", describe(&s))))?;
        let mut spec = super::bad_input::spec_json(&ctx)?;
        crate::merge_patch::merge_patch(&mut spec, &with_image(&patch, &shared.image_id));
        let class = ctx.class_with_spec(super::bad_input::to_text(&spec)?);
        let mut m = ctx.new_machine();
        match ctx.create_with(&m, class.clone(), ctx.secret()).await {
            Ok(r) => m.provider_id = r.provider_id,
            Err(s) => fail!("CreateMachine from the shared image {}: {}", shared.image_id, describe(&s)),
        }
        ctx.must_delete(&m).await?;
        ctx.wait_gone(&m).await?;
        if !ctx.has(machine_driver_proto::v1::Capability::RevokeImageShare) {
            return Ok(());
        }
        revoke(&ctx, &i, true).await.map_err(|s| Stop::Fail(format!("RevokeImageShare: {}", describe(&s))))?;
        let refused = ctx.new_machine();
        let outcome = ctx.create_with(&refused, class, ctx.secret()).await;
        share(&ctx, &i, &i.allowed_image, true)
            .await
            .map_err(|s| Stop::Fail(format!("ShareImage after the revocation: {}", describe(&s))))?;
        match outcome {
            Err(_) => Ok(()),
            Ok(r) => fail!("after RevokeImageShare the consumer still launched {} from the image", r.provider_id),
        }
    })
}
