//! The parts of ECS and STS answers the driver reads (ECS wraps lists twice:
//! `Instances.Instance[]`).

use serde::Deserialize;

/// `RunInstances`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct RunInstancesAnswer {
    /// The launched instances.
    pub(crate) instance_id_sets: InstanceIdSets,
}

impl RunInstancesAnswer {
    /// The one instance launched (the driver sends `Amount=1`).
    pub(crate) fn first_instance_id(self) -> Result<String, machine_driver_api::DriverError> {
        self.instance_id_sets.instance_id_set.into_iter().next().ok_or_else(|| {
            machine_driver_api::DriverError::internal("ecs RunInstances answered without an instance id")
        })
    }
}

/// `InstanceIdSets`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct InstanceIdSets {
    /// Instance ids.
    pub(crate) instance_id_set: Vec<String>,
}

/// `DescribeInstances`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct DescribeInstancesAnswer {
    /// The page's instances.
    pub(crate) instances: Instances,
    /// The next page's token; empty on the last page.
    pub(crate) next_token: Option<String>,
}

/// `Instances`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct Instances {
    /// Instances.
    pub(crate) instance: Vec<Instance>,
}

/// One instance.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct Instance {
    /// `i-...`.
    pub(crate) instance_id: String,
    /// The machine name.
    pub(crate) instance_name: String,
    /// `Pending`, `Starting`, `Running`, `Stopping`, `Stopped`.
    pub(crate) status: String,
    /// VPC details (the private IP).
    pub(crate) vpc_attributes: Option<VpcAttributes>,
    /// Tags.
    pub(crate) tags: Option<Tags>,
    /// `NoSpot`, `SpotWithPriceLimit` or `SpotAsPriceGo`.
    pub(crate) spot_strategy: String,
    /// Why ECS locked the instance, if it did (`financial`, `security`, `Recycling`).
    pub(crate) operation_locks: Option<OperationLocks>,
    /// `ecs.g7.large`: only a new instance changes it here (UpdateMachine).
    pub(crate) instance_type: String,
    /// The image it was launched from.
    pub(crate) image_id: String,
    /// `eu-central-1a`.
    pub(crate) zone_id: String,
    /// The security groups of the instance (its primary ENI's).
    pub(crate) security_group_ids: SecurityGroupIds,
    /// Its ENIs (the primary one made with it).
    pub(crate) network_interfaces: NetworkInterfaces,
}

/// `SecurityGroupIds` of DescribeInstances.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct SecurityGroupIds {
    /// Security group ids.
    pub(crate) security_group_id: Vec<String>,
}

/// `NetworkInterfaces` of DescribeInstances.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct NetworkInterfaces {
    /// ENIs.
    pub(crate) network_interface: Vec<NetworkInterface>,
}

/// One ENI of DescribeInstances (`Type` `Primary` or `Secondary`).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct NetworkInterface {
    /// `eni-...`.
    pub(crate) network_interface_id: String,
    /// `Primary` or `Secondary`.
    #[serde(rename = "Type")]
    pub(crate) kind: String,
}

/// `DescribeDisks`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct DescribeDisksAnswer {
    /// The page's disks.
    pub(crate) disks: Disks,
    /// Every disk that matched.
    pub(crate) total_count: u64,
}

/// `Disks`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct Disks {
    /// Disks.
    pub(crate) disk: Vec<Disk>,
}

/// One disk of DescribeDisks.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct Disk {
    /// `d-...`.
    pub(crate) disk_id: String,
    /// `DiskName` (`<machine>-<name>-data-disk` for a class data disk).
    pub(crate) disk_name: String,
    /// `system` or `data`.
    #[serde(rename = "Type")]
    pub(crate) kind: String,
    /// `cloud_essd`, `cloud_efficiency`, ...
    pub(crate) category: String,
    /// GiB.
    pub(crate) size: i64,
    /// Tags.
    pub(crate) tags: Option<Tags>,
}

impl Disk {
    /// Every tag, by key.
    pub(crate) fn tag_map(&self) -> std::collections::BTreeMap<String, String> {
        self.tags.iter().flat_map(|t| &t.tag).map(|t| (t.tag_key.clone(), t.tag_value.clone())).collect()
    }
}

/// `DescribeNetworkInterfaces`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct DescribeNetworkInterfacesAnswer {
    /// The ENIs.
    pub(crate) network_interface_sets: NetworkInterfaceSets,
}

/// `NetworkInterfaceSets`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct NetworkInterfaceSets {
    /// ENIs.
    pub(crate) network_interface_set: Vec<NetworkInterfaceSet>,
}

/// One ENI of DescribeNetworkInterfaces.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct NetworkInterfaceSet {
    /// `eni-...`.
    pub(crate) network_interface_id: String,
    /// Tags.
    pub(crate) tags: Option<Tags>,
}

impl NetworkInterfaceSet {
    /// Every tag, by key.
    pub(crate) fn tag_map(&self) -> std::collections::BTreeMap<String, String> {
        self.tags.iter().flat_map(|t| &t.tag).map(|t| (t.tag_key.clone(), t.tag_value.clone())).collect()
    }
}

/// `OperationLocks` of DescribeInstances: `{"LockReason": [{"LockReason", "LockMsg"}]}`
/// (alibaba-cloud-sdk-go `OperationLocksInDescribeInstances`).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct OperationLocks {
    /// The locks.
    pub(crate) lock_reason: Vec<LockReason>,
}

/// One lock of an instance.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct LockReason {
    /// The lock's kind.
    pub(crate) lock_reason: String,
}

/// `VpcAttributes`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct VpcAttributes {
    /// The vSwitch of the primary ENI.
    #[serde(rename = "VSwitchId")]
    pub(crate) v_switch_id: String,
    /// `PrivateIpAddress.IpAddress[]`.
    pub(crate) private_ip_address: IpAddresses,
}

/// `IpAddress[]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct IpAddresses {
    /// Addresses.
    pub(crate) ip_address: Vec<String>,
}

/// `Tags`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct Tags {
    /// Tags.
    pub(crate) tag: Vec<Tag>,
}

/// One tag.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct Tag {
    /// Key.
    pub(crate) tag_key: String,
    /// Value.
    pub(crate) tag_value: String,
}

impl Instance {
    /// The value of tag `key`.
    pub(crate) fn tag(&self, key: &str) -> Option<&str> {
        self.tags.as_ref()?.tag.iter().find(|t| t.tag_key == key).map(|t| t.tag_value.as_str())
    }

    /// Whether ECS reclaimed this spot instance: an `OperationLocks` entry with
    /// `LockReason` `Recycling`, ECS's mark of a spot instance "interrupted and
    /// pending release" (guide "Detect and handle spot instance interruptions";
    /// the `LockReason` data type spells it `recycling`, so case is ignored).
    pub(crate) fn is_recycling(&self) -> bool {
        self.operation_locks.as_ref().is_some_and(|locks| {
            locks.lock_reason.iter().any(|lock| lock.lock_reason.eq_ignore_ascii_case("recycling"))
        })
    }

    /// Every tag, by key.
    pub(crate) fn tag_map(&self) -> std::collections::BTreeMap<String, String> {
        self.tags.iter().flat_map(|t| &t.tag).map(|t| (t.tag_key.clone(), t.tag_value.clone())).collect()
    }

    /// The vSwitch of its primary ENI (empty when ECS did not show it).
    pub(crate) fn v_switch_id(&self) -> &str {
        self.vpc_attributes.as_ref().map_or("", |v| v.v_switch_id.as_str())
    }

    /// The id of its primary ENI, when DescribeInstances shows one.
    pub(crate) fn primary_eni(&self) -> Option<&str> {
        self.network_interfaces
            .network_interface
            .iter()
            .find(|n| n.kind == "Primary")
            .map(|n| n.network_interface_id.as_str())
    }

    /// The first private IP.
    pub(crate) fn private_ip(&self) -> Option<&str> {
        self.vpc_attributes.as_ref()?.private_ip_address.ip_address.first().map(String::as_str)
    }
}

/// `DescribeImages`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct DescribeImagesAnswer {
    /// Images visible to the caller that matched.
    pub(crate) total_count: i64,
}

/// `DescribeImageSharePermission`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct DescribeImageSharePermissionAnswer {
    /// How many accounts the image is shared with in all (every page).
    pub(crate) total_count: u64,
    /// The accounts the image is shared with (this page).
    pub(crate) accounts: Accounts,
    /// Groups the image is shared with (`all`: public).
    pub(crate) share_groups: ShareGroups,
}

/// `ShareGroups`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct ShareGroups {
    /// Groups.
    pub(crate) share_group: Vec<ShareGroup>,
}

/// One group of a share.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct ShareGroup {
    /// `all` for a public image.
    pub(crate) group: String,
}

/// `Accounts`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct Accounts {
    /// Accounts.
    pub(crate) account: Vec<Account>,
}

/// One account of a share.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct Account {
    /// The account's UID.
    pub(crate) aliyun_id: String,
}

/// STS `GetCallerIdentity`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct CallerIdentity {
    /// The account (UID) of the caller.
    pub(crate) account_id: String,
}

/// An answer whose body the driver does not read.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Empty {}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(locks: serde_json::Value) -> Instance {
        serde_json::from_value(serde_json::json!({"InstanceId": "i-1", "Status": "Stopped", "OperationLocks": locks}))
            .unwrap()
    }

    #[test]
    fn only_a_recycling_lock_marks_a_reclaimed_spot_instance() {
        let lock = |reason: &str| serde_json::json!({"LockReason": [{"LockReason": reason, "LockMsg": ""}]});
        assert!(instance(lock("Recycling")).is_recycling());
        assert!(instance(lock("recycling")).is_recycling(), "the LockReason data type spells it in lower case");
        assert!(!instance(lock("financial")).is_recycling());
        assert!(!instance(lock("security")).is_recycling());
        assert!(!instance(serde_json::json!({"LockReason": []})).is_recycling());
        let unlocked: Instance = serde_json::from_value(serde_json::json!({"InstanceId": "i-1"})).unwrap();
        assert!(!unlocked.is_recycling());
    }
}
