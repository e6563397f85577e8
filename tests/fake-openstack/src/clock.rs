//! Timestamps in the formats the OpenStack services answer with.

use std::time::SystemTime;

use fake_cloud_support::utc_timestamp;

/// `YYYY-MM-DDTHH:MM:SS.mmm` (UTC) of `at`.
fn millis(at: SystemTime) -> String {
    utc_timestamp(at, "")
}

/// Nova, Neutron and Glance: `2026-12-01T10:00:00Z`.
pub(crate) fn seconds(at: SystemTime) -> String {
    let text = millis(at);
    format!("{}Z", text.get(..19).unwrap_or(&text))
}

/// Keystone: `2026-12-01T10:00:00.000000Z`.
pub(crate) fn micros(at: SystemTime) -> String {
    format!("{}000Z", millis(at))
}

/// Cinder, and Nova's `OS-SRV-USG:launched_at` / `terminated_at`: `2026-12-01T10:00:00.000000`
/// (no zone suffix; Nova prints the naive UTC datetime of its database).
pub(crate) fn cinder(at: SystemTime) -> String {
    format!("{}000", millis(at))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn formats() {
        let at = UNIX_EPOCH + Duration::from_millis(1_709_210_096_789);
        assert_eq!(seconds(at), "2024-02-29T12:34:56Z");
        assert_eq!(micros(at), "2024-02-29T12:34:56.789000Z");
        assert_eq!(cinder(at), "2024-02-29T12:34:56.789000");
    }
}
