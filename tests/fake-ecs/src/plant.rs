//! `POST /_admin/instances` on ECS: a `Running` instance launched by someone
//! else, with exactly the requested tags (in the request's key order), named
//! as requested, in the vSwitch with its security group, from the system
//! image, with no ClientToken and no user data.
//!
//! `attached` disks describe its system disk (the first, booting: its
//! `size_gb`, default 20) and data disks (`name` = `DiskName`, `size_gb`
//! required, 20-32768, `delete_with_vm` = `DeleteWithInstance`, default true),
//! as RunInstances' `SystemDisk` and `DataDisk.N` make them, each a `d-...` disk
//! with the `tags` given (none by default); the fake keeps no system disk name,
//! so one is refused, as are other kinds. The primary ENI carries no tags.
//!
//! Scope keys: `account` (default the cluster account), `region` (the only
//! region), `vswitch` (default the seeded one; it must belong to the account;
//! the zone is the vSwitch's), `securityGroup` (default the seeded one).

use std::time::{Instant, SystemTime};

use fake_cloud_support::{AttachedKind, PlantError, PlantRequest, Planted, PlantedAttached};

use crate::state::{DataDisk, Instance, Phase, Store};
use crate::wire::{creation_time, instance_id};

/// The scope keys ECS planting knows.
const SCOPE_KEYS: &[&str] = &["account", "region", "vswitch", "securityGroup"];
/// ECS's limit of tags per instance.
const MAX_TAGS: usize = 20;

/// ECS's rule for a tag key (at most 128 characters, no `aliyun`/`acs:` prefix, no URL).
fn tag_key_valid(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    !key.is_empty()
        && key.chars().count() <= 128
        && !lower.starts_with("aliyun")
        && !lower.starts_with("acs:")
        && !lower.contains("http://")
        && !lower.contains("https://")
}

/// ECS's rule for `InstanceName` (2-128 characters, starting with a letter, no URL).
fn valid_instance_name(name: &str) -> bool {
    (2..=128).contains(&name.chars().count())
        && name.chars().next().is_some_and(char::is_alphabetic)
        && !name.starts_with("http://")
        && !name.starts_with("https://")
}

/// The system disk (category, size) and data disks `attached` describes (none: a 20 GiB ESSD, no data disk).
fn disks(request: &PlantRequest) -> Result<(DataDisk, Vec<DataDisk>), PlantError> {
    request.check_attached("ECS", &[AttachedKind::Disk], &[])?;
    let mut system = DataDisk::new("cloud_essd", 20);
    let mut data = Vec::new();
    for (i, disk) in request.attached.iter().enumerate() {
        let at = format!("attached[{i}]");
        let tags: Vec<(String, String)> = disk.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        if tags.len() > MAX_TAGS || tags.iter().any(|(k, _)| !tag_key_valid(k)) {
            return Err(PlantError::Invalid(format!("{at}: at most {MAX_TAGS} valid ECS tags")));
        }
        if i == 0 && !disk.boot {
            return Err(PlantError::Invalid(format!("{at}: the first disk is the system disk (boot)")));
        }
        if disk.boot {
            if !disk.name.is_empty() || disk.delete_with_vm == Some(false) {
                return Err(PlantError::Invalid(format!(
                    "{at}: the system disk takes no name here and always goes with the instance"
                )));
            }
            match disk.size_gb {
                None => {}
                Some(size) if (20..=2048).contains(&size) => system.size = size,
                Some(size) => return Err(PlantError::Invalid(format!("{at}: SystemDisk.Size {size} is invalid"))),
            }
            system.tags = tags;
            continue;
        }
        let size = disk
            .size_gb
            .filter(|s| (20..=32_768).contains(s))
            .ok_or_else(|| PlantError::Invalid(format!("{at}: DataDisk.n.Size is required and must be 20-32768")))?;
        if !disk.name.is_empty() && !valid_instance_name(&disk.name) {
            return Err(PlantError::Invalid(format!("{at}: {:?} is not a valid DiskName", disk.name)));
        }
        let mut made = DataDisk::new("cloud_essd", size);
        made.name = (!disk.name.is_empty()).then(|| disk.name.clone());
        made.delete_with_instance = disk.delete_with_vm.unwrap_or(true);
        made.tags = tags;
        data.push(made);
    }
    Ok((system, data))
}

/// Plants the instance described by `request` into `store`.
pub(crate) fn plant(store: &Store, request: &PlantRequest) -> Result<Planted, PlantError> {
    request.check_scope_keys(SCOPE_KEYS)?;
    request.refuse_network_tags("ECS")?;
    request.refuse_metadata("ECS")?;
    let (system_disk, data_disks) = disks(request)?;
    let account = request.scope_or("account", crate::ACCOUNT_ID);
    let region = request.scope_or("region", crate::REGION);
    let vswitch_id = request.scope_or("vswitch", crate::VSWITCH);
    let group = request.scope_or("securityGroup", crate::SECURITY_GROUP);
    if region != crate::REGION {
        return Err(PlantError::Invalid(format!("scope.region: the fake serves {} only", crate::REGION)));
    }
    if !valid_instance_name(&request.name) {
        return Err(PlantError::Invalid(format!("{:?} is not a valid InstanceName", request.name)));
    }
    if request.tags.len() > MAX_TAGS {
        return Err(PlantError::Invalid(format!("at most {MAX_TAGS} tags per instance")));
    }
    if let Some((key, _)) = request
        .tags
        .iter()
        .find(|(k, v)| !tag_key_valid(k) || v.chars().count() > 128 || v.to_ascii_lowercase().starts_with("acs:"))
    {
        return Err(PlantError::Invalid(format!("tag {key:?} is not a valid ECS tag")));
    }
    let now = Instant::now();
    let mut state = store.lock_at(now);
    let vswitch = state
        .vswitches
        .get(&vswitch_id)
        .filter(|v| v.account == account)
        .cloned()
        .ok_or_else(|| PlantError::Invalid(format!("vSwitch {vswitch_id} of account {account} does not exist")))?;
    if !state.security_groups.get(&group).is_some_and(|g| g.account == account && g.vpc == vswitch.vpc) {
        return Err(PlantError::Invalid(format!("security group {group} is not in the vSwitch's VPC")));
    }
    let private_ip = state
        .allocate_ip(&vswitch_id)
        .ok_or_else(|| PlantError::Invalid(format!("no private IP left in {vswitch_id}")))?;
    let id = instance_id();
    let seq = state.next_seq;
    state.next_seq += 1;
    let instance = Instance {
        seq,
        id: id.clone(),
        account: account.clone(),
        name: request.name.clone(),
        host_name: format!("iz{}z", &id[2..]),
        zone: vswitch.zone.clone(),
        instance_type: "ecs.g7.large".to_owned(),
        image_id: crate::PUBLIC_IMAGE.to_owned(),
        vswitch: vswitch_id.clone(),
        vpc: vswitch.vpc.clone(),
        private_ip,
        security_groups: vec![group],
        tags: request.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        user_data: None,
        client_token: None,
        creation_time: creation_time(SystemTime::now()),
        visible_at: now,
        phase: Phase::Running,
        instance_charge_type: "PostPaid".to_owned(),
        internet_charge_type: "PayByTraffic".to_owned(),
        bandwidth_in: 0,
        bandwidth_out: 0,
        spot_strategy: "NoSpot".to_owned(),
        io_optimized: true,
        key_pair: None,
        system_disk,
        data_disks,
        eni_id: crate::wire::eni_id(),
        eni_tags: Vec::new(),
        recycling: false,
    };
    // `attached` in order: the system disk first (when described), then the data disks.
    let attached = instance
        .disks()
        .zip(&request.attached)
        .map(|(made, disk)| PlantedAttached { kind: AttachedKind::Disk, id: made.id.clone(), name: disk.name.clone() })
        .collect();
    state.instances.insert(id.clone(), instance);
    Ok(Planted::new(
        id,
        request.name.clone(),
        [("account", account), ("region", region), ("zone", vswitch.zone), ("vswitch", vswitch_id)],
    )
    .with_attached(attached))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(name: &str) -> PlantRequest {
        PlantRequest {
            name: name.into(),
            tags: [("kubernetes.io/cluster/shoot--other".to_owned(), "1".to_owned())].into(),
            ..Default::default()
        }
    }

    #[test]
    fn plants_a_running_instance_with_exactly_the_tags() {
        let store = Store::new();
        let planted = plant(&store, &request("m-1")).unwrap();
        assert_eq!(planted.scope["zone"], crate::ZONE_A);
        let now = Instant::now();
        let state = store.lock_at(now);
        let instance = &state.instances[&planted.id];
        assert_eq!(instance.status(now), "Running");
        assert_eq!(instance.tags, [("kubernetes.io/cluster/shoot--other".to_owned(), "1".to_owned())]);
        assert!(instance.client_token.is_none() && instance.user_data.is_none());
        assert!(instance.private_ip.starts_with("10.250."));
        drop(state);
        let again = plant(&store, &request("m-1")).unwrap();
        assert_ne!(again.id, planted.id, "ECS names need not be unique");
    }

    #[test]
    fn plants_the_described_system_and_data_disks() {
        use fake_cloud_support::PlantAttached;
        let store = Store::new();
        let mut system = PlantAttached::new(AttachedKind::Disk, "");
        system.boot = true;
        system.size_gb = Some(50);
        let mut data = PlantAttached::new(AttachedKind::Disk, "m-1-containerd-data-disk");
        data.size_gb = Some(64);
        let req = PlantRequest { attached: vec![system.clone(), data.clone()], ..request("m-1") };
        let planted = plant(&store, &req).unwrap();
        assert_eq!(planted.attached.len(), 2);
        assert!(planted.attached.iter().all(|a| a.id.starts_with("d-gw8")), "{:?}", planted.attached);
        {
            let state = store.lock_at(Instant::now());
            let instance = &state.instances[&planted.id];
            assert_eq!(instance.system_disk.size, 50);
            let disk = &instance.data_disks[0];
            assert_eq!(
                (disk.name.as_deref(), disk.size, disk.delete_with_instance),
                (Some("m-1-containerd-data-disk"), 64, true)
            );
        }
        let refused =
            |attached: Vec<PlantAttached>| plant(&store, &PlantRequest { attached, ..request("m-2") }).is_err();
        assert!(refused(vec![data.clone()]), "the system disk comes first");
        let tagged = PlantAttached { tags: [("k".to_owned(), "v".to_owned())].into(), ..data.clone() };
        let kept = plant(&store, &PlantRequest { attached: vec![system.clone(), tagged], ..request("m-3") }).unwrap();
        assert_eq!(store.lock_at(Instant::now()).instances[&kept.id].data_disks[0].tags, [("k".into(), "v".into())]);
        let reserved = PlantAttached { tags: [("acs:k".to_owned(), "v".to_owned())].into(), ..data.clone() };
        assert!(refused(vec![system.clone(), reserved]));
        assert!(refused(vec![system.clone(), PlantAttached { size_gb: None, ..data }]));
        assert!(refused(vec![PlantAttached::new(AttachedKind::Nic, "eni")]));
    }

    #[test]
    fn refuses_what_ecs_would_not_hold() {
        let store = Store::new();
        assert!(plant(&store, &request("1-m")).is_err());
        let mut bad = request("m-1");
        bad.tags.insert("acs:x".into(), "1".into());
        assert!(plant(&store, &bad).is_err());
        let mut elsewhere = request("m-1");
        elsewhere.scope.insert("vswitch".into(), "vsw-nope".into());
        assert!(plant(&store, &elsewhere).is_err());
        let mut tagged = request("m-1");
        tagged.network_tags.push("fw".into());
        assert!(plant(&store, &tagged).is_err());
        assert!(store.lock_at(Instant::now()).instances.is_empty());
    }
}
