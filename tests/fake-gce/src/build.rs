//! Turns an `instances.insert` body into the stored `Instance`: validation with
//! GCE's error answers, URL normalisation, defaults, IP allocation and the image
//! permission check for boot disks created from images.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::{Map, Value, json};

use crate::access::{self, ImagePermission};
use crate::caller::Caller;
use crate::clock;
use crate::error::GceError;
use crate::model::disk::Disk;
use crate::model::instance::{
    AccessConfig, AliasIpRange, AttachedDisk, AttachedDiskRequest, Instance, InstanceRequest, Ipv6AccessConfig,
    Metadata, MetadataItem, NetworkInterface, NetworkInterfaceRequest, Tags,
};
use crate::state::{State, fingerprint, new_id};
use crate::urls::{self, ImageRef};

/// Fields GCE computes itself; a client copy of them in the body is ignored.
const OUTPUT_ONLY: &[&str] = &[
    "kind",
    "id",
    "creationTimestamp",
    "status",
    "statusMessage",
    "zone",
    "selfLink",
    "cpuPlatform",
    "labelFingerprint",
    "startRestricted",
    "fingerprint",
    "lastStartTimestamp",
    "lastStopTimestamp",
];

/// Total metadata size GCE accepts (512 KB).
const METADATA_LIMIT: usize = 512 * 1024;

/// Where the instance is created and by whom.
pub(crate) struct Target<'a> {
    /// Project of the instance.
    pub(crate) project: &'a str,
    /// Zone of the instance.
    pub(crate) zone: &'a str,
    /// The caller (for image permissions).
    pub(crate) caller: &'a Caller,
}

/// Validates `request` and builds the instance resource (status `PROVISIONING`).
pub(crate) fn instance(
    mut request: InstanceRequest,
    target: &Target<'_>,
    state: &mut State,
) -> Result<Instance, GceError> {
    let (project, zone) = (target.project, target.zone);
    let name = match request.name.as_deref() {
        None | Some("") => return Err(GceError::required("resource.name")),
        Some(n) if !urls::valid_name(n) => {
            return Err(GceError::invalid_field(
                "resource.name",
                n,
                "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?|[1-9][0-9]{0,19})'",
            ));
        }
        Some(n) => n.to_string(),
    };
    let machine_type = match request.machine_type.as_deref() {
        None | Some("") => return Err(GceError::required("resource.machineType")),
        Some(value) => urls::machine_type_url(value, project, zone)?,
    };
    check_labels(&request.labels)?;
    let metadata_items = metadata(request.metadata.take().map(|m| m.items).unwrap_or_default())?;
    let tag_items = request.tags.take().map(|t| t.items).unwrap_or_default();
    if let Some(bad) = tag_items.iter().find(|t| !urls::valid_name(t)) {
        return Err(GceError::invalid_field(
            "resource.tags.items[0]",
            bad,
            "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'",
        ));
    }
    let disks = disks(std::mem::take(&mut request.disks), &name, target, state)?;
    let network_interfaces = network_interfaces(std::mem::take(&mut request.network_interfaces), target, state)?;
    let given_scheduling = request.scheduling.take().unwrap_or_default();
    check_spot(&given_scheduling)?;
    let scheduling = scheduling(given_scheduling);
    check_confidential(&machine_type, &request.other, &scheduling)?;
    let mut other = std::mem::take(&mut request.other);
    for key in OUTPUT_ONLY {
        other.remove(*key);
    }
    let self_link = urls::full(&format!("projects/{project}/zones/{zone}/instances/{name}"));
    let label_json = serde_json::to_vec(&request.labels).unwrap_or_default();
    let metadata_json = serde_json::to_vec(&metadata_items).unwrap_or_default();
    let tags_json = serde_json::to_vec(&tag_items).unwrap_or_default();
    Ok(Instance {
        kind: "compute#instance",
        id: new_id(),
        creation_timestamp: clock::rfc3339(SystemTime::now()),
        fingerprint: fingerprint(self_link.as_bytes()),
        name,
        description: request.description.take(),
        tags: Tags { items: tag_items, fingerprint: fingerprint(&tags_json) },
        machine_type,
        status: "PROVISIONING".to_string(),
        zone: urls::full(&format!("projects/{project}/zones/{zone}")),
        can_ip_forward: request.can_ip_forward.unwrap_or(false),
        network_interfaces,
        disks,
        metadata: Metadata {
            kind: "compute#metadata",
            fingerprint: fingerprint(&metadata_json),
            items: metadata_items,
        },
        service_accounts: request.service_accounts,
        self_link,
        scheduling,
        cpu_platform: "Intel Broadwell",
        label_fingerprint: fingerprint(&label_json),
        labels: request.labels,
        start_restricted: false,
        deletion_protection: request.deletion_protection.unwrap_or(false),
        other,
    })
}

/// Label keys and values as GCE accepts them (lowercase, digits, `_`, `-`; ≤ 63 chars; ≤ 64 labels).
pub(crate) fn check_labels(labels: &BTreeMap<String, String>) -> Result<(), GceError> {
    let allowed = |s: &str| s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if labels.len() > 64 {
        return Err(GceError::invalid_field("resource.labels", "", "Too many labels. At most 64 are allowed."));
    }
    for (key, value) in labels {
        let key_ok = key.len() <= 63 && key.bytes().next().is_some_and(|b| b.is_ascii_lowercase()) && allowed(key);
        if !key_ok {
            return Err(GceError::invalid_field(
                "resource.labels",
                "",
                &format!(
                    "Label key '{key}' violates format constraints. The key must start with a lowercase character, can only contain lowercase letters, numeric characters, underscores and dashes. The key can be at most 63 characters long."
                ),
            ));
        }
        if value.len() > 63 || !allowed(value) {
            return Err(GceError::invalid_field(
                "resource.labels",
                "",
                &format!(
                    "Label value for key '{key}' violates format constraints. The value can only contain lowercase letters, numeric characters, underscores and dashes. The value can be at most 63 characters long."
                ),
            ));
        }
    }
    Ok(())
}

/// Metadata items: valid unique keys, total size within GCE's limit. Values are never echoed in errors.
fn metadata(items: Vec<MetadataItem>) -> Result<Vec<MetadataItem>, GceError> {
    let mut seen = std::collections::BTreeSet::new();
    let mut size = 0usize;
    for (i, item) in items.iter().enumerate() {
        let key_ok = !item.key.is_empty()
            && item.key.len() <= 128
            && item.key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !key_ok {
            return Err(GceError::invalid_field(
                &format!("resource.metadata.items[{i}].key"),
                &item.key,
                "Must be a match of regex '[a-zA-Z0-9-_]{1,128}'",
            ));
        }
        if !seen.insert(item.key.as_str()) {
            return Err(GceError::invalid(format!("Duplicate metadata key: '{}'.", item.key)));
        }
        size += item.key.len() + item.value.as_deref().map_or(0, str::len);
    }
    if size > METADATA_LIMIT {
        return Err(GceError::invalid_field("resource.metadata", "", "Metadata total size exceeds the 512 KB limit."));
    }
    Ok(items)
}

/// Attached disks: the first one is the boot disk; each has a `source` or `initializeParams`.
fn disks(
    requests: Vec<AttachedDiskRequest>,
    name: &str,
    target: &Target<'_>,
    state: &State,
) -> Result<Vec<AttachedDisk>, GceError> {
    let (project, zone) = (target.project, target.zone);
    if requests.is_empty() {
        return Err(GceError::invalid_field("resource.disks", "", "Boot disk must be specified."));
    }
    let mut out = Vec::with_capacity(requests.len());
    for (i, mut disk) in requests.into_iter().enumerate() {
        let field = format!("resource.disks[{i}]");
        let boot = i == 0;
        if disk.boot == Some(true) && !boot {
            return Err(GceError::invalid_field(
                &format!("{field}.boot"),
                "true",
                "Boot disk must be the first disk attached to the instance.",
            ));
        }
        let (source, size, created) = match (disk.source.take(), disk.initialize_params.take()) {
            (Some(_), Some(_)) => {
                return Err(GceError::invalid_field(
                    &field,
                    "",
                    "Source and initializeParams must not both be specified.",
                ));
            }
            (None, None) => {
                return Err(GceError::invalid_field(&field, "", "Source or initializeParams must be specified."));
            }
            (Some(source), None) => (disk_url(&source, project, zone, &format!("{field}.source"))?, None, None),
            (None, Some(params)) => {
                let image_size = match params.source_image.as_deref() {
                    Some(image) => {
                        Some(image_size(image, &format!("{field}.initializeParams.sourceImage"), target, state)?)
                    }
                    None if boot => return Err(GceError::required(&format!("{field}.initializeParams.sourceImage"))),
                    None => None,
                };
                if let Some(disk_type) = params.disk_type.as_deref() {
                    check_disk_type(disk_type, zone, &format!("{field}.initializeParams.diskType"))?;
                }
                let requested = params.disk_size_gb.as_deref().and_then(|s| s.parse::<i64>().ok());
                if let (Some(req), Some(min)) = (requested, image_size)
                    && req < min
                {
                    return Err(GceError::invalid(format!(
                        "Invalid value for field '{field}.initializeParams.diskSizeGb': '{req}'. Requested disk size cannot be smaller than the image size ({min} GB)"
                    )));
                }
                let disk_name = match params.disk_name {
                    Some(n) if urls::valid_name(&n) => n,
                    Some(n) => {
                        return Err(GceError::invalid_field(
                            &format!("{field}.initializeParams.diskName"),
                            &n,
                            "Must be a match of regex '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'",
                        ));
                    }
                    None if boot => name.to_string(),
                    None => format!("{name}-{i}"),
                };
                let size = requested.or(image_size).unwrap_or(10);
                check_labels(&params.labels)?;
                let self_link = urls::full(&format!("projects/{project}/zones/{zone}/disks/{disk_name}"));
                let type_name =
                    params.disk_type.as_deref().and_then(|t| t.rsplit('/').next()).unwrap_or("pd-standard").to_string();
                let label_json = serde_json::to_vec(&params.labels).unwrap_or_default();
                let created = Disk {
                    kind: "compute#disk",
                    id: new_id(),
                    creation_timestamp: clock::rfc3339(SystemTime::now()),
                    name: disk_name,
                    size_gb: size.to_string(),
                    zone: urls::full(&format!("projects/{project}/zones/{zone}")),
                    status: "READY",
                    self_link: self_link.clone(),
                    source_image: params.source_image.as_deref().and_then(|i| resolved_image(i, target, state)),
                    disk_type: urls::full(&format!("projects/{project}/zones/{zone}/diskTypes/{type_name}")),
                    label_fingerprint: fingerprint(&label_json),
                    labels: params.labels,
                    users: vec![urls::full(&format!("projects/{project}/zones/{zone}/instances/{name}"))],
                    provisioned_iops: params.provisioned_iops,
                    provisioned_throughput: params.provisioned_throughput,
                };
                (self_link, Some(size.to_string()), Some(Box::new(created)))
            }
        };
        let mut other = std::mem::take(&mut disk.other);
        other.remove("kind");
        other.remove("index");
        other.remove("diskSizeGb");
        out.push(AttachedDisk {
            kind: "compute#attachedDisk",
            disk_type: disk.disk_type.unwrap_or_else(|| "PERSISTENT".to_string()),
            mode: disk.mode.unwrap_or_else(|| "READ_WRITE".to_string()),
            source,
            device_name: disk.device_name.unwrap_or_else(|| format!("persistent-disk-{i}")),
            index: u32::try_from(i).unwrap_or(u32::MAX),
            boot,
            auto_delete: disk.auto_delete.unwrap_or(false),
            interface: disk.interface.unwrap_or_else(|| "SCSI".to_string()),
            disk_size_gb: size,
            licenses: Vec::new(),
            other,
            created,
        });
    }
    Ok(out)
}

/// A disk type: a name (`pd-ssd`), `zones/Z/diskTypes/T`, `projects/P/zones/Z/diskTypes/T` or a URL.
fn check_disk_type(value: &str, zone: &str, field: &str) -> Result<(), GceError> {
    let path = urls::strip_base(value);
    let (type_zone, name) = match path.split('/').collect::<Vec<_>>().as_slice() {
        [t] => (zone, *t),
        ["zones", z, "diskTypes", t] | ["projects", _, "zones", z, "diskTypes", t] => (*z, *t),
        _ => return Err(GceError::invalid_field(field, value, "The URL is malformed.")),
    };
    if type_zone != zone || !urls::valid_name(name) {
        return Err(GceError::invalid_field(field, value, "Disk type is not valid in the instance's zone."));
    }
    Ok(())
}

/// Normalises an existing disk reference (`zones/Z/disks/D`, `projects/P/zones/Z/disks/D`, URL).
fn disk_url(value: &str, project: &str, zone: &str, field: &str) -> Result<String, GceError> {
    let path = urls::strip_base(value);
    let (p, z, d) = match path.split('/').collect::<Vec<_>>().as_slice() {
        ["zones", z, "disks", d] => (project.to_string(), z.to_string(), d.to_string()),
        ["projects", p, "zones", z, "disks", d] => (p.to_string(), z.to_string(), d.to_string()),
        _ => return Err(GceError::invalid_field(field, value, "The URL is malformed.")),
    };
    if z != zone {
        return Err(GceError::invalid_field(field, value, "Disk must be in the same zone as the instance."));
    }
    Ok(urls::full(&format!("projects/{p}/zones/{z}/disks/{d}")))
}

/// Resolves a source image (name or family), checks the caller may use it, returns its size in GB.
fn image_size(value: &str, field: &str, target: &Target<'_>, state: &State) -> Result<i64, GceError> {
    let reference = urls::parse_image(value, target.project, field)?;
    let (project, found, path) = match &reference {
        ImageRef::Name { project, name } => (
            project.as_str(),
            state.images.get(&(project.clone(), name.clone())),
            format!("projects/{project}/global/images/{name}"),
        ),
        ImageRef::Family { project, family } => (
            project.as_str(),
            state.images.iter().find(|((p, _), rec)| p == project && &rec.image.family == family).map(|(_, rec)| rec),
            format!("projects/{project}/global/images/family/{family}"),
        ),
    };
    let image = found.ok_or_else(|| GceError::not_found(&path))?;
    access::check(image, project, target.caller, ImagePermission::Use)?;
    Ok(image.image.disk_size_gb.parse().unwrap_or(10))
}

/// The full URL of the image a `sourceImage` reference boots (a family's
/// image, as GCE resolves it), as the disk's `sourceImage` shows it.
fn resolved_image(value: &str, target: &Target<'_>, state: &State) -> Option<String> {
    let found = match urls::parse_image(value, target.project, "sourceImage").ok()? {
        ImageRef::Name { project, name } => state.images.get(&(project, name)),
        ImageRef::Family { project, family } => {
            state.images.iter().find(|((p, _), rec)| *p == project && rec.image.family == family).map(|(_, rec)| rec)
        }
    };
    found.map(|rec| rec.image.self_link.clone())
}

/// Network interfaces: full URLs, an internal IP each, and a NAT IP per access config.
fn network_interfaces(
    requests: Vec<NetworkInterfaceRequest>,
    target: &Target<'_>,
    state: &mut State,
) -> Result<Vec<NetworkInterface>, GceError> {
    let (project, zone) = (target.project, target.zone);
    if requests.is_empty() {
        return Err(GceError::invalid_field(
            "resource.networkInterfaces",
            "",
            "At least one network interface is required.",
        ));
    }
    let mut out = Vec::with_capacity(requests.len());
    for (i, mut nic) in requests.into_iter().enumerate() {
        let field = format!("resource.networkInterfaces[{i}]");
        let network = match nic.network.as_deref() {
            Some(n) => urls::network_url(n, project, &format!("{field}.network"))?,
            None => urls::full(&format!("projects/{project}/global/networks/default")),
        };
        let subnetwork = match nic.subnetwork.as_deref() {
            Some(s) => urls::subnetwork_url(s, project, zone, &format!("{field}.subnetwork"))?,
            None => {
                let net_name = network.rsplit('/').next().unwrap_or("default");
                urls::full(&format!("projects/{project}/regions/{}/subnetworks/{net_name}", urls::region_of(zone)))
            }
        };
        let (internal, external) = state.allocate_addresses();
        let network_ip = match nic.network_ip.take() {
            Some(ip) if ip.parse::<std::net::Ipv4Addr>().is_ok() => ip,
            Some(ip) => {
                return Err(GceError::invalid_field(
                    &format!("{field}.networkIP"),
                    &ip,
                    "The IP address is not valid.",
                ));
            }
            None => internal,
        };
        let mut access_configs = Vec::with_capacity(nic.access_configs.len());
        for (j, config) in std::mem::take(&mut nic.access_configs).into_iter().enumerate() {
            let kind = config.access_type.unwrap_or_else(|| "ONE_TO_ONE_NAT".to_string());
            if kind != "ONE_TO_ONE_NAT" {
                return Err(GceError::invalid_field(
                    &format!("{field}.accessConfigs[{j}].type"),
                    &kind,
                    "Must be ONE_TO_ONE_NAT.",
                ));
            }
            access_configs.push(AccessConfig {
                kind: Some("compute#accessConfig".to_string()),
                name: Some(config.name.unwrap_or_else(|| "External NAT".to_string())),
                access_type: Some(kind),
                ephemeral: config.nat_ip.is_none(),
                nat_ip: Some(config.nat_ip.unwrap_or_else(|| external.clone())),
                network_tier: Some(config.network_tier.unwrap_or_else(|| "PREMIUM".to_string())),
            });
        }
        let mut other = std::mem::take(&mut nic.other);
        for output_only in ["kind", "name", "fingerprint", "ipv6Address", "internalIpv6PrefixLength"] {
            other.remove(output_only);
        }
        let ipv6 = ipv6_of(&mut nic, &field, state)?;
        let alias_ip_ranges = alias_ranges(std::mem::take(&mut nic.alias_ip_ranges), &field, state)?;
        out.push(NetworkInterface {
            kind: "compute#networkInterface",
            fingerprint: fingerprint(format!("{network}{subnetwork}{network_ip}").as_bytes()),
            network,
            subnetwork,
            network_ip,
            name: format!("nic{i}"),
            access_configs,
            stack_type: ipv6.stack_type,
            alias_ip_ranges,
            ipv6_access_type: ipv6.access_type,
            internal_ipv6_prefix_length: ipv6.address.as_ref().map(|_| IPV6_PREFIX_LENGTH),
            ipv6_address: ipv6.address,
            ipv6_access_configs: ipv6.access_configs,
            other,
        });
    }
    Ok(out)
}

/// The stack types of `networkInterfaces[].stackType`.
const STACK_TYPES: &[&str] = &["IPV4_ONLY", "IPV4_IPV6", "IPV6_ONLY"];
/// The IPv6 access types (`ipv6AccessType`, a subnetwork's property).
const IPV6_ACCESS_TYPES: &[&str] = &["EXTERNAL", "INTERNAL"];
/// The prefix length of an interface's IPv6 range.
const IPV6_PREFIX_LENGTH: u32 = 96;

/// The IPv6 side of an interface.
struct Ipv6Side {
    stack_type: String,
    access_type: Option<String>,
    address: Option<String>,
    access_configs: Vec<Ipv6AccessConfig>,
}

/// Stack type, IPv6 access type, internal IPv6 address and IPv6 access
/// configs of an interface. GCE inherits `ipv6AccessType` from the
/// subnetwork; the fake has no subnetworks and takes the request's value as
/// the subnetwork's (`INTERNAL` when absent, `EXTERNAL` with an IPv6 access
/// config). An IPv6 stack on an `INTERNAL` subnetwork gets an internal `/96`
/// (`ipv6Address`); on an `EXTERNAL` one the `DIRECT_IPV6` access config gets
/// the external `/96` (`externalIpv6`), and without one the interface has no
/// IPv6 address, as GCE documents.
fn ipv6_of(nic: &mut NetworkInterfaceRequest, field: &str, state: &mut State) -> Result<Ipv6Side, GceError> {
    let stack_type = nic.stack_type.take().unwrap_or_else(|| "IPV4_ONLY".to_string());
    if !STACK_TYPES.contains(&stack_type.as_str()) {
        return Err(GceError::invalid_field(
            &format!("{field}.stackType"),
            &stack_type,
            "Value must be one of [IPV4_IPV6, IPV4_ONLY, IPV6_ONLY].",
        ));
    }
    if let Some(at) = nic.ipv6_access_type.as_deref()
        && !IPV6_ACCESS_TYPES.contains(&at)
    {
        return Err(GceError::invalid_field(
            &format!("{field}.ipv6AccessType"),
            at,
            "Value must be one of [EXTERNAL, INTERNAL].",
        ));
    }
    let requested = std::mem::take(&mut nic.ipv6_access_configs);
    let ipv6_stack = stack_type != "IPV4_ONLY";
    if !requested.is_empty() && !ipv6_stack {
        return Err(GceError::invalid_field(
            &format!("{field}.ipv6AccessConfigs"),
            "",
            "IPv6 access configs require stack type IPV4_IPV6 or IPV6_ONLY.",
        ));
    }
    if requested.len() > 1 {
        return Err(GceError::invalid_field(
            &format!("{field}.ipv6AccessConfigs"),
            "",
            "At most one IPv6 access config (DIRECT_IPV6) is supported.",
        ));
    }
    if !ipv6_stack {
        return Ok(Ipv6Side { stack_type, access_type: None, address: None, access_configs: Vec::new() });
    }
    let access_type = nic
        .ipv6_access_type
        .take()
        .unwrap_or_else(|| if requested.is_empty() { "INTERNAL".to_string() } else { "EXTERNAL".to_string() });
    if access_type == "INTERNAL" && !requested.is_empty() {
        return Err(GceError::invalid_field(
            &format!("{field}.ipv6AccessConfigs"),
            "",
            "IPv6 access configs require a subnetwork with external IPv6 access.",
        ));
    }
    let (internal, external) = state.allocate_ipv6();
    let mut access_configs = Vec::with_capacity(requested.len());
    for (j, config) in requested.into_iter().enumerate() {
        let kind = config.access_type.unwrap_or_else(|| "DIRECT_IPV6".to_string());
        if kind != "DIRECT_IPV6" {
            return Err(GceError::invalid_field(
                &format!("{field}.ipv6AccessConfigs[{j}].type"),
                &kind,
                "Must be DIRECT_IPV6.",
            ));
        }
        access_configs.push(Ipv6AccessConfig {
            kind: Some("compute#accessConfig".to_string()),
            name: Some(config.name.unwrap_or_else(|| "external-ipv6".to_string())),
            access_type: Some(kind),
            external_ipv6: Some(config.external_ipv6.unwrap_or_else(|| external.clone())),
            external_ipv6_prefix_length: Some(IPV6_PREFIX_LENGTH),
            network_tier: Some(config.network_tier.unwrap_or_else(|| "PREMIUM".to_string())),
        });
    }
    let address = (access_type == "INTERNAL").then_some(internal);
    Ok(Ipv6Side { stack_type, access_type: Some(access_type), address, access_configs })
}

/// Alias IP ranges: `ipCidrRange` a netmask (`/24`, a free block is
/// allocated), an address (`/32`) or a CIDR; `subnetworkRangeName`, when
/// given, a secondary range name. Anything else is 400 `invalid`.
fn alias_ranges(requested: Vec<AliasIpRange>, field: &str, state: &mut State) -> Result<Vec<AliasIpRange>, GceError> {
    let mut out = Vec::with_capacity(requested.len());
    for (j, range) in requested.into_iter().enumerate() {
        let here = format!("{field}.aliasIpRanges[{j}]");
        let name = range.subnetwork_range_name.filter(|n| !n.is_empty());
        if let Some(n) = &name
            && !urls::valid_name(n)
        {
            return Err(GceError::invalid_field(
                &format!("{here}.subnetworkRangeName"),
                n,
                "Must be a match of regex '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'",
            ));
        }
        let given = range.ip_cidr_range.unwrap_or_default();
        let bad = || {
            GceError::invalid_field(
                &format!("{here}.ipCidrRange"),
                &given,
                "Must be a netmask (/N), an IP address or a CIDR range.",
            )
        };
        let cidr = if let Some(mask) = given.strip_prefix('/') {
            let prefix: u8 = mask.parse().map_err(|_| bad())?;
            if !(8..=32).contains(&prefix) {
                return Err(bad());
            }
            state.allocate_alias_range(prefix).ok_or_else(|| {
                GceError::invalid(format!("IP space of '{here}' is exhausted: no free /{prefix} range."))
            })?
        } else if let Some((addr, mask)) = given.split_once('/') {
            let prefix: u8 = mask.parse().map_err(|_| bad())?;
            let ip: std::net::Ipv4Addr = addr.parse().map_err(|_| bad())?;
            if prefix > 32 || u32::from(ip) & !(u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)) != 0 {
                return Err(bad());
            }
            given.clone()
        } else {
            let ip: std::net::Ipv4Addr = given.parse().map_err(|_| bad())?;
            format!("{ip}/32")
        };
        out.push(AliasIpRange { ip_cidr_range: Some(cidr), subnetwork_range_name: name });
    }
    Ok(out)
}

/// Scheduling with GCE's defaults (`MIGRATE`, automatic restart) unless preemptible/spot.
fn scheduling(given: Map<String, Value>) -> Map<String, Value> {
    let spot = given.get("preemptible") == Some(&Value::Bool(true))
        || given.get("provisioningModel").and_then(Value::as_str) == Some("SPOT");
    let defaults = if spot {
        json!({"onHostMaintenance": "TERMINATE", "automaticRestart": false, "preemptible": given.get("preemptible").cloned().unwrap_or(Value::Bool(false)), "provisioningModel": "SPOT"})
    } else {
        json!({"onHostMaintenance": "MIGRATE", "automaticRestart": true, "preemptible": false, "provisioningModel": "STANDARD"})
    };
    let mut out = match defaults {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    out.extend(given);
    out
}

/// Longest `scheduling.maxRunDuration` GCE accepts (120 days), and the shortest (30 s).
const MAX_RUN_SECONDS: std::ops::RangeInclusive<i64> = 30..=120 * 24 * 3600;

/// Spot VMs and run-time limits as GCE documents them ("Spot VMs", "Limit the
/// run time of a VM"): `provisioningModel` `STANDARD` or `SPOT`; a Spot VM
/// neither restarts automatically nor live-migrates; `instanceTerminationAction`
/// (`STOP`, `DELETE`) belongs to a Spot VM or a `maxRunDuration`, which needs
/// it and lies between 30 s and 120 days. 400 `invalid` (or `required`) otherwise.
fn check_spot(given: &Map<String, Value>) -> Result<(), GceError> {
    let field = |k: &str| format!("resource.scheduling.{k}");
    let model = given.get("provisioningModel").and_then(Value::as_str);
    if let Some(m) = model
        && m != "STANDARD"
        && m != "SPOT"
    {
        return Err(GceError::invalid_field(&field("provisioningModel"), m, "Value must be one of [SPOT, STANDARD]."));
    }
    let spot = model == Some("SPOT");
    if spot && given.get("automaticRestart") == Some(&Value::Bool(true)) {
        return Err(GceError::invalid_field(
            &field("automaticRestart"),
            "true",
            "Automatic restart is not supported for Spot VMs.",
        ));
    }
    if spot && let Some(ohm) = given.get("onHostMaintenance").and_then(Value::as_str).filter(|o| *o != "TERMINATE") {
        return Err(GceError::invalid_field(
            &field("onHostMaintenance"),
            ohm,
            "Spot VMs must have onHostMaintenance set to TERMINATE.",
        ));
    }
    let action = given.get("instanceTerminationAction").and_then(Value::as_str);
    if let Some(a) = action {
        if a != "STOP" && a != "DELETE" {
            return Err(GceError::invalid_field(
                &field("instanceTerminationAction"),
                a,
                "Value must be one of [DELETE, STOP].",
            ));
        }
        if !spot && !given.contains_key("maxRunDuration") {
            return Err(GceError::invalid_field(
                &field("instanceTerminationAction"),
                a,
                "Instance termination action can only be set for Spot VMs or VMs with a max run duration.",
            ));
        }
    }
    if let Some(duration) = given.get("maxRunDuration") {
        if action.is_none() {
            return Err(GceError::required(&field("instanceTerminationAction")));
        }
        let seconds = match duration.get("seconds") {
            Some(Value::String(s)) => s.parse::<i64>().ok(),
            Some(Value::Number(n)) => n.as_i64(),
            _ => None,
        };
        let nanos = duration.get("nanos").map_or(Some(0), Value::as_i64);
        let valid = seconds.is_some_and(|s| MAX_RUN_SECONDS.contains(&s))
            && nanos.is_some_and(|n| (0..1_000_000_000).contains(&n));
        if !valid {
            return Err(GceError::invalid_field(
                &field("maxRunDuration"),
                &duration.to_string(),
                "Max run duration must be between 30 seconds and 120 days.",
            ));
        }
    }
    Ok(())
}

/// The machine series each Confidential VM technology runs on, and those
/// that can live-migrate it (GCE, "Confidential VM supported
/// configurations": AMD SEV on N2D, C2D and C3D, live migration on N2D; AMD
/// SEV-SNP on N2D; Intel TDX on C3).
const CONFIDENTIAL_SERIES: &[(&str, &[&str], &[&str])] =
    &[("SEV", &["n2d", "c2d", "c3d"], &["n2d"]), ("SEV_SNP", &["n2d"], &[]), ("TDX", &["c3"], &[])];

/// `confidentialInstanceConfig` on a machine type that can host it, with
/// `onHostMaintenance: TERMINATE` unless the series can live-migrate it.
fn check_confidential(
    machine_type: &str,
    other: &Map<String, Value>,
    scheduling: &Map<String, Value>,
) -> Result<(), GceError> {
    let Some(config) = other.get("confidentialInstanceConfig") else { return Ok(()) };
    const TYPE_FIELD: &str = "resource.confidentialInstanceConfig.confidentialInstanceType";
    let tech = match config.get("confidentialInstanceType").and_then(Value::as_str) {
        Some(t) => t,
        None if config.get("enableConfidentialCompute") == Some(&Value::Bool(true)) => "SEV",
        None => return Ok(()),
    };
    let Some((_, series, migrate)) = CONFIDENTIAL_SERIES.iter().find(|(t, _, _)| *t == tech) else {
        return Err(GceError::invalid_field(TYPE_FIELD, tech, "Value must be one of [SEV, SEV_SNP, TDX]."));
    };
    let name = machine_type.rsplit('/').next().unwrap_or_default();
    let of = name.split('-').next().unwrap_or_default();
    if !series.contains(&of) {
        return Err(GceError::invalid_field(
            "resource.machineType",
            machine_type,
            &format!("Confidential instance type {tech} is not supported for machine type '{name}'."),
        ));
    }
    let ohm = scheduling.get("onHostMaintenance").and_then(Value::as_str).unwrap_or("MIGRATE");
    if ohm != "TERMINATE" && !migrate.contains(&of) {
        return Err(GceError::invalid_field(
            "resource.scheduling.onHostMaintenance",
            ohm,
            &format!(
                "Confidential VMs of type {tech} on machine type '{name}' must have onHostMaintenance set to TERMINATE."
            ),
        ));
    }
    Ok(())
}
