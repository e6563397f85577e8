//! Resource names and URLs: building the full `selfLink` URLs GCE returns and
//! normalising the partial forms clients send (`zones/Z/machineTypes/T`,
//! `global/networks/N`, `projects/P/global/images/family/F`, full URLs).

use crate::error::GceError;

/// The URL prefix of every `selfLink` the real API returns.
pub(crate) const BASE: &str = "https://www.googleapis.com/compute/v1/";

/// The full URL of a resource path such as `projects/p/zones/z`.
pub(crate) fn full(path: &str) -> String {
    format!("{BASE}{path}")
}

/// Strips any `http(s)://HOST/compute/v1/` prefix, leaving the resource path.
pub(crate) fn strip_base(value: &str) -> &str {
    if value.starts_with("https://") || value.starts_with("http://") {
        match value.find("/compute/v1/") {
            Some(at) => &value[at + "/compute/v1/".len()..],
            None => value,
        }
    } else {
        value.trim_start_matches('/')
    }
}

/// Whether `name` is a valid GCE resource name (RFC 1035 label, at most 63 chars).
pub(crate) fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let Some((&first, rest)) = bytes.split_first() else {
        return false;
    };
    bytes.len() <= 63
        && first.is_ascii_lowercase()
        && rest.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.last().is_some_and(|b| *b != b'-')
}

/// The region of a zone (`us-central1-a` → `us-central1`).
pub(crate) fn region_of(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(region, _)| region)
}

/// Whether `zone` looks like a real zone name (`us-central1-a`, `europe-west3-c`).
pub(crate) fn valid_zone(zone: &str) -> bool {
    let parts: Vec<&str> = zone.split('-').collect();
    parts.len() >= 3
        && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
        && parts.last().is_some_and(|p| p.len() == 1 && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts[parts.len() - 2].bytes().last().is_some_and(|b| b.is_ascii_digit())
}

/// Fails with GCE's `Unknown zone` answer unless `zone` is a plausible zone.
pub(crate) fn check_zone(zone: &str) -> Result<(), GceError> {
    if valid_zone(zone) { Ok(()) } else { Err(GceError::invalid_field("zone", zone, "Unknown zone.")) }
}

/// Machine type families the fake knows; a type outside them "does not exist".
const MACHINE_FAMILIES: &[&str] = &[
    "e2", "n1", "n2", "n2d", "n4", "c2", "c2d", "c3", "c3d", "c4", "c4a", "c4d", "t2a", "t2d", "m1", "m2", "m3", "a2",
    "a3", "g2", "h3", "z3", "f1", "g1",
];

/// Normalises `machineType` (`zones/Z/machineTypes/T`, `projects/P/zones/Z/machineTypes/T`
/// or a full URL) to its full URL; the zone must be the instance's zone.
pub(crate) fn machine_type_url(value: &str, project: &str, zone: &str) -> Result<String, GceError> {
    const FIELD: &str = "resource.machineType";
    let path = strip_base(value);
    let segments: Vec<&str> = path.split('/').collect();
    let (type_zone, name) = match segments.as_slice() {
        ["zones", z, "machineTypes", t] => (*z, *t),
        ["projects", _, "zones", z, "machineTypes", t] => (*z, *t),
        _ => return Err(GceError::invalid_field(FIELD, value, "Must be a URL to a machine type resource.")),
    };
    if type_zone != zone {
        return Err(GceError::invalid_field(
            FIELD,
            value,
            &format!("Machine type specified '{name}' is in a different scope than the instance."),
        ));
    }
    let family = name.split('-').next().unwrap_or_default();
    if !(MACHINE_FAMILIES.contains(&family) || family == "custom") || !valid_name(name) {
        return Err(GceError::invalid_field(
            FIELD,
            value,
            &format!("Machine type with name '{name}' does not exist in zone '{zone}'."),
        ));
    }
    Ok(full(&format!("projects/{project}/zones/{zone}/machineTypes/{name}")))
}

/// Normalises a network reference to its full URL.
pub(crate) fn network_url(value: &str, project: &str, field: &str) -> Result<String, GceError> {
    let path = strip_base(value);
    match path.split('/').collect::<Vec<_>>().as_slice() {
        ["global", "networks", n] if valid_name(n) => Ok(full(&format!("projects/{project}/global/networks/{n}"))),
        ["projects", p, "global", "networks", n] if valid_name(n) => {
            Ok(full(&format!("projects/{p}/global/networks/{n}")))
        }
        _ => Err(GceError::invalid_field(field, value, "The URL is malformed.")),
    }
}

/// Normalises a subnetwork reference to its full URL; it must be in the zone's region.
pub(crate) fn subnetwork_url(value: &str, project: &str, zone: &str, field: &str) -> Result<String, GceError> {
    let path = strip_base(value);
    let (p, region, name) = match path.split('/').collect::<Vec<_>>().as_slice() {
        ["regions", r, "subnetworks", s] => (project.to_string(), r.to_string(), s.to_string()),
        ["projects", p, "regions", r, "subnetworks", s] => (p.to_string(), r.to_string(), s.to_string()),
        _ => return Err(GceError::invalid_field(field, value, "The URL is malformed.")),
    };
    if !valid_name(&name) {
        return Err(GceError::invalid_field(field, value, "The URL is malformed."));
    }
    if region != region_of(zone) {
        return Err(GceError::invalid_field(
            field,
            value,
            &format!("Subnetwork must be in region '{}'.", region_of(zone)),
        ));
    }
    Ok(full(&format!("projects/{p}/regions/{region}/subnetworks/{name}")))
}

/// An image reference: by name or by family, in a project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ImageRef {
    /// `projects/P/global/images/NAME`.
    Name { project: String, name: String },
    /// `projects/P/global/images/family/FAMILY`: the newest image of the family.
    Family { project: String, family: String },
}

/// Parses a `sourceImage` reference; `global/images/N` means the caller's project.
pub(crate) fn parse_image(value: &str, own_project: &str, field: &str) -> Result<ImageRef, GceError> {
    let path = strip_base(value);
    let segs: Vec<&str> = path.split('/').collect();
    let image = match segs.as_slice() {
        ["projects", p, "global", "images", "family", f] => {
            ImageRef::Family { project: p.to_string(), family: f.to_string() }
        }
        ["projects", p, "global", "images", n] => ImageRef::Name { project: p.to_string(), name: n.to_string() },
        ["global", "images", "family", f] => {
            ImageRef::Family { project: own_project.to_string(), family: f.to_string() }
        }
        ["global", "images", n] => ImageRef::Name { project: own_project.to_string(), name: n.to_string() },
        _ => return Err(GceError::invalid_field(field, value, "The URL is malformed.")),
    };
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_type_forms() {
        let want = "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/machineTypes/e2-small";
        assert_eq!(
            machine_type_url("zones/us-central1-a/machineTypes/e2-small", "p", "us-central1-a").as_deref(),
            Ok(want)
        );
        assert_eq!(machine_type_url(want, "p", "us-central1-a").as_deref(), Ok(want));
        assert_eq!(
            machine_type_url("zones/us-central1-b/machineTypes/e2-small", "p", "us-central1-a").map_err(|e| e.reason),
            Err("invalid")
        );
        assert_eq!(machine_type_url("e2-small", "p", "us-central1-a").map_err(|e| e.reason), Err("invalid"));
        assert_eq!(
            machine_type_url("zones/us-central1-a/machineTypes/zz-huge", "p", "us-central1-a").map_err(|e| e.reason),
            Err("invalid")
        );
    }

    #[test]
    fn zones_and_names() {
        assert!(valid_zone("us-central1-a"));
        assert!(valid_zone("europe-west3-c"));
        assert!(!valid_zone("nowhere"));
        assert_eq!(region_of("europe-west3-c"), "europe-west3");
        assert!(valid_name("vm-1"));
        assert!(!valid_name("1vm"));
        assert!(!valid_name("vm-"));
        assert!(!valid_name("Vm"));
    }

    #[test]
    fn images() {
        assert_eq!(
            parse_image("projects/debian-cloud/global/images/family/debian-12", "p", "f"),
            Ok(ImageRef::Family { project: "debian-cloud".into(), family: "debian-12".into() })
        );
        assert_eq!(
            parse_image("https://www.googleapis.com/compute/v1/projects/x/global/images/y", "p", "f"),
            Ok(ImageRef::Name { project: "x".into(), name: "y".into() })
        );
    }
}
