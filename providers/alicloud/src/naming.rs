//! The providerID (`<region>.<instance-id>`) and node name (`i-abc` → `izabcz`),
//! byte-identical to the Go provider's.

use machine_driver_api::DriverError;

/// The tag carrying the machine's uid on the instance.
pub(crate) const MACHINE_UID_TAG: &str = "mcm.gardener.cloud/machine-uid";

/// `<region>.<instance-id>`.
pub(crate) fn provider_id(region: &str, instance_id: &str) -> String {
    format!("{region}.{instance_id}")
}

/// The Go provider's node name: the instance id with its first `-` replaced by
/// `z`, and a `z` appended (ECS's default host name of the instance).
pub(crate) fn node_name(instance_id: &str) -> String {
    format!("{}z", instance_id.replacen('-', "z", 1))
}

/// True for a region id (`eu-central-1`, `cn-hangzhou`): it becomes part of
/// the ECS host name, so nothing else may pass.
pub(crate) fn is_region(region: &str) -> bool {
    let mut parts = region.split('-');
    parts.next().is_some_and(|p| p.len() >= 2 && p.bytes().all(|b| b.is_ascii_lowercase()))
        && region.contains('-')
        && parts.all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
}

/// True for an instance id (`i-` and lowercase letters and digits, as ECS
/// writes them): the only ids that go into a `DescribeInstances` id list.
pub(crate) fn is_instance_id(id: &str) -> bool {
    id.strip_prefix("i-")
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
}

/// Parses `<region>.<instance-id>` into (region, instance id).
pub(crate) fn parse_provider_id(pid: &str) -> Result<(String, String), DriverError> {
    match pid.trim().rsplit_once('.') {
        Some((region, id)) if is_region(region) && is_instance_id(id) => Ok((region.to_string(), id.to_string())),
        _ => Err(DriverError::invalid_argument(
            "machine.providerID",
            format!("{pid:?} is not of the form <region>.<instance-id>"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_as_the_go_provider_writes_them() {
        assert_eq!(provider_id("eu-central-1", "i-gw8abc"), "eu-central-1.i-gw8abc");
        assert_eq!(node_name("i-gw8abc"), "izgw8abcz");
        assert_eq!(parse_provider_id("eu-central-1.i-gw8abc").unwrap(), ("eu-central-1".into(), "i-gw8abc".into()));
        assert!(parse_provider_id("i-gw8abc").is_err());
        assert!(parse_provider_id("eu-central-1.x").is_err());
        assert!(parse_provider_id("x.evil.com/p?.i-abc").is_err());
        assert!(is_region("cn-hangzhou") && is_region("eu-central-1") && !is_region("evil.com") && !is_region("eu"));
    }
}
