//! Identities: providerIDs, create `requestId`s and the labels this driver sets.

use machine_driver_api::{DriverError, idempotency_token};

/// Scheme prefix of a GCE providerID (`gce:///<project>/<zone>/<name>`).
const PROVIDER_ID_PREFIX: &str = "gce:///";

/// Label carrying the machine uid on every instance this driver creates, so
/// that "already exists" can be told apart from a foreign instance of the same name.
pub(crate) const MACHINE_UID_LABEL: &str = "mcm-machine-uid";

/// Value of the cluster and role labels (`kubernetes-io-cluster-<name>: "1"`).
pub(crate) const MEMBERSHIP_LABEL_VALUE: &str = "1";

/// Where an instance lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct InstanceRef {
    /// Project id.
    pub(crate) project: String,
    /// Zone, e.g. `europe-west1-b`.
    pub(crate) zone: String,
    /// Instance name (= machine name = node name).
    pub(crate) name: String,
}

impl InstanceRef {
    /// `gce:///<project>/<zone>/<name>`.
    pub(crate) fn provider_id(&self) -> String {
        format!("{PROVIDER_ID_PREFIX}{}/{}/{}", self.project, self.zone, self.name)
    }

    /// Parses a providerID; INVALID_ARGUMENT naming `machine.providerID` otherwise.
    ///
    /// Each part goes into a Compute URL path as one segment, so each is
    /// checked against GCE's syntax first: the project a project id
    /// ([`is_project_id`]), zone and name GCE resource names ([`is_gce_name`]).
    /// None of them can then hold `/`, `.`-segments, `?`, `#` or `%`.
    pub(crate) fn parse_provider_id(provider_id: &str) -> Result<Self, DriverError> {
        let bad = || {
            DriverError::invalid_argument(
                "machine.providerID",
                format!("{provider_id:?} is not of the form gce:///<project>/<zone>/<name>"),
            )
        };
        let rest = provider_id.strip_prefix(PROVIDER_ID_PREFIX).ok_or_else(bad)?;
        let mut parts = rest.split('/');
        let (Some(project), Some(zone), Some(name), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        if project.is_empty() || zone.is_empty() || name.is_empty() {
            return Err(bad());
        }
        let part = |what: &str, syntax: &str| {
            DriverError::invalid_argument(
                "machine.providerID",
                format!("the {what} of {provider_id:?} is not a GCE {syntax}"),
            )
        };
        if !is_project_id(project) {
            return Err(part("project", "project id"));
        }
        if !is_gce_name(zone) {
            return Err(part("zone", "zone name"));
        }
        if !is_gce_name(name) {
            return Err(part("instance name", "instance name (lowercase letters, digits and '-', at most 63)"));
        }
        Ok(Self { project: project.into(), zone: zone.into(), name: name.into() })
    }
}

/// The `requestId` of the instances.insert for machine `uid`, generation `after`
/// (`None` for the first attempt; the name of the failed operation of the
/// previous attempt otherwise). A UUID (version 8, RFC 4122 variant) derived
/// from a SHA-256 of the uid, so every retry, replica and restart sends the
/// same id and GCE answers a repeated insert with the original operation.
pub(crate) fn insert_request_id(uid: &str, after: Option<&str>) -> String {
    let purpose = match after {
        None => "gce-insert".to_string(),
        Some(op) => format!("gce-insert-after/{op}"),
    };
    let mut hex: Vec<u8> = idempotency_token(&purpose, uid, 32).into_bytes();
    // Version nibble 8 (custom), variant bits 10xx: a well-formed non-nil UUID.
    hex[12] = b'8';
    let variant = u8::from_str_radix(&String::from(hex[16] as char), 16).unwrap_or(0);
    hex[16] = b"89ab"[usize::from(variant & 0x3)];
    let s = String::from_utf8_lossy(&hex).into_owned();
    format!("{}-{}-{}-{}-{}", &s[0..8], &s[8..12], &s[12..16], &s[16..20], &s[20..32])
}

/// Checks a GCE resource name (`[a-z]([-a-z0-9]*[a-z0-9])?`, at most 63 chars).
pub(crate) fn is_gce_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[b.len() - 1] != b'-'
}

/// Checks a GCP project id: 6 to 30 lowercase letters, digits and hyphens,
/// starting with a letter and not ending with a hyphen; legacy domain-scoped
/// projects have a `domain:` prefix (`example.com:my-project`), a DNS name of
/// lowercase letters, digits, `-` and `.` (no empty label). Nothing of it can
/// leave a URL path segment.
pub(crate) fn is_project_id(id: &str) -> bool {
    let (domain, name) = match id.split_once(':') {
        Some((domain, name)) => (Some(domain), name),
        None => (None, id),
    };
    let name_ok = (6..=30).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let domain_ok = domain.is_none_or(|d| {
        d.len() <= 253
            && d.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            })
    });
    name_ok && domain_ok
}

/// Checks a GCE label key (`[a-z][a-z0-9_-]{0,62}`).
pub(crate) fn is_label_key(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty() && b.len() <= 63 && b[0].is_ascii_lowercase() && b.iter().all(|c| is_label_char(*c))
}

/// Checks a GCE label value (`[a-z0-9_-]{0,63}`).
pub(crate) fn is_label_value(s: &str) -> bool {
    s.len() <= 63 && s.bytes().all(is_label_char)
}

fn is_label_char(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_'
}

/// A machine uid as a label value: lowercase, other characters as `-`, at most 63 chars.
pub(crate) fn uid_label_value(uid: &str) -> String {
    uid.chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if is_label_char(c as u8) && c.is_ascii() { c } else { '-' })
        .take(63)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_id_round_trip() {
        let r = InstanceRef { project: "proj-1".into(), zone: "europe-west1-b".into(), name: "m-1".into() };
        assert_eq!(r.provider_id(), "gce:///proj-1/europe-west1-b/m-1");
        assert_eq!(InstanceRef::parse_provider_id(&r.provider_id()).unwrap(), r);
    }

    #[test]
    fn malformed_provider_ids_name_the_field() {
        for bad in ["aws:///eu/i-1", "gce:///p/z", "gce:///p/z/n/x", "gce:////z/n", "gce://p/z/n", ""] {
            let e = InstanceRef::parse_provider_id(bad).unwrap_err();
            assert_eq!(e.field(), Some("machine.providerID"), "{bad}");
        }
    }

    #[test]
    fn provider_id_parts_that_could_leave_their_path_segment_are_refused() {
        for bad in [
            "gce:///../europe-west1-b/m-1",
            "gce:///proj-1/../m-1",
            "gce:///proj-1/europe-west1-b/..",
            "gce:///proj-1/europe-west1-b/m-1?alt=x",
            "gce:///proj-1/europe-west1-b/m-1#x",
            "gce:///proj-1/europe-west1-b/%2e%2e",
            "gce:///proj-1/Zone/m-1",
            "gce:///a..b:proj-1/europe-west1-b/m-1",
            "gce:///p/europe-west1-b/m-1",
        ] {
            let e = InstanceRef::parse_provider_id(bad).unwrap_err();
            assert_eq!(e.field(), Some("machine.providerID"), "{bad}");
        }
        let domain = InstanceRef::parse_provider_id("gce:///example.com:proj-1/europe-west1-b/m-1").unwrap();
        assert_eq!(domain.project, "example.com:proj-1");
    }

    #[test]
    fn project_ids() {
        for ok in ["demo-project", "image-owner", "example.com:my-project", "a23456"] {
            assert!(is_project_id(ok), "{ok}");
        }
        for bad in ["p-1", "Demo-project", "demo-project-", "1demo-project", "a/../b:my-project", ".:my-project", "x"] {
            assert!(!is_project_id(bad), "{bad}");
        }
    }

    #[test]
    fn request_ids_are_stable_uuids() {
        let a = insert_request_id("8f0a1c2e-uid", None);
        assert_eq!(a, insert_request_id("8f0a1c2e-uid", None));
        assert_ne!(a, insert_request_id("other-uid", None));
        assert_ne!(a, insert_request_id("8f0a1c2e-uid", Some("operation-1")));
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), vec![8, 4, 4, 4, 12]);
        assert!(a.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
        assert_eq!(&parts[2][..1], "8", "version nibble");
        assert!("89ab".contains(&parts[3][..1]), "variant bits");
    }

    #[test]
    fn names_and_labels() {
        assert!(is_gce_name("shoot--p--c-worker-z1-5d8f9-abcde"));
        assert!(!is_gce_name("Upper"));
        assert!(!is_gce_name("1abc"));
        assert!(!is_gce_name("abc-"));
        assert!(!is_gce_name(&"a".repeat(64)));
        assert!(is_label_key("kubernetes-io-role-node"));
        assert!(!is_label_key("kubernetes.io/role"));
        assert!(is_label_value(""));
        assert!(!is_label_value("UPPER"));
        assert_eq!(uid_label_value("AB.c/1"), "ab-c-1");
    }
}
