//! `POST /_admin/instances` on ARM: a `Succeeded` VM created by someone else
//! (another cluster's tooling, an operator in the portal), with exactly the
//! requested tags, one NIC of its own in the subnet and a managed OS disk from
//! the marketplace image, both deleted with the VM (`deleteOption: Delete`),
//! as the portal creates them: the NIC named `<vm>-<4 hex>`, the disk
//! `<vm>_OsDisk_1_<hex>`. Neither carries tags.
//!
//! Scope keys: `subscription` (default the cluster subscription),
//! `resourceGroup` (default the seeded group; it must exist, and the VM takes
//! its location), `vnet` and `subnet` (default the seeded ones; the subnet
//! must exist).

use std::time::{Instant, SystemTime};

use fake_cloud_support::{PlantError, PlantRequest, Planted};
use serde_json::json;

use crate::state::{Attachment, DiskPhase, DiskRecord, NicRecord, Store, VmPhase, VmRecord, key};
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

fn check_tags(request: &PlantRequest) -> Result<(), PlantError> {
    if request.tags.len() > 50 {
        return Err(PlantError::Invalid("at most 50 tags per resource".into()));
    }
    for (name, value) in &request.tags {
        if name.is_empty() || name.len() > 512 || name.contains(BAD_TAG_CHARS) {
            return Err(PlantError::Invalid(format!("tag name {name:?} is invalid (1-512 chars, none of <>%&\\?/)")));
        }
        if value.len() > 256 {
            return Err(PlantError::Invalid(format!("tag {name:?}: value longer than 256 characters")));
        }
    }
    Ok(())
}

/// Plants the VM described by `request` into `store`.
pub(crate) fn plant(store: &Store, request: &PlantRequest) -> Result<Planted, PlantError> {
    request.check_scope_keys(SCOPE_KEYS)?;
    request.refuse_network_tags("Azure")?;
    check_tags(request)?;
    let name = request.name.as_str();
    if !valid_vm_name(name) {
        return Err(PlantError::Invalid(format!("{name:?} is not a valid virtual machine name")));
    }
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
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let nic_name = format!("{name}-{}", &suffix[..4]);
    let nic_key = key(&sub, &rg, &nic_name);
    let os_name = format!("{name}_OsDisk_1_{suffix}");
    let os_key = key(&sub, &rg, &os_name);
    if st.nics.contains_key(&nic_key) || st.disks.contains_key(&os_key) {
        return Err(PlantError::Conflict(format!("NIC {nic_name} or disk {os_name} exists; plant again")));
    }
    let vm_id = format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{name}");
    let nic_id =
        format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces/{nic_name}");
    let os_id = format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/disks/{os_name}");
    let private_ip = st.allocate_ip(&subnet_lc);
    let mac = {
        let b = uuid::Uuid::new_v4();
        let b = b.as_bytes();
        format!("00-0D-3A-{:02X}-{:02X}-{:02X}", b[0], b[1], b[2])
    };
    st.nics.insert(
        nic_key.clone(),
        NicRecord {
            sub: sub.clone(),
            rg: rg.clone(),
            name: nic_name.clone(),
            id: nic_id.clone(),
            location: location.clone(),
            model: json!({"location": location, "properties": {
                "enableIPForwarding": false,
                "enableAcceleratedNetworking": false,
                "ipConfigurations": [{"name": "ipconfig1", "properties": {
                    "subnet": {"id": subnet_id}, "privateIPAllocationMethod": "Dynamic", "primary": true,
                }}],
            }}),
            private_ip,
            guid: uuid::Uuid::new_v4().to_string(),
            mac,
            vm: Some(vm_id.clone()),
            reserved: None,
            deleting_until: None,
            generation: 1,
            created_at: now,
        },
    );
    let image = json!({"publisher": "sap", "offer": "gardenlinux", "sku": "greatest", "version": "1443.3.0"});
    st.disks.insert(
        os_key.clone(),
        DiskRecord {
            sub: sub.clone(),
            rg: rg.clone(),
            name: os_name.clone(),
            id: os_id.clone(),
            location: location.clone(),
            tags: None,
            zones: None,
            sku: "Premium_LRS".to_owned(),
            size_gb: 30,
            creation_data: json!({"createOption": "FromImage", "imageReference": image}),
            os_type: Some("Linux".into()),
            managed_by: Some(vm_id.clone()),
            phase: DiskPhase::Succeeded,
            time_created: timestamp(SystemTime::now()),
            unique_id: uuid::Uuid::new_v4().to_string(),
        },
    );
    let model = json!({
        "location": location,
        "tags": request.tags,
        "properties": {
            "hardwareProfile": {"vmSize": "Standard_D2s_v3"},
            "storageProfile": {
                "imageReference": image,
                "osDisk": {"createOption": "FromImage", "deleteOption": "Delete", "diskSizeGB": 30,
                           "managedDisk": {"storageAccountType": "Premium_LRS"}},
                "dataDisks": [],
            },
            "osProfile": {"computerName": name, "adminUsername": "azureuser",
                          "linuxConfiguration": {"disablePasswordAuthentication": true}},
            "networkProfile": {"networkInterfaces": [
                {"id": nic_id, "properties": {"primary": true, "deleteOption": "Delete"}},
            ]},
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
        visible_at: now,
        nics: vec![Attachment { key: nic_key, id: nic_id, name: nic_name, delete_option: "Delete".into(), lun: None }],
        os_disk: Attachment { key: os_key, id: os_id, name: os_name, delete_option: "Delete".into(), lun: None },
        data_disks: Vec::new(),
    };
    st.vms.insert(vm_key, record);
    Ok(Planted::new(vm_id, name.to_owned(), [("subscription", sub), ("resourceGroup", rg), ("location", location)]))
}

#[cfg(test)]
mod tests {
    use super::*;

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
