//! The request bodies of one machine: its NIC and its VM, built from the spec
//! as the Go provider builds them, plus reading what ARM answers about a VM.
//!
//! Bodies are written as ARM JSON, the JSON the Go provider's structs
//! marshal to, and sent as built ([`crate::clients::Api::put_raw`]): never
//! through an SDK model, whose types drop what they cannot express
//! (azure_mgmt_compute 0.21's `UserAssignedIdentities` is an empty struct:
//! decoded into it, the VM's identity ids were lost and ARM refuses
//! `userAssignedIdentities: {}`). The image disk body still goes through the
//! SDK's `Disk`; a test checks that the model keeps every field of it.

use std::collections::BTreeMap;

use base64::Engine as _;
use machine_driver_api::{DriverError, SecretBytes};
use serde_json::{Value, json};

use crate::marketplace::Plan;
use crate::naming::{MACHINE_UID_TAG, VmRef, data_disk_name};
use crate::spec::{AzureProviderSpec, DataDisk, ImageReference, Placement};

/// Largest user data Azure takes as `customData` (bytes before base64).
pub const MAX_USER_DATA_BYTES: usize = 65_535;

/// The SSH key installed when the class has none: Azure needs one when
/// password login is off. Its private half was discarded when it was made,
/// so nobody can log in with it (the Go provider generates a throwaway key
/// on every create for the same reason).
const PLACEHOLDER_SSH_KEY: &str = include_str!("placeholder_ssh_key.pub");

/// `networkProfile.networkApiVersion` of the VMs: the Microsoft.Network API
/// version Compute uses to make their NICs (the only value the API defines).
const NETWORK_API_VERSION: &str = "2020-11-01";

/// The compute VM model.
pub(crate) type VirtualMachine = azure_mgmt_compute::package_2024_07_01::models::VirtualMachine;
/// The network NIC model.
pub(crate) type NetworkInterface = azure_mgmt_network::package_2024_03::models::NetworkInterface;

/// The tags of the machine's resources: the spec's (with the cluster and
/// role markers) plus the machine uid, when the request has one.
pub(crate) fn machine_tags(spec: &AzureProviderSpec, uid: &str) -> BTreeMap<String, String> {
    let mut tags = spec.tags.clone();
    if !uid.is_empty() {
        tags.insert(MACHINE_UID_TAG.to_string(), uid.to_string());
    }
    tags
}

/// The VM's `networkInterfaceConfigurations`: the NIC named `nic_name`, made
/// by the VM PUT itself (no NIC PUT of its own) with what the Go provider puts
/// on its NIC: IP forwarding on, a dynamic private IP in the spec's subnet,
/// accelerated networking as the spec says, deleted with the VM.
fn nic_configuration(spec: &AzureProviderSpec, vm: &VmRef, nic_name: &str) -> Value {
    let subnet = format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/{}/subnets/{}",
        vm.subscription,
        spec.vnet_resource_group(),
        spec.subnet_info.vnet_name,
        spec.subnet_info.subnet_name
    );
    json!({
        "name": nic_name,
        "properties": {
            "primary": true,
            "deleteOption": "Delete",
            "enableIPForwarding": true,
            "enableAcceleratedNetworking": spec.properties.network_profile.accelerated_networking.unwrap_or(false),
            "ipConfigurations": [{
                "name": nic_name,
                "properties": {"subnet": {"id": subnet}, "primary": true, "privateIPAddressVersion": "IPv4"}
            }]
        }
    })
}

/// The VM PUT body of a machine with its NIC `nic_name` (made by the same
/// PUT), booting `user_data`, with the marketplace purchase `plan` of its
/// image when it has one (as the Go provider's `createVMCreationParams`,
/// pkg/azure/provider/helpers/driver.go).
pub(crate) fn vm_body(
    spec: &AzureProviderSpec,
    vm: &VmRef,
    nic_name: &str,
    uid: &str,
    user_data: &SecretBytes,
    plan: Option<&Plan>,
) -> Value {
    let p = &spec.properties;
    let os = &p.storage_profile.os_disk;
    let mut os_disk = json!({
        "name": vm.os_disk_name(),
        "createOption": os.create_option,
        "diskSizeGB": os.disk_size_gb,
        "deleteOption": "Delete",
        "managedDisk": {}
    });
    set(&mut os_disk, "caching", os.caching.as_deref());
    set(&mut os_disk["managedDisk"], "storageAccountType", os.managed_disk.storage_account_type.as_deref());
    if let Some(enc) = os.managed_disk.security_profile.as_ref().and_then(|s| s.security_encryption_type.as_deref()) {
        os_disk["managedDisk"]["securityProfile"] = json!({"securityEncryptionType": enc});
    }
    let data_disks: Vec<Value> = p
        .storage_profile
        .data_disks
        .iter()
        .map(|d| {
            let name = data_disk_name(&vm.name, d);
            let mut disk = json!({
                "lun": d.lun.unwrap_or(0),
                "name": name,
                "diskSizeGB": d.disk_size_gb,
                "deleteOption": "Delete",
                "managedDisk": {"storageAccountType": d.storage_account_type},
            });
            if d.made_before_vm() {
                // Made from its image or with its performance before the VM (crate::create), attached here.
                disk["createOption"] = json!("Attach");
                disk["managedDisk"]["id"] = json!(vm.resource_id("Microsoft.Compute/disks", &name));
            } else {
                disk["createOption"] = json!("Empty");
            }
            set(&mut disk, "caching", d.caching.as_deref());
            disk
        })
        .collect();
    let ssh = &p.os_profile.linux_configuration.ssh.public_keys;
    let key_data = if ssh.key_data.trim().is_empty() { PLACEHOLDER_SSH_KEY.trim() } else { ssh.key_data.trim() };
    let key_path = if ssh.path.trim().is_empty() {
        format!("/home/{}/.ssh/authorized_keys", p.os_profile.admin_username)
    } else {
        ssh.path.clone()
    };
    let mut storage = json!({
        "imageReference": image_reference(&p.storage_profile.image_reference),
        "osDisk": os_disk,
        "dataDisks": data_disks,
    });
    set(&mut storage, "diskControllerType", p.storage_profile.disk_controller_type.as_deref());
    let mut properties = json!({
        "hardwareProfile": {"vmSize": p.hardware_profile.vm_size},
        "storageProfile": storage,
        "osProfile": {
            "computerName": vm.name,
            "adminUsername": p.os_profile.admin_username,
            "customData": base64::engine::general_purpose::STANDARD.encode(&user_data.0),
            "linuxConfiguration": {
                // Password login is never offered: the Go provider sets it on every VM.
                "disablePasswordAuthentication": true,
                "ssh": {"publicKeys": [{"path": key_path, "keyData": key_data}]}
            }
        },
        "networkProfile": {
            // Compute makes the NIC through Microsoft.Network at this API version (2020-11-01 is
            // the one value the API defines).
            "networkApiVersion": NETWORK_API_VERSION,
            "networkInterfaceConfigurations": [nic_configuration(spec, vm, nic_name)]
        }
    });
    match spec.placement() {
        Placement::AvailabilitySet(id) => properties["availabilitySet"] = json!({"id": id}),
        Placement::ScaleSet(id) => properties["virtualMachineScaleSet"] = json!({"id": id}),
        Placement::Zone(_) | Placement::Anywhere => {}
    }
    if let Some(d) = &p.diagnostics_profile {
        let mut boot = json!({"enabled": d.enabled});
        set(&mut boot, "storageUri", d.storage_uri.as_deref().filter(|u| !u.is_empty()));
        properties["diagnosticsProfile"] = json!({"bootDiagnostics": boot});
    }
    if let Some(s) = &p.security_profile {
        let mut profile = json!({});
        set(&mut profile, "securityType", s.security_type.as_deref());
        // Sent only when on: ARM refuses the property itself, even `false`, on a
        // subscription without the `Microsoft.Compute/EncryptionAtHost` feature, and
        // off is its default.
        if s.encryption_at_host == Some(true) {
            profile["encryptionAtHost"] = json!(true);
        }
        if let Some(u) = &s.uefi_settings {
            profile["uefiSettings"] =
                json!({"vTpmEnabled": u.vtpm_enabled, "secureBootEnabled": u.secure_boot_enabled});
        }
        properties["securityProfile"] = profile;
    }
    // An Ultra Disk attaches only to a VM with Ultra Disk compatibility
    // (learn.microsoft.com/azure/virtual-machines/disks-enable-ultra-ssd).
    if p.storage_profile.data_disks.iter().any(|d| d.storage_account_type.trim().eq_ignore_ascii_case("UltraSSD_LRS")) {
        properties["additionalCapabilities"] = json!({"ultraSSDEnabled": true});
    }
    if let Some(group) = p.capacity_reservation.as_ref().and_then(|c| c.capacity_reservation_group_id.as_deref()) {
        properties["capacityReservation"] = json!({"capacityReservationGroup": {"id": group}});
    }
    set(&mut properties, "priority", p.priority.as_deref().map(str::trim));
    set(&mut properties, "evictionPolicy", p.eviction_policy.as_deref().map(str::trim));
    if let Some(price) = p.billing_profile.as_ref().and_then(|b| b.max_price) {
        properties["billingProfile"] = json!({"maxPrice": price});
    }
    let mut body = json!({
        "location": spec.location,
        "tags": machine_tags(spec, uid),
        "properties": properties,
    });
    if let Placement::Zone(zone) = spec.placement() {
        body["zones"] = json!([zone]);
    }
    if let Some(identity) = p.identity_id.as_deref().map(str::trim).filter(|i| !i.is_empty()) {
        // The Go provider's getVMIdentity: the id is the key, its value an empty object.
        body["identity"] = json!({"type": "UserAssigned", "userAssignedIdentities": {identity: {}}});
    }
    if let Some(plan) = plan {
        body["plan"] = json!({"name": plan.name, "product": plan.product, "publisher": plan.publisher});
    }
    body
}

/// The body of the PUT that makes data disk `disk` before the VM, from its
/// image (the Go provider's `createDiskCreationParams`) or empty with its
/// provisioned performance (`diskIOPSReadWrite`, `diskMBpsReadWrite`: the
/// VM PUT's data disk cannot set them): tagged with the machine's tags, in
/// the VM's zone.
pub(crate) fn image_disk_body(spec: &AzureProviderSpec, vm: &VmRef, disk: &DataDisk, uid: &str) -> Value {
    let creation = disk
        .image_ref
        .as_ref()
        .map(|image| disk_creation_data(image, &vm.subscription, &spec.location))
        .unwrap_or_else(|| json!({"createOption": "Empty"}));
    let mut properties = json!({"creationData": creation, "diskSizeGB": disk.disk_size_gb});
    set_number(&mut properties, "diskIOPSReadWrite", disk.disk_iops_read_write);
    set_number(&mut properties, "diskMBpsReadWrite", disk.disk_mbps_read_write);
    json!({
        "location": spec.location,
        "tags": machine_tags(spec, uid),
        "zones": match spec.placement() { Placement::Zone(z) => vec![z], _ => Vec::new() },
        "sku": {"name": disk.storage_account_type},
        "properties": properties
    })
}

/// ARM's `imageReference` for one of the spec's image forms.
pub(crate) fn image_reference(image: &ImageReference) -> Value {
    let some = |v: &Option<String>| v.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string);
    if let Some(urn) = some(&image.urn)
        && let [publisher, offer, sku, version] = urn.split(':').collect::<Vec<_>>()[..]
    {
        return json!({"publisher": publisher, "offer": offer, "sku": sku, "version": version});
    }
    if let Some(id) = some(&image.shared_gallery_image_id) {
        return json!({"sharedGalleryImageId": id});
    }
    if let Some(id) = some(&image.community_gallery_image_id) {
        return json!({"communityGalleryImageId": id});
    }
    json!({"id": some(&image.id).unwrap_or_default()})
}

/// `creationData` of a data disk made from `image` before the VM: gallery
/// images go in `galleryImageReference`, a managed image or a marketplace
/// image (its platform image id) in `imageReference`.
pub(crate) fn disk_creation_data(image: &ImageReference, subscription: &str, location: &str) -> Value {
    let some = |v: &Option<String>| v.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string);
    let reference = if let Some(id) = some(&image.shared_gallery_image_id) {
        json!({"galleryImageReference": {"sharedGalleryImageId": id}})
    } else if let Some(id) = some(&image.community_gallery_image_id) {
        json!({"galleryImageReference": {"communityGalleryImageId": id}})
    } else if let Some(id) = some(&image.id) {
        if id.to_ascii_lowercase().contains("/galleries/") {
            json!({"galleryImageReference": {"id": id}})
        } else {
            json!({"imageReference": {"id": id}})
        }
    } else if let Some(urn) = some(&image.urn)
        && let [publisher, offer, sku, version] = urn.split(':').collect::<Vec<_>>()[..]
    {
        json!({"imageReference": {"id": format!(
            "/Subscriptions/{subscription}/Providers/Microsoft.Compute/Locations/{location}/Publishers/{publisher}/ArtifactTypes/VMImage/Offers/{offer}/Skus/{sku}/Versions/{version}"
        )}})
    } else {
        json!({})
    };
    let mut creation = reference;
    creation["createOption"] = json!("FromImage");
    creation
}

fn set(obj: &mut Value, key: &str, value: Option<&str>) {
    if let Some(v) = value.filter(|v| !v.is_empty()) {
        obj[key] = json!(v);
    }
}

/// Sets `key` on `obj` when `value` is given.
fn set_number(obj: &mut Value, key: &str, value: Option<i64>) {
    if let Some(v) = value {
        obj[key] = json!(v);
    }
}

/// `body` through the SDK model `T` and back: what the SDK would send of it.
/// Refused when the model would drop or change any field (the driver then
/// has a bug: the test of every body catches it first).
pub(crate) fn through_model<T: serde::de::DeserializeOwned + serde::Serialize>(
    body: &Value,
    what: &str,
) -> Result<T, DriverError> {
    let model: T = serde_json::from_value(body.clone())
        .map_err(|e| DriverError::internal(format!("building the {what} request failed: {e}")))?;
    let back = serde_json::to_value(&model)
        .map_err(|e| DriverError::internal(format!("building the {what} request failed: {e}")))?;
    if !same_json(body, &back) {
        return Err(DriverError::internal(format!("the SDK's {what} model would not send the request as built")));
    }
    Ok(model)
}

/// `a` and `b` equal once `null`s and empty lists are dropped (what an SDK
/// model leaves out, meaning "absent"), numbers by value. An empty object is
/// a value (an identity id's `{}`): a model that drops the key differs.
pub(crate) fn same_json(a: &Value, b: &Value) -> bool {
    fn norm(v: &Value) -> Option<Value> {
        match v {
            Value::Null => None,
            Value::Object(map) => {
                Some(Value::Object(map.iter().filter_map(|(k, v)| norm(v).map(|v| (k.clone(), v))).collect()))
            }
            Value::Array(items) => {
                let kept: Vec<Value> = items.iter().map(|i| norm(i).unwrap_or(Value::Null)).collect();
                (!kept.is_empty()).then_some(Value::Array(kept))
            }
            Value::Number(n) => n.as_f64().map(|f| json!(f)),
            other => Some(other.clone()),
        }
    }
    norm(a) == norm(b)
}

/// ARM's provisioning state of a VM, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provisioning {
    /// `Creating`, `Updating`, `Migrating`: on its way.
    InProgress,
    /// `Succeeded`.
    Succeeded,
    /// `Failed`: Azure leaves the VM (and what it holds) behind.
    Failed,
    /// `Deleting`.
    Deleting,
}

/// The provisioning state of `vm`.
pub(crate) fn provisioning(vm: &VirtualMachine) -> Provisioning {
    provisioning_of(vm.properties.as_ref().and_then(|p| p.provisioning_state.as_deref()).unwrap_or(""))
}

/// ARM's provisioning state word (a VM's `properties.provisioningState`, or
/// the generic resource list's top-level `provisioningState`) as read.
pub(crate) fn provisioning_of(state: &str) -> Provisioning {
    match state.to_ascii_lowercase().as_str() {
        "succeeded" => Provisioning::Succeeded,
        "failed" | "canceled" => Provisioning::Failed,
        "deleting" => Provisioning::Deleting,
        _ => Provisioning::InProgress,
    }
}

/// The failure recorded in a failed VM's instance view
/// (`ProvisioningState/failed/<Code>`), `None` when there is none.
pub(crate) fn failure_of(vm: &VirtualMachine) -> Option<(String, String)> {
    let view = vm.properties.as_ref()?.instance_view.as_ref()?;
    view.statuses.iter().find_map(|s| {
        let code = s.code.as_deref()?;
        let rest = code.strip_prefix("ProvisioningState/failed/")?;
        Some((rest.to_string(), s.message.clone().unwrap_or_default()))
    })
}

/// Whether `vm` was read with its instance view (`$expand=instanceView`).
pub(crate) fn has_instance_view(vm: &VirtualMachine) -> bool {
    vm.properties.as_ref().is_some_and(|p| p.instance_view.is_some())
}

/// How ARM shows a Spot VM that Azure evicted and kept (`evictionPolicy`
/// `Deallocate`, the default; learn.microsoft.com/azure/virtual-machines/spot-vms):
/// the VM's record says `priority` `Spot` (or `Low`), its provisioning state
/// stays `Succeeded`, and its instance view's power state is
/// `PowerState/deallocated` (`deallocating` while it goes). `None` for a VM
/// that is not Spot, was read without its instance view, or is not
/// deallocated (running, starting, stopped but allocated). A Spot VM this
/// driver made is never deallocated by the driver, and ARM records no other
/// cause on the VM: a deallocated Spot VM is answered as reclaimed.
/// (`Delete` evictions leave nothing to read.)
pub(crate) fn reclaimed(vm: &VirtualMachine) -> Option<String> {
    use azure_mgmt_compute::package_2024_07_01::models::{EvictionPolicy, Priority};
    let props = vm.properties.as_ref()?;
    let spot = match props.priority.as_ref()? {
        Priority::Spot | Priority::Low => true,
        Priority::Regular => false,
        Priority::UnknownValue(v) => v.eq_ignore_ascii_case("Spot") || v.eq_ignore_ascii_case("Low"),
    };
    if !spot {
        return None;
    }
    let power = props.instance_view.as_ref()?.statuses.iter().find_map(|s| {
        let code = s.code.as_deref()?;
        code.get(..11).filter(|p| p.eq_ignore_ascii_case("PowerState/")).map(|_| code)
    })?;
    let state = power.get(11..).unwrap_or_default();
    if !(state.eq_ignore_ascii_case("deallocated") || state.eq_ignore_ascii_case("deallocating")) {
        return None;
    }
    let policy = match &props.eviction_policy {
        Some(EvictionPolicy::Deallocate) => "Deallocate",
        Some(EvictionPolicy::Delete) => "Delete",
        Some(EvictionPolicy::UnknownValue(v)) => v.as_str(),
        None => "Deallocate (the default)",
    };
    let provisioning = props.provisioning_state.as_deref().unwrap_or("unknown");
    Some(format!("evicted: instance view {power}, provisioningState {provisioning}, evictionPolicy {policy}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vm: Value) -> VirtualMachine {
        serde_json::from_value(vm).unwrap()
    }

    fn with_power(priority: Option<&str>, power: Option<&str>) -> VirtualMachine {
        let mut props = json!({"provisioningState": "Succeeded", "evictionPolicy": "Deallocate"});
        if let Some(p) = priority {
            props["priority"] = json!(p);
        }
        if let Some(code) = power {
            props["instanceView"] = json!({"statuses": [
                {"code": "ProvisioningState/succeeded", "level": "Info"},
                {"code": code, "level": "Info"}
            ]});
        }
        read(json!({"location": "westeurope", "properties": props}))
    }

    #[test]
    fn only_a_deallocated_spot_vm_read_with_its_instance_view_is_reclaimed() {
        let shown = reclaimed(&with_power(Some("Spot"), Some("PowerState/deallocated"))).unwrap();
        assert_eq!(
            shown,
            "evicted: instance view PowerState/deallocated, provisioningState Succeeded, evictionPolicy Deallocate"
        );
        assert!(reclaimed(&with_power(Some("Low"), Some("PowerState/deallocating"))).is_some());
        assert!(reclaimed(&with_power(Some("spot"), Some("powerstate/Deallocated"))).is_some(), "any case");
        for (priority, power) in [
            (Some("Spot"), Some("PowerState/running")),
            (Some("Spot"), Some("PowerState/stopped")),
            (Some("Spot"), Some("PowerState/starting")),
            (Some("Spot"), None),
            (Some("Regular"), Some("PowerState/deallocated")),
            (None, Some("PowerState/deallocated")),
        ] {
            assert_eq!(reclaimed(&with_power(priority, power)), None, "{priority:?} {power:?}");
        }
        assert!(has_instance_view(&with_power(None, Some("PowerState/running"))));
        assert!(!has_instance_view(&with_power(Some("Spot"), None)));
    }

    fn spec() -> AzureProviderSpec {
        AzureProviderSpec::parse(&serde_json::to_vec(&crate::spec::tests_support::example()).unwrap()).unwrap()
    }

    fn vm() -> VmRef {
        VmRef {
            subscription: "sub".into(),
            resource_group: "rg".into(),
            location: "westeurope".into(),
            name: "m-1".into(),
        }
    }

    const IDENTITY: &str = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/shoot--dev--conf";
    const RESERVATION: &str =
        "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/capacityReservationGroups/crg-1";

    /// A class that sets every field the VM PUT applies, each to a value of its own.
    fn full_class() -> serde_json::Value {
        json!({
            "location": "westeurope",
            "resourceGroup": "rg",
            "tags": {"kubernetes.io-cluster-shoot--dev--conf": "1", "kubernetes.io-role-node": "1", "Name": "n-1"},
            "cloudConfiguration": {"name": "AzurePublic"},
            "subnetInfo": {"vnetName": "vnet-1", "subnetName": "nodes-1", "vnetResourceGroup": "rg-net"},
            "properties": {
                "hardwareProfile": {"vmSize": "Standard_D4s_v5"},
                "storageProfile": {
                    "imageReference": {"urn": "sap:gardenlinux:greatest:1443.3.0"},
                    "osDisk": {"caching": "ReadWrite", "diskSizeGB": 77, "createOption": "FromImage",
                               "managedDisk": {"storageAccountType": "StandardSSD_LRS",
                                               "securityProfile": {"securityEncryptionType": "VMGuestStateOnly"}}},
                    "dataDisks": [
                        {"name": "containerd", "lun": 3, "caching": "ReadOnly", "storageAccountType": "Premium_LRS", "diskSizeGB": 64},
                        {"lun": 5, "storageAccountType": "Standard_LRS", "diskSizeGB": 9,
                         "imageRef": {"sharedGalleryImageID": "/SharedGalleries/g-1/Images/data/Versions/1.0.0"}}
                    ],
                    "diskControllerType": "NVMe"
                },
                "osProfile": {"adminUsername": "gardener", "linuxConfiguration": {"ssh": {"publicKeys": {
                    "path": "/home/gardener/.ssh/keys", "keyData": "ssh-ed25519 AAAAkey"}}}},
                "networkProfile": {"acceleratedNetworking": true},
                "zone": 2,
                "identityID": IDENTITY,
                "diagnosticsProfile": {"enabled": true, "storageURI": "https://diag.blob.core.windows.net/"},
                "securityProfile": {"securityType": "TrustedLaunch", "encryptionAtHost": true,
                                    "uefiSettings": {"vtpmEnabled": true, "secureBootEnabled": false}},
                "capacityReservation": {"capacityReservationGroupID": RESERVATION},
                "priority": "Spot",
                "evictionPolicy": "Delete",
                "billingProfile": {"maxPrice": 0.01538}
            }
        })
    }

    fn parse(v: &serde_json::Value) -> AzureProviderSpec {
        AzureProviderSpec::parse(&serde_json::to_vec(v).unwrap()).unwrap()
    }

    /// What goes on the wire: the body serialized as `put_raw` sends it, read back.
    fn wire(body: &Value) -> Value {
        serde_json::from_slice(&serde_json::to_vec(body).unwrap()).unwrap()
    }

    /// Every field the class asks for is in the VM PUT as sent, one by one (nothing lost
    /// through a model: the body is sent as built).
    #[test]
    fn the_vm_put_carries_every_field_the_class_asks_for() {
        let plan = Plan { name: "greatest".into(), product: "gardenlinux".into(), publisher: "sap".into() };
        let spec = parse(&full_class());
        let body = wire(&vm_body(&spec, &vm(), "m-1-nic", "uid-1", &SecretBytes(b"#!/bin/sh".to_vec()), Some(&plan)));
        let nic = "/properties/networkProfile/networkInterfaceConfigurations/0";
        let expected: &[(&str, &str, Value)] = &[
            ("location", "/location", json!("westeurope")),
            ("tags.Name", "/tags/Name", json!("n-1")),
            ("tags (cluster marker)", "/tags/kubernetes.io-cluster-shoot--dev--conf", json!("1")),
            ("tags (role marker)", "/tags/kubernetes.io-role-node", json!("1")),
            ("machine uid", &format!("/tags/{MACHINE_UID_TAG}"), json!("uid-1")),
            ("hardwareProfile.vmSize", "/properties/hardwareProfile/vmSize", json!("Standard_D4s_v5")),
            ("imageReference.urn publisher", "/properties/storageProfile/imageReference/publisher", json!("sap")),
            ("imageReference.urn offer", "/properties/storageProfile/imageReference/offer", json!("gardenlinux")),
            ("imageReference.urn sku", "/properties/storageProfile/imageReference/sku", json!("greatest")),
            ("imageReference.urn version", "/properties/storageProfile/imageReference/version", json!("1443.3.0")),
            ("image plan name", "/plan/name", json!("greatest")),
            ("image plan product", "/plan/product", json!("gardenlinux")),
            ("image plan publisher", "/plan/publisher", json!("sap")),
            ("osDisk.caching", "/properties/storageProfile/osDisk/caching", json!("ReadWrite")),
            ("osDisk.diskSizeGB", "/properties/storageProfile/osDisk/diskSizeGB", json!(77)),
            ("osDisk.createOption", "/properties/storageProfile/osDisk/createOption", json!("FromImage")),
            (
                "osDisk.managedDisk.storageAccountType",
                "/properties/storageProfile/osDisk/managedDisk/storageAccountType",
                json!("StandardSSD_LRS"),
            ),
            (
                "osDisk.managedDisk.securityProfile.securityEncryptionType",
                "/properties/storageProfile/osDisk/managedDisk/securityProfile/securityEncryptionType",
                json!("VMGuestStateOnly"),
            ),
            ("dataDisks[0].lun", "/properties/storageProfile/dataDisks/0/lun", json!(3)),
            ("dataDisks[0].name", "/properties/storageProfile/dataDisks/0/name", json!("m-1-containerd-3-data-disk")),
            ("dataDisks[0].caching", "/properties/storageProfile/dataDisks/0/caching", json!("ReadOnly")),
            (
                "dataDisks[0].storageAccountType",
                "/properties/storageProfile/dataDisks/0/managedDisk/storageAccountType",
                json!("Premium_LRS"),
            ),
            ("dataDisks[0].diskSizeGB", "/properties/storageProfile/dataDisks/0/diskSizeGB", json!(64)),
            ("dataDisks[0] made empty", "/properties/storageProfile/dataDisks/0/createOption", json!("Empty")),
            ("dataDisks[1].imageRef: attached", "/properties/storageProfile/dataDisks/1/createOption", json!("Attach")),
            (
                "dataDisks[1]: the disk made from its image",
                "/properties/storageProfile/dataDisks/1/managedDisk/id",
                json!("/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/disks/m-1-5-data-disk"),
            ),
            ("diskControllerType", "/properties/storageProfile/diskControllerType", json!("NVMe")),
            ("osProfile.adminUsername", "/properties/osProfile/adminUsername", json!("gardener")),
            (
                "ssh.publicKeys.path",
                "/properties/osProfile/linuxConfiguration/ssh/publicKeys/0/path",
                json!("/home/gardener/.ssh/keys"),
            ),
            (
                "ssh.publicKeys.keyData",
                "/properties/osProfile/linuxConfiguration/ssh/publicKeys/0/keyData",
                json!("ssh-ed25519 AAAAkey"),
            ),
            ("user data", "/properties/osProfile/customData", json!("IyEvYmluL3No")),
            (
                "networkProfile.acceleratedNetworking",
                &format!("{nic}/properties/enableAcceleratedNetworking"),
                json!(true),
            ),
            (
                "subnetInfo (vnetResourceGroup, vnetName, subnetName)",
                &format!("{nic}/properties/ipConfigurations/0/properties/subnet/id"),
                json!(
                    "/subscriptions/sub/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-1/subnets/nodes-1"
                ),
            ),
            ("zone", "/zones/0", json!("2")),
            ("identityID: the type", "/identity/type", json!("UserAssigned")),
            ("diagnosticsProfile.enabled", "/properties/diagnosticsProfile/bootDiagnostics/enabled", json!(true)),
            (
                "diagnosticsProfile.storageURI",
                "/properties/diagnosticsProfile/bootDiagnostics/storageUri",
                json!("https://diag.blob.core.windows.net/"),
            ),
            ("securityProfile.securityType", "/properties/securityProfile/securityType", json!("TrustedLaunch")),
            (
                "securityProfile.uefiSettings.vtpmEnabled",
                "/properties/securityProfile/uefiSettings/vTpmEnabled",
                json!(true),
            ),
            (
                "securityProfile.uefiSettings.secureBootEnabled",
                "/properties/securityProfile/uefiSettings/secureBootEnabled",
                json!(false),
            ),
            (
                "capacityReservation.capacityReservationGroupID",
                "/properties/capacityReservation/capacityReservationGroup/id",
                json!(RESERVATION),
            ),
            ("securityProfile.encryptionAtHost", "/properties/securityProfile/encryptionAtHost", json!(true)),
            ("priority", "/properties/priority", json!("Spot")),
            ("evictionPolicy", "/properties/evictionPolicy", json!("Delete")),
            ("billingProfile.maxPrice", "/properties/billingProfile/maxPrice", json!(0.01538)),
        ];
        let mut missing = Vec::new();
        for (asked, pointer, value) in expected {
            if body.pointer(pointer) != Some(value) {
                missing.push(format!("{asked}: {pointer} is {:?}, want {value}", body.pointer(pointer)));
            }
        }
        assert!(missing.is_empty(), "the VM PUT lost fields:\n{}\nbody: {body:#}", missing.join("\n"));
        // The identity: exactly the class's id, as the key of an empty object (the Go
        // provider's getVMIdentity); `userAssignedIdentities: {}` is what ARM refuses.
        assert_eq!(body["identity"]["userAssignedIdentities"], json!({IDENTITY: {}}));
        // One data disk entry per class entry, and no field the class did not ask for.
        assert_eq!(body["properties"]["storageProfile"]["dataDisks"].as_array().unwrap().len(), 2);
        assert!(body["properties"].get("availabilitySet").is_none());
        assert!(body["properties"].get("virtualMachineScaleSet").is_none());
    }

    /// A class without Spot or encryption at host sends none of their keys (ARM refuses
    /// `encryptionAtHost`, even `false`, where the subscription lacks the feature).
    #[test]
    fn regular_vms_send_no_spot_keys_and_encryption_at_host_only_when_on() {
        let mut class = full_class();
        for key in ["priority", "evictionPolicy", "billingProfile"] {
            class["properties"][key] = serde_json::Value::Null;
        }
        class["properties"]["securityProfile"]["encryptionAtHost"] = json!(false);
        let body = wire(&vm_body(&parse(&class), &vm(), "n", "u", &SecretBytes::default(), None));
        for key in ["priority", "evictionPolicy", "billingProfile"] {
            assert!(body["properties"].get(key).is_none(), "{key}: {body}");
        }
        assert!(body["properties"]["securityProfile"].get("encryptionAtHost").is_none(), "{body}");
        assert_eq!(body["properties"]["securityProfile"]["securityType"], "TrustedLaunch");
    }

    /// The placements other than a zone, each where ARM reads it.
    #[test]
    fn availability_sets_and_scale_sets_are_sent() {
        let put = |patch: serde_json::Value| {
            let mut class = full_class();
            class["properties"]["zone"] = serde_json::Value::Null;
            class["properties"]["identityID"] = serde_json::Value::Null;
            // A Spot VM cannot be in an availability set (AzureSpotVMNotSupportedInAvailabilitySet).
            for spot in ["priority", "evictionPolicy", "billingProfile"] {
                class["properties"][spot] = serde_json::Value::Null;
            }
            class["properties"][patch["key"].as_str().unwrap()] = patch["value"].clone();
            wire(&vm_body(&parse(&class), &vm(), "m-1-nic", "u", &SecretBytes::default(), None))
        };
        let set = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/availabilitySets/as-1";
        let vmss = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss-1";
        let b = put(json!({"key": "availabilitySet", "value": {"id": set}}));
        assert_eq!(b["properties"]["availabilitySet"]["id"], set);
        assert!(b.get("zones").is_none());
        let b = put(json!({"key": "virtualMachineScaleSet", "value": {"id": vmss}}));
        assert_eq!(b["properties"]["virtualMachineScaleSet"]["id"], vmss);
        let b = put(json!({"key": "machineSet", "value": {"id": vmss, "kind": "vmo"}}));
        assert_eq!(b["properties"]["virtualMachineScaleSet"]["id"], vmss);
        let b = put(json!({"key": "machineSet", "value": {"id": set, "kind": "availabilityset"}}));
        assert_eq!(b["properties"]["availabilitySet"]["id"], set);
        // No identity, no plan: neither key is sent.
        assert!(b.get("identity").is_none() && b.get("plan").is_none(), "{b}");
    }

    /// The other image forms, each as ARM takes it.
    #[test]
    fn every_image_form_is_sent() {
        let image = |reference: serde_json::Value| {
            let mut class = full_class();
            class["properties"]["storageProfile"]["imageReference"] = reference;
            wire(&vm_body(&parse(&class), &vm(), "n", "u", &SecretBytes::default(), None))["properties"]
                ["storageProfile"]["imageReference"]
                .clone()
        };
        let community = "/CommunityGalleries/gardenlinux-13e998fe/Images/gardenlinux/Versions/1592.1.0";
        assert_eq!(image(json!({"communityGalleryImageID": community})), json!({"communityGalleryImageId": community}));
        let shared = "/SharedGalleries/o-GL/Images/gardenlinux/Versions/1.0.0";
        assert_eq!(image(json!({"sharedGalleryImageID": shared})), json!({"sharedGalleryImageId": shared}));
        let id = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/i/versions/1";
        assert_eq!(image(json!({"id": id})), json!({"id": id}));
    }

    /// A disk with provisioned performance is made empty before the VM with
    /// it (through the SDK's `Disk`) and attached; an Ultra Disk makes the VM
    /// Ultra Disk compatible.
    #[test]
    fn a_disk_with_performance_is_made_before_the_vm_and_attached() {
        let mut class = full_class();
        class["properties"]["storageProfile"]["dataDisks"] = json!([
            {"name": "fast", "lun": 0, "storageAccountType": "UltraSSD_LRS", "diskSizeGB": 64,
             "diskIOPSReadWrite": 5000, "diskMBpsReadWrite": 200},
            {"name": "plain", "lun": 1, "storageAccountType": "Premium_LRS", "diskSizeGB": 8}
        ]);
        let spec = parse(&class);
        let disks = &spec.properties.storage_profile.data_disks;
        assert!(disks[0].made_before_vm() && !disks[1].made_before_vm());
        let model: azure_mgmt_compute::package_2024_07_01::models::Disk =
            through_model(&image_disk_body(&spec, &vm(), &disks[0], "uid-1"), "disk").unwrap();
        let sent = serde_json::to_value(model).unwrap();
        assert_eq!(sent["properties"]["creationData"], json!({"createOption": "Empty"}));
        assert_eq!(
            (sent["properties"]["diskIOPSReadWrite"].clone(), sent["properties"]["diskMBpsReadWrite"].clone()),
            (json!(5000), json!(200))
        );
        let body = wire(&vm_body(&spec, &vm(), "n", "u", &SecretBytes::default(), None));
        let data = &body["properties"]["storageProfile"]["dataDisks"];
        assert_eq!(
            (data[0]["createOption"].clone(), data[1]["createOption"].clone()),
            (json!("Attach"), json!("Empty"))
        );
        assert!(data[0]["managedDisk"]["id"].as_str().unwrap().ends_with("/disks/m-1-fast-0-data-disk"), "{data}");
        assert_eq!(body["properties"]["additionalCapabilities"], json!({"ultraSSDEnabled": true}));
        class["properties"]["storageProfile"]["dataDisks"][0]["storageAccountType"] = json!("PremiumV2_LRS");
        let body = wire(&vm_body(&parse(&class), &vm(), "n", "u", &SecretBytes::default(), None));
        assert!(body["properties"].get("additionalCapabilities").is_none());
    }

    /// The image disk body goes through the SDK's `Disk`: the model keeps all of it.
    #[test]
    fn the_image_disk_body_survives_the_sdk_model() {
        let spec = parse(&full_class());
        let disk = &spec.properties.storage_profile.data_disks[1];
        let body = image_disk_body(&spec, &vm(), disk, "uid-1");
        let model: azure_mgmt_compute::package_2024_07_01::models::Disk = through_model(&body, "disk").unwrap();
        let sent = serde_json::to_value(model).unwrap();
        assert_eq!(sent["sku"]["name"], "Standard_LRS");
        assert_eq!(sent["properties"]["diskSizeGB"], 9);
        assert_eq!(sent["zones"], json!(["2"]));
        assert_eq!(sent["tags"][MACHINE_UID_TAG], "uid-1");
        assert_eq!(sent["tags"]["Name"], "n-1");
        assert_eq!(
            sent["properties"]["creationData"],
            json!({"createOption": "FromImage",
                   "galleryImageReference": {"sharedGalleryImageId": "/SharedGalleries/g-1/Images/data/Versions/1.0.0"}})
        );
        // And a model that would drop a field is refused, not sent.
        let identity: Result<VirtualMachine, _> = through_model(
            &json!({"location": "l", "identity": {"type": "UserAssigned", "userAssignedIdentities": {IDENTITY: {}}}}),
            "VM",
        );
        assert!(identity.is_err(), "the SDK's VM model drops the identity ids");
    }

    #[test]
    fn the_vm_body_is_what_the_go_provider_sends() {
        let json = vm_body(&spec(), &vm(), "m-1-nic", "uid-1", &SecretBytes(b"#!/bin/sh".to_vec()), None);
        assert_eq!(json["properties"]["hardwareProfile"]["vmSize"], "Standard_D2s_v3");
        assert_eq!(json["properties"]["storageProfile"]["osDisk"]["name"], "m-1-os-disk");
        assert_eq!(json["properties"]["storageProfile"]["osDisk"]["deleteOption"], "Delete");
        assert_eq!(json["properties"]["storageProfile"]["imageReference"]["publisher"], "sap");
        let nic = &json["properties"]["networkProfile"]["networkInterfaceConfigurations"][0];
        assert_eq!(nic["name"], "m-1-nic");
        assert_eq!(nic["properties"]["deleteOption"], "Delete");
        assert_eq!(json["properties"]["networkProfile"]["networkApiVersion"], "2020-11-01");
        assert!(json["properties"]["networkProfile"].get("networkInterfaces").is_none());
        assert_eq!(json["properties"]["osProfile"]["customData"], "IyEvYmluL3No");
        assert_eq!(json["zones"][0], "1");
        assert_eq!(json["tags"][MACHINE_UID_TAG], "uid-1");
    }

    #[test]
    fn a_class_without_ssh_key_gets_the_placeholder() {
        let mut s = spec();
        s.properties.os_profile.linux_configuration.ssh.public_keys.key_data = String::new();
        let json = vm_body(&s, &vm(), "m-1-nic", "u", &SecretBytes::default(), None);
        let key =
            json["properties"]["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"][0]["keyData"].as_str().unwrap();
        assert!(key.starts_with("ssh-rsa "));
    }

    #[test]
    fn disks_from_images_reference_them_as_arm_wants() {
        let urn = ImageReference { urn: Some("sap:gardenlinux:greatest:1443.3.0".into()), ..Default::default() };
        let c = disk_creation_data(&urn, "s", "westeurope");
        assert_eq!(
            c["imageReference"]["id"],
            "/Subscriptions/s/Providers/Microsoft.Compute/Locations/westeurope/Publishers/sap/ArtifactTypes/VMImage/Offers/gardenlinux/Skus/greatest/Versions/1443.3.0"
        );
        let shared = ImageReference {
            shared_gallery_image_id: Some("/SharedGalleries/x/Images/i/Versions/1".into()),
            ..Default::default()
        };
        assert_eq!(
            disk_creation_data(&shared, "s", "l")["galleryImageReference"]["sharedGalleryImageId"],
            "/SharedGalleries/x/Images/i/Versions/1"
        );
        let gallery = ImageReference {
            id: Some(
                "/subscriptions/s/resourceGroups/r/providers/Microsoft.Compute/galleries/g/images/i/versions/1".into(),
            ),
            ..Default::default()
        };
        assert!(disk_creation_data(&gallery, "s", "l")["galleryImageReference"]["id"].is_string());
    }

    #[test]
    fn the_nic_forwards_ip_in_the_specs_subnet() {
        let json = vm_body(&spec(), &vm(), "m-1-nic", "u", &SecretBytes::default(), None);
        let nic = &json["properties"]["networkProfile"]["networkInterfaceConfigurations"][0]["properties"];
        assert_eq!(nic["enableIPForwarding"], true);
        let subnet = nic["ipConfigurations"][0]["properties"]["subnet"]["id"].as_str().unwrap();
        assert!(subnet.ends_with("/virtualNetworks/shoot--dev--conf/subnets/shoot--dev--conf-nodes"));
    }
}
