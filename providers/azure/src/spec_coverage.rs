//! No accepted providerSpec key is dropped silently: every field path of
//! [`AzureProviderSpec`] (walked with `machine_driver_api::spec_walk`) is either applied
//! (changing its value changes a request the driver makes: the VM PUT, an
//! image disk's PUT, the request paths, the cloud's endpoints or the
//! marketplace lookup) or listed in the README's "Accepted and ignored" table;
//! and the README's provider spec table names exactly the applied fields.

use std::collections::BTreeSet;

use machine_driver_api::SecretBytes;
use serde_json::{Value, json};

use crate::config::CloudEndpoints;
use crate::naming::VmRef;
use crate::spec::AzureProviderSpec;
use crate::vm::{image_disk_body, vm_body};
use machine_driver_api::spec_walk::{self, field_paths, merge_patch};

const README: &str = include_str!("../README.md");

const IMAGE_ID: &str = "/subscriptions/s-1/resourceGroups/rg-1/providers/Microsoft.Compute/images/img-1";
const SET_ID: &str = "/subscriptions/s-1/resourceGroups/rg-1/providers/Microsoft.Compute/availabilitySets/as-1";
const VMSS_ID: &str = "/subscriptions/s-1/resourceGroups/rg-1/providers/Microsoft.Compute/virtualMachineScaleSets/ss-1";

/// A class setting every field, each to a value of its own (placement: a zone; image: a URN).
fn base() -> Value {
    json!({
        "location": "westeurope",
        "resourceGroup": "rg-a",
        "tags": {"kubernetes.io-cluster-c": "1", "kubernetes.io-role-node": "1"},
        "cloudConfiguration": {"name": "AzurePublic"},
        "subnetInfo": {"vnetName": "vnet-a", "subnetName": "nodes-a", "vnetResourceGroup": "rg-net"},
        "properties": {
            "hardwareProfile": {"vmSize": "Standard_D2s_v3"},
            "storageProfile": {
                "imageReference": {"urn": "sap:gardenlinux:greatest:1443.3.0", "skipMarketplaceAgreement": false},
                "osDisk": {"name": "os", "caching": "None", "diskSizeGB": 50, "createOption": "FromImage",
                           "managedDisk": {"id": "/x", "storageAccountType": "Premium_LRS",
                                           "securityProfile": {"securityEncryptionType": "VMGuestStateOnly"}}},
                "dataDisks": [
                    {"name": "containerd", "lun": 0, "caching": "None", "storageAccountType": "PremiumV2_LRS", "diskSizeGB": 64,
                     "diskIOPSReadWrite": 4000, "diskMBpsReadWrite": 150},
                    {"name": "img", "lun": 1, "caching": "ReadOnly", "storageAccountType": "Premium_LRS", "diskSizeGB": 8,
                     "imageRef": {"urn": "sap:gardenlinux:greatest:1443.3.0", "skipMarketplaceAgreement": false}}
                ],
                "diskControllerType": "SCSI"
            },
            "osProfile": {"adminUsername": "core", "computerName": "c", "adminPassword": "p", "customData": "d",
                          "linuxConfiguration": {"disablePasswordAuthentication": true,
                                                 "ssh": {"publicKeys": {"path": "/home/core/k", "keyData": "ssh-rsa A"}}}},
            "networkProfile": {"networkInterfaces": "n", "acceleratedNetworking": false},
            "zone": 1,
            "identityID": "/subscriptions/s-1/resourceGroups/rg-1/providers/Microsoft.ManagedIdentity/userAssignedIdentities/id-1",
            "diagnosticsProfile": {"enabled": true, "storageURI": "https://d.blob.core.windows.net/"},
            "securityProfile": {"securityType": "TrustedLaunch", "encryptionAtHost": true,
                                "uefiSettings": {"vtpmEnabled": true, "secureBootEnabled": true}},
            "capacityReservation": {"capacityReservationGroupID": "/subscriptions/s-1/resourceGroups/rg-1/providers/Microsoft.Compute/capacityReservationGroups/c-1"},
            "priority": "Spot",
            "evictionPolicy": "Delete",
            "billingProfile": {"maxPrice": 0.5}
        }
    })
}

/// The class a field is probed in when the base does not hold it: the other
/// members of its one-of group (image forms, placements) removed.
fn context(path: &str) -> Option<Value> {
    // The one image form alone (`null` removes the base's URN in a merge patch).
    let image_forms = |key: &str, value: &str| {
        let mut form = json!({"id": null, "urn": null, "communityGalleryImageID": null, "sharedGalleryImageID": null});
        form[key] = json!(value);
        form
    };
    let disk_with = |image_ref: Value| {
        let mut disks = base()["properties"]["storageProfile"]["dataDisks"].clone();
        let mut alone = image_ref;
        if let Some(form) = alone.as_object_mut() {
            form.retain(|_, v| !v.is_null());
        }
        disks[1]["imageRef"] = alone;
        json!({"properties": {"storageProfile": {"dataDisks": disks}}})
    };
    let image = |reference: Value| json!({"properties": {"storageProfile": {"imageReference": reference}}});
    Some(match path {
        "properties.storageProfile.imageReference.id" => image(image_forms("id", IMAGE_ID)),
        "properties.storageProfile.imageReference.communityGalleryImageID" => {
            image(image_forms("communityGalleryImageID", "/CommunityGalleries/cg/Images/i/Versions/1"))
        }
        "properties.storageProfile.imageReference.sharedGalleryImageID" => {
            image(image_forms("sharedGalleryImageID", "/SharedGalleries/sg/Images/i/Versions/1"))
        }
        "properties.storageProfile.dataDisks[].imageRef.id" => disk_with(image_forms("id", IMAGE_ID)),
        "properties.storageProfile.dataDisks[].imageRef.communityGalleryImageID" => {
            disk_with(image_forms("communityGalleryImageID", "/CommunityGalleries/cg/Images/i/Versions/1"))
        }
        "properties.storageProfile.dataDisks[].imageRef.sharedGalleryImageID" => {
            disk_with(image_forms("sharedGalleryImageID", "/SharedGalleries/sg/Images/i/Versions/1"))
        }
        "properties.availabilitySet.id" => json!({"properties": {"zone": null, "availabilitySet": {"id": SET_ID}}}),
        "properties.virtualMachineScaleSet.id" => {
            json!({"properties": {"zone": null, "virtualMachineScaleSet": {"id": VMSS_ID}}})
        }
        "properties.machineSet.id" | "properties.machineSet.kind" => {
            json!({"properties": {"zone": null, "machineSet": {"id": SET_ID, "kind": "availabilityset"}}})
        }
        _ => return None,
    })
}

/// A second value of a field where appending to the first would mean the same.
fn alternative(path: &str) -> Option<Value> {
    Some(match path {
        "properties.machineSet.kind" => json!("vmo"),
        "cloudConfiguration.name" => json!("AzureChina"),
        _ => return None,
    })
}

/// The values at `path` (`a.b[].c`: in every element of `b`).
fn values_at<'a>(json: &'a Value, path: &str) -> Vec<&'a Value> {
    let mut current = vec![json];
    for part in path.split('.') {
        let (key, list) = part.strip_suffix("[]").map_or((part, false), |k| (k, true));
        current = current
            .into_iter()
            .filter_map(|v| v.get(key))
            .flat_map(|v| if list { v.as_array().map(|a| a.iter().collect()).unwrap_or_default() } else { vec![v] })
            .collect();
    }
    current
}

/// Sets `path` to `value` where it is present.
fn set_at(json: &mut Value, path: &str, value: &Value) {
    let (head, last) = path.rsplit_once('.').unwrap_or(("", path));
    let mut parents: Vec<&mut Value> = vec![json];
    for part in head.split('.').filter(|p| !p.is_empty()) {
        let (key, list) = part.strip_suffix("[]").map_or((part, false), |k| (k, true));
        parents = parents
            .into_iter()
            .filter_map(|v| v.get_mut(key))
            .flat_map(|v| match (list, v) {
                (true, Value::Array(items)) => items.iter_mut().collect::<Vec<_>>(),
                (true, _) => Vec::new(),
                (false, v) => vec![v],
            })
            .collect();
    }
    for parent in parents {
        if let Some(slot) = parent.get_mut(last) {
            *slot = value.clone();
        }
    }
}

/// A different value of the same type.
fn changed(value: &Value) -> Value {
    match value {
        Value::String(s) => json!(format!("{s}9")),
        Value::Number(n) => json!(n.as_i64().unwrap_or(0) + 1),
        Value::Bool(b) => json!(!b),
        Value::Object(map) => {
            let mut map = map.clone();
            map.insert("probe".into(), json!("1"));
            Value::Object(map)
        }
        other => panic!("no second value for {other}"),
    }
}

/// Everything the driver sends for a class: where, which cloud, the
/// marketplace lookup, the VM PUT and the image disks' PUTs.
fn requests_of(class: &Value) -> Value {
    let spec: AzureProviderSpec = match serde_json::from_value(class.clone()) {
        Ok(spec) => spec,
        Err(e) => panic!("probe class does not parse: {e}: {class}"),
    };
    let vm = VmRef {
        subscription: "sub".into(),
        resource_group: spec.resource_group.clone(),
        location: spec.location.clone(),
        name: "m-1".into(),
    };
    let image = &spec.properties.storage_profile.image_reference;
    let lookup = (!image.skip_marketplace_agreement).then(|| image.urn.clone()).flatten();
    let cloud = CloudEndpoints::resolve(spec.cloud(), None).map(|c| c.name.to_string()).unwrap_or_default();
    let disks: Vec<Value> = spec
        .properties
        .storage_profile
        .data_disks
        .iter()
        .filter(|d| d.made_before_vm())
        .map(|d| image_disk_body(&spec, &vm, d, "uid"))
        .collect();
    json!({
        "where": [vm.resource_group, vm.location],
        "cloud": cloud,
        "marketplaceLookup": lookup,
        "vm": vm_body(&spec, &vm, "m-1-nic", "uid", &SecretBytes::default(), None),
        "imageDisks": disks,
    })
}

/// The spec type's field paths.
fn spec_paths() -> BTreeSet<String> {
    field_paths::<AzureProviderSpec>().expect("the spec type walks")
}

/// The paths whose value changes a request.
fn applied_and_ignored() -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut applied, mut ignored) = (BTreeSet::new(), BTreeSet::new());
    for path in spec_paths() {
        let mut class = base();
        if let Some(patch) = context(&path) {
            merge_patch(&mut class, &patch);
        }
        let first = values_at(&class, &path).first().map(|v| (*v).clone());
        let Some(first) = first else { panic!("the probe class does not set {path}: add it to base() or context()") };
        let second = alternative(&path).unwrap_or_else(|| changed(&first));
        let mut other = class.clone();
        set_at(&mut other, &path, &second);
        if requests_of(&class) == requests_of(&other) {
            ignored.insert(path);
        } else {
            applied.insert(path);
        }
    }
    (applied, ignored)
}

/// The field paths the README's tables under `heading` name.
fn readme_paths(heading: &str) -> BTreeSet<String> {
    spec_walk::readme_paths(README, heading).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_walk_finds_the_fields_of_the_spec() {
    let paths = spec_paths();
    for expected in [
        "location",
        "tags",
        "properties.identityID",
        "properties.storageProfile.imageReference.skipMarketplaceAgreement",
        "properties.storageProfile.dataDisks[].imageRef.communityGalleryImageID",
        "properties.osProfile.linuxConfiguration.ssh.publicKeys.keyData",
        "properties.storageProfile.osDisk.name",
    ] {
        assert!(paths.contains(expected), "{expected} missing from {paths:?}");
    }
}

#[test]
fn the_probe_tells_applied_from_ignored() {
    // A field that is sent, and one that is not, as the probe must find them.
    let (applied, ignored) = applied_and_ignored();
    assert!(applied.contains("properties.identityID"), "{applied:?}");
    assert!(applied.contains("properties.storageProfile.imageReference.skipMarketplaceAgreement"));
    assert!(ignored.contains("properties.osProfile.computerName"), "{ignored:?}");
}

/// Every accepted key is applied or listed as deliberately ignored; the README's
/// tables name exactly those.
#[test]
fn no_accepted_key_is_dropped_silently_and_the_readme_tables_match() {
    let (applied, ignored) = applied_and_ignored();
    let documented_ignored = readme_paths("Accepted and ignored");
    let silently_dropped: Vec<&String> = ignored.difference(&documented_ignored).collect();
    assert!(
        silently_dropped.is_empty(),
        "accepted but neither applied nor listed in the README as ignored: {silently_dropped:?}"
    );
    let not_ignored: Vec<&String> = documented_ignored.difference(&ignored).collect();
    assert!(
        not_ignored.is_empty(),
        "the README lists as ignored what the driver applies or has no such field: {not_ignored:?}"
    );
    let table = readme_paths("Provider spec");
    let undocumented: Vec<&String> = applied.difference(&table).collect();
    assert!(undocumented.is_empty(), "applied but not in the README's field table: {undocumented:?}");
    let phantom: Vec<&String> = table.difference(&applied).collect();
    assert!(phantom.is_empty(), "the README's field table names what the driver does not apply: {phantom:?}");
}
