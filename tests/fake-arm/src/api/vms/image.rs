//! A VM's image: the checks of `storageProfile.imageReference` against the marketplace,
//! the galleries and their sharing, the marketplace purchase plan, and the marketplace
//! image read `virtualMachineImages.get`.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use crate::api::{Req, ids, respond};
use crate::error::ArmError;
use crate::state::seed::{self, marketplace};
use crate::state::{Failure, State, agreement_key, key, render};
use crate::wire::field;

/// Checks the image reference against marketplace, galleries and sharing.
pub(super) fn check_image(
    st: &State,
    req: &Req,
    sub: &str,
    vm: &str,
    location: &str,
    image: &Value,
) -> Result<(String, Value), ArmError> {
    let not_available = |what: &str| {
        ArmError::new(
            StatusCode::NOT_FOUND,
            "GalleryImageNotFound",
            format!("The gallery image {what} is not available in {location} region. Please contact image owner to replicate to this region, or change your requested region."),
        )
        .with_target("imageReference")
    };
    if let Some(id) = field(image, "id").and_then(Value::as_str) {
        let Some((isub, irg, g, i, v)) = ids::gallery_version(id) else {
            return Err(ArmError::new(
                StatusCode::NOT_FOUND,
                "NotFound",
                format!("The Image '{id}' cannot be found in '{location}' region."),
            ));
        };
        if !isub.eq_ignore_ascii_case(sub) {
            return Err(ArmError::linked_authorization_failed(
                &req.caller.client_id,
                "Microsoft.Compute/virtualMachines/write",
                vm,
                id,
            ));
        }
        let gallery = st.galleries.get(&key(&isub, &irg, &g)).ok_or_else(|| not_available(id))?;
        let ok = match &v {
            Some(v) => gallery.version(&i, v).is_some(),
            None => gallery.images.contains_key(&i.to_ascii_lowercase()),
        };
        if !ok {
            return Err(not_available(id));
        }
        return Ok(("galleryImageReference".into(), json!({ "id": id })));
    }
    if let Some(id) = field(image, "sharedGalleryImageId").and_then(Value::as_str) {
        let (unique, i, v) = ids::direct_gallery(id, "SharedGalleries").ok_or_else(|| not_available(id))?;
        let visible = st.galleries.values().find(|g| g.unique_name.eq_ignore_ascii_case(&unique)).is_some_and(|g| {
            (g.shared_with(sub) || g.sub.eq_ignore_ascii_case(sub))
                && g.version_in(&i, v.as_deref(), location).is_some()
        });
        if !visible {
            return Err(not_available(id));
        }
        return Ok(("galleryImageReference".into(), json!({ "sharedGalleryImageId": id })));
    }
    // Any subscription may boot a community gallery's image, in a region its version is
    // replicated to (without a version: the latest one there); elsewhere GalleryImageNotFound.
    if let Some(id) = field(image, "communityGalleryImageId").and_then(Value::as_str) {
        let (public, i, v) = ids::direct_gallery(id, "CommunityGalleries").ok_or_else(|| not_available(id))?;
        let visible = st
            .galleries
            .values()
            .find(|g| g.community && render::community_name(g).eq_ignore_ascii_case(&public))
            .is_some_and(|g| g.version_in(&i, v.as_deref(), location).is_some());
        if !visible {
            return Err(not_available(id));
        }
        return Ok(("galleryImageReference".into(), json!({ "communityGalleryImageId": id })));
    }
    let part = |name: &str| field(image, name).and_then(Value::as_str);
    match (part("publisher"), part("offer"), part("sku"), part("version")) {
        (Some(p), Some(o), Some(s), v) => {
            let v = v.unwrap_or("latest");
            let Some(version) = marketplace(p, o, s, v) else {
                return Err(ArmError::new(
                    StatusCode::NOT_FOUND,
                    "PlatformImageNotFound",
                    format!("The platform image '{p}:{o}:{s}:{v}' is not available. Verify that all fields in the storage profile are correct. For more details about storage profile information, please refer to https://aka.ms/storageprofile"),
                )
                .with_target("imageReference"));
            };
            let id = format!(
                "/Subscriptions/{sub}/Providers/Microsoft.Compute/Locations/{location}/Publishers/{p}/ArtifactTypes/VMImage/Offers/{o}/Skus/{s}/Versions/{version}"
            );
            Ok(("imageReference".into(), json!({ "id": id })))
        }
        _ => Err(ArmError::invalid_parameter(
            "The value of parameter imageReference is invalid: set either id, sharedGalleryImageId, communityGalleryImageId or publisher, offer, sku and version.",
            "imageReference",
        )),
    }
}

/// A marketplace image with a purchase plan: a VM of it must carry that `plan`
/// (without it, or with another, ARM accepts the PUT and the VM fails
/// `VMMarketplaceInvalidInput`: the provisioning failure kubermatic/machine-controller#788,
/// hashicorp/terraform-provider-azurerm#4678 and Azure/sap-automation#433 report), and the
/// subscription must have accepted the plan's terms (else the PUT is refused at once,
/// 400 `ResourcePurchaseValidationFailed`). Plans are matched case-insensitively.
pub(super) fn check_plan(
    st: &State,
    sub: &str,
    vm: &str,
    reference: &Value,
    plan: Option<&Value>,
) -> Result<Option<Failure>, ArmError> {
    let part = |name: &str| field(reference, name).and_then(Value::as_str);
    let (Some(p), Some(o), Some(s)) = (part("publisher"), part("offer"), part("sku")) else { return Ok(None) };
    let Some(wanted) = seed::marketplace_image(p, o, s).and_then(|image| image.plan) else { return Ok(None) };
    let given = |name: &str| plan.and_then(|plan| field(plan, name)).and_then(Value::as_str);
    let matches = given("name").is_some_and(|v| v.eq_ignore_ascii_case(wanted.name))
        && given("product").is_some_and(|v| v.eq_ignore_ascii_case(wanted.product))
        && given("publisher").is_some_and(|v| v.eq_ignore_ascii_case(wanted.publisher));
    if !matches {
        return Ok(Some(Failure {
            code: "VMMarketplaceInvalidInput".to_owned(),
            message: format!(
                "Creating a virtual machine from Marketplace image or a custom image sourced from a Marketplace image requires Plan information in the request. VM: '{vm}'."
            ),
        }));
    }
    let accepted = st
        .agreements
        .get(&agreement_key(sub, wanted.publisher, wanted.product, wanted.name))
        .is_some_and(|a| a.accepted);
    if !accepted {
        return Err(ArmError::terms_not_accepted(sub, p, o, s));
    }
    Ok(None)
}

/// `GET /subscriptions/S/providers/Microsoft.Compute/locations/L/publishers/P/artifacttypes/vmimage/offers/O/skus/K/versions/V`.
pub(crate) fn marketplace_image(
    req: &Req,
    location: &str,
    publisher: &str,
    offer: &str,
    sku: &str,
    version: &str,
) -> Result<Response, ArmError> {
    let found = marketplace(publisher, offer, sku, version)
        .ok_or_else(|| ArmError::new(StatusCode::NOT_FOUND, "NotFound", "Artifact: VMImage was not found."))?;
    let plan = seed::marketplace_image(publisher, offer, sku)
        .and_then(|image| image.plan)
        .map(|p| json!({"name": p.name, "product": p.product, "publisher": p.publisher}));
    let id = format!(
        "/Subscriptions/{}/Providers/Microsoft.Compute/Locations/{location}/Publishers/{publisher}/ArtifactTypes/VMImage/Offers/{offer}/Skus/{sku}/Versions/{found}",
        req.caller.subscription
    );
    let mut body = json!({
        "name": found,
        "location": location,
        "id": id,
        "properties": {
            "osDiskImage": {"operatingSystem": "Linux", "sizeInGb": 30},
            "hyperVGeneration": "V2",
            "architecture": "x64",
            "dataDiskImages": [],
            "automaticOSUpgradeProperties": {"automaticOSUpgradeSupported": false},
        },
    });
    // A plan image's `properties.plan` (`PurchasePlan`: name, product, publisher).
    if let Some(plan) = plan {
        body["properties"]["plan"] = plan;
    }
    Ok(respond(StatusCode::OK, Some(body), &[]))
}
