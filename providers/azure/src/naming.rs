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

/// The tag carrying the machine's uid on the VM and on the data disks made
/// from an image (Azure refuses `/` in tag names). The NICs and the OS and
/// `Empty` data disks ARM makes from the VM PUT carry no tags
/// ([`crate::ownership`], "Leftovers").
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

/// Parses `azure:///<location>/<vm>` into (location, vm), both checked
/// against Azure's syntax ([`check_location`], [`check_vm_name`]): the VM
/// name goes into request paths.
pub(crate) fn parse_provider_id(pid: &str) -> Result<(String, String), DriverError> {
    const FIELD: &str = "machine.providerID";
    let bad =
        || DriverError::invalid_argument(FIELD, format!("{pid:?} is not of the form azure:///<location>/<vm-name>"));
    let rest = pid.strip_prefix(PROVIDER_ID_PREFIX).ok_or_else(bad)?;
    match rest.split('/').collect::<Vec<_>>().as_slice() {
        [location, name] if !location.is_empty() && !name.is_empty() => {
            check_location(FIELD, location)?;
            check_vm_name(FIELD, name)?;
            Ok(((*location).to_string(), (*name).to_string()))
        }
        _ => Err(bad()),
    }
}

// Syntax of the request data that goes into ARM request paths (and ARM ids
// in request bodies). The SDK builds its paths with `format!` and
// `Url::set_path`, which resolves `.`/`..` segments and keeps `/`: a value
// is therefore checked against Azure's own syntax for it before any request
// is made, so that it cannot leave its path segment; the driver's own
// requests also percent-encode every segment (`Api::arm_url`). Each check
// answers INVALID_ARGUMENT naming `field`.

/// Longest value quoted back in an error message.
const QUOTED: usize = 100;

fn refused(field: &str, value: &str, rule: &str) -> DriverError {
    let shown: String = value.chars().take(QUOTED).collect();
    DriverError::invalid_argument(field, format!("{shown:?} is not {rule}"))
}

/// A resource group name as Azure allows it: 1-90 letters, digits, `_`,
/// `-`, `.`, `(`, `)`, not ending in a period (so neither `.` nor `..`).
pub(crate) fn check_resource_group(field: &str, value: &str) -> Result<(), DriverError> {
    let ok = (1..=90).contains(&value.chars().count())
        && value.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '(' | ')'))
        && !value.ends_with('.');
    if ok {
        Ok(())
    } else {
        Err(refused(field, value, "a resource group name (1-90 letters, digits, _ - . ( ), not ending in a period)"))
    }
}

/// A VM name (the machine name): 1-64 ASCII letters, digits, `-`, `_`, `.`,
/// starting with a letter or digit, not ending in `.` or `-` (Azure's rule for
/// Linux VMs).
pub(crate) fn check_vm_name(field: &str, value: &str) -> Result<(), DriverError> {
    let ok = name_syntax(value, 64) && !value.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(refused(
            field,
            value,
            "an Azure VM name (1-64 letters, digits, - _ ., starting with a letter or digit, not ending in . or -)",
        ))
    }
}

/// The name of a resource below a resource group (virtual network, subnet,
/// gallery, gallery image, image version, URN part): 1-`max` ASCII letters,
/// digits, `-`, `_`, `.`, starting with a letter or digit, not ending in `.`.
pub(crate) fn check_arm_name(field: &str, value: &str, max: usize) -> Result<(), DriverError> {
    if name_syntax(value, max) {
        Ok(())
    } else {
        Err(refused(field, value, "an Azure resource name (letters, digits, - _ ., starting with a letter or digit)"))
    }
}

fn name_syntax(value: &str, max: usize) -> bool {
    (1..=max).contains(&value.len())
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && !value.ends_with('.')
}

/// An Azure location: `westeurope` (or its display name, `West Europe`):
/// 1-64 ASCII letters, digits and spaces.
pub(crate) fn check_location(field: &str, value: &str) -> Result<(), DriverError> {
    let ok = (1..=64).contains(&value.len())
        && value.chars().all(|c| c.is_ascii_alphanumeric() || c == ' ')
        && !value.trim().is_empty();
    if ok { Ok(()) } else { Err(refused(field, value, "an Azure location (letters, digits and spaces)")) }
}

/// A subscription id (a GUID): 1-64 ASCII letters, digits and `-`.
pub(crate) fn check_subscription(field: &str, value: &str) -> Result<(), DriverError> {
    let ok = (1..=64).contains(&value.len()) && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if ok { Ok(()) } else { Err(refused(field, value, "a subscription id")) }
}

/// An ARM id given in the spec and sent in a request body (an image, an
/// availability set, an identity): `/`-separated segments, none empty, `.` or
/// `..`, without whitespace, control characters, `?`, `#`, `%` or `\`.
pub(crate) fn check_arm_id(field: &str, value: &str) -> Result<(), DriverError> {
    let segments = value.strip_prefix('/').unwrap_or(value).split('/');
    let ok = value.len() <= 1024
        && !value.chars().any(|c| c.is_whitespace() || c.is_control() || matches!(c, '?' | '#' | '%' | '\\'))
        && segments.into_iter().all(|s| !s.is_empty() && s != "." && s != "..");
    if ok { Ok(()) } else { Err(refused(field, value, "an ARM resource id (/-separated names, no . or .. segment)")) }
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
        for bad in ["azure:///westeurope/..", "azure:///westeurope/.", "azure:///../m-1", "azure:///westeurope/m%2F1"] {
            assert_eq!(parse_provider_id(bad).unwrap_err().field(), Some("machine.providerID"), "{bad}");
        }
    }

    #[test]
    fn path_building_values_are_checked_against_azures_syntax() {
        for good in ["shoot--dev--conf", "rg.(1)_x", "Grüne-Gruppe"] {
            check_resource_group("f", good).unwrap();
        }
        for bad in ["", "rg/../other", "..", ".", "rg.", "a?b", "a#b", "a%2Fb", "a b", &"r".repeat(91)] {
            assert_eq!(
                check_resource_group("providerSpec.resourceGroup", bad).unwrap_err().field(),
                Some("providerSpec.resourceGroup"),
                "{bad}"
            );
        }
        check_vm_name("f", "shoot--dev--conf-worker-z1-5d4c8-abcde").unwrap();
        for bad in ["", "..", ".x", "x.", "x-", "a/b", "_a", "a b", &"m".repeat(65)] {
            assert!(check_vm_name("f", bad).is_err(), "{bad}");
        }
        check_arm_name("f", "shoot--dev--conf-nodes", 80).unwrap();
        assert!(check_arm_name("f", "nodes/../x", 80).is_err());
        check_location("f", "westeurope").unwrap();
        check_location("f", "West Europe").unwrap();
        assert!(check_location("f", "west/europe").is_err());
        check_subscription("f", "00000000-0000-4000-8000-000000000001").unwrap();
        assert!(check_subscription("f", "../../x").is_err());
        check_arm_id(
            "f",
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/i/versions/1.0.0",
        )
        .unwrap();
        check_arm_id("f", "/SharedGalleries/x-G/Images/i/Versions/1").unwrap();
        for bad in ["/subscriptions/s/resourceGroups/../x", "/a//b", "/a/./b", "/a?x", "/a b", "/a%2e%2e"] {
            assert!(check_arm_id("f", bad).is_err(), "{bad}");
        }
    }
}
