//! Names the driver gives and reads: the providerID
//! (`openstack:///<region>/<server-id>`, byte-identical to the Go
//! provider's), the machine uid metadata key, and Nova's name filter.

use machine_driver_api::DriverError;

/// The metadata key carrying the machine's uid on the server (Nova takes
/// `[A-Za-z0-9-_:. ]` in keys, so no `/`).
pub(crate) const MACHINE_UID_KEY: &str = "mcm.gardener.cloud-machine-uid";

const PREFIX: &str = "openstack:///";

/// `openstack:///<region>/<server-id>`.
pub(crate) fn provider_id(region: &str, server_id: &str) -> String {
    format!("{PREFIX}{region}/{server_id}")
}

/// Parses `openstack:///<region>/<server-id>` into (region, server id).
pub(crate) fn parse_provider_id(pid: &str) -> Result<(String, String), DriverError> {
    let refuse = || {
        DriverError::invalid_argument("machine.providerID", format!("{pid:?} is not openstack:///<region>/<server-id>"))
    };
    let rest = pid.trim().strip_prefix(PREFIX).ok_or_else(refuse)?;
    let (region, id) = rest.rsplit_once('/').ok_or_else(refuse)?;
    let id_ok = is_id(id);
    let region_ok = !region.is_empty() && !region.contains('/') && region.bytes().all(|b| b.is_ascii_graphic());
    if id_ok && region_ok { Ok((region.to_string(), id.to_string())) } else { Err(refuse()) }
}

/// True for an id of the syntax every id the driver puts into a URL path has:
/// 1-64 characters of `[A-Za-z0-9_-]`. Nova, Neutron, Glance and Cinder ids
/// are UUIDs; Keystone's project ids are 32 hex digits (an LDAP or federated
/// identity backend makes other ids, still of this alphabet). No `/`, `.`,
/// `%`, `?` or `#`: such an id cannot leave its path segment, even before
/// [`segment`] encodes it.
pub(crate) fn is_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `value` (an id from the request, named `field` in the INVALID_ARGUMENT) as
/// one path segment: checked by [`is_id`], then percent-encoded ([`segment`]).
pub(crate) fn request_id(field: &str, value: &str) -> Result<String, DriverError> {
    if is_id(value) {
        Ok(segment(value))
    } else {
        Err(DriverError::invalid_argument(field, format!("{value:?} is not an OpenStack id (1-64 of [A-Za-z0-9_-])")))
    }
}

/// `value` (an id a service answered, `what` naming it) as one path segment:
/// checked by [`is_id`] (an answer that is not one is the cloud's fault:
/// INTERNAL, nothing sent), then percent-encoded ([`segment`]).
pub(crate) fn answered_id(what: &str, value: &str) -> Result<String, DriverError> {
    if is_id(value) {
        Ok(segment(value))
    } else {
        Err(DriverError::internal(format!("{what} is not an OpenStack id: nothing was sent for it")))
    }
}

/// One URL path segment: every byte but `[A-Za-z0-9_~-]` percent-encoded
/// (`/`, `?`, `#`, `%` and `.` among them), so a value cannot end its segment,
/// start a query, or make a relative segment. Only ids checked by [`is_id`]
/// reach it ([`request_id`], [`answered_id`]), which it leaves unchanged.
pub(crate) fn segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Nova's `name` filter is a regular expression searched in the name: this
/// one matches exactly one of `names`.
pub(crate) fn exact_names_filter<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let alternatives: Vec<String> = names.into_iter().map(escape).collect();
    format!("^({})$", alternatives.join("|"))
}

/// Nova's `name` filter matching every name that starts with `prefix` (a
/// regular expression searched in the name, so anchored at its start).
pub(crate) fn prefix_filter(prefix: &str) -> String {
    format!("^{}", escape(prefix))
}

/// `name` with every regex metacharacter escaped.
fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_round_trip() {
        let pid = provider_id("RegionOne", "3f2a-9b");
        assert_eq!(pid, "openstack:///RegionOne/3f2a-9b");
        assert_eq!(parse_provider_id(&pid).unwrap(), ("RegionOne".into(), "3f2a-9b".into()));
        for bad in ["aws:///r/i", "openstack:///r/", "openstack:///noslash", "openstack:///r/a b", "openstack:////id"] {
            assert_eq!(parse_provider_id(bad).unwrap_err().field(), Some("machine.providerID"), "{bad}");
        }
    }

    #[test]
    fn ids_reach_paths_checked_and_encoded() {
        assert_eq!(request_id("consumer_account", "0123abcd_E-f").unwrap(), "0123abcd_E-f");
        for bad in ["", "../../x", "a/b", "a.b", "..", "a%2Fb", "a?b", "a#b", "a b", &"a".repeat(65)] {
            let e = request_id("consumer_account", bad).unwrap_err();
            assert_eq!(e.field(), Some("consumer_account"), "{bad:?}");
        }
        assert!(answered_id("a port id", "../x").is_err());
        assert_eq!(segment("../a/b?c#d%e f"), "%2E%2E%2Fa%2Fb%3Fc%23d%25e%20f");
    }

    #[test]
    fn name_filters_are_anchored_and_escaped() {
        assert_eq!(exact_names_filter(["m-1"]), "^(m-1)$");
        assert_eq!(exact_names_filter(["a.b", "c"]), "^(a\\.b|c)$");
        assert_eq!(prefix_filter("shoot--p.1-"), "^shoot--p\\.1-");
    }
}
