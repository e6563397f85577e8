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
use crate::model::instance::{
    AccessConfig, AttachedDisk, AttachedDiskRequest, Instance, InstanceRequest, Metadata, MetadataItem,
    NetworkInterface, NetworkInterfaceRequest, Tags,
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
    let scheduling = scheduling(request.scheduling.take().unwrap_or_default());
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
fn check_labels(labels: &BTreeMap<String, String>) -> Result<(), GceError> {
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
        let (source, size) = match (disk.source.take(), disk.initialize_params.take()) {
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
            (Some(source), None) => (disk_url(&source, project, zone, &format!("{field}.source"))?, None),
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
                (urls::full(&format!("projects/{project}/zones/{zone}/disks/{disk_name}")), Some(size.to_string()))
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
                nat_ip: Some(config.nat_ip.unwrap_or_else(|| external.clone())),
                network_tier: Some(config.network_tier.unwrap_or_else(|| "PREMIUM".to_string())),
            });
        }
        let mut other = std::mem::take(&mut nic.other);
        other.remove("kind");
        other.remove("name");
        other.remove("fingerprint");
        let stack_type = match other.remove("stackType") {
            Some(Value::String(s)) => s,
            _ => "IPV4_ONLY".to_string(),
        };
        out.push(NetworkInterface {
            kind: "compute#networkInterface",
            fingerprint: fingerprint(format!("{network}{subnetwork}{network_ip}").as_bytes()),
            network,
            subnetwork,
            network_ip,
            name: format!("nic{i}"),
            access_configs,
            stack_type,
            other,
        });
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
