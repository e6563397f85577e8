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
    let id_ok = !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let region_ok = !region.is_empty() && !region.contains('/') && region.bytes().all(|b| b.is_ascii_graphic());
    if id_ok && region_ok { Ok((region.to_string(), id.to_string())) } else { Err(refuse()) }
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
    fn name_filters_are_anchored_and_escaped() {
        assert_eq!(exact_names_filter(["m-1"]), "^(m-1)$");
        assert_eq!(exact_names_filter(["a.b", "c"]), "^(a\\.b|c)$");
        assert_eq!(prefix_filter("shoot--p.1-"), "^shoot--p\\.1-");
    }
}
