//! The request bodies of one machine: its NIC and its VM, built from the spec
//! as the Go provider builds them, plus reading what ARM answers about a VM.
//!
//! Bodies are written as ARM JSON and decoded into the SDK's models: the
//! models' builders cannot express everything (an arbitrary `vmSize`, the
//! `deleteOption`s), and the JSON is what the Go provider's structs marshal to.

use std::collections::BTreeMap;

use base64::Engine as _;
use machine_driver_api::{DriverError, SecretBytes};
use serde_json::{Value, json};

use crate::naming::{MACHINE_UID_TAG, VmRef, data_disk_name};
use crate::spec::{AzureProviderSpec, ImageReference, Placement};

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

/// The VM of a machine with its NIC `nic_name` (made by the same PUT), booting `user_data`.
pub(crate) fn vm_body(
    spec: &AzureProviderSpec,
    vm: &VmRef,
    nic_name: &str,
    uid: &str,
    user_data: &SecretBytes,
) -> Result<VirtualMachine, DriverError> {
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
            if d.image_ref.is_some() {
                // Made from its image before the VM (crate::create), attached here.
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
        if let Some(u) = &s.uefi_settings {
            profile["uefiSettings"] =
                json!({"vTpmEnabled": u.vtpm_enabled, "secureBootEnabled": u.secure_boot_enabled});
        }
        properties["securityProfile"] = profile;
    }
    if let Some(group) = p.capacity_reservation.as_ref().and_then(|c| c.capacity_reservation_group_id.as_deref()) {
        properties["capacityReservation"] = json!({"capacityReservationGroup": {"id": group}});
    }
    let mut body = json!({
        "location": spec.location,
        "tags": machine_tags(spec, uid),
        "properties": properties,
    });
    if let Placement::Zone(zone) = spec.placement() {
        body["zones"] = json!([zone]);
    }
    if let Some(identity) = p.identity_id.as_deref().filter(|i| !i.is_empty()) {
        body["identity"] = json!({"type": "UserAssigned", "userAssignedIdentities": {identity: {}}});
    }
    decode(body, "VM")
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

fn decode<T: serde::de::DeserializeOwned>(body: Value, what: &str) -> Result<T, DriverError> {
    serde_json::from_value(body).map_err(|e| DriverError::internal(format!("building the {what} request failed: {e}")))
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_vm_body_is_what_the_go_provider_sends() {
        let body = vm_body(&spec(), &vm(), "m-1-nic", "uid-1", &SecretBytes(b"#!/bin/sh".to_vec())).unwrap();
        let json = serde_json::to_value(&body).unwrap();
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
        let json = serde_json::to_value(vm_body(&s, &vm(), "m-1-nic", "u", &SecretBytes::default()).unwrap()).unwrap();
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
        // What the SDK model keeps of it (unknown fields would be dropped silently).
        let disk: azure_mgmt_compute::package_2024_07_01::models::Disk = serde_json::from_value(json!({
            "location": "l", "properties": {"creationData": c}
        }))
        .unwrap();
        let back = serde_json::to_value(&disk).unwrap();
        assert!(
            back["properties"]["creationData"]["imageReference"]["id"].as_str().unwrap().contains("/Publishers/sap/")
        );
    }

    #[test]
    fn the_nic_forwards_ip_in_the_specs_subnet() {
        let body = vm_body(&spec(), &vm(), "m-1-nic", "u", &SecretBytes::default()).unwrap();
        let json = serde_json::to_value(body).unwrap();
        let nic = &json["properties"]["networkProfile"]["networkInterfaceConfigurations"][0]["properties"];
        assert_eq!(nic["enableIPForwarding"], true);
        let subnet = nic["ipConfigurations"][0]["properties"]["subnet"]["id"].as_str().unwrap();
        assert!(subnet.ends_with("/virtualNetworks/shoot--dev--conf/subnets/shoot--dev--conf-nodes"));
    }
}
