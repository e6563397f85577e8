//! `virtualMachines.createOrUpdate`, `.update`, `.get`, `.list`, `.delete`, and the
//! marketplace image read `virtualMachineImages.get`.

use std::time::{Duration, Instant, SystemTime};

use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::{Ctx, Req, ids, nics, operations, respond};
use crate::error::ArmError;
use crate::paging;
use crate::state::seed::{self, VM_SIZES, marketplace};
use crate::state::{
    Attachment, DiskPhase, DiskRecord, Failure, Key, NicRecord, State, VmPhase, VmRecord, agreement_key, key, render,
};
use crate::wire::{field, path, path_str, timestamp};

/// Azure's limit on `osProfile.customData` (base64 characters).
const MAX_CUSTOM_DATA: usize = 87_380;

fn vm_id(sub: &str, rg: &str, name: &str) -> String {
    format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{name}")
}

fn disk_id(sub: &str, rg: &str, name: &str) -> String {
    format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/disks/{name}")
}

fn not_found(name: &str, rg: &str) -> ArmError {
    ArmError::resource_not_found(&format!("Microsoft.Compute/virtualMachines/{name}"), rg)
}

fn hex32() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn delete_option(value: Option<&Value>) -> String {
    match value.and_then(Value::as_str) {
        Some(v) if v.eq_ignore_ascii_case("Delete") => "Delete".to_owned(),
        _ => "Detach".to_owned(),
    }
}

/// A data disk the request asks for.
#[derive(Debug, Clone)]
struct DataDiskPlan {
    lun: i64,
    /// Existing disk (Attach) or `None` (create).
    attach: Option<(Key, String, String)>,
    name: Option<String>,
    size_gb: u64,
    sku: String,
    create_option: String,
    delete_option: String,
}

/// A validated VM request.
#[derive(Debug)]
struct VmSpec {
    location: String,
    model: Value,
    custom_data: Option<String>,
    nics: Vec<Attachment>,
    /// NICs the PUT makes (`networkInterfaceConfigurations`).
    nic_plans: Vec<NicPlan>,
    data_disks: Vec<DataDiskPlan>,
    /// `creationData.imageReference`/`galleryImageReference` for the OS disk.
    image: Option<(String, Value)>,
    /// The failure the VM's provisioning ends with whatever the failure queue holds
    /// (a marketplace image with a plan PUT without it: `VMMarketplaceInvalidInput`).
    failure: Option<Failure>,
}

/// Removes read-only and secret fields from a request body before it is stored.
fn normalize(mut body: Value) -> (Value, Option<String>) {
    let mut custom_data = None;
    if let Some(map) = body.as_object_mut() {
        for k in ["id", "name", "type", "etag", "resources"] {
            map.remove(k);
        }
        if let Some(props) = map.get_mut("properties").and_then(Value::as_object_mut) {
            for k in ["provisioningState", "vmId", "timeCreated", "instanceView"] {
                props.remove(k);
            }
            if let Some(os) = props.get_mut("osProfile").and_then(Value::as_object_mut) {
                custom_data = os.remove("customData").and_then(|v| v.as_str().map(str::to_owned));
                os.remove("adminPassword");
            }
        }
    }
    (body, custom_data)
}

/// The fields whose change makes a re-PUT an update (rather than a no-op).
fn fingerprint(model: &Value) -> Value {
    let nics: Vec<Value> = path(model, &["properties", "networkProfile", "networkInterfaces"])
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|n| {
                    json!([
                        field(n, "id").and_then(Value::as_str).map(str::to_ascii_lowercase),
                        delete_option(path(n, &["properties", "deleteOption"])),
                    ])
                })
                .collect::<Vec<Value>>()
        })
        .unwrap_or_default()
        .into_iter()
        .chain(
            path(model, &["properties", "networkProfile", "networkInterfaceConfigurations"])
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| {
                    json!([
                        field(c, "name").and_then(Value::as_str).map(str::to_ascii_lowercase),
                        delete_option(path(c, &["properties", "deleteOption"])),
                    ])
                }),
        )
        .collect();
    let disks: Vec<Value> = path(model, &["properties", "storageProfile", "dataDisks"])
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|d| json!([field(d, "lun"), field(d, "diskSizeGB"), delete_option(field(d, "deleteOption"))]))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "size": path_str(model, &["properties", "hardwareProfile", "vmSize"]).map(str::to_ascii_lowercase),
        "tags": field(model, "tags"),
        "nics": nics,
        "disks": disks,
        "osDelete": delete_option(path(model, &["properties", "storageProfile", "osDisk", "deleteOption"])),
    })
}

/// Checks the image reference against marketplace, galleries and sharing.
fn check_image(
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

/// Validates a VM PUT body; `existing` is the VM being updated.
#[allow(clippy::too_many_arguments)]
fn validate(
    st: &State,
    req: &Req,
    sub: &str,
    rg: &str,
    vm: &str,
    body: Value,
    existing: Option<&VmRecord>,
    now: Instant,
) -> Result<VmSpec, ArmError> {
    let location = field(&body, "location")
        .and_then(Value::as_str)
        .filter(|l| !l.is_empty())
        .ok_or_else(|| {
            ArmError::new(
                StatusCode::BAD_REQUEST,
                "LocationRequired",
                "The location property is required for this definition.",
            )
        })?
        .to_owned();
    if let Some(existing) = existing
        && !existing.location.replace(' ', "").eq_ignore_ascii_case(&location.replace(' ', ""))
    {
        return Err(ArmError::property_change_not_allowed("location"));
    }
    let props = field(&body, "properties").filter(|p| p.is_object()).ok_or_else(|| ArmError::required("properties"))?;
    let size = path_str(props, &["hardwareProfile", "vmSize"]).ok_or_else(|| ArmError::required("vmSize"))?;
    if !VM_SIZES.iter().any(|(known, _)| known.eq_ignore_ascii_case(size)) {
        return Err(ArmError::invalid_parameter(
            format!(
                "The value {size} provided for the VM size is not valid. The valid sizes in the current region are: {}.",
                VM_SIZES.iter().map(|(s, _)| *s).collect::<Vec<_>>().join(",")
            ),
            "vmSize",
        ));
    }
    check_identity(field(&body, "identity"))?;
    check_spot(props, existing)?;
    check_encryption_at_host(st, sub, props)?;
    // Image and OS disk (creation only: they cannot change afterwards).
    let mut image = None;
    let mut failure = None;
    if existing.is_none() {
        let create = path_str(props, &["storageProfile", "osDisk", "createOption"]).unwrap_or("FromImage");
        if !create.eq_ignore_ascii_case("FromImage") {
            return Err(ArmError::invalid_parameter(
                format!(
                    "The value '{create}' of parameter 'osDisk.createOption' is not supported by this fake; use FromImage."
                ),
                "osDisk.createOption",
            ));
        }
        let reference =
            path(props, &["storageProfile", "imageReference"]).ok_or_else(|| ArmError::required("imageReference"))?;
        image = Some(check_image(st, req, sub, &vm_id(sub, rg, vm), &location, reference)?);
        failure = check_plan(st, sub, &vm_id(sub, rg, vm), reference, field(&body, "plan"))?;
        if let Some(size) = path(props, &["storageProfile", "osDisk", "diskSizeGB"])
            && size.as_u64().is_none_or(|s| s == 0 || s > 4095)
        {
            return Err(ArmError::invalid_parameter(
                format!("The value {size} of parameter 'diskSizeGB' is invalid."),
                "diskSizeGB",
            ));
        }
        if let Some(name) = path_str(props, &["storageProfile", "osDisk", "name"])
            && st.disks.contains_key(&key(sub, rg, name))
        {
            return Err(ArmError::new(
                StatusCode::CONFLICT,
                "ConflictingUserInput",
                format!(
                    "Disk {name} already exists in resource group {}. Only CreateOption.Attach is supported.",
                    rg.to_ascii_uppercase()
                ),
            )
            .with_target("/properties/storageProfile/osDisk/name"));
        }
    }
    // OS profile.
    let (_, custom_data) = normalize(body.clone());
    let os_profile = field(props, "osProfile");
    if existing.is_none() {
        let os_profile = os_profile.ok_or_else(|| ArmError::required("osProfile"))?;
        if field(os_profile, "adminUsername").and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(ArmError::required("adminUsername"));
        }
        let keys = path(os_profile, &["linuxConfiguration", "ssh", "publicKeys"])
            .and_then(Value::as_array)
            .is_some_and(|k| !k.is_empty());
        let no_password = path(os_profile, &["linuxConfiguration", "disablePasswordAuthentication"])
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let password = field(os_profile, "adminPassword").and_then(Value::as_str).is_some();
        if !keys && (no_password || !password) {
            return Err(ArmError::invalid_parameter(
                "Authentication using either SSH or by user name and password must be enabled in Linux profile.",
                "linuxConfiguration",
            ));
        }
    }
    if let Some(data) = &custom_data
        && (data.len() > MAX_CUSTOM_DATA || base64::engine::general_purpose::STANDARD.decode(data).is_err())
    {
        return Err(ArmError::invalid_parameter(
            "Custom data in OSProfile must be in Base64 encoding and with a maximum length of 87380 characters.",
            "customData",
        ));
    }
    if let Some(existing) = existing
        && let Some(new) = &custom_data
        && existing.custom_data.as_deref() != Some(new.as_str())
    {
        return Err(ArmError::property_change_not_allowed("customData"));
    }
    // Network interfaces: references to NICs that exist, or configurations of NICs the VM makes.
    let this_vm = vm_id(sub, rg, vm);
    let configs = path(props, &["networkProfile", "networkInterfaceConfigurations"])
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty());
    let mut nic_plans = Vec::new();
    let nics = match configs {
        Some(configs) => {
            if path(props, &["networkProfile", "networkInterfaces"])
                .and_then(Value::as_array)
                .is_some_and(|l| !l.is_empty())
            {
                return Err(ArmError::invalid_parameter(
                    "Network interfaces and network interface configurations cannot both be specified in the network profile.",
                    "networkProfile",
                ));
            }
            if path_str(props, &["networkProfile", "networkApiVersion"]).is_none() {
                return Err(ArmError::invalid_parameter(
                    "networkApiVersion must be specified when networkInterfaceConfigurations are used.",
                    "networkProfile.networkApiVersion",
                ));
            }
            plan_nics(st, sub, rg, &this_vm, &location, configs, now, &mut nic_plans)?
        }
        None => referenced_nics(st, sub, props, &this_vm, now)?,
    };
    // Data disks.
    let mut data_disks: Vec<DataDiskPlan> = Vec::new();
    for disk in path(props, &["storageProfile", "dataDisks"]).and_then(Value::as_array).into_iter().flatten() {
        let lun = field(disk, "lun")
            .and_then(Value::as_i64)
            .filter(|l| (0..64).contains(l))
            .ok_or_else(|| ArmError::required("lun"))?;
        if data_disks.iter().any(|d| d.lun == lun) {
            return Err(ArmError::invalid_parameter(format!("A disk at LUN {lun} already exists."), "dataDisks"));
        }
        let create_option = field(disk, "createOption").and_then(Value::as_str).unwrap_or("Empty").to_owned();
        let attached_here = existing.and_then(|vm| vm.data_disks.iter().find(|a| a.lun == Some(lun)));
        let sku = path_str(disk, &["managedDisk", "storageAccountType"]).unwrap_or("Premium_LRS").to_owned();
        let size_gb = field(disk, "diskSizeGB").and_then(Value::as_u64);
        let mut plan = DataDiskPlan {
            lun,
            attach: None,
            name: field(disk, "name").and_then(Value::as_str).map(str::to_owned),
            size_gb: size_gb.unwrap_or(0),
            sku,
            create_option: create_option.clone(),
            delete_option: delete_option(field(disk, "deleteOption")),
        };
        if let Some(att) = attached_here {
            plan.attach = Some((att.key.clone(), att.id.clone(), att.name.clone()));
        } else if create_option.eq_ignore_ascii_case("Attach") {
            let id = path_str(disk, &["managedDisk", "id"]).ok_or_else(|| ArmError::required("managedDisk.id"))?;
            let record = ids::resource(id, "Microsoft.Compute", "disks")
                .filter(|(s, _, _)| s.eq_ignore_ascii_case(sub))
                .and_then(|(s, r, n)| st.disks.get(&key(&s, &r, &n)))
                .ok_or_else(|| ArmError::invalid_reference(id, &this_vm))?;
            if let Some(owner) = &record.managed_by
                && !owner.eq_ignore_ascii_case(&this_vm)
            {
                return Err(ArmError::operation_not_allowed(format!(
                    "Disk {} is attached to VM {owner}.",
                    record.name
                )));
            }
            plan.attach = Some((key(&record.sub, &record.rg, &record.name), record.id.clone(), record.name.clone()));
        } else if create_option.eq_ignore_ascii_case("Empty") {
            if size_gb.is_none_or(|s| s == 0 || s > 32_767) {
                return Err(ArmError::invalid_parameter(
                    format!("Required parameter 'diskSizeGB' is missing or invalid for data disk at LUN {lun}."),
                    "diskSizeGB",
                ));
            }
            if let Some(name) = &plan.name
                && st.disks.contains_key(&key(sub, rg, name))
            {
                return Err(ArmError::new(
                    StatusCode::CONFLICT,
                    "ConflictingUserInput",
                    format!(
                        "Disk {name} already exists in resource group {}. Only CreateOption.Attach is supported.",
                        rg.to_ascii_uppercase()
                    ),
                ));
            }
        } else if create_option.eq_ignore_ascii_case("FromImage") {
            plan.size_gb = size_gb.unwrap_or(30);
        } else {
            return Err(ArmError::invalid_parameter(
                format!("The value '{create_option}' of parameter 'dataDisks.createOption' is not valid."),
                "createOption",
            ));
        }
        data_disks.push(plan);
    }
    let (model, _) = normalize(body);
    Ok(VmSpec { location, model, custom_data, nics, nic_plans, data_disks, image, failure })
}

/// A marketplace image with a purchase plan: a VM of it must carry that `plan`
/// (without it, or with another, ARM accepts the PUT and the VM fails
/// `VMMarketplaceInvalidInput`: the provisioning failure kubermatic/machine-controller#788,
/// hashicorp/terraform-provider-azurerm#4678 and Azure/sap-automation#433 report), and the
/// subscription must have accepted the plan's terms (else the PUT is refused at once,
/// 400 `ResourcePurchaseValidationFailed`). Plans are matched case-insensitively.
fn check_plan(
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

/// ARM's checks of a VM's `identity`: a known type; `UserAssigned` needs ids
/// (`MissingIdentityIds`), `SystemAssigned` takes none (`InvalidParameter`), and
/// every id is a user-assigned identity's ARM id (`InvalidIdentityId`). Whether the
/// identity exists is not checked (the fake has no Microsoft.ManagedIdentity).
fn check_identity(identity: Option<&Value>) -> Result<(), ArmError> {
    let Some(identity) = identity else { return Ok(()) };
    let kind = field(identity, "type").and_then(Value::as_str).unwrap_or("");
    let normal: String = kind.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_ascii_lowercase();
    let user = match normal.as_str() {
        "userassigned" | "systemassigned,userassigned" => true,
        "systemassigned" | "none" => false,
        _ => {
            return Err(ArmError::invalid_parameter(
                format!(
                    "The value '{kind}' of parameter 'identity.type' is invalid; allowed: SystemAssigned, UserAssigned, 'SystemAssigned, UserAssigned', None."
                ),
                "identity.type",
            ));
        }
    };
    let ids: Vec<&String> = field(identity, "userAssignedIdentities")
        .and_then(Value::as_object)
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    if !user {
        if !ids.is_empty() {
            return Err(ArmError::invalid_parameter(
                format!("ResourceIdentity identityIds should not be provided if the type is \"{kind}\"."),
                "resourceIdentity.identityIds",
            ));
        }
        return Ok(());
    }
    if ids.is_empty() {
        return Err(ArmError::missing_identity_ids());
    }
    let bad: Vec<&str> = ids.iter().map(|id| id.as_str()).filter(|id| !is_user_assigned_identity_id(id)).collect();
    if !bad.is_empty() {
        return Err(ArmError::invalid_identity_ids(&bad.join(",")));
    }
    Ok(())
}

/// ARM's checks of a Spot VM (Compute REST `VirtualMachinePriorityTypes`,
/// `VirtualMachineEvictionPolicyTypes`, `BillingProfile`, and the Spot error table,
/// learn.microsoft.com/azure/virtual-machines/error-codes-spot): `priority` is
/// `Regular`, `Low` or `Spot`; `evictionPolicy` (`Deallocate`, `Delete`) only on a Spot
/// VM (`EvictionPolicyCanBeSetOnlyOnAzureSpotVirtualMachines`); `billingProfile.maxPrice`
/// -1 or a decimal > 0 (`MaxPriceValueInvalid`), only on a Spot VM; no Spot VM in an
/// availability set (`AzureSpotVMNotSupportedInAvailabilitySet`); a VM made without a
/// priority cannot get one later (`VMPriorityCannotBeApplied`). Values case-insensitive.
fn check_spot(props: &Value, existing: Option<&VmRecord>) -> Result<(), ArmError> {
    let priority = field(props, "priority").and_then(Value::as_str);
    let spot = match priority {
        None => false,
        Some(p) if p.eq_ignore_ascii_case("Regular") => false,
        Some(p) if p.eq_ignore_ascii_case("Spot") || p.eq_ignore_ascii_case("Low") => true,
        Some(p) => {
            return Err(ArmError::invalid_parameter(
                format!("The value '{p}' of parameter 'priority' is invalid; allowed: Regular, Low, Spot."),
                "priority",
            ));
        }
    };
    if let (Some(p), Some(vm)) = (priority, existing)
        && path(&vm.model, &["properties", "priority"]).is_none()
        && spot
    {
        return Err(ArmError::new(
            StatusCode::BAD_REQUEST,
            "VMPriorityCannotBeApplied",
            format!(
                "The specified priority value '{p}' cannot be applied to the Virtual Machine '{}' since no priority was specified when the Virtual Machine was created.",
                vm.name
            ),
        )
        .with_target("priority"));
    }
    if let Some(policy) = field(props, "evictionPolicy").filter(|v| !v.is_null()) {
        let known =
            policy.as_str().is_some_and(|p| p.eq_ignore_ascii_case("Deallocate") || p.eq_ignore_ascii_case("Delete"));
        if !known {
            return Err(ArmError::invalid_parameter(
                format!("The value {policy} of parameter 'evictionPolicy' is invalid; allowed: Deallocate, Delete."),
                "evictionPolicy",
            ));
        }
        if !spot {
            return Err(ArmError::new(
                StatusCode::BAD_REQUEST,
                "EvictionPolicyCanBeSetOnlyOnAzureSpotVirtualMachines",
                "Eviction policy can be set only on Azure Spot Virtual Machines.",
            )
            .with_target("evictionPolicy"));
        }
    }
    if let Some(price) = path(props, &["billingProfile", "maxPrice"]).filter(|v| !v.is_null()) {
        if !price.as_f64().is_some_and(|p| p == -1.0 || p > 0.0) {
            return Err(ArmError::new(
                StatusCode::BAD_REQUEST,
                "MaxPriceValueInvalid",
                "Invalid max price value. The only supported values for max price are -1 or a decimal greater than zero. A max price value of -1 indicates the Azure Spot virtual machine will not be evicted for price reasons.",
            )
            .with_target("billingProfile.maxPrice"));
        }
        if !spot {
            // The Spot error table names no code of its own for this: ARM's generic one.
            return Err(ArmError::invalid_parameter(
                "Billing profile (maxPrice) can be set only on Azure Spot Virtual Machines.",
                "billingProfile.maxPrice",
            ));
        }
    }
    if spot && path(props, &["availabilitySet", "id"]).and_then(Value::as_str).is_some_and(|id| !id.is_empty()) {
        return Err(ArmError::new(
            StatusCode::BAD_REQUEST,
            "AzureSpotVMNotSupportedInAvailabilitySet",
            "Azure Spot Virtual Machine is not supported in Availability Set.",
        )
        .with_target("availabilitySet"));
    }
    Ok(())
}

/// `securityProfile.encryptionAtHost` needs the subscription feature
/// `Microsoft.Compute/EncryptionAtHost`: without it ARM refuses the property at all,
/// `false` too (400 `InvalidParameter`, target `securityProfile.encryptionAtHost`, the
/// message users report, e.g. Azure/azure-cli#16788, Azure/bicep-registry-modules#2374).
fn check_encryption_at_host(st: &State, sub: &str, props: &Value) -> Result<(), ArmError> {
    let asked = path(props, &["securityProfile", "encryptionAtHost"]).is_some_and(|v| !v.is_null());
    if asked && !st.encryption_at_host.contains(&sub.to_ascii_lowercase()) {
        return Err(ArmError::invalid_parameter(
            "The property 'securityProfile.encryptionAtHost' is not valid because the 'Microsoft.Compute/EncryptionAtHost' feature is not enabled for this subscription.",
            "securityProfile.encryptionAtHost",
        ));
    }
    Ok(())
}

/// `/subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{name}`
/// (segment names case-insensitive), with a resource group and a name of Azure's syntax.
fn is_user_assigned_identity_id(id: &str) -> bool {
    let Some((sub, rg, name)) = ids::resource(id, "Microsoft.ManagedIdentity", "userAssignedIdentities") else {
        return false;
    };
    let rg_ok = !rg.is_empty()
        && rg.len() <= 90
        && !rg.ends_with('.')
        && rg.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '(' | ')'));
    let name_ok = (3..=128).contains(&name.len())
        && name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    id.starts_with('/') && uuid::Uuid::parse_str(&sub).is_ok() && rg_ok && name_ok
}

/// Refuses a NIC attached to another VM, or reserved after a failed or deleted one.
fn check_nic_free(st: &State, nic: &NicRecord, this_vm: &str, now: Instant) -> Result<(), ArmError> {
    if let Some(other) = &nic.vm
        && !other.eq_ignore_ascii_case(this_vm)
    {
        return Err(ArmError::new(
            StatusCode::BAD_REQUEST,
            "NicInUse",
            format!(
                "Network Interface {} is used by existing resource {other}. A network interface can be attached to one virtual machine only.",
                nic.id
            ),
        ));
    }
    if let Some(reservation) = &nic.reserved
        && st.reservation_active(reservation, now)
    {
        return Err(ArmError::nic_reserved(&reservation.vm, st.reservation_seconds()));
    }
    Ok(())
}

/// The NICs `networkProfile.networkInterfaces` references (they must exist).
fn referenced_nics(
    st: &State,
    sub: &str,
    props: &Value,
    this_vm: &str,
    now: Instant,
) -> Result<Vec<Attachment>, ArmError> {
    let list = path(props, &["networkProfile", "networkInterfaces"])
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
        .ok_or_else(|| ArmError::required("networkProfile"))?;
    let mut nics: Vec<Attachment> = Vec::new();
    for entry in list {
        let id = field(entry, "id").and_then(Value::as_str).unwrap_or("");
        let parsed =
            ids::resource(id, "Microsoft.Network", "networkInterfaces").filter(|(s, _, _)| s.eq_ignore_ascii_case(sub));
        let Some((s, r, n)) = parsed else {
            return Err(ArmError::invalid_reference(id, this_vm));
        };
        let nic_key = key(&s, &r, &n);
        let Some(nic) = st.nics.get(&nic_key).filter(|nic| nic.deleting_until.is_none()) else {
            return Err(ArmError::invalid_reference(id, this_vm));
        };
        check_nic_free(st, nic, this_vm, now)?;
        if nics.iter().any(|a| a.key == nic_key) {
            return Err(ArmError::invalid_parameter(
                format!("Network interface {id} is referenced more than once."),
                "networkInterfaces",
            ));
        }
        nics.push(Attachment {
            key: nic_key,
            id: nic.id.clone(),
            name: nic.name.clone(),
            delete_option: delete_option(path(entry, &["properties", "deleteOption"])),
            lun: None,
        });
    }
    Ok(nics)
}

/// A NIC the VM PUT makes from one of its `networkInterfaceConfigurations`.
#[derive(Debug, Clone)]
struct NicPlan {
    key: Key,
    name: String,
    id: String,
    location: String,
    /// The NIC as a `networkInterfaces.createOrUpdate` would store it (no tags).
    model: Value,
    /// Lowercase id of the first IP configuration's subnet.
    subnet_lc: String,
}

/// The NICs of `networkProfile.networkInterfaceConfigurations`: each is named
/// as configured, in the VM's resource group; one of that name that exists
/// already is taken over when it is free (as a NIC PUT of the name would
/// update it), refused when it belongs to another VM or is reserved.
#[allow(clippy::too_many_arguments)]
fn plan_nics(
    st: &State,
    sub: &str,
    rg: &str,
    this_vm: &str,
    location: &str,
    configs: &[Value],
    now: Instant,
    plans: &mut Vec<NicPlan>,
) -> Result<Vec<Attachment>, ArmError> {
    let mut nics: Vec<Attachment> = Vec::new();
    for config in configs {
        let name = field(config, "name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ArmError::required("networkInterfaceConfigurations.name"))?;
        let props = field(config, "properties").cloned().unwrap_or(json!({}));
        let ip_configs = field(&props, "ipConfigurations")
            .and_then(Value::as_array)
            .filter(|c| !c.is_empty())
            .ok_or_else(|| ArmError::required("networkInterfaceConfigurations.properties.ipConfigurations"))?;
        let id = nics::nic_id(sub, rg, name);
        let mut subnet_lc = None;
        let mut nic_ip_configs = Vec::new();
        for (i, ip) in ip_configs.iter().enumerate() {
            let subnet = path_str(ip, &["properties", "subnet", "id"]).unwrap_or("");
            let lc = subnet.trim_end_matches('/').to_ascii_lowercase();
            if !st.subnets.contains_key(&lc) {
                return Err(ArmError::invalid_reference(subnet, &id));
            }
            subnet_lc.get_or_insert(lc);
            let ip_name = field(ip, "name").and_then(Value::as_str).unwrap_or("ipconfig1");
            let primary = path(ip, &["properties", "primary"]).and_then(Value::as_bool).unwrap_or(i == 0);
            nic_ip_configs.push(json!({
                "name": ip_name,
                "properties": {"subnet": {"id": subnet}, "privateIPAllocationMethod": "Dynamic", "primary": primary}
            }));
        }
        let nic_key = key(sub, rg, name);
        if let Some(nic) = st.nics.get(&nic_key) {
            if nic.deleting_until.is_some() {
                return Err(ArmError::another_operation_in_progress(&nic.id));
            }
            check_nic_free(st, nic, this_vm, now)?;
        }
        if nics.iter().any(|a| a.key == nic_key) {
            return Err(ArmError::invalid_parameter(
                format!("Network interface configuration {name} is specified more than once."),
                "networkInterfaceConfigurations",
            ));
        }
        let flag = |name: &str| field(&props, name).and_then(Value::as_bool).unwrap_or(false);
        let mut model_props = json!({
            "enableIPForwarding": flag("enableIPForwarding"),
            "enableAcceleratedNetworking": flag("enableAcceleratedNetworking"),
            "ipConfigurations": nic_ip_configs,
        });
        if let Some(nsg) = field(&props, "networkSecurityGroup") {
            model_props["networkSecurityGroup"] = nsg.clone();
        }
        let id = st.nics.get(&nic_key).map_or(id, |nic| nic.id.clone());
        let stored_name = st.nics.get(&nic_key).map_or_else(|| name.to_owned(), |nic| nic.name.clone());
        nics.push(Attachment {
            key: nic_key.clone(),
            id: id.clone(),
            name: stored_name.clone(),
            delete_option: delete_option(field(&props, "deleteOption")),
            lun: None,
        });
        plans.push(NicPlan {
            key: nic_key,
            name: stored_name,
            id,
            location: location.to_owned(),
            model: json!({"location": location, "properties": model_props}),
            subnet_lc: subnet_lc.unwrap_or_default(),
        });
    }
    Ok(nics)
}

/// Creates (or updates) the NICs a VM PUT makes from its configurations.
fn realize_nics(st: &mut State, sub: &str, rg: &str, plans: &[NicPlan]) {
    for plan in plans {
        if let Some(nic) = st.nics.get_mut(&plan.key) {
            nic.model = plan.model.clone();
            nic.location.clone_from(&plan.location);
            nic.generation += 1;
            continue;
        }
        let ip = st.allocate_ip(&plan.subnet_lc);
        st.nics.insert(
            plan.key.clone(),
            NicRecord {
                sub: sub.to_owned(),
                rg: rg.to_owned(),
                name: plan.name.clone(),
                id: plan.id.clone(),
                location: plan.location.clone(),
                model: plan.model.clone(),
                private_ip: ip,
                guid: uuid::Uuid::new_v4().to_string(),
                mac: nics::mac(),
                vm: None,
                reserved: None,
                deleting_until: None,
                generation: 1,
                created_at: Instant::now(),
            },
        );
    }
}

/// Creates the disks of `plans` that do not exist yet and marks all as used by `vm`.
fn realize_data_disks(
    st: &mut State,
    sub: &str,
    rg: &str,
    vm: &VmRecord,
    plans: &[DataDiskPlan],
    zones: Option<&Value>,
) -> Vec<Attachment> {
    let mut out = Vec::new();
    for plan in plans {
        let (disk_key, id, name) = match &plan.attach {
            Some(existing) => existing.clone(),
            None => {
                let name = plan.name.clone().unwrap_or_else(|| format!("{}_disk{}_{}", vm.name, plan.lun + 1, hex32()));
                let id = disk_id(sub, rg, &name);
                st.disks.insert(
                    key(sub, rg, &name),
                    DiskRecord {
                        sub: sub.to_owned(),
                        rg: rg.to_owned(),
                        name: name.clone(),
                        id: id.clone(),
                        location: vm.location.clone(),
                        tags: None,
                        zones: zones.cloned(),
                        sku: plan.sku.clone(),
                        size_gb: plan.size_gb,
                        creation_data: json!({"createOption": plan.create_option}),
                        os_type: None,
                        managed_by: None,
                        phase: DiskPhase::Succeeded,
                        time_created: timestamp(SystemTime::now()),
                        unique_id: uuid::Uuid::new_v4().to_string(),
                        performance: None,
                        performance_changes: Vec::new(),
                    },
                );
                (key(sub, rg, &name), id, name)
            }
        };
        if let Some(disk) = st.disks.get_mut(&disk_key) {
            disk.managed_by = Some(vm.id.clone());
        }
        out.push(Attachment {
            key: disk_key,
            id,
            name,
            delete_option: plan.delete_option.clone(),
            lun: Some(plan.lun),
        });
    }
    out
}

/// `PUT .../virtualMachines/NAME`: create (201, `Creating`) or update (200).
pub(crate) fn put(ctx: &Ctx, req: &Req, sub: &str, rg: &str, name: &str) -> Result<Response, ArmError> {
    let body = req.json_body()?;
    let now = Instant::now();
    let boot = ctx.admin.timing().boot();
    let invisible = ctx.admin.consistency().invisible();
    let mut st = ctx.store.lock_at(now);
    let rg_name = st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?.name.clone();
    let vm_key = key(sub, rg, name);
    match req.if_none_match.as_deref() {
        None => {}
        // Create only: a VM of the name (in any state, visible to reads or not yet) refuses the PUT.
        Some("*") if st.vms.contains_key(&vm_key) => {
            return Err(ArmError::precondition_failed(&vm_id(sub, &rg_name, name)));
        }
        Some("*") => {}
        Some(_) => {
            return Err(ArmError::invalid_parameter(
                "The If-None-Match header supports the value '*' only.",
                "If-None-Match",
            ));
        }
    }
    if st.vms.contains_key(&vm_key) {
        return update(&mut st, req, sub, &rg_name, &vm_key, body, now, boot);
    }
    let spec = validate(&st, req, sub, &rg_name, name, body, None, now)?;
    realize_nics(&mut st, sub, &rg_name, &spec.nic_plans);
    let id = vm_id(sub, &rg_name, name);
    let zones = field(&spec.model, "zones").cloned();
    // The OS disk.
    let os = path(&spec.model, &["properties", "storageProfile", "osDisk"]).cloned().unwrap_or(json!({}));
    let os_name = field(&os, "name")
        .and_then(Value::as_str)
        .map_or_else(|| format!("{name}_OsDisk_1_{}", hex32()), str::to_owned);
    let (image_field, image_ref) = spec.image.clone().unwrap_or_else(|| ("imageReference".into(), json!({})));
    let mut creation = Map::new();
    creation.insert("createOption".into(), json!("FromImage"));
    creation.insert(image_field, image_ref);
    let os_key = key(sub, &rg_name, &os_name);
    let os_id = disk_id(sub, &rg_name, &os_name);
    st.disks.insert(
        os_key.clone(),
        DiskRecord {
            sub: sub.to_owned(),
            rg: rg_name.clone(),
            name: os_name.clone(),
            id: os_id.clone(),
            location: spec.location.clone(),
            tags: None,
            zones: zones.clone(),
            sku: path_str(&os, &["managedDisk", "storageAccountType"]).unwrap_or("Premium_LRS").to_owned(),
            size_gb: field(&os, "diskSizeGB").and_then(Value::as_u64).unwrap_or(30),
            creation_data: Value::Object(creation),
            os_type: Some("Linux".into()),
            managed_by: Some(id.clone()),
            phase: DiskPhase::Succeeded,
            time_created: timestamp(SystemTime::now()),
            unique_id: uuid::Uuid::new_v4().to_string(),
            performance: None,
            performance_changes: Vec::new(),
        },
    );
    for nic in &spec.nics {
        if let Some(record) = st.nics.get_mut(&nic.key) {
            record.vm = Some(id.clone());
            record.reserved = None;
            record.generation += 1;
        }
    }
    let failure = match spec.failure.clone() {
        Some(failure) => Some(failure),
        None => st.vm_failures.pop_front().map(|code| Failure::for_code(&code)),
    };
    let until = now + boot;
    let op = st.new_operation(sub, now, until, failure.clone(), None);
    let mut record = VmRecord {
        sub: sub.to_owned(),
        rg: rg_name.clone(),
        name: name.to_owned(),
        id: id.clone(),
        location: spec.location.clone(),
        model: spec.model,
        custom_data: spec.custom_data,
        vm_id: uuid::Uuid::new_v4().to_string(),
        time_created: timestamp(SystemTime::now()),
        phase: VmPhase::Provisioning { until, failure, updating: false, op: op.clone() },
        deallocated: false,
        visible_at: now + invisible,
        nics: spec.nics,
        os_disk: Attachment {
            key: os_key,
            id: os_id,
            name: os_name,
            delete_option: delete_option(field(&os, "deleteOption")),
            lun: None,
        },
        data_disks: Vec::new(),
    };
    record.data_disks = realize_data_disks(&mut st, sub, &rg_name, &record, &spec.data_disks, zones.as_ref());
    let body = render::vm(&record, false);
    let location = record.location.clone();
    st.vms.insert(vm_key, record);
    let retry = operations::retry_after(&st, &op, now);
    drop(st);
    let (async_url, _) = req.op_urls(sub, "Microsoft.Compute", &location, &op);
    let mut headers = vec![("Azure-AsyncOperation", async_url)];
    headers.extend(retry);
    Ok(respond(StatusCode::CREATED, Some(body), &headers))
}

#[allow(clippy::too_many_arguments)]
fn update(
    st: &mut State,
    req: &Req,
    sub: &str,
    rg: &str,
    vm_key: &Key,
    body: Value,
    now: Instant,
    boot: Duration,
) -> Result<Response, ArmError> {
    let Some(existing) = st.vms.get(vm_key).cloned() else {
        return Err(not_found(&vm_key.2, rg));
    };
    if matches!(existing.phase, VmPhase::Deleting { .. }) {
        return Err(ArmError::operation_not_allowed(format!(
            "Operation 'PUT' is not allowed on VM '{}' since the VM is marked for deletion. You can only retry the Delete operation (or wait for an ongoing one to complete).",
            existing.name
        )));
    }
    let spec = validate(st, req, sub, rg, &existing.name, body, Some(&existing), now)?;
    let unchanged = fingerprint(&spec.model) == fingerprint(&existing.model);
    let op = match &existing.phase {
        VmPhase::Provisioning { op, .. } if unchanged => op.clone(),
        VmPhase::Succeeded if unchanged => st.new_operation(sub, now, now, None, None),
        // An unchanged re-PUT of a Failed VM reports the failure again (so that a client
        // that polls by re-PUTting, like the Rust SDK's `IntoFuture`, sees the failure).
        VmPhase::Failed(failure) if unchanged => st.new_operation(sub, now, now, Some(failure.clone()), None),
        _ => {
            // A real update (changed model, or a changed retry of a Failed VM): re-provision.
            let mut record = existing.clone();
            realize_nics(st, sub, rg, &spec.nic_plans);
            for old in &existing.nics {
                if !spec.nics.iter().any(|n| n.key == old.key)
                    && let Some(nic) = st.nics.get_mut(&old.key)
                {
                    nic.vm = None;
                    nic.generation += 1;
                }
            }
            for nic in &spec.nics {
                if let Some(n) = st.nics.get_mut(&nic.key) {
                    n.vm = Some(existing.id.clone());
                    n.generation += 1;
                }
            }
            for old in &existing.data_disks {
                if !spec.data_disks.iter().any(|d| Some(d.lun) == old.lun)
                    && let Some(disk) = st.disks.get_mut(&old.key)
                {
                    disk.managed_by = None;
                }
            }
            let zones = field(&spec.model, "zones").cloned();
            record.data_disks = realize_data_disks(st, sub, rg, &record, &spec.data_disks, zones.as_ref());
            record.nics = spec.nics;
            record.os_disk.delete_option =
                delete_option(path(&spec.model, &["properties", "storageProfile", "osDisk", "deleteOption"]));
            record.model = spec.model;
            let failure = st.vm_failures.pop_front().map(|code| Failure::for_code(&code));
            let until = now + boot;
            let op = st.new_operation(sub, now, until, failure.clone(), None);
            record.phase = VmPhase::Provisioning { until, failure, updating: true, op: op.clone() };
            st.vms.insert(vm_key.clone(), record);
            op
        }
    };
    let record = st.vms.get(vm_key).ok_or_else(|| not_found(&vm_key.2, rg))?;
    let (async_url, _) = req.op_urls(sub, "Microsoft.Compute", &record.location, &op);
    let mut headers = vec![("Azure-AsyncOperation", async_url)];
    headers.extend(operations::retry_after(st, &op, now));
    Ok(respond(StatusCode::OK, Some(render::vm(record, false)), &headers))
}

/// Deep-merges a JSON merge patch into `target`.
fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if k == "tags" || !v.is_object() {
                    t.insert(k.clone(), v.clone());
                } else {
                    merge(t.entry(k.clone()).or_insert_with(|| json!({})), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// `PATCH .../virtualMachines/NAME`: tags and delete options (200 + already finished async op).
pub(crate) fn patch(ctx: &Ctx, req: &Req, sub: &str, rg: &str, name: &str) -> Result<Response, ArmError> {
    let body = req.json_body()?;
    let (patch, custom_data) = normalize(body);
    let now = Instant::now();
    let mut st = ctx.store.lock_at(now);
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let vm_key = key(sub, rg, name);
    let record = st.vms.get_mut(&vm_key).ok_or_else(|| not_found(name, rg))?;
    if matches!(record.phase, VmPhase::Deleting { .. }) {
        return Err(ArmError::operation_not_allowed(format!(
            "Operation 'PATCH' is not allowed on VM '{}' since the VM is marked for deletion.",
            record.name
        )));
    }
    if let Some(new) = &custom_data
        && record.custom_data.as_deref() != Some(new.as_str())
    {
        return Err(ArmError::property_change_not_allowed("customData"));
    }
    merge(&mut record.model, &patch);
    let model = record.model.clone();
    for nic in &mut record.nics {
        if let Some(entry) = path(&model, &["properties", "networkProfile", "networkInterfaces"])
            .and_then(Value::as_array)
            .and_then(|l| {
                l.iter()
                    .find(|n| field(n, "id").and_then(Value::as_str).is_some_and(|id| id.eq_ignore_ascii_case(&nic.id)))
            })
        {
            nic.delete_option = delete_option(path(entry, &["properties", "deleteOption"]));
        }
    }
    if let Some(option) = path(&model, &["properties", "storageProfile", "osDisk", "deleteOption"]) {
        record.os_disk.delete_option = delete_option(Some(option));
    }
    for disk in &mut record.data_disks {
        if let Some(entry) = path(&model, &["properties", "storageProfile", "dataDisks"])
            .and_then(Value::as_array)
            .and_then(|l| l.iter().find(|d| field(d, "lun").and_then(Value::as_i64) == disk.lun))
            && let Some(option) = field(entry, "deleteOption")
        {
            disk.delete_option = delete_option(Some(option));
        }
    }
    let body = render::vm(record, false);
    let location = record.location.clone();
    let op = st.new_operation(sub, now, now, None, None);
    let (async_url, _) = req.op_urls(sub, "Microsoft.Compute", &location, &op);
    Ok(respond(StatusCode::OK, Some(body), &[("Azure-AsyncOperation", async_url)]))
}

/// `GET .../virtualMachines/NAME[?$expand=instanceView]`; 404 while still invisible.
pub(crate) fn get(ctx: &Ctx, req: &Req, sub: &str, rg: &str, name: &str) -> Result<Response, ArmError> {
    let now = Instant::now();
    let st = ctx.store.lock_at(now);
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let record =
        st.vms.get(&key(sub, rg, name)).filter(|vm| now >= vm.visible_at).ok_or_else(|| not_found(name, rg))?;
    let expand = req.param("$expand").is_some_and(|e| e.eq_ignore_ascii_case("instanceView"));
    Ok(respond(StatusCode::OK, Some(render::vm(record, expand)), &[]))
}

/// `GET .../virtualMachines`: paged by name.
pub(crate) fn list(ctx: &Ctx, req: &Req, sub: &str, rg: &str) -> Result<Response, ArmError> {
    let now = Instant::now();
    let st = ctx.store.lock_at(now);
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let (s, r) = (sub.to_ascii_lowercase(), rg.to_ascii_lowercase());
    let items: Vec<(String, _)> = st
        .vms
        .iter()
        .filter(|((ks, kr, _), vm)| *ks == s && *kr == r && now >= vm.visible_at)
        .map(|((_, _, name), vm)| (name.clone(), vm))
        .collect();
    let body = paging::page(
        items,
        req.param("$skiptoken"),
        st.page_size,
        &format!("{}{}", req.base, req.path),
        &[],
        &req.api_version,
        |vm| render::vm(vm, false),
    );
    Ok(respond(StatusCode::OK, Some(body), &[]))
}

/// `DELETE .../virtualMachines/NAME[?forceDeletion=]`: 202 + async op, or 204 when absent.
pub(crate) fn delete(ctx: &Ctx, req: &Req, sub: &str, rg: &str, name: &str) -> Result<Response, ArmError> {
    let now = Instant::now();
    let stop = ctx.admin.timing().stop();
    let mut st = ctx.store.lock_at(now);
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let vm_key = key(sub, rg, name);
    let Some(record) = st.vms.get_mut(&vm_key) else {
        return Ok(respond(StatusCode::NO_CONTENT, None, &[]));
    };
    let until = match record.phase {
        VmPhase::Deleting { until } => until,
        _ => now + stop,
    };
    record.phase = VmPhase::Deleting { until };
    let location = record.location.clone();
    let op = st.new_operation(sub, now, until, None, None);
    let (async_url, location_url) = req.op_urls(sub, "Microsoft.Compute", &location, &op);
    let mut headers = vec![("Azure-AsyncOperation", async_url), ("Location", location_url)];
    headers.extend(operations::retry_after(&st, &op, now));
    Ok(respond(StatusCode::ACCEPTED, None, &headers))
}

/// A VM PUT refused synchronously for capacity/quota reserves the NICs its body referenced.
pub(crate) fn reserve_on_refusal(ctx: &Ctx, sub: &str, rg: &str, name: &str, body: &[u8]) {
    let Ok(body) = serde_json::from_slice::<Value>(body) else { return };
    let now = Instant::now();
    let mut st = ctx.store.lock_at(now);
    let Some(rg_name) = st.resource_group(sub, rg).map(|g| g.name.clone()) else { return };
    let vm = vm_id(sub, &rg_name, name);
    let nic_keys: Vec<Key> = path(&body, &["properties", "networkProfile", "networkInterfaces"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|n| field(n, "id").and_then(Value::as_str))
        .filter_map(|id| ids::resource(id, "Microsoft.Network", "networkInterfaces"))
        .filter(|(s, _, _)| s.eq_ignore_ascii_case(sub))
        .map(|(s, r, n)| key(&s, &r, &n))
        .collect();
    for nic_key in nic_keys {
        let free = st.nics.get(&nic_key).is_some_and(|nic| nic.vm.is_none() && nic.deleting_until.is_none());
        if free {
            st.reserve_nic(&nic_key, &vm, now);
        }
    }
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
