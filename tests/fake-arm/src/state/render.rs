//! Resources as ARM returns them, and as the admin inventory lists them.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use fake_cloud_support::InventoryInstance;
use serde_json::{Map, Value, json};

use super::{DiskPhase, DiskRecord, GalleryRecord, NicRecord, State, VmPhase, VmRecord};
use crate::wire::{field, object_mut, tag_map};

/// Copies the top-level fields of a stored model that ARM echoes (tags, zones, identity, plan...).
fn top_level(model: &Value, out: &mut Map<String, Value>) {
    if let Some(map) = model.as_object() {
        for (k, v) in map {
            let lower = k.to_ascii_lowercase();
            if !matches!(lower.as_str(), "properties" | "id" | "name" | "type" | "location" | "etag" | "resources") {
                out.insert(k.clone(), v.clone());
            }
        }
    }
}

/// A VM as `virtualMachines.get` returns it (never with `customData`).
pub(crate) fn vm(record: &VmRecord, instance_view: bool) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), json!(record.name));
    out.insert("id".into(), json!(record.id));
    out.insert("type".into(), json!("Microsoft.Compute/virtualMachines"));
    out.insert("location".into(), json!(record.location));
    top_level(&record.model, &mut out);
    if let Some(identity) = out.get_mut("identity").and_then(Value::as_object_mut)
        && identity.get("type").and_then(Value::as_str).is_some_and(|t| t.contains("SystemAssigned"))
    {
        identity.insert("principalId".into(), json!(record.vm_id));
        identity.insert("tenantId".into(), json!(crate::TENANT_ID));
    }
    // Each user-assigned identity as ARM shows it: its principal and client ids.
    if let Some(ids) =
        out.get_mut("identity").and_then(|i| i.get_mut("userAssignedIdentities")).and_then(Value::as_object_mut)
    {
        for (id, value) in ids.iter_mut() {
            *value = json!({"principalId": pseudo_guid(id, 1), "clientId": pseudo_guid(id, 2)});
        }
    }
    let mut props = field(&record.model, "properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let storage = object_mut(&mut props, "storageProfile");
    let os_disk = object_mut(storage, "osDisk");
    os_disk.insert("osType".into(), json!("Linux"));
    os_disk.insert("name".into(), json!(record.os_disk.name));
    os_disk.entry("createOption").or_insert(json!("FromImage"));
    os_disk.entry("caching").or_insert(json!("ReadWrite"));
    os_disk.insert("deleteOption".into(), json!(record.os_disk.delete_option));
    object_mut(os_disk, "managedDisk").insert("id".into(), json!(record.os_disk.id));
    if let Some(Value::Array(disks)) = storage.get_mut("dataDisks") {
        for disk in disks.iter_mut().filter_map(Value::as_object_mut) {
            let lun = disk.get("lun").and_then(Value::as_i64);
            if let Some(att) = record.data_disks.iter().find(|a| a.lun == lun) {
                disk.insert("name".into(), json!(att.name));
                disk.insert("deleteOption".into(), json!(att.delete_option));
                object_mut(disk, "managedDisk").insert("id".into(), json!(att.id));
                disk.entry("caching").or_insert(json!("None"));
                disk.entry("toBeDetached").or_insert(json!(false));
            }
        }
    }
    storage.entry("dataDisks").or_insert(json!([]));
    // NICs the VM made from its configurations are listed as its network interfaces too.
    let network = object_mut(&mut props, "networkProfile");
    if network.get("networkInterfaceConfigurations").and_then(Value::as_array).is_some_and(|c| !c.is_empty()) {
        let made: Vec<Value> = record
            .nics
            .iter()
            .enumerate()
            .map(|(i, nic)| json!({"id": nic.id, "properties": {"primary": i == 0, "deleteOption": nic.delete_option}}))
            .collect();
        network.insert("networkInterfaces".into(), Value::Array(made));
    }
    let os_profile = object_mut(&mut props, "osProfile");
    os_profile.remove("customData");
    os_profile.remove("adminPassword");
    os_profile.entry("computerName").or_insert(json!(record.name));
    os_profile.entry("secrets").or_insert(json!([]));
    os_profile.entry("allowExtensionOperations").or_insert(json!(true));
    os_profile.entry("requireGuestProvisionSignal").or_insert(json!(true));
    props.insert("provisioningState".into(), json!(record.phase.word()));
    props.insert("vmId".into(), json!(record.vm_id));
    props.insert("timeCreated".into(), json!(record.time_created));
    if instance_view {
        props.insert("instanceView".into(), vm_instance_view(record));
    }
    out.insert("properties".into(), Value::Object(props));
    Value::Object(out)
}

/// A guid derived from `seed` (the same every time: ARM's ids of an identity do not change).
fn pseudo_guid(seed: &str, salt: u64) -> String {
    use std::hash::{Hash, Hasher};
    let half = |n: u64| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (seed.to_ascii_lowercase(), salt, n).hash(&mut h);
        h.finish()
    };
    let (a, b) = (half(0), half(1));
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        b >> 52,
        b & 0xffff_ffff_ffff
    )
}

fn vm_instance_view(record: &VmRecord) -> Value {
    let mut statuses = Vec::new();
    match &record.phase {
        VmPhase::Succeeded => {
            statuses.push(json!({"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Provisioning succeeded", "time": record.time_created}));
            statuses.push(json!({"code": "PowerState/running", "level": "Info", "displayStatus": "VM running"}));
        }
        VmPhase::Failed(failure) => statuses.push(json!({
            "code": format!("ProvisioningState/failed/{}", failure.code),
            "level": "Error",
            "displayStatus": "Provisioning failed",
            "message": failure.message,
            "time": record.time_created,
        })),
        VmPhase::Provisioning { updating, .. } => {
            let word = if *updating { "updating" } else { "creating" };
            statuses.push(json!({"code": format!("ProvisioningState/{word}"), "level": "Info", "displayStatus": if *updating { "Updating" } else { "Creating" }}));
            if *updating {
                statuses.push(json!({"code": "PowerState/running", "level": "Info", "displayStatus": "VM running"}));
            } else {
                statuses.push(json!({"code": "PowerState/starting", "level": "Info", "displayStatus": "VM starting"}));
            }
        }
        VmPhase::Deleting { .. } => {
            statuses.push(json!({"code": "ProvisioningState/deleting", "level": "Info", "displayStatus": "Deleting"}));
            statuses.push(json!({"code": "PowerState/stopping", "level": "Info", "displayStatus": "VM stopping"}));
        }
    }
    // A deallocated VM (a Spot eviction with evictionPolicy Deallocate) shows that power
    // state whatever its provisioning state says (Compute's `InstanceViewStatus` codes
    // `PowerState/<state>`, as `az vm get-instance-view` prints an evicted Spot VM).
    if record.deallocated {
        statuses.retain(|s| !s["code"].as_str().is_some_and(|c| c.starts_with("PowerState/")));
        statuses.push(json!({"code": "PowerState/deallocated", "level": "Info", "displayStatus": "VM deallocated"}));
    }
    json!({
        "computerName": record.name,
        "osName": "gardenlinux",
        "hyperVGeneration": "V2",
        "statuses": statuses,
    })
}

/// A NIC as `networkInterfaces.get` returns it.
pub(crate) fn nic(record: &NicRecord, now: Instant) -> Value {
    let mut props = field(&record.model, "properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let provisioning = if record.deleting_until.is_some_and(|t| now < t) { "Deleting" } else { "Succeeded" };
    let configs = props.get("ipConfigurations").and_then(Value::as_array).cloned().unwrap_or_default();
    let configs: Vec<Value> = configs
        .into_iter()
        .enumerate()
        .map(|(i, config)| {
            let name = config.get("name").and_then(Value::as_str).unwrap_or("ipconfig1").to_owned();
            let mut cprops = config.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
            cprops.insert("provisioningState".into(), json!(provisioning));
            cprops.entry("privateIPAllocationMethod").or_insert(json!("Dynamic"));
            cprops.entry("privateIPAddressVersion").or_insert(json!("IPv4"));
            cprops.entry("primary").or_insert(json!(i == 0));
            if i == 0 {
                cprops.insert("privateIPAddress".into(), json!(record.private_ip));
            }
            json!({
                "name": name,
                "id": format!("{}/ipConfigurations/{name}", record.id),
                "etag": etag(record),
                "type": "Microsoft.Network/networkInterfaces/ipConfigurations",
                "properties": cprops,
            })
        })
        .collect();
    props.insert("ipConfigurations".into(), Value::Array(configs));
    props.insert("provisioningState".into(), json!(provisioning));
    props.insert("resourceGuid".into(), json!(record.guid));
    props.entry("enableIPForwarding").or_insert(json!(false));
    props.entry("enableAcceleratedNetworking").or_insert(json!(false));
    props.entry("nicType").or_insert(json!("Standard"));
    props.entry("disableTcpStateTracking").or_insert(json!(false));
    props.insert("dnsSettings".into(), json!({"dnsServers": [], "appliedDnsServers": []}));
    props.insert("hostedWorkloads".into(), json!([]));
    props.insert("tapConfigurations".into(), json!([]));
    props.insert("vnetEncryptionSupported".into(), json!(false));
    props.remove("virtualMachine");
    props.remove("macAddress");
    if let Some(vm) = &record.vm {
        props.insert("virtualMachine".into(), json!({"id": vm}));
        props.insert("macAddress".into(), json!(record.mac));
        props.insert("primary".into(), json!(true));
    }
    let mut out = Map::new();
    out.insert("name".into(), json!(record.name));
    out.insert("id".into(), json!(record.id));
    out.insert("etag".into(), json!(etag(record)));
    out.insert("type".into(), json!("Microsoft.Network/networkInterfaces"));
    out.insert("location".into(), json!(record.location));
    top_level(&record.model, &mut out);
    out.insert("properties".into(), Value::Object(props));
    Value::Object(out)
}

fn etag(record: &NicRecord) -> String {
    format!("W/\"{}-{}\"", &record.guid[..8.min(record.guid.len())], record.generation)
}

/// A disk's `diskIOPSReadWrite` and `diskMBpsReadWrite`: as provisioned, or its type's default.
pub(crate) fn performance(record: &DiskRecord) -> (u64, u64) {
    record.performance.unwrap_or_else(|| default_performance(&record.sku, record.size_gb))
}

/// The performance a disk of `sku` and `size` GiB has when none is asked for:
/// Premium SSD v2 its baseline, 3,000 IOPS and 125 MB/s; an Ultra Disk (the
/// fake's choice, Azure's differs by size) 300 IOPS per GiB up to 400,000 and
/// a quarter of that in MB/s; every other type the fake's fixed 500 IOPS and
/// 100 MB/s.
pub(crate) fn default_performance(sku: &str, size: u64) -> (u64, u64) {
    if sku.eq_ignore_ascii_case("PremiumV2_LRS") {
        (3_000, 125)
    } else if sku.eq_ignore_ascii_case("UltraSSD_LRS") {
        let iops = size.saturating_mul(300).clamp(100, 400_000);
        (iops, (iops / 4).clamp(1, 10_000))
    } else {
        (500, 100)
    }
}

/// A disk as `disks.get` returns it.
pub(crate) fn disk(record: &DiskRecord) -> Value {
    let state = match record.phase {
        DiskPhase::Updating(_) => "Updating",
        DiskPhase::Succeeded => "Succeeded",
        DiskPhase::Deleting(_) => "Deleting",
    };
    let tier = if record.sku.to_ascii_lowercase().starts_with("premium") { "Premium" } else { "Standard" };
    let mut props = json!({
        "creationData": record.creation_data,
        "diskSizeGB": record.size_gb,
        "diskSizeBytes": record.size_gb * 1024 * 1024 * 1024,
        "diskIOPSReadWrite": performance(record).0,
        "diskMBpsReadWrite": performance(record).1,
        "encryption": {"type": "EncryptionAtRestWithPlatformKey"},
        "networkAccessPolicy": "AllowAll",
        "publicNetworkAccess": "Enabled",
        "timeCreated": record.time_created,
        "provisioningState": state,
        "diskState": if record.managed_by.is_some() { "Attached" } else { "Unattached" },
        "uniqueId": record.unique_id,
    });
    if let Some(os) = &record.os_type {
        props["osType"] = json!(os);
        props["hyperVGeneration"] = json!("V2");
    }
    let mut out = json!({
        "name": record.name,
        "id": record.id,
        "type": "Microsoft.Compute/disks",
        "location": record.location,
        "sku": {"name": record.sku, "tier": tier},
        "properties": props,
    });
    if let Some(tags) = &record.tags {
        out["tags"] = tags.clone();
    }
    if let Some(zones) = &record.zones {
        out["zones"] = zones.clone();
    }
    if let Some(vm) = &record.managed_by {
        out["managedBy"] = json!(vm);
    }
    out
}

/// A gallery as `galleries.get` returns it.
pub(crate) fn gallery(record: &GalleryRecord) -> Value {
    let groups: Vec<Value> = record.groups.iter().map(|(kind, ids)| json!({"type": kind, "ids": ids})).collect();
    let mut sharing = json!({"permissions": record.permissions, "groups": groups});
    if record.community {
        sharing["communityGalleryInfo"] = json!({
            "publisherUri": "https://gardenlinux.io",
            "publisherContact": "gardenlinux@example.com",
            "eula": "https://gardenlinux.io/eula",
            "publicNamePrefix": community_prefix(record),
            "communityGalleryEnabled": true,
            "publicNames": [community_name(record)],
        });
    }
    json!({
        "name": record.name,
        "id": record.id(),
        "type": "Microsoft.Compute/galleries",
        "location": record.location,
        "properties": {
            "identifier": {"uniqueName": record.unique_name},
            "provisioningState": "Succeeded",
            "sharingProfile": sharing,
        },
    })
}

/// The `publicNamePrefix` of a community gallery: its public name without the guid ARM appends.
fn community_prefix(record: &GalleryRecord) -> String {
    match &record.public_name {
        Some(public) => {
            let parts: Vec<&str> = public.split('-').collect();
            parts[..parts.len().saturating_sub(5).max(1)].join("-")
        }
        None => record.name.clone(),
    }
}

/// The community gallery public name of a gallery with community sharing on.
pub(crate) fn community_name(record: &GalleryRecord) -> String {
    record.public_name.clone().unwrap_or_else(|| format!("{}-{}", record.name, &record.sub[..8.min(record.sub.len())]))
}

/// A gallery image definition as `galleryImages.get` returns it.
pub(crate) fn gallery_image(record: &GalleryRecord, image: &str) -> Value {
    json!({
        "name": image,
        "id": format!("{}/images/{image}", record.id()),
        "type": "Microsoft.Compute/galleries/images",
        "location": record.location,
        "properties": {
            "osType": "Linux",
            "osState": "Generalized",
            "hyperVGeneration": "V2",
            "architecture": "x64",
            "identifier": {"publisher": "gardenlinux", "offer": image, "sku": "greatest"},
            "provisioningState": "Succeeded",
        },
    })
}

/// A gallery image version as `galleryImageVersions.get` returns it.
pub(crate) fn gallery_version(record: &GalleryRecord, image: &str, version: &str) -> Value {
    let regions = record
        .images
        .get(&image.to_ascii_lowercase())
        .map(|def| def.regions_of(version, &record.location))
        .unwrap_or_else(|| vec![record.location.clone()]);
    let targets: Vec<Value> = regions
        .iter()
        .map(|r| json!({"name": r, "regionalReplicaCount": 1, "storageAccountType": "Standard_LRS"}))
        .collect();
    json!({
        "name": version,
        "id": format!("{}/images/{image}/versions/{version}", record.id()),
        "type": "Microsoft.Compute/galleries/images/versions",
        "location": record.location,
        "properties": {
            "publishingProfile": {
                "targetRegions": targets,
                "replicaCount": 1,
                "excludeFromLatest": false,
                "publishedDate": "2024-06-01T00:00:00+00:00",
                "storageAccountType": "Standard_LRS",
            },
            "storageProfile": {"osDiskImage": {"sizeInGB": 30, "hostCaching": "ReadWrite"}},
            "provisioningState": "Succeeded",
        },
    })
}

/// A gallery image version as the consumer's `sharedGalleryImageVersions.get` returns it.
pub(crate) fn shared_version(record: &GalleryRecord, image: &str, version: &str) -> Value {
    json!({
        "name": version,
        "location": record.location,
        "identifier": {"uniqueId": format!("/SharedGalleries/{}/Images/{image}/Versions/{version}", record.unique_name)},
        "properties": {
            "publishedDate": "2024-06-01T00:00:00+00:00",
            "excludeFromLatest": false,
            "storageProfile": {"osDiskImage": {"diskSizeGB": 30, "hostCaching": "ReadWrite"}},
        },
    })
}

/// A community gallery image version as `communityGalleryImageVersions.get` returns it
/// in `location` (Compute gallery API 2023-07-03, `CommunityGalleryImageVersion`).
pub(crate) fn community_version(record: &GalleryRecord, image: &str, version: &str, location: &str) -> Value {
    json!({
        "name": version,
        "location": location,
        "type": "Microsoft.Compute/Locations/CommunityGalleries/Images/Versions",
        "identifier": {"uniqueId": format!("/CommunityGalleries/{}/Images/{image}/Versions/{version}", community_name(record))},
        "properties": {
            "publishedDate": "2024-06-01T00:00:00+00:00",
            "excludeFromLatest": false,
            "storageProfile": {"osDiskImage": {"diskSizeGB": 30, "hostCaching": "ReadWrite"}, "dataDiskImages": []},
            "disclaimer": "Garden Linux community image (fake-arm seed).",
        },
    })
}

/// One VM in the admin inventory.
pub(crate) fn vm_inventory(record: &VmRecord, state: &str, live: bool) -> InventoryInstance {
    let mut extra = Map::new();
    extra.insert("kind".into(), json!("virtualMachine"));
    extra.insert("user_data".into(), json!(record.custom_data));
    extra.insert("location".into(), json!(record.location));
    extra.insert("resource_group".into(), json!(record.rg));
    extra.insert("subscription".into(), json!(record.sub));
    extra.insert("vm_id".into(), json!(record.vm_id));
    if let VmPhase::Failed(failure) = &record.phase {
        extra.insert("error_code".into(), json!(failure.code));
    }
    if record.deallocated {
        extra.insert("power_state".into(), json!("deallocated"));
    }
    extra.insert("network_interfaces".into(), json!(record.nics.iter().map(|a| a.id.clone()).collect::<Vec<_>>()));
    extra.insert(
        "disks".into(),
        json!(std::iter::once(&record.os_disk).chain(&record.data_disks).map(|a| a.id.clone()).collect::<Vec<_>>()),
    );
    InventoryInstance {
        id: record.id.clone(),
        name: record.name.clone(),
        state: state.to_owned(),
        live,
        tags: tag_map(field(&record.model, "tags")),
        extra,
    }
}

fn epoch_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0).try_into().unwrap_or(u64::MAX)
}

/// The NICs and disks of the inventory's `dependents`.
pub(crate) fn dependents(state: &State, now: Instant) -> Vec<InventoryInstance> {
    let mut out = Vec::new();
    for nic in state.nics.values() {
        let mut extra = Map::new();
        extra.insert("kind".into(), json!("networkInterface"));
        extra.insert("subscription".into(), json!(nic.sub));
        extra.insert("resource_group".into(), json!(nic.rg));
        extra.insert("virtual_machine".into(), json!(nic.vm));
        extra.insert("private_ip".into(), json!(nic.private_ip));
        let reserved = nic.reserved.as_ref().filter(|r| state.reservation_active(r, now));
        extra.insert(
            "reserved_until_ms".into(),
            json!(reserved.map(|r| epoch_ms(r.since_wall + state.nic_reservation))),
        );
        extra.insert("reserved_for".into(), json!(reserved.map(|r| r.vm.clone())));
        let word = if nic.deleting_until.is_some_and(|t| now < t) { "Deleting" } else { "Succeeded" };
        out.push(InventoryInstance {
            id: nic.id.clone(),
            name: nic.name.clone(),
            state: word.to_owned(),
            live: true,
            tags: tag_map(field(&nic.model, "tags")),
            extra,
        });
    }
    for disk in state.disks.values() {
        let rendered = self::disk(disk);
        let mut extra = Map::new();
        extra.insert("kind".into(), json!("disk"));
        extra.insert("subscription".into(), json!(disk.sub));
        extra.insert("resource_group".into(), json!(disk.rg));
        extra.insert("managed_by".into(), json!(disk.managed_by));
        extra.insert("disk_size_gb".into(), json!(disk.size_gb));
        out.push(InventoryInstance {
            id: disk.id.clone(),
            name: disk.name.clone(),
            state: rendered["properties"]["provisioningState"].as_str().unwrap_or("Succeeded").to_owned(),
            live: true,
            tags: tag_map(disk.tags.as_ref()),
            extra,
        });
    }
    out
}
