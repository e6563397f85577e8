//! Percent-encoding on the wire, the one implementation the fakes share.
//!
//! Three shapes occur in the clouds the fakes imitate:
//!
//! - [`encode_component`]: RFC 3986 §2.3 — only the *unreserved* set
//!   (`A-Z a-z 0-9 - . _ ~`) stays, every other byte of the UTF-8 text becomes
//!   `%XX` with uppercase hex (§2.1), space included (`%20`, never `+`). This is
//!   the encoding Alibaba Cloud's signatures require (`percentEncode` of the
//!   RPC signature, "Signature mechanism", Alibaba Cloud API reference) and the
//!   one a safe query value or link needs (OpenStack `next` links).
//! - [`decode_component`]: RFC 3986 §2.1 percent-decoding of one path segment:
//!   `%XX` is a byte, `+` is a plus sign.
//! - [`decode_form_component`] and [`parse_form`]: the
//!   `application/x-www-form-urlencoded` parser of the WHATWG URL standard
//!   (§5.1): `+` is a space, then `%XX` is a byte. AWS Query requests (EC2,
//!   STS), Alibaba RPC requests and OpenStack query strings are read this way.
//!
//! Malformed sequences (`%` not followed by two hex digits) stay as they are,
//! as both references prescribe, and bytes that are not UTF-8 once decoded
//! become U+FFFD.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// Every byte but RFC 3986's unreserved characters (`ALPHA DIGIT - . _ ~`).
const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// Percent-encodes `value` per RFC 3986: unreserved characters stay, every
/// other UTF-8 byte (space included) becomes `%XX` with uppercase hex.
pub fn encode_component(value: &str) -> String {
    utf8_percent_encode(value, NOT_UNRESERVED).to_string()
}

/// Percent-decodes one URI component per RFC 3986 (`+` stays a plus sign);
/// malformed `%` sequences stay as they are.
pub fn decode_component(text: &str) -> String {
    percent_decode_str(text).decode_utf8_lossy().into_owned()
}

/// Decodes one `application/x-www-form-urlencoded` name or value: `+` is a
/// space, then `%XX` is a byte; malformed `%` sequences stay as they are.
pub fn decode_form_component(text: &str) -> String {
    if text.contains('+') { decode_component(&text.replace('+', " ")) } else { decode_component(text) }
}

/// The `name=value` pairs of a form body or query string, decoded with
/// [`decode_form_component`], in order; empty pieces are skipped and a piece
/// without `=` is a name with an empty value.
pub fn parse_form(raw: &str) -> Vec<(String, String)> {
    raw.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode_form_component(name), decode_form_component(value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_keeps_only_the_unreserved_set() {
        assert_eq!(encode_component("AZaz09-._~"), "AZaz09-._~");
        assert_eq!(encode_component("a b+c/~*"), "a%20b%2Bc%2F~%2A");
        assert_eq!(encode_component(":/?#[]@!$&'()*,;="), "%3A%2F%3F%23%5B%5D%40%21%24%26%27%28%29%2A%2C%3B%3D");
        assert_eq!(encode_component("%"), "%25");
        assert_eq!(encode_component("[\"i-1\"]"), "%5B%22i-1%22%5D");
    }

    #[test]
    fn encoding_is_utf8_with_uppercase_hex() {
        assert_eq!(encode_component("é"), "%C3%A9");
        assert_eq!(encode_component("日"), "%E6%97%A5");
        assert_eq!(decode_component("%c3%a9%E6%97%A5"), "é日");
        for text in ["a b+c", "é/日?x=1&y", "%41", "~*'"] {
            assert_eq!(decode_component(&encode_component(text)), text);
            assert_eq!(decode_form_component(&encode_component(text)), text);
        }
    }

    #[test]
    fn plus_is_a_space_only_in_forms() {
        assert_eq!(decode_component("a+b%20c"), "a+b c");
        assert_eq!(decode_form_component("a+b%20c%2Bd"), "a b c+d");
    }

    #[test]
    fn malformed_sequences_stay_as_they_are() {
        assert_eq!(decode_form_component("a+b%2Bc%zz%4"), "a b+c%zz%4");
        assert_eq!(decode_component("%"), "%");
        assert_eq!(decode_component("%+1%-1%g0"), "%+1%-1%g0");
        assert_eq!(decode_component("100%"), "100%");
        assert_eq!(decode_component("%FF"), "\u{FFFD}");
        assert_eq!(decode_component("%E6%97"), "\u{FFFD}");
    }

    #[test]
    fn forms_split_into_decoded_pairs() {
        assert_eq!(
            parse_form("A=1&&Tag.1.Key=k%20x&Empty=&Flag&f%3Dx=a=b&Filter.1.Value.1=a+b"),
            vec![
                ("A".into(), "1".into()),
                ("Tag.1.Key".into(), "k x".into()),
                ("Empty".into(), String::new()),
                ("Flag".into(), String::new()),
                ("f=x".into(), "a=b".into()),
                ("Filter.1.Value.1".into(), "a b".into()),
            ]
        );
        assert!(parse_form("").is_empty());
    }
}
