//! `POST /_admin/instances` on ARM: a `Succeeded` VM created by someone else
//! (another cluster's tooling, an operator in the portal), with exactly the
//! requested tags, one NIC of its own in the subnet and a managed OS disk from
//! the marketplace image, both deleted with the VM (`deleteOption: Delete`),
//! as the portal creates them: the NIC named `<vm>-<4 hex>`, the disk
//! `<vm>_OsDisk_1_<hex>`. Neither carries tags.
//!
//! `attached` describes them instead (then at least one `nic` and exactly one
//! boot `disk`): each NIC and disk by its name (default as above; data disks
//! `<vm>_disk<lun+1>_<hex>`, as a VM PUT names them), tags and
//! `deleteOption` (`delete_with_vm`; ARM's default is `Detach`); the OS disk
//! takes `size_gb` (default 30), a data disk needs it (LUNs in order, created
//! `Empty`), as a NIC PUT and a VM PUT with `networkInterfaces` references
//! and `storageProfile.osDisk`/`dataDisks` names make them.
//!
//! Scope keys: `subscription` (default the cluster subscription),
//! `resourceGroup` (default the seeded group; it must exist, and the VM takes
//! its location), `vnet` and `subnet` (default the seeded ones; the subnet
//! must exist).

use std::time::{Instant, SystemTime};

use fake_cloud_support::{AttachedKind, PlantError, PlantRequest, Planted, PlantedAttached};
use serde_json::json;

use crate::state::{Attachment, DiskPhase, DiskRecord, NicRecord, Store, VmPhase, VmRecord, key, random_mac};
use crate::wire::timestamp;

/// The scope keys ARM planting knows.
const SCOPE_KEYS: &[&str] = &["subscription", "resourceGroup", "vnet", "subnet"];

/// Characters ARM refuses in tag names.
const BAD_TAG_CHARS: &[char] = &['<', '>', '%', '&', '\\', '?', '/'];

/// Whether `name` is a valid Linux VM name (1-64 letters, digits, `-`, `_`, `.`;
/// not ending in `.` or `-`).
fn valid_vm_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !name.ends_with(['.', '-'])
}

fn check_tags(tags: &std::collections::BTreeMap<String, String>) -> Result<(), PlantError> {
    if tags.len() > 50 {
        return Err(PlantError::Invalid("at most 50 tags per resource".into()));
    }
    for (name, value) in tags {
        if name.is_empty() || name.len() > 512 || name.contains(BAD_TAG_CHARS) {
            return Err(PlantError::Invalid(format!("tag name {name:?} is invalid (1-512 chars, none of <>%&\\?/)")));
        }
        if value.len() > 256 {
            return Err(PlantError::Invalid(format!("tag {name:?}: value longer than 256 characters")));
        }
    }
    Ok(())
}

/// Whether `name` is a valid NIC or managed disk name (1-80 letters, digits,
/// `-`, `_`, `.`; starting with a letter or digit, not ending in `.` or `-`).
fn valid_resource_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 80
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && !name.ends_with(['.', '-'])
}

/// `Delete` or `Detach` (ARM's default).
fn delete_option(delete_with_vm: Option<bool>) -> &'static str {
    if delete_with_vm == Some(true) { "Delete" } else { "Detach" }
}

/// One NIC or disk to make, resolved from the request (or the console's defaults).
struct Part {
    kind: AttachedKind,
    name: String,
    tags: Option<serde_json::Value>,
    delete_option: &'static str,
    size_gb: u64,
    boot: bool,
}

/// The NICs and disks to make: `attached`, or the console's NIC and OS disk.
fn parts(request: &PlantRequest, name: &str) -> Result<Vec<Part>, PlantError> {
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    if request.attached.is_empty() {
        let console =
            |kind, name: String, boot| Part { kind, name, tags: None, delete_option: "Delete", size_gb: 30, boot };
        return Ok(vec![
            console(AttachedKind::Nic, format!("{name}-{}", &suffix[..4]), false),
            console(AttachedKind::Disk, format!("{name}_OsDisk_1_{suffix}"), true),
        ]);
    }
    request.check_attached("Azure", &[AttachedKind::Nic, AttachedKind::Disk], &[])?;
    if request.attached_of(AttachedKind::Nic).next().is_none()
        || !request.attached_of(AttachedKind::Disk).next().is_some_and(|d| d.boot)
    {
        return Err(PlantError::Invalid("an Azure VM needs at least one nic and its OS disk (a boot disk)".into()));
    }
    let mut lun = 0;
    let mut out = Vec::new();
    for (i, a) in request.attached.iter().enumerate() {
        check_tags(&a.tags).map_err(|e| PlantError::Invalid(format!("attached[{i}]: {e}")))?;
        let default_name = match (a.kind, a.boot) {
            (AttachedKind::Nic, _) => format!("{name}-{}", &suffix[..4]),
            (_, true) => format!("{name}_OsDisk_1_{suffix}"),
            _ => format!("{name}_disk{}_{suffix}", lun + 1),
        };
        let part_name = if a.name.is_empty() { default_name } else { a.name.clone() };
        if !valid_resource_name(&part_name) {
            return Err(PlantError::Invalid(format!("attached[{i}]: {part_name:?} is not a valid resource name")));
        }
        let size_gb = match (a.kind, a.boot, a.size_gb) {
            (AttachedKind::Nic, _, None) => 0,
            (AttachedKind::Nic, _, Some(_)) => {
                return Err(PlantError::Invalid(format!("attached[{i}]: a NIC has no size")));
            }
            (_, true, None) => 30,
            (_, _, Some(size)) if (1..=32_767).contains(&size) => size,
            (_, false, _) => {
                return Err(PlantError::Invalid(format!(
                    "attached[{i}]: Required parameter 'diskSizeGB' is missing (null) or invalid for a disk created Empty."
                )));
            }
            (_, true, Some(size)) => {
                return Err(PlantError::Invalid(format!("attached[{i}]: disk size {size} is invalid")));
            }
        };
        if a.kind == AttachedKind::Disk && !a.boot {
            lun += 1;
        }
        out.push(Part {
            kind: a.kind,
            name: part_name,
            tags: (!a.tags.is_empty()).then(|| json!(a.tags)),
            delete_option: delete_option(a.delete_with_vm),
            size_gb,
            boot: a.boot,
        });
    }
    Ok(out)
}

/// Plants the VM described by `request` into `store`.
pub(crate) fn plant(store: &Store, request: &PlantRequest) -> Result<Planted, PlantError> {
    request.check_scope_keys(SCOPE_KEYS)?;
    request.refuse_network_tags("Azure")?;
    request.refuse_metadata("Azure")?;
    check_tags(&request.tags)?;
    let name = request.name.as_str();
    if !valid_vm_name(name) {
        return Err(PlantError::Invalid(format!("{name:?} is not a valid virtual machine name")));
    }
    let parts = parts(request, name)?;
    let sub = request.scope_or("subscription", crate::SUBSCRIPTION_ID);
    let rg = request.scope_or("resourceGroup", crate::RESOURCE_GROUP);
    let vnet = request.scope_or("vnet", crate::VNET);
    let subnet = request.scope_or("subnet", crate::SUBNET);
    let now = Instant::now();
    let mut st = store.lock_at(now);
    let group = st
        .resource_group(&sub, &rg)
        .ok_or_else(|| PlantError::Invalid(format!("resource group {rg} of subscription {sub} does not exist")))?;
    let (sub, rg, location) = (group.sub.clone(), group.name.clone(), group.location.clone());
    let subnet_id = format!(
        "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/{vnet}/subnets/{subnet}"
    );
    let subnet_lc = subnet_id.to_ascii_lowercase();
    let subnet_id = match st.subnets.get(&subnet_lc) {
        Some(found) => found.id.clone(),
        None => return Err(PlantError::Invalid(format!("subnet {subnet} of {vnet} in {rg} does not exist"))),
    };
    let vm_key = key(&sub, &rg, name);
    if st.vms.contains_key(&vm_key) {
        return Err(PlantError::Conflict(format!("virtual machine {name} already exists in {rg}")));
    }
    for (i, part) in parts.iter().enumerate() {
        let part_key = key(&sub, &rg, &part.name);
        let taken = match part.kind {
            AttachedKind::Nic => st.nics.contains_key(&part_key),
            _ => st.disks.contains_key(&part_key),
        };
        if taken || parts[..i].iter().any(|p| p.kind == part.kind && p.name.eq_ignore_ascii_case(&part.name)) {
            return Err(PlantError::Conflict(format!("{} {} exists in {rg}", part.kind.word(), part.name)));
        }
    }
    let vm_id = format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{name}");
    let image = json!({"publisher": "sap", "offer": "gardenlinux", "sku": "greatest", "version": "1443.3.0"});
    let mut nics = Vec::new();
    let mut os_disk = None;
    let mut data_disks = Vec::new();
    let mut planted_parts = Vec::new();
    for part in &parts {
        let part_key = key(&sub, &rg, &part.name);
        let attachment = |id: &str, lun| Attachment {
            key: part_key.clone(),
            id: id.to_owned(),
            name: part.name.clone(),
            delete_option: part.delete_option.into(),
            lun,
        };
        if part.kind == AttachedKind::Nic {
            let nic_id = format!(
                "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces/{}",
                part.name
            );
            let private_ip = st.allocate_ip(&subnet_lc);
            let mut model = json!({"location": location, "properties": {
                "enableIPForwarding": false,
                "enableAcceleratedNetworking": false,
                "ipConfigurations": [{"name": "ipconfig1", "properties": {
                    "subnet": {"id": subnet_id}, "privateIPAllocationMethod": "Dynamic", "primary": true,
                }}],
            }});
            if let Some(tags) = &part.tags {
                model["tags"] = tags.clone();
            }
            st.nics.insert(
                part_key.clone(),
                NicRecord {
                    sub: sub.clone(),
                    rg: rg.clone(),
                    name: part.name.clone(),
                    id: nic_id.clone(),
                    location: location.clone(),
                    model,
                    private_ip,
                    guid: uuid::Uuid::new_v4().to_string(),
                    mac: random_mac(),
                    vm: Some(vm_id.clone()),
                    reserved: None,
                    deleting_until: None,
                    generation: 1,
                    created_at: now,
                },
            );
            nics.push(attachment(&nic_id, None));
            planted_parts.push(PlantedAttached { kind: part.kind, id: nic_id, name: part.name.clone() });
            continue;
        }
        let disk_id =
            format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/disks/{}", part.name);
        let lun = (!part.boot).then(|| i64::try_from(data_disks.len()).unwrap_or(i64::MAX));
        let creation_data = if part.boot {
            json!({"createOption": "FromImage", "imageReference": image})
        } else {
            json!({"createOption": "Empty"})
        };
        st.disks.insert(
            part_key.clone(),
            DiskRecord {
                sub: sub.clone(),
                rg: rg.clone(),
                name: part.name.clone(),
                id: disk_id.clone(),
                location: location.clone(),
                tags: part.tags.clone(),
                zones: None,
                sku: "Premium_LRS".to_owned(),
                size_gb: part.size_gb,
                creation_data,
                os_type: part.boot.then(|| "Linux".into()),
                managed_by: Some(vm_id.clone()),
                phase: DiskPhase::Succeeded,
                time_created: timestamp(SystemTime::now()),
                unique_id: uuid::Uuid::new_v4().to_string(),
                performance: None,
                performance_changes: Vec::new(),
            },
        );
        if part.boot {
            os_disk = Some((attachment(&disk_id, None), part));
        } else {
            data_disks.push((attachment(&disk_id, lun), part));
        }
        planted_parts.push(PlantedAttached { kind: part.kind, id: disk_id, name: part.name.clone() });
    }
    let Some((os_disk, os_part)) = os_disk else {
        return Err(PlantError::Invalid("an Azure VM needs its OS disk".into()));
    };
    let network_interfaces: Vec<_> = nics
        .iter()
        .enumerate()
        .map(|(i, nic)| json!({"id": nic.id, "properties": {"primary": i == 0, "deleteOption": nic.delete_option}}))
        .collect();
    let data_disk_models: Vec<_> = data_disks
        .iter()
        .map(|(disk, part)| {
            json!({"lun": disk.lun, "name": disk.name, "createOption": "Empty", "deleteOption": disk.delete_option,
                   "diskSizeGB": part.size_gb, "managedDisk": {"id": disk.id, "storageAccountType": "Premium_LRS"}})
        })
        .collect();
    let model = json!({
        "location": location,
        "tags": request.tags,
        "properties": {
            "hardwareProfile": {"vmSize": "Standard_D2s_v3"},
            "storageProfile": {
                "imageReference": image,
                "osDisk": {"name": os_disk.name, "createOption": "FromImage", "deleteOption": os_disk.delete_option,
                           "diskSizeGB": os_part.size_gb, "managedDisk": {"storageAccountType": "Premium_LRS"}},
                "dataDisks": data_disk_models,
            },
            "osProfile": {"computerName": name, "adminUsername": "azureuser",
                          "linuxConfiguration": {"disablePasswordAuthentication": true}},
            "networkProfile": {"networkInterfaces": network_interfaces},
        },
    });
    let record = VmRecord {
        sub: sub.clone(),
        rg: rg.clone(),
        name: name.to_owned(),
        id: vm_id.clone(),
        location: location.clone(),
        model,
        custom_data: None,
        vm_id: uuid::Uuid::new_v4().to_string(),
        time_created: timestamp(SystemTime::now()),
        phase: VmPhase::Succeeded,
        deallocated: false,
        visible_at: now,
        nics,
        os_disk,
        data_disks: data_disks.into_iter().map(|(disk, _)| disk).collect(),
    };
    st.vms.insert(vm_key, record);
    let attached = if request.attached.is_empty() { Vec::new() } else { planted_parts };
    Ok(Planted::new(vm_id, name.to_owned(), [("subscription", sub), ("resourceGroup", rg), ("location", location)])
        .with_attached(attached))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fake_cloud_support::PlantAttached;

    fn request(name: &str) -> PlantRequest {
        PlantRequest {
            name: name.into(),
            tags: [("kubernetes.io-cluster-shoot--other".to_owned(), "1".to_owned())].into(),
            ..Default::default()
        }
    }

    #[test]
    fn plants_a_succeeded_vm_with_exactly_the_tags_and_its_own_nic_and_disk() {
        let store = Store::new();
        let planted = plant(&store, &request("m-1")).unwrap();
        assert_eq!(planted.scope["location"], crate::LOCATION);
        assert_eq!(planted.scope["resourceGroup"], crate::RESOURCE_GROUP);
        let state = store.lock_at(Instant::now());
        let vm = state.vms.values().find(|vm| vm.id == planted.id).unwrap();
        assert_eq!(vm.phase, VmPhase::Succeeded);
        let inventory = crate::state::render::vm_inventory(vm, "succeeded", true);
        assert_eq!(inventory.tags.keys().collect::<Vec<_>>(), ["kubernetes.io-cluster-shoot--other"]);
        let nic = &state.nics[&vm.nics[0].key];
        assert_eq!(nic.vm.as_deref(), Some(vm.id.as_str()));
        assert!(nic.private_ip.starts_with("10.250."));
        assert!(state.disks[&vm.os_disk.key].managed_by.is_some());
    }

    #[test]
    fn terminating_a_planted_vm_takes_its_nic_and_disk() {
        use fake_cloud_support::CloudHooks;
        let hooks = crate::hooks::ArmHooks { store: std::sync::Arc::new(Store::new()) };
        let planted = hooks.plant(&request("m-1")).unwrap();
        assert!(hooks.terminate(&planted.id));
        let inventory = hooks.inventory();
        assert!(inventory.instances.iter().all(|i| !i.live));
        assert!(inventory.dependents.is_empty(), "{:?}", inventory.dependents);
    }

    fn go_shaped(name: &str) -> PlantRequest {
        let tags: std::collections::BTreeMap<String, String> =
            [("kubernetes.io-cluster-shoot--x".to_owned(), "1".to_owned())].into();
        let mut nic = PlantAttached::new(AttachedKind::Nic, &format!("{name}-nic"));
        nic.tags = tags.clone();
        nic.delete_with_vm = Some(true);
        let mut os = PlantAttached::new(AttachedKind::Disk, &format!("{name}-os-disk"));
        os.boot = true;
        os.size_gb = Some(50);
        os.delete_with_vm = Some(true);
        let mut data = PlantAttached::new(AttachedKind::Disk, &format!("{name}-containerd-0-data-disk"));
        data.size_gb = Some(64);
        PlantRequest { attached: vec![nic, os, data], tags, ..request(name) }
    }

    #[test]
    fn plants_the_described_nic_and_disks_with_their_names_tags_and_delete_options() {
        use fake_cloud_support::CloudHooks;
        let hooks = crate::hooks::ArmHooks { store: std::sync::Arc::new(Store::new()) };
        let planted = hooks.plant(&go_shaped("m-9")).unwrap();
        let names: Vec<&str> = planted.attached.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["m-9-nic", "m-9-os-disk", "m-9-containerd-0-data-disk"]);
        let inventory = hooks.inventory();
        let dependent = |name: &str| inventory.dependents.iter().find(|d| d.name == name).unwrap();
        assert_eq!(dependent("m-9-nic").tags.keys().collect::<Vec<_>>(), ["kubernetes.io-cluster-shoot--x"]);
        assert!(dependent("m-9-os-disk").tags.is_empty());
        assert_eq!(dependent("m-9-containerd-0-data-disk").extra["disk_size_gb"], 64);
        let vm = &inventory.instances[0];
        let refs =
            vm.extra["network_interfaces"].as_array().unwrap().len() + vm.extra["disks"].as_array().unwrap().len();
        assert_eq!(refs, 3);
        {
            let state = hooks.store.lock_at(Instant::now());
            let record = state.vms.values().next().unwrap();
            assert_eq!(record.data_disks[0].lun, Some(0));
            assert_eq!(record.data_disks[0].delete_option, "Detach", "ARM's default");
            assert_eq!(record.os_disk.delete_option, "Delete");
        }
        assert!(hooks.terminate(&planted.id));
        let left: Vec<String> = hooks.inventory().dependents.into_iter().map(|d| d.name).collect();
        assert_eq!(left, ["m-9-containerd-0-data-disk"], "a Detach disk stays when its VM goes");
        let mut no_os = go_shaped("m-10");
        no_os.attached.remove(1);
        assert!(hooks.plant(&no_os).unwrap_err().to_string().contains("OS disk"));
        let mut sizeless = go_shaped("m-11");
        sizeless.attached[2].size_gb = None;
        assert!(hooks.plant(&sizeless).unwrap_err().to_string().contains("diskSizeGB"));
        assert!(matches!(hooks.plant(&go_shaped("m-9")), Err(PlantError::Conflict(_))), "the data disk is still there");
    }

    #[test]
    fn refuses_what_arm_would_not_hold() {
        let store = Store::new();
        plant(&store, &request("m-1")).unwrap();
        assert!(matches!(plant(&store, &request("M-1")), Err(PlantError::Conflict(_))), "names ignore case");
        assert!(matches!(plant(&store, &request("m-")), Err(PlantError::Invalid(_))));
        let mut bad = request("m-2");
        bad.tags.insert("kubernetes.io/cluster/x".into(), "1".into());
        assert!(matches!(plant(&store, &bad), Err(PlantError::Invalid(_))));
        let mut elsewhere = request("m-3");
        elsewhere.scope.insert("resourceGroup".into(), "nope".into());
        assert!(matches!(plant(&store, &elsewhere), Err(PlantError::Invalid(_))));
        let mut tagged = request("m-4");
        tagged.network_tags.push("fw".into());
        assert!(matches!(plant(&store, &tagged), Err(PlantError::Invalid(_))));
        assert_eq!(store.lock_at(Instant::now()).vms.len(), 1);
    }
}
