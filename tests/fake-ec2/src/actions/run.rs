//! RunInstances: validation, client-token idempotency, interfaces, volumes and tags.

use std::collections::BTreeMap;
use std::time::SystemTime;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::actions::Ctx;
use crate::errors::Ec2Error;
use crate::ids::{new_id, well_formed};
use fake_cloud_support::Replay;

use crate::model::{Image, Instance, Interruption, Market, NetworkInterface, Tags, Volume};
use crate::query::Params;
use crate::render;
use crate::store::{DEFAULT_SUBNET, DEFAULT_VPC, World};
use crate::xml::Xml;

const MAX_USER_DATA_BYTES: usize = 16 * 1024;
const VOLUME_TYPES: &[&str] = &["gp2", "gp3", "io1", "io2", "st1", "sc1", "standard"];
const INTERFACE_TYPES: &[&str] = &["interface", "efa", "efa-only"];
/// `InstanceMarketOptionsRequest.MarketType` (EC2 API reference: spot | capacity-block |
/// interruptible-capacity-reservation).
pub(crate) const MARKET_TYPES: &[&str] = &["spot", "capacity-block", "interruptible-capacity-reservation"];
/// `SpotMarketOptions.SpotInstanceType`.
const SPOT_INSTANCE_TYPES: &[&str] = &["one-time", "persistent"];
/// `SpotMarketOptions.InstanceInterruptionBehavior`.
const INTERRUPTION_BEHAVIORS: &[&str] = &["hibernate", "stop", "terminate"];
const TAGGABLE_AT_LAUNCH: &[&str] =
    &["instance", "volume", "network-interface", "spot-instances-request", "elastic-gpu"];

/// Whether `text` looks like an EC2 instance type (`m5.large`, `p4d.24xlarge`, `u-6tb1.metal`).
fn valid_instance_type(text: &str) -> bool {
    let Some((family, size)) = text.split_once('.') else { return false };
    let family_ok = !family.is_empty()
        && family.starts_with(|c: char| c.is_ascii_lowercase())
        && family.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    let size_ok = matches!(size, "nano" | "micro" | "small" | "medium" | "large" | "xlarge" | "metal")
        || size.strip_suffix("xlarge").is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        || size.strip_prefix("metal-").is_some_and(|n| n.ends_with("xl"));
    family_ok && size_ok
}

pub(crate) fn validate_tags(tags: &Tags) -> Result<(), Ec2Error> {
    if tags.len() > 50 {
        return Err(Ec2Error::client(
            "TagLimitExceeded",
            "The maximum number of Tags for a resource has been reached.",
        ));
    }
    for (key, value) in tags {
        if key.is_empty() || key.chars().count() > 128 {
            return Err(Ec2Error::client(
                "InvalidParameterValue",
                format!("Tag key '{key}' is invalid: length must be 1 to 128"),
            ));
        }
        if value.chars().count() > 256 {
            return Err(Ec2Error::client(
                "InvalidParameterValue",
                format!("Tag value for key '{key}' exceeds 256 characters"),
            ));
        }
        if key.to_ascii_lowercase().starts_with("aws:") {
            return Err(Ec2Error::client(
                "InvalidParameterValue",
                "Tag keys starting with 'aws:' are reserved for internal use",
            ));
        }
    }
    Ok(())
}

/// `Tag.N.Key` / `Tag.N.Value` of a structure.
pub(crate) fn read_tags(params: &Params, list: &str) -> Result<Tags, Ec2Error> {
    let mut tags = Tags::new();
    for tag in params.members(list) {
        let key = tag.get("Key").ok_or_else(|| Ec2Error::missing_parameter("Tag.Key"))?;
        tags.insert(key.to_owned(), tag.get("Value").unwrap_or("").to_owned());
    }
    validate_tags(&tags)?;
    Ok(tags)
}

/// Tags per resource type from `TagSpecification.N`.
fn tag_specifications(params: &Params) -> Result<BTreeMap<String, Tags>, Ec2Error> {
    let mut by_type: BTreeMap<String, Tags> = BTreeMap::new();
    for spec in params.members("TagSpecification") {
        let resource_type =
            spec.required("ResourceType").map_err(|_| Ec2Error::missing_parameter("TagSpecification.ResourceType"))?;
        if !TAGGABLE_AT_LAUNCH.contains(&resource_type) {
            return Err(Ec2Error::client(
                "InvalidParameterValue",
                format!("'{resource_type}' is not a valid taggable resource type for this operation."),
            ));
        }
        let tags = read_tags(&spec, "Tag")?;
        by_type.entry(resource_type.to_owned()).or_default().extend(tags);
    }
    Ok(by_type)
}

/// One requested interface before addresses are allocated.
struct InterfaceRequest {
    subnet_id: String,
    device_index: i64,
    network_card_index: i64,
    interface_type: String,
    ipv6_address_count: i64,
    ipv6_prefix_count: i64,
    delete_on_termination: bool,
    description: String,
    security_groups: Vec<String>,
    private_ip: Option<String>,
}

fn interface_requests(params: &Params) -> Result<Vec<InterfaceRequest>, Ec2Error> {
    let members = params.members("NetworkInterface");
    let instance_groups = params.list("SecurityGroupId");
    if members.is_empty() {
        let subnet_id = params.get("SubnetId").unwrap_or(DEFAULT_SUBNET).to_owned();
        return Ok(vec![InterfaceRequest {
            subnet_id,
            device_index: 0,
            network_card_index: 0,
            interface_type: "interface".to_owned(),
            ipv6_address_count: params.int("Ipv6AddressCount")?.unwrap_or(0),
            ipv6_prefix_count: 0,
            delete_on_termination: true,
            description: String::new(),
            security_groups: instance_groups,
            private_ip: params.get("PrivateIpAddress").map(str::to_owned),
        }]);
    }
    if params.get("SubnetId").is_some() {
        return Err(Ec2Error::combination(
            "Network interfaces and an instance-level subnet ID may not be specified on the same request",
        ));
    }
    if !instance_groups.is_empty() {
        return Err(Ec2Error::combination(
            "Network interfaces and an instance-level security groups may not be specified on the same request",
        ));
    }
    let mut requests: Vec<InterfaceRequest> = Vec::new();
    for member in members {
        if member.get("NetworkInterfaceId").is_some() {
            return Err(Ec2Error::client(
                "InvalidNetworkInterfaceID.NotFound",
                "Attaching existing network interfaces at launch is not supported by this fake",
            ));
        }
        let device_index = member.int("DeviceIndex")?.ok_or_else(|| {
            Ec2Error::client("InvalidParameterValue", "Each network interface requires a device index.")
        })?;
        let network_card_index = member.int("NetworkCardIndex")?.unwrap_or(0);
        if requests.iter().any(|r| r.device_index == device_index && r.network_card_index == network_card_index) {
            return Err(Ec2Error::client(
                "InvalidParameterValue",
                format!("Each network interface requires a unique device index; {device_index} is used twice."),
            ));
        }
        let interface_type = member.get("InterfaceType").unwrap_or("interface").to_owned();
        if !INTERFACE_TYPES.contains(&interface_type.as_str()) {
            return Err(Ec2Error::invalid_value("InterfaceType", &interface_type));
        }
        let ipv6_address_count = member.int("Ipv6AddressCount")?.unwrap_or(0);
        let ipv6_prefix_count = member.int("Ipv6PrefixCount")?.unwrap_or(0);
        if !(0..=32).contains(&ipv6_address_count) {
            return Err(Ec2Error::invalid_value("Ipv6AddressCount", &ipv6_address_count.to_string()));
        }
        if !(0..=16).contains(&ipv6_prefix_count) {
            return Err(Ec2Error::invalid_value("Ipv6PrefixCount", &ipv6_prefix_count.to_string()));
        }
        if ipv6_address_count > 0 && ipv6_prefix_count > 0 {
            // EC2 launches an interface with IPv6 addresses or IPv6 prefixes, never both
            // (its answer, word for word; the prefixes come later through AssignIpv6Addresses).
            return Err(Ec2Error::client(
                "InvalidParameterValue",
                "You can and can only specify one of ipv6-addresses or ipv6-addresses-count  ipv6-prefix and ipv6-prefix-count.",
            ));
        }
        requests.push(InterfaceRequest {
            subnet_id: member.get("SubnetId").unwrap_or(DEFAULT_SUBNET).to_owned(),
            device_index,
            network_card_index,
            interface_type,
            ipv6_address_count,
            ipv6_prefix_count,
            delete_on_termination: member.bool("DeleteOnTermination")?.unwrap_or(true),
            description: member.get("Description").unwrap_or("").to_owned(),
            security_groups: member.list("SecurityGroupId"),
            private_ip: member.get("PrivateIpAddress").map(str::to_owned),
        });
    }
    Ok(requests)
}

fn validate_network(requests: &[InterfaceRequest]) -> Result<(), Ec2Error> {
    for request in requests {
        if !well_formed("subnet", &request.subnet_id) {
            return Err(Ec2Error::client(
                "InvalidSubnetID.NotFound",
                format!("The subnet ID '{}' does not exist", request.subnet_id),
            ));
        }
        if let Some(bad) = request.security_groups.iter().find(|g| !well_formed("sg", g)) {
            return Err(Ec2Error::client(
                "InvalidGroup.NotFound",
                format!("The security group '{bad}' does not exist"),
            ));
        }
    }
    Ok(())
}

/// The third octet of a subnet's `10.0.X.0/24`, stable per subnet id.
fn subnet_octet(subnet_id: &str) -> u32 {
    let hash =
        subnet_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    u32::try_from(hash % 250).unwrap_or(0) + 1
}

pub(crate) fn private_dns(region: &str, ip: &str) -> String {
    let host = format!("ip-{}", ip.replace('.', "-"));
    if region == "us-east-1" { format!("{host}.ec2.internal") } else { format!("{host}.{region}.compute.internal") }
}

fn in_use(world: &World, ip: &str) -> bool {
    world
        .instances
        .iter()
        .filter(|i| i.terminate_requested.is_none())
        .any(|i| i.interfaces.iter().any(|e| e.private_ip == ip))
}

pub(crate) fn allocate_ip(world: &mut World, subnet_id: &str, wanted: Option<&str>) -> Result<String, Ec2Error> {
    let octet = subnet_octet(subnet_id);
    if let Some(ip) = wanted {
        if !ip.starts_with(&format!("10.0.{octet}.")) {
            return Err(Ec2Error::client(
                "InvalidParameterValue",
                format!("Address {ip} does not fall within the subnet's address range"),
            ));
        }
        if in_use(world, ip) {
            return Err(Ec2Error::client("InvalidIPAddress.InUse", format!("Address {ip} is in use.")));
        }
        return Ok(ip.to_owned());
    }
    // Hosts .4 to .254 (AWS reserves the first four and the last address). A
    // rotating cursor hands out fresh addresses first; addresses of terminated
    // instances become free again, as in a real subnet.
    const FIRST: u32 = 4;
    const LAST: u32 = 254;
    let span = LAST - FIRST + 1;
    let cursor = *world.subnet_hosts.entry(subnet_id.to_owned()).or_insert(FIRST);
    for step in 0..span {
        let host = FIRST + (cursor - FIRST + step) % span;
        let ip = format!("10.0.{octet}.{host}");
        if !in_use(world, &ip) {
            world.subnet_hosts.insert(subnet_id.to_owned(), FIRST + (host - FIRST + 1) % span);
            return Ok(ip);
        }
    }
    Err(Ec2Error::client(
        "InsufficientFreeAddressesInSubnet",
        format!(
            "There are not enough free addresses in subnet '{subnet_id}' to satisfy the requested number of instances."
        ),
    ))
}

/// The `/64` of a subnet (first four groups).
pub(crate) fn ipv6_base(subnet_id: &str) -> String {
    format!("2600:1f18:4a3b:{:x}00", subnet_octet(subnet_id))
}

/// Hands out `count` new addresses of an interface.
pub(crate) fn new_ipv6_addresses(eni: &mut NetworkInterface, count: i64) -> Vec<String> {
    (0..count)
        .map(|_| {
            eni.ipv6_next += 1;
            format!("{}:0:{:x}:{:x}:{:x}", eni.ipv6_base, rand::random::<u16>(), rand::random::<u16>(), eni.ipv6_next)
        })
        .collect()
}

/// Hands out `count` new `/80` prefixes (unique across the fake).
pub(crate) fn new_ipv6_prefixes(counter: &mut u32, base: &str, count: i64) -> Vec<String> {
    (0..count)
        .map(|_| {
            *counter += 1;
            format!("{base}:{:x}::/80", *counter)
        })
        .collect()
}

pub(crate) fn mac() -> String {
    let bytes: [u8; 5] = rand::random();
    format!("0e:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", bytes[0], bytes[1], bytes[2], bytes[3], bytes[4])
}

/// The root volume EC2 makes from `image` when no block device mapping
/// changes it (id not yet assigned): gp3 with its default 3000 IOPS and 125 MiB/s.
pub(crate) fn root_volume(image: &Image, tags: Tags) -> Volume {
    Volume {
        id: String::new(),
        device_name: image.root_device_name.clone(),
        size_gib: image.volume_size,
        volume_type: "gp3".to_owned(),
        delete_on_termination: true,
        encrypted: false,
        iops: None,
        throughput: None,
        kms_key_id: None,
        snapshot_id: Some(image.snapshot_id.clone()),
        tags,
        modification: None,
    }
    .with_defaults()
}

fn volumes(params: &Params, image: &Image, tags: &Tags) -> Result<Vec<Volume>, Ec2Error> {
    let mut root = root_volume(image, tags.clone());
    let mut extra = Vec::new();
    for mapping in params.members("BlockDeviceMapping") {
        let device_name =
            mapping.required("DeviceName").map_err(|_| Ec2Error::missing_parameter("BlockDeviceMapping.DeviceName"))?;
        if mapping.get("NoDevice").is_some() || mapping.get("VirtualName").is_some() {
            continue;
        }
        let ebs = mapping.nested("Ebs");
        let is_root = device_name == image.root_device_name;
        let mut volume = if is_root { root.clone() } else { Volume { snapshot_id: None, size_gib: 0, ..root.clone() } };
        volume.device_name = device_name.to_owned();
        if let Some(size) = ebs.int("VolumeSize")? {
            volume.size_gib = size;
        }
        if let Some(kind) = ebs.get("VolumeType") {
            if !VOLUME_TYPES.contains(&kind) {
                return Err(Ec2Error::client(
                    "InvalidParameterValue",
                    format!("Value ({kind}) for parameter volumeType is invalid."),
                ));
            }
            volume.volume_type = kind.to_owned();
        }
        volume.delete_on_termination = ebs.bool("DeleteOnTermination")?.unwrap_or(true);
        volume.encrypted = ebs.bool("Encrypted")?.unwrap_or(false);
        volume.iops = ebs.int("Iops")?;
        volume.throughput = ebs.int("Throughput")?;
        volume.kms_key_id = ebs.get("KmsKeyId").map(str::to_owned);
        if let Some(snapshot) = ebs.get("SnapshotId") {
            volume.snapshot_id = Some(snapshot.to_owned());
        }
        if volume.size_gib < 1 || volume.size_gib > 16_384 {
            return Err(Ec2Error::client(
                "InvalidParameterValue",
                format!("Volume size {} GiB for device {device_name} is out of range 1..16384", volume.size_gib),
            ));
        }
        if matches!(volume.volume_type.as_str(), "io1" | "io2") && volume.iops.is_none() {
            return Err(Ec2Error::missing_parameter("Iops"));
        }
        if volume.throughput.is_some() && volume.volume_type != "gp3" {
            return Err(Ec2Error::combination("The parameter throughput is only supported for gp3 volumes"));
        }
        if is_root && volume.size_gib < image.volume_size {
            return Err(Ec2Error::client(
                "InvalidBlockDeviceMapping",
                format!(
                    "Volume of size {}GB is smaller than snapshot '{}', expect size >= {}GB",
                    volume.size_gib, image.snapshot_id, image.volume_size
                ),
            ));
        }
        if is_root {
            root = volume;
        } else {
            extra.push(volume);
        }
    }
    let mut all = vec![root];
    all.extend(extra);
    Ok(all.into_iter().map(Volume::with_defaults).collect())
}

fn validate_user_data(params: &Params) -> Result<Option<String>, Ec2Error> {
    let Some(user_data) = params.get("UserData") else { return Ok(None) };
    let decoded = STANDARD
        .decode(user_data.trim())
        .map_err(|_| Ec2Error::client("InvalidParameterValue", "Invalid BASE64 encoding of user data."))?;
    if decoded.len() > MAX_USER_DATA_BYTES {
        return Err(Ec2Error::client("InvalidParameterValue", "User data is limited to 16384 bytes"));
    }
    Ok(Some(user_data.to_owned()))
}

fn image_for_launch<'w>(world: &'w World, ctx: &Ctx<'_>, image_id: &str) -> Result<&'w Image, Ec2Error> {
    if !well_formed("ami", image_id) {
        return Err(Ec2Error::client(
            "InvalidAMIID.Malformed",
            format!("Invalid id: \"{image_id}\" (expecting \"ami-...\")"),
        ));
    }
    world
        .images
        .iter()
        .find(|image| image.id == image_id && image.launchable_by(&ctx.caller.account))
        .ok_or_else(|| Ec2Error::client("InvalidAMIID.NotFound", format!("The image id '[{image_id}]' does not exist")))
}

fn render_reservation(world: &World, ctx: &Ctx<'_>, ids: &[String]) -> Xml {
    let instances: Vec<&Instance> = ids.iter().filter_map(|id| world.instances.iter().find(|i| &i.id == id)).collect();
    let mut x = Xml::new();
    render::reservation(&mut x, instances.iter().copied(), ctx.now);
    x
}

/// `InstanceMarketOptions`: the market the instance is launched in (its
/// `instanceLifecycle`, and for Spot its request and interruption behaviour),
/// `None` for on-demand. Values outside the API reference's enums are
/// `InvalidParameterValue`, as EC2 answers them. A Spot request's type and
/// interruption behaviour must agree as EC2 requires (EC2 User Guide,
/// "Behavior of Spot Instance interruptions": stop and hibernate need a
/// `persistent` request; a persistent request may not terminate):
/// `InvalidParameterCombination` with EC2's wording otherwise.
fn market(params: &Params) -> Result<Option<Market>, Ec2Error> {
    let options = params.nested("InstanceMarketOptions");
    let spot = options.nested("SpotOptions");
    let checks = [
        ("marketType", options.get("MarketType"), MARKET_TYPES),
        ("spotInstanceType", spot.get("SpotInstanceType"), SPOT_INSTANCE_TYPES),
        ("instanceInterruptionBehavior", spot.get("InstanceInterruptionBehavior"), INTERRUPTION_BEHAVIORS),
    ];
    for (name, value, allowed) in checks {
        if let Some(v) = value.filter(|v| !allowed.contains(v)) {
            return Err(Ec2Error::client(
                "InvalidParameterValue",
                format!("Value ({v}) for parameter {name} is invalid. Valid values: {}", allowed.join(", ")),
            ));
        }
    }
    if let Some(price) = spot.get("MaxPrice")
        && !price.parse::<f64>().is_ok_and(|p| p >= 0.001)
    {
        return Err(Ec2Error::client(
            "InvalidParameterValue",
            format!("Value ({price}) for parameter maxPrice is invalid. It must be more than USD $0.001."),
        ));
    }
    let Some(lifecycle) = options.get("MarketType") else { return Ok(None) };
    let is_spot = lifecycle == "spot";
    let interruption =
        spot.get("InstanceInterruptionBehavior").and_then(Interruption::parse).unwrap_or(Interruption::Terminate);
    if is_spot {
        let request_type = spot.get("SpotInstanceType").unwrap_or("one-time");
        match (request_type, interruption) {
            ("one-time", Interruption::Stop | Interruption::Hibernate) => {
                return Err(Ec2Error::combination(format!(
                    "The request with type 'one-time' is not supported when instanceInterruptionBehavior is set to '{}'.",
                    interruption.name()
                )));
            }
            ("persistent", Interruption::Terminate) => {
                return Err(Ec2Error::combination(
                    "The terminate InstanceInterruptionBehavior is not supported when requestType is set to persistent.",
                ));
            }
            _ => {}
        }
    }
    Ok(Some(Market {
        lifecycle: lifecycle.to_owned(),
        spot_request_id: None,
        interruption: if is_spot { interruption } else { Interruption::Terminate },
    }))
}

/// A Spot instance request id such as `sir-0a1b2c3d`.
fn new_spot_request_id() -> String {
    format!("sir-{:08x}", rand::random::<u32>())
}

/// The instance type and Availability Zone a RunInstances request asks for:
/// `InstanceType` (EC2's default `m1.small`) and `Placement.AvailabilityZone`,
/// else the region's first zone (the fake keeps no subnet-to-zone map).
pub(crate) fn requested_placement(params: &Params, region: &str) -> (String, String) {
    let instance_type = params.get("InstanceType").unwrap_or("m1.small").to_owned();
    let zone = params.get("Placement.AvailabilityZone").map_or_else(|| format!("{region}a"), str::to_owned);
    (instance_type, zone)
}

/// RunInstances.
pub(crate) fn run_instances(world: &mut World, ctx: &Ctx<'_>, params: &Params) -> Result<Xml, Ec2Error> {
    let token = params.get("ClientToken").filter(|t| !t.is_empty()).map(str::to_owned);
    if let Some(token) = &token {
        if token.len() > 64 || !token.is_ascii() {
            return Err(Ec2Error::client(
                "InvalidParameterValue",
                "Value for parameter clientToken is invalid. Length exceeds maximum of 64 ASCII characters.",
            ));
        }
        let fingerprint = params.fingerprint(&["ClientToken"]);
        match world.client_tokens.check(&(ctx.caller.account.clone(), token.clone()), &fingerprint, ctx.now) {
            Replay::New => {}
            Replay::Same(ids) => {
                let ids = ids.clone();
                return Ok(render_reservation(world, ctx, &ids));
            }
            Replay::Mismatch => {
                return Err(Ec2Error::client(
                    "IdempotentParameterMismatch",
                    "The request uses the same client token as a previous, but non-identical request. \
                     Do not reuse a client token with different requests, unless the requests are identical.",
                ));
            }
        }
    }

    let image_id = params.required("ImageId")?;
    let min = params.int("MinCount")?.ok_or_else(|| Ec2Error::missing_parameter("MinCount"))?;
    let max = params.int("MaxCount")?.ok_or_else(|| Ec2Error::missing_parameter("MaxCount"))?;
    if min < 1 {
        return Err(Ec2Error::client(
            "InvalidParameterValue",
            format!("Value ({min}) for parameter minCount is invalid. Expecting a value greater than 0."),
        ));
    }
    if max < min {
        return Err(Ec2Error::client(
            "InvalidParameterValue",
            format!(
                "Value ({max}) for parameter maxCount is invalid. Expecting a value greater than or equal to minCount."
            ),
        ));
    }
    if max > 20 {
        return Err(Ec2Error::client(
            "InstanceLimitExceeded",
            "You have requested more instances than your current instance limit of 20 allows.",
        ));
    }
    let (instance_type, availability_zone) = requested_placement(params, &ctx.caller.region);
    if !valid_instance_type(&instance_type) {
        return Err(Ec2Error::client(
            "InvalidParameterValue",
            format!("Invalid value '{instance_type}' for InstanceType."),
        ));
    }
    let market = market(params)?;
    let image = image_for_launch(world, ctx, image_id)?.clone();
    let user_data = validate_user_data(params)?;
    let tags = tag_specifications(params)?;
    let requests = interface_requests(params)?;
    validate_network(&requests)?;
    let metadata = crate::actions::metadata::at_launch(params)?;
    let region = ctx.caller.region.clone();
    if !availability_zone.starts_with(&region) || availability_zone.len() != region.len() + 1 {
        return Err(Ec2Error::client(
            "InvalidParameterValue",
            format!("Invalid availability zone: [{availability_zone}]"),
        ));
    }
    let volume_tags = tags.get("volume").cloned().unwrap_or_default();
    let volume_template = volumes(params, &image, &volume_tags)?;
    let instance_tags = tags.get("instance").cloned().unwrap_or_default();
    let eni_tags = tags.get("network-interface").cloned().unwrap_or_default();
    let iam_instance_profile = params.get("IamInstanceProfile.Arn").map(str::to_owned).or_else(|| {
        params
            .get("IamInstanceProfile.Name")
            .map(|n| format!("arn:aws:iam::{}:instance-profile/{n}", ctx.caller.account))
    });

    let reservation_id = new_id("r");
    let launch_time = SystemTime::now();
    let count = usize::try_from(max).unwrap_or(1);
    let mut ids = Vec::with_capacity(count);
    let mut created = Vec::with_capacity(count);
    for launch_index in 0..count {
        let mut interfaces = Vec::new();
        for request in &requests {
            let private_ip = allocate_ip(
                world,
                &request.subnet_id,
                if launch_index == 0 { request.private_ip.as_deref() } else { None },
            )?;
            let mut eni = NetworkInterface {
                id: new_id("eni"),
                attachment_id: new_id("eni-attach"),
                description: request.description.clone(),
                subnet_id: request.subnet_id.clone(),
                vpc_id: DEFAULT_VPC.to_owned(),
                availability_zone: availability_zone.clone(),
                private_dns: private_dns(&region, &private_ip),
                private_ip,
                mac: mac(),
                source_dest_check: true,
                interface_type: request.interface_type.clone(),
                ipv6_addresses: Vec::new(),
                ipv6_prefixes: Vec::new(),
                device_index: request.device_index,
                network_card_index: request.network_card_index,
                delete_on_termination: request.delete_on_termination,
                security_groups: if request.security_groups.is_empty() {
                    vec!["sg-0de0fa000000000a1".to_owned()]
                } else {
                    request.security_groups.clone()
                },
                tags: eni_tags.clone(),
                ipv6_next: 0,
                ipv6_base: ipv6_base(&request.subnet_id),
            };
            eni.ipv6_addresses = new_ipv6_addresses(&mut eni, request.ipv6_address_count);
            eni.ipv6_prefixes =
                new_ipv6_prefixes(&mut world.ipv6_prefixes_handed_out, &eni.ipv6_base, request.ipv6_prefix_count);
            interfaces.push(eni);
        }
        interfaces.sort_by_key(|eni| (eni.network_card_index, eni.device_index));
        let security_groups = interfaces.first().map(|e| e.security_groups.clone()).unwrap_or_default();
        let volumes = volume_template.iter().map(|v| Volume { id: new_id("vol"), ..v.clone() }).collect();
        let instance = Instance {
            id: new_id("i"),
            reservation_id: reservation_id.clone(),
            owner: ctx.caller.account.clone(),
            region: region.clone(),
            image_id: image.id.clone(),
            instance_type: instance_type.clone(),
            key_name: params.get("KeyName").map(str::to_owned),
            availability_zone: availability_zone.clone(),
            security_groups,
            tags: instance_tags.clone(),
            user_data: user_data.clone(),
            client_token: token.clone(),
            iam_instance_profile: iam_instance_profile.clone(),
            metadata: metadata.clone(),
            ami_launch_index: launch_index,
            root_device_name: image.root_device_name.clone(),
            launch_time,
            created: ctx.now,
            boot: ctx.timing.boot(),
            visible_at: ctx.now + ctx.consistency.invisible(),
            terminate_requested: None,
            stopped_at: None,
            end_reason: None,
            // Each Spot instance has its own Spot request.
            market: market.clone().map(|m| Market { spot_request_id: m.is_spot().then(new_spot_request_id), ..m }),
            interfaces,
            volumes,
        };
        ids.push(instance.id.clone());
        created.push(instance);
    }
    let spot = params.nested("InstanceMarketOptions").nested("SpotOptions");
    let request_type = spot.get("SpotInstanceType").unwrap_or("one-time");
    let max_price = spot.get("MaxPrice").map(str::to_owned);
    world
        .spot_requests
        .extend(created.iter().filter_map(|i| crate::actions::spot::request_for(i, request_type, max_price.clone())));
    world.instances.extend(created);
    if let Some(token) = token {
        world.client_tokens.record(
            (ctx.caller.account.clone(), token),
            params.fingerprint(&["ClientToken"]),
            ids.clone(),
            ctx.now,
        );
    }
    Ok(render_reservation(world, ctx, &ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_types() {
        for ok in ["m5.large", "t3.micro", "p4d.24xlarge", "u-6tb1.metal", "c7gn.metal", "m7i.metal-24xl"] {
            assert!(valid_instance_type(ok), "{ok}");
        }
        for bad in ["", "m5", "m5.", ".large", "M5.large", "m5.huge", "m5.xxlarge"] {
            assert!(!valid_instance_type(bad), "{bad}");
        }
    }

    #[test]
    fn dns_names_follow_region_rules() {
        assert_eq!(private_dns("us-east-1", "10.0.1.5"), "ip-10-0-1-5.ec2.internal");
        assert_eq!(private_dns("eu-west-1", "10.0.1.5"), "ip-10-0-1-5.eu-west-1.compute.internal");
    }
}
