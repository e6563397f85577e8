//! `DescribeImages`, `ModifyImageSharePermission` and `DescribeImageSharePermission`:
//! per-account image visibility (system, own, public, shared with me).

use std::time::Instant;

use axum::response::Response;
use serde_json::{Value, json};

use super::{Call, Ctx, check_region, page_params, page_window};
use crate::REGION;
use crate::error::{EcsError, ok};
use crate::state::{Image, State};

/// Maximum `N` of `AddAccount.N` / `RemoveAccount.N`.
const MAX_ACCOUNTS_PER_CALL: u32 = 10;

fn render(image: &Image, account: &str) -> Value {
    let mut value = json!({
        "ImageId": image.id,
        "ImageName": image.name,
        "ImageOwnerAlias": image.alias_for(account),
        "IsPublic": image.is_public,
        "IsSelfShared": if image.owner.as_deref() == Some(account) && !image.shared_with.is_empty() { "True" } else { "False" },
        "Status": "Available",
        "OSType": "linux",
        "OSName": image.os_name,
        "Platform": image.platform,
        "Architecture": "x86_64",
        "Size": 20,
        "Progress": "100%",
        "Usage": "instance",
        "Description": "",
        "CreationTime": image.creation_time,
    });
    if let Some(owner_id) = image.owner.as_deref().and_then(|o| o.parse::<u64>().ok()) {
        value["ImageOwnerId"] = json!(owner_id);
    }
    value
}

/// `DescribeImages`: only images the caller may see; an invisible image is simply absent.
pub(super) fn describe(ctx: &Ctx, call: &Call) -> Result<Response, EcsError> {
    let p = &call.params;
    check_region(p, true)?;
    let ids: Option<Vec<&str>> =
        p.get("ImageId").map(|list| list.split(',').map(str::trim).filter(|id| !id.is_empty()).collect());
    let alias = p.get("ImageOwnerAlias");
    if alias.is_some_and(|a| !["system", "self", "others", "marketplace"].contains(&a)) {
        return Err(EcsError::invalid_parameter("ImageOwnerAlias"));
    }
    let available = p.get("Status").is_none_or(|list| list.split(',').any(|s| s.trim() == "Available"));
    let (size, number) = page_params(p, 100)?;
    let state = ctx.store.lock_at(Instant::now());
    let matches: Vec<&Image> = state
        .images
        .values()
        .filter(|image| available && image.visible_to(call.account))
        .filter(|image| ids.as_ref().is_none_or(|ids| ids.contains(&image.id.as_str())))
        .filter(|image| alias.is_none_or(|a| image.alias_for(call.account) == a))
        .collect();
    let (start, end) = page_window(matches.len(), size, number);
    Ok(ok(json!({
        "TotalCount": matches.len(),
        "PageNumber": number,
        "PageSize": size,
        "RegionId": REGION,
        "Images": {"Image": matches[start..end].iter().map(|image| render(image, call.account)).collect::<Vec<_>>()},
    })))
}

/// The caller's own (custom) image, or ECS's error for a system or foreign image.
fn owned_image<'a>(state: &'a mut State, image_id: &str, account: &str) -> Result<&'a mut Image, EcsError> {
    let image = state.images.get_mut(image_id).ok_or_else(EcsError::image_not_found)?;
    match image.owner.as_deref() {
        None => Err(EcsError::forbidden(
            "InvalidImageId.IsSystemImage",
            "The specified image is a system image and its share permission cannot be modified.",
        )),
        Some(owner) if owner != account => Err(EcsError::image_not_found()),
        Some(_) => Ok(image),
    }
}

fn accounts(call: &Call, prefix: &str) -> Result<Vec<String>, EcsError> {
    let list = call.params.list(prefix);
    if list.iter().any(|(n, _)| *n == 0 || *n > MAX_ACCOUNTS_PER_CALL) {
        return Err(EcsError::bad_request(
            "InvalidParameter",
            format!("The specified parameter \"{prefix}.N\" is not valid: N must be 1 to {MAX_ACCOUNTS_PER_CALL}."),
        ));
    }
    if let Some((n, _)) =
        list.iter().find(|(_, account)| account.is_empty() || !account.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(EcsError::not_found(
            "InvalidAccount.NotFound",
            format!("The specified account in {prefix}.{n} does not exist."),
        ));
    }
    Ok(list.into_iter().map(|(_, account)| account).collect())
}

/// `ModifyImageSharePermission`: owner only; removes, then adds (adding a present account is a no-op).
pub(super) fn modify_share(ctx: &Ctx, call: &Call) -> Result<Response, EcsError> {
    let p = &call.params;
    check_region(p, true)?;
    let image_id = p.required("ImageId")?;
    let add = accounts(call, "AddAccount")?;
    let remove = accounts(call, "RemoveAccount")?;
    let public = match p.get("IsPublic") {
        None => None,
        Some(_) => Some(p.flag("IsPublic", false)?),
    };
    let mut state = ctx.store.lock_at(Instant::now());
    let quota = state.share_quota;
    let image = owned_image(&mut state, image_id, call.account)?;
    let mut shared: Vec<String> = image.shared_with.iter().filter(|a| !remove.contains(a)).cloned().collect();
    for account in add {
        if account != call.account && !shared.contains(&account) {
            shared.push(account);
        }
    }
    if shared.len() > quota {
        return Err(EcsError::forbidden(
            "QuotaExceed.ShareImageUser",
            format!("The number of accounts the image is shared with exceeds the quota ({quota})."),
        ));
    }
    image.shared_with = shared;
    if let Some(public) = public {
        image.is_public = public;
    }
    Ok(ok(json!({})))
}

/// `DescribeImageSharePermission`: owner only; the accounts the image is shared with.
pub(super) fn describe_share(ctx: &Ctx, call: &Call) -> Result<Response, EcsError> {
    let p = &call.params;
    check_region(p, true)?;
    let image_id = p.required("ImageId")?;
    let (size, number) = page_params(p, 100)?;
    let mut state = ctx.store.lock_at(Instant::now());
    let image = owned_image(&mut state, image_id, call.account)?;
    let (start, end) = page_window(image.shared_with.len(), size, number);
    let groups: Vec<Value> = if image.is_public { vec![json!({"Group": "all"})] } else { Vec::new() };
    Ok(ok(json!({
        "ImageId": image.id,
        "RegionId": REGION,
        "TotalCount": image.shared_with.len(),
        "PageNumber": number,
        "PageSize": size,
        "Accounts": {"Account": image.shared_with[start..end].iter().map(|a| json!({"AliyunId": a})).collect::<Vec<_>>()},
        "ShareGroups": {"ShareGroup": groups},
    })))
}
