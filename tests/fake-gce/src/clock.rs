//! Wall-clock timestamps in the RFC 3339 form Compute Engine returns
//! (`2024-01-02T03:04:05.678-08:00`); the fake always answers in UTC (`+00:00`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Formats a system time as RFC 3339 with millisecond precision and a `+00:00` offset.
pub(crate) fn rfc3339(at: SystemTime) -> String {
    fake_cloud_support::utc_timestamp(at, "+00:00")
}

/// Milliseconds since the Unix epoch, as used in operation names.
pub(crate) fn epoch_millis(at: SystemTime) -> u128 {
    at.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000+00:00");
        let t = UNIX_EPOCH + Duration::from_millis(1_709_210_096_789);
        assert_eq!(rfc3339(t), "2024-02-29T12:34:56.789+00:00");
    }
}
