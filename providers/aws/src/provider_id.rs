//! providerID ⇄ (region, instance id): `aws:///<region>/<instance-id>`.

use machine_driver_api::{DriverError, Result};

/// Formats the providerID of an instance.
pub(crate) fn encode(region: &str, instance_id: &str) -> String {
    format!("aws:///{region}/{instance_id}")
}

/// Splits a providerID into (region, instance id). Accepts the forms the Go
/// provider produced (`aws:///<region>/<id>`) and, like it, takes the last
/// path segment as the instance id.
pub(crate) fn decode(provider_id: &str) -> Result<(String, String)> {
    let bad = || DriverError::invalid_argument("machine.providerID", "expected aws:///<region>/<instance-id>");
    let rest = provider_id.strip_prefix("aws://").ok_or_else(bad)?;
    let mut parts = rest.trim_start_matches('/').split('/').filter(|s| !s.is_empty());
    let (region, id) = match (parts.next(), parts.next(), parts.next()) {
        (Some(region), Some(id), None) => (region, id),
        _ => return Err(bad()),
    };
    if !id.starts_with("i-") {
        return Err(bad());
    }
    Ok((region.to_string(), id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let p = encode("eu-west-1", "i-0abc");
        assert_eq!(p, "aws:///eu-west-1/i-0abc");
        assert_eq!(decode(&p).unwrap(), ("eu-west-1".to_string(), "i-0abc".to_string()));
        for bad in ["gce:///x/i-1", "aws:///eu-west-1", "aws:///eu-west-1/vol-1", "aws:///a/b/i-1"] {
            let e = decode(bad).unwrap_err();
            assert_eq!(e.field(), Some("machine.providerID"), "{bad}");
        }
    }
}
