//! ShareImage on OpenStack: Glance image members. The consumer is the
//! project of the cluster's credentials (its token's project, or the request's
//! `consumer_account`).
//!
//! First the consumer's own view (`GET /v2/images/{id}` with the consumer's
//! credentials): a public or community image, or one the consumer owns, is
//! done; a shared image it is a member of is done once its membership is
//! `accepted` (the consumer accepts it itself: membership status decides
//! whether the image appears in the consumer's listings, which an `imageName`
//! class needs). Otherwise the owner's credentials are needed: a private image
//! becomes `shared` (never downgrading public or community), the consumer's
//! project is added as a member (409: already one), and the consumer accepts.
//! RevokeImageShare deletes the membership with the owner's credentials;
//! ListImageShares lists the members.

use machine_driver_api::{
    CallContext, CallFailure, DriverError, ImageShares, ListImageShares, OwnerSecret, RevokeImageShare,
    RevokedImageShare, ShareImage, SharedImage,
};
use serde_json::json;

use crate::clients::{Api, Call, ClientPool, Verb};
use crate::credentials::OsCredentials;
use crate::naming::{answered_id, request_id, segment};
use crate::os::keystone::Service;
use crate::os::model::{Image, Member, MembersPage};
use crate::resolve::looks_like_uuid;

/// Glance's JSON patch media type.
const JSON_PATCH: &str = "application/openstack-images-v2.1-json-patch";

/// ShareImage (see the module docs).
pub(crate) async fn share_image(
    pool: &ClientPool,
    ctx: &CallContext,
    req: ShareImage,
) -> Result<SharedImage, DriverError> {
    let (image, region) = image_and_region(&req.image, req.region.as_deref())?;
    let consumer = OsCredentials::from_secret(&req.consumer_secret, "consumerSecret")?;
    let consumer_api = pool.api(&consumer, &region, ctx)?;
    let project = match given_project(req.consumer_account.as_deref())? {
        Some(p) => p,
        None => token_project(&consumer_api).await?,
    };

    if let Some(seen) = get_image(&consumer_api, &image).await? {
        if seen.visibility != "shared" || seen.owner == project {
            return Ok(SharedImage { image_id: image, granted_now: false, consumer_account: project });
        }
        let accepted_now = accept(&consumer_api, &image, &project).await?;
        return Ok(SharedImage { image_id: image, granted_now: accepted_now, consumer_account: project });
    }

    let owner_api = owner_api(pool, ctx, req.owner_secret_required()?, &region)?;
    let owned = get_image(&owner_api, &image)
        .await?
        .ok_or_else(|| DriverError::not_found(format!("image {image} (not visible to the owner's project either)")))?;
    if owned.visibility == "private" {
        let path = format!("/images/{}", segment(&image));
        let patch = serde_json::to_vec(&json!([{"op": "replace", "path": "/visibility", "value": "shared"}]))
            .unwrap_or_default();
        owner_api
            .raw(Call::new(Service::Image, "images.update", Verb::Patch, &path), &[], Some((&patch, JSON_PATCH)))
            .await?;
    }
    let path = format!("/images/{}/members", segment(&image));
    match owner_api
        .json::<Member>(
            Call::new(Service::Image, "members.create", Verb::Post, &path),
            &[],
            Some(&json!({"member": project})),
        )
        .await
    {
        Ok(_) => {}
        Err(CallFailure::Cloud(_, f)) if f.is_conflict() => {}
        Err(e) => return Err(e.into()),
    }
    // The member was just added (pending) or was there already: the consumer accepts.
    set_accepted(&consumer_api, &image, &project).await?;
    Ok(SharedImage { image_id: image, granted_now: true, consumer_account: project })
}

/// RevokeImageShare: `DELETE /v2/images/{id}/members/{project}` with the owner's credentials.
pub(crate) async fn revoke_image_share(
    pool: &ClientPool,
    ctx: &CallContext,
    req: RevokeImageShare,
) -> Result<RevokedImageShare, DriverError> {
    let (image, region) = image_and_region(&req.image, req.region.as_deref())?;
    let owner_api = owner_api(pool, ctx, &req.owner_secret, &region)?;
    let project = match given_project(req.consumer_account.as_deref())? {
        Some(p) => p,
        None => {
            let consumer = OsCredentials::from_secret(&req.consumer_secret, "consumerSecret")?;
            token_project(&pool.api(&consumer, &region, ctx)?).await?
        }
    };
    let path = format!("/images/{}/members/{}", segment(&image), project_segment(&project)?);
    match owner_api.raw(Call::new(Service::Image, "members.delete", Verb::Delete, &path), &[], None).await {
        Ok(_) => Ok(RevokedImageShare { revoked_now: true, consumer_account: project }),
        // Not a member, or an image that is not `shared` (Glance: "Only shared images have members").
        Err(CallFailure::Cloud(_, f)) if f.is_not_found() || f.is_not_a_shared_image() => {
            Ok(RevokedImageShare { revoked_now: false, consumer_account: project })
        }
        Err(e) => Err(e.into()),
    }
}

/// ListImageShares: the image (for its visibility) and its members, with the owner's credentials.
pub(crate) async fn list_image_shares(
    pool: &ClientPool,
    ctx: &CallContext,
    req: ListImageShares,
) -> Result<ImageShares, DriverError> {
    let (image, region) = image_and_region(&req.image, req.region.as_deref())?;
    let owner_api = owner_api(pool, ctx, &req.owner_secret, &region)?;
    let found = get_image(&owner_api, &image).await?.ok_or_else(|| DriverError::not_found(format!("image {image}")))?;
    let public = matches!(found.visibility.as_str(), "public" | "community");
    // Only a `shared` image has members (Glance refuses the list for others).
    if found.visibility != "shared" {
        return Ok(ImageShares { consumer_accounts: Vec::new(), public });
    }
    let path = format!("/images/{}/members", segment(&image));
    let members: MembersPage = owner_api.json(Call::get(Service::Image, "members.list", &path), &[], None).await?;
    Ok(ImageShares {
        consumer_accounts: members
            .members
            .into_iter()
            .filter(|m| m.status != "rejected")
            .map(|m| m.member_id)
            .collect(),
        public,
    })
}

/// The consumer accepts its membership (`GET` then, when not yet accepted,
/// `PUT .../members/{project}`); true when it wrote.
async fn accept(consumer_api: &Api<'_>, image: &str, project: &str) -> Result<bool, DriverError> {
    let path = format!("/images/{}/members/{}", segment(image), project_segment(project)?);
    let member: Member = consumer_api.json(Call::get(Service::Image, "members.get", &path), &[], None).await?;
    if member.status == "accepted" {
        return Ok(false);
    }
    set_accepted(consumer_api, image, project).await?;
    Ok(true)
}

/// `PUT /v2/images/{id}/members/{project}` `accepted`, with the consumer's credentials.
async fn set_accepted(consumer_api: &Api<'_>, image: &str, project: &str) -> Result<(), DriverError> {
    let path = format!("/images/{}/members/{}", segment(image), project_segment(project)?);
    let call = Call::new(Service::Image, "members.update", Verb::Put, &path);
    consumer_api.json::<Member>(call, &[], Some(&json!({"status": "accepted"}))).await?;
    Ok(())
}

/// `GET /v2/images/{id}`; `None` when the project cannot see it.
async fn get_image(api: &Api<'_>, image: &str) -> Result<Option<Image>, DriverError> {
    let path = format!("/images/{}", segment(image));
    match api.json::<Image>(Call::get(Service::Image, "images.get", &path), &[], None).await {
        Ok(i) => Ok(Some(i)),
        Err(CallFailure::Cloud(_, f)) if f.is_not_found() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The project of `api`'s token, checked as an id before it names a member.
async fn token_project(api: &Api<'_>) -> Result<String, DriverError> {
    let project = api.project_id().await?;
    answered_id("the project id of the consumer's token", &project)?;
    Ok(project)
}

/// The request's `consumer_account`, when given: a Keystone project id
/// ([`crate::naming::is_id`]: 1-64 of `[A-Za-z0-9_-]`), INVALID_ARGUMENT naming the field
/// otherwise (it becomes a path segment of Glance's member URLs).
fn given_project(given: Option<&str>) -> Result<Option<String>, DriverError> {
    let Some(account) = given.map(str::trim).filter(|a| !a.is_empty()) else {
        return Ok(None);
    };
    request_id("consumer_account", account)?;
    Ok(Some(account.to_string()))
}

/// A member project id as its path segment (checked again where it is used).
fn project_segment(project: &str) -> Result<String, DriverError> {
    request_id("consumer_account", project)
}

/// The owner's call handle (the owner's credentials checked first).
fn owner_api<'a>(
    pool: &ClientPool,
    ctx: &'a CallContext,
    owner_secret: &OwnerSecret,
    region: &str,
) -> Result<Api<'a>, DriverError> {
    let owner = OsCredentials::from_secret(owner_secret, "ownerSecret")?;
    pool.api(&owner, region, ctx)
}

/// The request's image id (a Glance UUID) and region (it selects the catalog's endpoints).
fn image_and_region(image: &str, region: Option<&str>) -> Result<(String, String), DriverError> {
    let image = image.trim().to_string();
    // A UUID: no character of it can leave its path segment (encoded all the same).
    if !looks_like_uuid(&image) {
        return Err(DriverError::invalid_argument("image", format!("{image:?} is not a Glance image id (a UUID)")));
    }
    let region = region
        .map(str::trim)
        .filter(|r| !r.is_empty() && !r.contains('/'))
        .ok_or_else(|| DriverError::invalid_argument("region", "is required: the region whose Glance holds the image"))?
        .to_string();
    Ok((image, region))
}
