//! Small wire helpers: percent-decoding, query strings and version numbers.

/// Percent-decodes `text` (`+` is a space in query strings only; see [`parse_query`]).
pub(crate) fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        if byte == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(value) = u8::from_str_radix(hex, 16)
        {
            out.push(value);
            i += 3;
            continue;
        }
        out.push(byte);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses `a=1&b=2` into decoded pairs (`+` means space).
pub(crate) fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(&key.replace('+', " ")), decode(&value.replace('+', " ")))
        })
        .collect()
}

/// Percent-encodes a query value (RFC 3986 unreserved characters stay).
pub(crate) fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

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
    fn query_and_versions() {
        assert_eq!(
            parse_query("name=%5Eweb-&tags=a%2Cb&x"),
            vec![("name".into(), "^web-".into()), ("tags".into(), "a,b".into()), ("x".into(), String::new())]
        );
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
        assert_eq!(parse_version("2.96"), Some((2, 96)));
        assert_eq!(parse_version("2."), None);
        assert_eq!(parse_version("x.1"), None);
    }
}
