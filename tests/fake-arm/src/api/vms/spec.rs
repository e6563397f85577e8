//! The checks of a VM PUT body (location, size, identity, Spot, encryption at host,
//! OS profile and custom data, network profile, data disks), ending in a [`VmSpec`]
//! that [`super::provision`] realizes.

use std::time::Instant;

use axum::http::StatusCode;
use base64::Engine as _;
use serde_json::Value;

use super::image::{check_image, check_plan};
use super::network::{NicPlan, plan_nics, referenced_nics};
use super::{delete_option, vm_id};
use crate::api::{Req, body_location, ids};
use crate::error::ArmError;
use crate::state::seed::VM_SIZES;
use crate::state::{Attachment, Failure, Key, State, VmRecord, key};
use crate::wire::{field, path, path_str};

/// Azure's limit on `osProfile.customData` (base64 characters).
pub(super) const MAX_CUSTOM_DATA: usize = 87_380;

/// A data disk the request asks for.
#[derive(Debug, Clone)]
pub(super) struct DataDiskPlan {
    pub(super) lun: i64,
    /// Existing disk (Attach) or `None` (create).
    pub(super) attach: Option<(Key, String, String)>,
    pub(super) name: Option<String>,
    pub(super) size_gb: u64,
    pub(super) sku: String,
    pub(super) create_option: String,
    pub(super) delete_option: String,
}

/// A validated VM request.
#[derive(Debug)]
pub(super) struct VmSpec {
    pub(super) location: String,
    pub(super) model: Value,
    pub(super) custom_data: Option<String>,
    pub(super) nics: Vec<Attachment>,
    /// NICs the PUT makes (`networkInterfaceConfigurations`).
    pub(super) nic_plans: Vec<NicPlan>,
    pub(super) data_disks: Vec<DataDiskPlan>,
    /// `creationData.imageReference`/`galleryImageReference` for the OS disk.
    pub(super) image: Option<(String, Value)>,
    /// The failure the VM's provisioning ends with whatever the failure queue holds
    /// (a marketplace image with a plan PUT without it: `VMMarketplaceInvalidInput`).
    pub(super) failure: Option<Failure>,
}

/// Removes read-only and secret fields from a request body before it is stored.
pub(super) fn normalize(mut body: Value) -> (Value, Option<String>) {
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

/// Validates a VM PUT body; `existing` is the VM being updated.
#[allow(clippy::too_many_arguments)]
pub(super) fn validate(
    st: &State,
    req: &Req,
    sub: &str,
    rg: &str,
    vm: &str,
    body: Value,
    existing: Option<&VmRecord>,
    now: Instant,
) -> Result<VmSpec, ArmError> {
    let location = body_location(&body)?;
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
            return Err(disk_exists(name, rg).with_target("/properties/storageProfile/osDisk/name"));
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
                return Err(disk_exists(name, rg));
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

/// ARM's 409 `ConflictingUserInput` for a VM PUT that would make disk `name`, which
/// exists in resource group `rg` already (only `Attach` may name an existing disk).
fn disk_exists(name: &str, rg: &str) -> ArmError {
    ArmError::new(
        StatusCode::CONFLICT,
        "ConflictingUserInput",
        format!(
            "Disk {name} already exists in resource group {}. Only CreateOption.Attach is supported.",
            rg.to_ascii_uppercase()
        ),
    )
}

/// ARM's checks of a VM's `identity`: a known type; `UserAssigned` needs ids
/// (`MissingIdentityIds`), `SystemAssigned` takes none (`InvalidParameter`), and
/// every id is a user-assigned identity's ARM id (`InvalidIdentityId`). Whether the
/// identity exists is not checked (the fake has no Microsoft.ManagedIdentity).
pub(super) fn check_identity(identity: Option<&Value>) -> Result<(), ArmError> {
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
pub(super) fn check_spot(props: &Value, existing: Option<&VmRecord>) -> Result<(), ArmError> {
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
pub(super) fn check_encryption_at_host(st: &State, sub: &str, props: &Value) -> Result<(), ArmError> {
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
pub(super) fn is_user_assigned_identity_id(id: &str) -> bool {
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
