//! `maxResults` and the opaque `pageToken`/`nextPageToken` of list calls.
//! The token encodes the name of the last item returned; lists are in name order.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::error::GceError;

/// Default and maximum of `maxResults`, as on the real API.
pub(crate) const MAX_RESULTS: usize = 500;

/// Parses `maxResults` (absent or empty = 500; must be 0..=500, 0 meaning the default).
pub(crate) fn max_results(value: Option<&str>) -> Result<usize, GceError> {
    match value.filter(|v| !v.is_empty()) {
        None => Ok(MAX_RESULTS),
        Some(text) => match text.parse::<usize>() {
            Ok(0) => Ok(MAX_RESULTS),
            Ok(n) if n <= MAX_RESULTS => Ok(n),
            _ => Err(GceError::invalid_field("maxResults", text, "Must be less than or equal to 500")),
        },
    }
}

/// Encodes the token that continues after `last_name`.
pub(crate) fn token_after(last_name: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("after:{last_name}"))
}

/// Decodes a `pageToken` (absent or empty = first page) to the name to continue after.
pub(crate) fn decode(token: Option<&str>) -> Result<Option<String>, GceError> {
    let Some(token) = token.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| text.strip_prefix("after:").map(str::to_string))
        .map(Some)
        .ok_or_else(|| GceError::invalid_field("pageToken", token, "Invalid page token."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_limits() {
        assert_eq!(decode(Some(&token_after("vm-3"))), Ok(Some("vm-3".to_string())));
        assert_eq!(decode(Some("")), Ok(None));
        assert!(decode(Some("%%%")).is_err());
        assert_eq!(max_results(None), Ok(500));
        assert_eq!(max_results(Some("2")), Ok(2));
        assert!(max_results(Some("501")).is_err());
    }
}
