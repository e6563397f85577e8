//! providerID ⇄ (region, instance id): `aws:///<region>/<instance-id>`, and
//! the syntax of the ids request data may carry (regions, instance ids,
//! account ids), checked before any of them reaches EC2 (the region becomes
//! the endpoint's host name and the SigV4 scope, the instance id a filter
//! value).

use machine_driver_api::{DriverError, Result};

/// Formats the providerID of an instance.
pub(crate) fn encode(region: &str, instance_id: &str) -> String {
    format!("aws:///{region}/{instance_id}")
}

/// Splits a providerID into (region, instance id). Accepts the forms the Go
/// provider produced (`aws:///<region>/<id>`), an availability zone in place
/// of the region included; the region must look like one ([`is_region`]) and
/// the id like an EC2 instance id ([`is_instance_id`]).
pub(crate) fn decode(provider_id: &str) -> Result<(String, String)> {
    let bad = || DriverError::invalid_argument("machine.providerID", "expected aws:///<region>/<instance-id>");
    let rest = provider_id.strip_prefix("aws://").ok_or_else(bad)?;
    let mut parts = rest.trim_start_matches('/').split('/').filter(|s| !s.is_empty());
    let (region, id) = match (parts.next(), parts.next(), parts.next()) {
        (Some(region), Some(id), None) => (region, id),
        _ => return Err(bad()),
    };
    if !is_instance_id(id) || !is_region(region) {
        return Err(bad());
    }
    Ok((region.to_string(), id.to_string()))
}

/// An EC2 instance id: `i-` and 8 or 17 lowercase hex digits.
pub(crate) fn is_instance_id(id: &str) -> bool {
    id.strip_prefix("i-").is_some_and(|hex| {
        matches!(hex.len(), 8 | 17) && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// An AWS region (or availability zone) name: 1-32 lowercase letters,
/// digits and hyphens, starting with a letter and not ending with a hyphen
/// (`eu-west-1`, `us-gov-west-1`, `eu-west-1a`). Nothing of that syntax can
/// leave the endpoint's host label.
pub(crate) fn is_region(region: &str) -> bool {
    (1..=32).contains(&region.len())
        && region.starts_with(|c: char| c.is_ascii_lowercase())
        && !region.ends_with('-')
        && region.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// An AWS account id: 12 digits.
pub(crate) fn is_account_id(account: &str) -> bool {
    account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit())
}

/// INVALID_ARGUMENT naming `field` unless `region` is a region name ([`is_region`]).
pub(crate) fn check_region(field: &str, region: &str) -> Result<()> {
    if is_region(region) {
        Ok(())
    } else {
        Err(DriverError::invalid_argument(field, "must be an AWS region name such as eu-west-1"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let p = encode("eu-west-1", "i-0123456789abcdef0");
        assert_eq!(p, "aws:///eu-west-1/i-0123456789abcdef0");
        assert_eq!(decode(&p).unwrap(), ("eu-west-1".to_string(), "i-0123456789abcdef0".to_string()));
        assert_eq!(decode("aws:///eu-west-1a/i-1234abcd").unwrap().1, "i-1234abcd");
        for bad in [
            "gce:///x/i-1",
            "aws:///eu-west-1",
            "aws:///eu-west-1/vol-1",
            "aws:///a/b/i-1",
            "aws:///eu-west-1/i-0abc",
            "aws:///eu-west-1/i-*",
            "aws:///eu-west-1/i-0123456789ABCDEF0",
            "aws:///evil.example.com/i-0123456789abcdef0",
            "aws:///../i-0123456789abcdef0",
            "aws:///eu-west-1/../i-0123456789abcdef0",
            "aws:///EU-WEST-1/i-0123456789abcdef0",
        ] {
            let e = decode(bad).unwrap_err();
            assert_eq!(e.field(), Some("machine.providerID"), "{bad}");
        }
    }

    #[test]
    fn id_syntax() {
        assert!(is_region("us-gov-west-1") && is_region("cn-north-1") && !is_region("") && !is_region("eu-west-1-"));
        assert!(!is_region("eu_west") && !is_region("1eu") && !is_region("eu-west-1/x"));
        assert!(is_account_id("123456789012") && !is_account_id("12345678901") && !is_account_id("12345678901a"));
        assert_eq!(check_region("region", "a/b").unwrap_err().field(), Some("region"));
    }
}
