//! `POST /_admin/instances` on EC2: a running instance launched by someone
//! else (another cluster, an operator), with exactly the requested tags plus
//! the `Name` tag EC2's console shows as its name, one network interface in
//! the subnet, a root volume, no client token and no user data.
//!
//! `attached` may describe the root volume (one boot `disk`: its tags, size
//! and `DeleteOnTermination`, default true as for an AMI's root device), as a
//! RunInstances with a `volume` TagSpecification and a root block device
//! mapping makes it; EC2 volumes have no name of their own (their `Name` is a
//! tag), so a disk name is refused, and so is any other kind.
//!
//! Scope keys: `account` (default the cluster account), `region` (required:
//! EC2 keeps no default region; the caller's is in every request),
//! `zone` (default `<region>a`), `subnet` (default the seeded default subnet).

use std::time::{Duration, Instant, SystemTime};

use fake_cloud_support::{AttachedKind, PlantError, PlantRequest, Planted, PlantedAttached};

use crate::actions::run::{allocate_ip, ipv6_base, mac, private_dns, root_volume, validate_tags};
use crate::caller::CLUSTER_ACCOUNT;
use crate::ids::{is_account_id, new_id, well_formed};
use crate::model::{Instance, MetadataOptions, NetworkInterface, Tags, Volume};
use crate::store::{DEFAULT_SUBNET, DEFAULT_VPC, PUBLIC_IMAGE, World};

/// The scope keys EC2 planting knows.
const SCOPE_KEYS: &[&str] = &["account", "region", "zone", "subnet"];

/// Whether `region` looks like an EC2 region (`eu-west-1`, `us-gov-east-1`).
fn is_region(region: &str) -> bool {
    let parts: Vec<&str> = region.split('-').collect();
    parts.len() >= 3
        && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
        && parts.last().is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// The root volume `attached` describes: its tags, size and delete flag.
struct RootSpec {
    tags: Tags,
    size_gib: Option<i64>,
    delete_on_termination: bool,
}

/// The root volume of `request.attached` (none: the AMI's defaults, untagged).
fn root_spec(request: &PlantRequest) -> Result<Option<RootSpec>, PlantError> {
    request.check_attached("EC2", &[AttachedKind::Disk], &[])?;
    let disks: Vec<_> = request.attached_of(AttachedKind::Disk).collect();
    let Some(root) = disks.first() else { return Ok(None) };
    if disks.len() > 1 || !root.boot {
        return Err(PlantError::Invalid("EC2 planting attaches the root volume only: one disk with boot".into()));
    }
    if !root.name.is_empty() {
        return Err(PlantError::Invalid("an EC2 volume has no name of its own; give it a Name tag".into()));
    }
    validate_tags(&root.tags)
        .map_err(|e| PlantError::Invalid(format!("attached[].tags: {}: {}", e.code, e.message)))?;
    let size_gib = match root.size_gb {
        Some(size) => Some(i64::try_from(size).ok().filter(|s| (1..=16_384).contains(s)).ok_or_else(|| {
            PlantError::Invalid(format!("attached[].size_gb {size} is not an EBS volume size (1-16384)"))
        })?),
        None => None,
    };
    Ok(Some(RootSpec { tags: root.tags.clone(), size_gib, delete_on_termination: root.delete_with_vm.unwrap_or(true) }))
}

/// Plants the instance described by `request` into `world`.
pub(crate) fn plant(world: &mut World, request: &PlantRequest) -> Result<Planted, PlantError> {
    request.check_scope_keys(SCOPE_KEYS)?;
    request.refuse_network_tags("EC2")?;
    request.refuse_metadata("EC2")?;
    let root_request = root_spec(request)?;
    let account = request.scope_or("account", CLUSTER_ACCOUNT);
    let region = request.scope_required("region")?;
    let zone = request.scope_or("zone", &format!("{region}a"));
    let subnet = request.scope_or("subnet", DEFAULT_SUBNET);
    if !is_account_id(&account) {
        return Err(PlantError::Invalid(format!("scope.account {account:?} is not a 12-digit account id")));
    }
    if !is_region(&region) {
        return Err(PlantError::Invalid(format!("scope.region {region:?} is not an EC2 region")));
    }
    if !zone.starts_with(&region) || zone.len() != region.len() + 1 {
        return Err(PlantError::Invalid(format!("scope.zone {zone:?} is not a zone of {region}")));
    }
    if !well_formed("subnet", &subnet) {
        return Err(PlantError::Invalid(format!("scope.subnet {subnet:?} is not a subnet id")));
    }
    if request.name.is_empty() {
        return Err(PlantError::Invalid("name must not be empty (it becomes the Name tag)".into()));
    }
    let mut tags: Tags = request.tags.clone();
    if tags.get("Name").is_some_and(|n| n != &request.name) {
        return Err(PlantError::Invalid("tags.Name differs from name (EC2's name is its Name tag)".into()));
    }
    tags.insert("Name".to_owned(), request.name.clone());
    validate_tags(&tags).map_err(|e| PlantError::Invalid(format!("{}: {}", e.code, e.message)))?;
    let private_ip =
        allocate_ip(world, &subnet, None).map_err(|e| PlantError::Invalid(format!("{}: {}", e.code, e.message)))?;
    let now = Instant::now();
    let interface = NetworkInterface {
        id: new_id("eni"),
        attachment_id: new_id("eni-attach"),
        description: String::new(),
        subnet_id: subnet.clone(),
        vpc_id: DEFAULT_VPC.to_owned(),
        availability_zone: zone.clone(),
        private_dns: private_dns(&region, &private_ip),
        private_ip,
        mac: mac(),
        source_dest_check: true,
        interface_type: "interface".to_owned(),
        ipv6_addresses: Vec::new(),
        ipv6_prefixes: Vec::new(),
        device_index: 0,
        network_card_index: 0,
        delete_on_termination: true,
        security_groups: vec!["sg-0de0fa000000000a1".to_owned()],
        tags: Tags::new(),
        ipv6_next: 0,
        ipv6_base: ipv6_base(&subnet),
    };
    let root = world.images.iter().find(|i| i.id == PUBLIC_IMAGE).map(|i| (i.root_device_name.clone(), i));
    let (root_device_name, volume) = match (root, &root_request) {
        (Some((device, image)), None) => (device, Volume { id: new_id("vol"), ..root_volume(image, Tags::new()) }),
        (Some((device, image)), Some(spec)) => {
            let mut volume = Volume { id: new_id("vol"), ..root_volume(image, spec.tags.clone()) };
            if let Some(size) = spec.size_gib {
                if size < volume.size_gib {
                    return Err(PlantError::Invalid(format!(
                        "attached[].size_gb {size} is smaller than the image's root snapshot ({} GiB)",
                        volume.size_gib
                    )));
                }
                volume.size_gib = size;
            }
            volume.delete_on_termination = spec.delete_on_termination;
            (device, volume)
        }
        (None, _) => return Err(PlantError::Invalid(format!("the seeded image {PUBLIC_IMAGE} is gone"))),
    };
    let attached = match &root_request {
        Some(spec) => vec![PlantedAttached {
            kind: AttachedKind::Disk,
            id: volume.id.clone(),
            name: spec.tags.get("Name").cloned().unwrap_or_default(),
        }],
        None => Vec::new(),
    };
    let instance = Instance {
        id: new_id("i"),
        reservation_id: new_id("r"),
        owner: account.clone(),
        region: region.clone(),
        image_id: PUBLIC_IMAGE.to_owned(),
        instance_type: "m5.large".to_owned(),
        key_name: None,
        availability_zone: zone.clone(),
        security_groups: interface.security_groups.clone(),
        tags,
        user_data: None,
        client_token: None,
        iam_instance_profile: None,
        metadata: MetadataOptions::default(),
        ami_launch_index: 0,
        root_device_name,
        launch_time: SystemTime::now(),
        created: now,
        boot: Duration::ZERO,
        visible_at: now,
        terminate_requested: None,
        stopped_at: None,
        end_reason: None,
        market: None,
        interfaces: vec![interface],
        volumes: vec![volume],
    };
    let planted = Planted::new(
        instance.id.clone(),
        request.name.clone(),
        [("account", account), ("region", region), ("zone", zone), ("subnet", subnet)],
    )
    .with_attached(attached);
    world.instances.push(instance);
    Ok(planted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(name: &str, scope: &[(&str, &str)]) -> PlantRequest {
        PlantRequest {
            name: name.into(),
            tags: [("kubernetes.io/cluster/other".to_owned(), "1".to_owned())].into(),
            network_tags: Vec::new(),
            scope: scope.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn plants_the_root_volume_as_described() {
        use fake_cloud_support::PlantAttached;
        let mut world = World::seeded();
        let mut req = request("m-2", &[("region", "eu-west-1")]);
        let mut root = PlantAttached::new(AttachedKind::Disk, "");
        root.boot = true;
        root.tags = [("Name".to_owned(), "m-2".to_owned()), ("k".to_owned(), "v".to_owned())].into();
        root.size_gb = Some(50);
        root.delete_with_vm = Some(false);
        req.attached = vec![root.clone()];
        let planted = plant(&mut world, &req).unwrap();
        let instance = world.instances.iter().find(|i| i.id == planted.id).unwrap();
        let volume = &instance.volumes[0];
        assert_eq!((volume.size_gib, volume.delete_on_termination), (50, false));
        assert_eq!(volume.tags, root.tags);
        assert_eq!(
            planted.attached,
            [PlantedAttached { kind: AttachedKind::Disk, id: volume.id.clone(), name: "m-2".into() }]
        );
        let refused = |attached: Vec<PlantAttached>| {
            let mut world = World::seeded();
            let req = PlantRequest { attached, ..request("m-3", &[("region", "eu-west-1")]) };
            plant(&mut world, &req).unwrap_err().to_string()
        };
        let named = PlantAttached { name: "root".into(), ..root.clone() };
        assert!(refused(vec![named]).contains("no name"));
        let data = PlantAttached { boot: false, ..root.clone() };
        assert!(refused(vec![data]).contains("root volume only"));
        assert!(refused(vec![PlantAttached::new(AttachedKind::Nic, "n")]).contains("no nic"));
        let tiny = PlantAttached { size_gb: Some(1), ..root };
        assert!(refused(vec![tiny]).contains("smaller"));
        let with_metadata = PlantRequest {
            metadata: [("k".to_owned(), "v".to_owned())].into(),
            ..request("m-4", &[("region", "eu-west-1")])
        };
        assert!(plant(&mut world, &with_metadata).is_err());
    }

    #[test]
    fn plants_a_running_instance_with_exactly_the_tags_and_its_name() {
        let mut world = World::seeded();
        let planted = plant(&mut world, &request("m-1", &[("region", "eu-west-1")])).unwrap();
        assert_eq!(planted.scope["zone"], "eu-west-1a");
        assert_eq!(planted.scope["account"], CLUSTER_ACCOUNT);
        let instance = world.instances.iter().find(|i| i.id == planted.id).unwrap();
        assert_eq!(instance.state(Instant::now()).name(), "running");
        assert!(instance.visible_to(CLUSTER_ACCOUNT, Instant::now()));
        let keys: Vec<&str> = instance.tags.keys().map(String::as_str).collect();
        assert_eq!(keys, ["Name", "kubernetes.io/cluster/other"]);
        assert_eq!(instance.name(), "m-1");
        assert!(instance.client_token.is_none() && instance.user_data.is_none());
        assert_eq!(instance.interfaces.len(), 1);
        let again = plant(&mut world, &request("m-1", &[("region", "eu-west-1")])).unwrap();
        assert_ne!(again.id, planted.id, "EC2 names are tags: a second instance of the name is fine");
    }

    #[test]
    fn refuses_what_ec2_would_not_hold() {
        let mut world = World::seeded();
        for (scope, why) in [
            (vec![], "scope.region is required"),
            (vec![("region", "mars")], "not an EC2 region"),
            (vec![("region", "eu-west-1"), ("zone", "us-east-1a")], "not a zone"),
            (vec![("region", "eu-west-1"), ("project", "p")], "unknown scope key"),
            (vec![("region", "eu-west-1"), ("account", "12")], "12-digit"),
        ] {
            let err = plant(&mut world, &request("m", &scope)).unwrap_err().to_string();
            assert!(err.contains(why), "{err}");
        }
        let mut tagged = request("m", &[("region", "eu-west-1")]);
        tagged.network_tags = vec!["fw".into()];
        assert!(plant(&mut world, &tagged).is_err());
        tagged.network_tags.clear();
        tagged.tags.insert("aws:reserved".into(), String::new());
        assert!(plant(&mut world, &tagged).unwrap_err().to_string().contains("reserved"));
        assert!(world.instances.is_empty());
    }
}
