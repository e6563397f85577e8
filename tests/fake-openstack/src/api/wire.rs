//! Small wire helpers: version numbers (percent-encoding and query strings are
//! [`fake_cloud_support::wire`]'s).

/// Parses `X.Y` into numbers.
pub(crate) fn parse_version(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.trim().split_once('.')?;
    if major.is_empty() || minor.is_empty() || !major.bytes().chain(minor.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("2.96"), Some((2, 96)));
        assert_eq!(parse_version("2."), None);
        assert_eq!(parse_version("x.1"), None);
    }
}
