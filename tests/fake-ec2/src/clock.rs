//! Wall-clock timestamps in the ISO 8601 form EC2 uses (`2024-05-01T12:00:00.000Z`).

use std::time::SystemTime;

/// Formats a time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn iso8601(time: SystemTime) -> String {
    fake_cloud_support::utc_timestamp(time, "Z")
}

/// Formats a time as `YYYY-MM-DD HH:MM:SS GMT`, as EC2 writes it in a StateTransitionReason.
pub(crate) fn gmt(time: SystemTime) -> String {
    let iso = iso8601(time);
    let seconds = iso.split('.').next().unwrap_or(&iso);
    format!("{} GMT", seconds.replace('T', " "))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(iso8601(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_709_210_096_789); // 2024-02-29T12:34:56.789Z
        assert_eq!(iso8601(t), "2024-02-29T12:34:56.789Z");
        assert_eq!(gmt(t), "2024-02-29 12:34:56 GMT");
    }
}
