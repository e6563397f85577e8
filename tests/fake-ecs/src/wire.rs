//! Small wire helpers: request ids, resource ids and ECS's timestamps (percent-encoding
//! and form parsing are [`fake_cloud_support::wire`]'s).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::Rng;

/// A fresh request id in ECS's shape (`473469C7-AA6F-4DC5-B3DB-A3DC0DE3C83E`).
pub(crate) fn request_id() -> String {
    uuid::Uuid::new_v4().to_string().to_ascii_uppercase()
}

/// `prefix` followed by `len` random lowercase letters and digits.
pub(crate) fn random_id(prefix: &str, len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let mut id = String::with_capacity(prefix.len() + len);
    id.push_str(prefix);
    for _ in 0..len {
        id.push(char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]));
    }
    id
}

/// A new instance id: `i-gw8` plus 17 random characters (20 after `i-`, as in eu-central-1).
pub(crate) fn instance_id() -> String {
    random_id("i-gw8", 17)
}

/// A new disk id: `d-gw8` plus 17 random characters.
pub(crate) fn disk_id() -> String {
    random_id("d-gw8", 17)
}

/// A new ENI id: `eni-gw8` plus 17 random characters.
pub(crate) fn eni_id() -> String {
    random_id("eni-gw8", 17)
}

/// A RunInstances `OrderId` (digits).
pub(crate) fn order_id() -> String {
    let mut rng = rand::rng();
    (0..15).map(|i| char::from(b'0' + if i == 0 { rng.random_range(1..10) } else { rng.random_range(0..10) })).collect()
}

/// ECS's `CreationTime` shape: `2025-01-01T10:00Z` (UTC, minutes).
pub(crate) fn creation_time(at: SystemTime) -> String {
    let full = fake_cloud_support::utc_timestamp(at, "Z");
    format!("{}Z", &full[..16.min(full.len())])
}

/// A request timestamp as signed (`2025-01-01T10:00:00Z`).
pub(crate) fn request_time(at: SystemTime) -> String {
    let full = fake_cloud_support::utc_timestamp(at, "Z");
    format!("{}Z", &full[..19.min(full.len())])
}

/// Parses `YYYY-MM-DDTHH:MM:SSZ` (optionally with fractional seconds) as UTC.
pub(crate) fn parse_request_time(text: &str) -> Option<SystemTime> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date_parts = date.split('-');
    let year: i64 = date_parts.next()?.parse().ok()?;
    let month: u32 = date_parts.next()?.parse().ok()?;
    let day: u32 = date_parts.next()?.parse().ok()?;
    if date_parts.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let time = time.split_once('.').map_or(time, |(whole, _)| whole);
    let mut time_parts = time.split(':');
    let hour: u64 = time_parts.next()?.parse().ok()?;
    let minute: u64 = time_parts.next()?.parse().ok()?;
    let second: u64 = time_parts.next()?.parse().ok()?;
    if time_parts.next().is_some() || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = u64::try_from(days_from_civil(year, month, day)).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(days * 86_400 + hour * 3600 + minute * 60 + second))
}

/// Days since 1970-01-01 of a civil date, after Howard Hinnant's algorithm.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = i64::from(month);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_parse_and_format() {
        let t = parse_request_time("2024-02-29T12:34:56Z").expect("parses");
        assert_eq!(request_time(t), "2024-02-29T12:34:56Z");
        assert_eq!(creation_time(t), "2024-02-29T12:34Z");
        assert_eq!(parse_request_time("1970-01-01T00:00:00.123Z"), Some(UNIX_EPOCH));
        assert!(parse_request_time("2024-02-29 12:34:56").is_none());
        assert!(parse_request_time("2024-13-01T00:00:00Z").is_none());
        let now = SystemTime::now();
        let round = parse_request_time(&request_time(now)).expect("parses");
        assert!(now.duration_since(round).unwrap_or_default() < Duration::from_secs(1));
    }

    #[test]
    fn ids_have_ecs_shape() {
        let id = instance_id();
        assert_eq!(id.len(), 22);
        assert!(id.starts_with("i-gw8"));
        assert!(id[2..].bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
        assert_eq!(order_id().len(), 15);
        assert_eq!(request_id().len(), 36);
    }
}
