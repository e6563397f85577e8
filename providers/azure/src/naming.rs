//! Names and ids: the providerID (`azure:///<location>/<vm>`, as the Go
//! provider writes it), the VM a machine RPC addresses, and the names of a
//! VM's NIC and disks, derived from the VM name exactly as the Go provider
//! derives them (`<vm>-nic`, `<vm>-os-disk`, `<vm>-[<name>-]<lun>-data-disk`),
//! so that a retry finds what an earlier attempt (or the Go provider) made.

use machine_driver_api::DriverError;

use crate::spec::DataDisk;

/// Scheme and empty host of the providerID.
const PROVIDER_ID_PREFIX: &str = "azure:///";
/// Suffix of the NIC name.
pub(crate) const NIC_SUFFIX: &str = "-nic";
/// Suffix of the OS disk name.
pub(crate) const OS_DISK_SUFFIX: &str = "-os-disk";
/// Suffix of data disk names.
pub(crate) const DATA_DISK_SUFFIX: &str = "-data-disk";
/// NIC generations: `<vm>-nic`, then `<vm>-nic-1` and `<vm>-nic-2` when the
/// earlier one is reserved for a VM that failed (`NicReservedForAnotherVm`).
pub(crate) const NIC_GENERATIONS: u32 = 3;

/// The tag carrying the machine's uid on the VM and its NIC (Azure refuses
/// `/` in tag names).
pub(crate) const MACHINE_UID_TAG: &str = "mcm.gardener.cloud-machine-uid";

/// One VM: where it lives and its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct VmRef {
    /// Subscription (from the secret).
    pub(crate) subscription: String,
    /// Resource group (from the spec).
    pub(crate) resource_group: String,
    /// Region (from the providerID or the spec).
    pub(crate) location: String,
    /// VM name (the machine name).
    pub(crate) name: String,
}

impl VmRef {
    /// `azure:///<location>/<vm>`.
    pub(crate) fn provider_id(&self) -> String {
        format!("{PROVIDER_ID_PREFIX}{}/{}", self.location, self.name)
    }

    /// The ARM id of a resource of this VM's group: `<type>` is `Microsoft.Network/networkInterfaces`...
    pub(crate) fn resource_id(&self, provider_type: &str, name: &str) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}/providers/{provider_type}/{name}",
            self.subscription, self.resource_group
        )
    }

    /// The NIC name of generation `generation` (0 = the Go provider's name).
    pub(crate) fn nic_name(&self, generation: u32) -> String {
        match generation {
            0 => format!("{}{NIC_SUFFIX}", self.name),
            g => format!("{}{NIC_SUFFIX}-{g}", self.name),
        }
    }

    /// The OS disk's name.
    pub(crate) fn os_disk_name(&self) -> String {
        format!("{}{OS_DISK_SUFFIX}", self.name)
    }
}

/// The name of a data disk of `vm`.
pub(crate) fn data_disk_name(vm: &str, disk: &DataDisk) -> String {
    format!("{vm}{}", data_disk_suffix(disk))
}

/// `-[<name>-]<lun>-data-disk`.
pub(crate) fn data_disk_suffix(disk: &DataDisk) -> String {
    let lun = disk.lun.unwrap_or(0);
    match disk.name.as_deref().filter(|n| !n.is_empty()) {
        Some(name) => format!("-{name}-{lun}{DATA_DISK_SUFFIX}"),
        None => format!("-{lun}{DATA_DISK_SUFFIX}"),
    }
}

/// The VM name a NIC or disk of a machine belongs to, `None` for names no
/// machine resource has. `data_disk_suffixes` are the spec's data disk suffixes.
pub(crate) fn owner_vm(resource_type: &str, name: &str, data_disk_suffixes: &[String]) -> Option<String> {
    let t = resource_type.to_ascii_lowercase();
    if t == "microsoft.compute/virtualmachines" {
        return Some(name.to_string());
    }
    if t == "microsoft.network/networkinterfaces" {
        if let Some(vm) = name.strip_suffix(NIC_SUFFIX) {
            return Some(vm.to_string()).filter(|v| !v.is_empty());
        }
        let (stem, generation) = name.rsplit_once('-')?;
        let generation: u32 = generation.parse().ok()?;
        if generation == 0 || generation >= NIC_GENERATIONS {
            return None;
        }
        return stem.strip_suffix(NIC_SUFFIX).filter(|v| !v.is_empty()).map(str::to_string);
    }
    if t == "microsoft.compute/disks" {
        if let Some(vm) = name.strip_suffix(OS_DISK_SUFFIX) {
            return Some(vm.to_string()).filter(|v| !v.is_empty());
        }
        return data_disk_suffixes
            .iter()
            .find_map(|s| name.strip_suffix(s.as_str()))
            .filter(|v| !v.is_empty())
            .map(str::to_string);
    }
    None
}

/// Parses `azure:///<location>/<vm>` into (location, vm).
pub(crate) fn parse_provider_id(pid: &str) -> Result<(String, String), DriverError> {
    let bad = || {
        DriverError::invalid_argument(
            "machine.providerID",
            format!("{pid:?} is not of the form azure:///<location>/<vm-name>"),
        )
    };
    let rest = pid.strip_prefix(PROVIDER_ID_PREFIX).ok_or_else(bad)?;
    match rest.split('/').collect::<Vec<_>>().as_slice() {
        [location, name] if !location.is_empty() && !name.is_empty() => {
            Ok(((*location).to_string(), (*name).to_string()))
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm() -> VmRef {
        VmRef {
            subscription: "s".into(),
            resource_group: "rg".into(),
            location: "westeurope".into(),
            name: "m-1".into(),
        }
    }

    #[test]
    fn names_are_the_go_providers() {
        let v = vm();
        assert_eq!(v.provider_id(), "azure:///westeurope/m-1");
        assert_eq!(v.nic_name(0), "m-1-nic");
        assert_eq!(v.nic_name(2), "m-1-nic-2");
        assert_eq!(v.os_disk_name(), "m-1-os-disk");
        let named = DataDisk { name: Some("etcd".into()), lun: Some(1), ..DataDisk::default() };
        let unnamed = DataDisk { lun: Some(0), ..DataDisk::default() };
        assert_eq!(data_disk_name("m-1", &named), "m-1-etcd-1-data-disk");
        assert_eq!(data_disk_name("m-1", &unnamed), "m-1-0-data-disk");
        assert_eq!(
            v.resource_id("Microsoft.Network/networkInterfaces", "m-1-nic"),
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/m-1-nic"
        );
    }

    #[test]
    fn dependents_map_back_to_their_vm() {
        let suffixes = vec!["-etcd-1-data-disk".to_string()];
        assert_eq!(owner_vm("Microsoft.Compute/virtualMachines", "m-1", &suffixes).as_deref(), Some("m-1"));
        assert_eq!(owner_vm("Microsoft.Network/networkInterfaces", "m-1-nic", &suffixes).as_deref(), Some("m-1"));
        assert_eq!(owner_vm("microsoft.network/networkinterfaces", "m-1-nic-2", &suffixes).as_deref(), Some("m-1"));
        assert_eq!(owner_vm("Microsoft.Network/networkInterfaces", "m-1-nic-7", &suffixes), None);
        assert_eq!(owner_vm("Microsoft.Compute/disks", "m-1-os-disk", &suffixes).as_deref(), Some("m-1"));
        assert_eq!(owner_vm("Microsoft.Compute/disks", "m-1-etcd-1-data-disk", &suffixes).as_deref(), Some("m-1"));
        assert_eq!(owner_vm("Microsoft.Compute/disks", "other", &suffixes), None);
        assert_eq!(owner_vm("Microsoft.Storage/storageAccounts", "m-1", &suffixes), None);
    }

    #[test]
    fn provider_ids_parse() {
        assert_eq!(parse_provider_id("azure:///westeurope/m-1").unwrap(), ("westeurope".into(), "m-1".into()));
        assert!(parse_provider_id("azure:///westeurope").is_err());
        assert!(parse_provider_id("aws:///x/y").is_err());
    }
}
