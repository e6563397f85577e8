//! MIME multipart: recognising an existing message, appending a part to it
//! without touching the existing parts, and building a new message.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::error::BootstrapError;

/// cloud-init merge rule for our cloud-config part: append lists (so
/// `write_files` from earlier parts is kept) and never replace other keys.
pub(crate) const MERGE_TYPE: &str = "list(append)+dict(no_replace,recurse_list)+str()";

/// The top-level facts of an existing multipart message.
#[derive(Debug)]
pub(crate) struct Multipart {
    boundary: String,
    /// The line ending its header uses (`\r\n` or `\n`).
    eol: &'static str,
}

/// One part of a message to build.
pub(crate) struct Part<'a> {
    pub(crate) content_type: &'a str,
    pub(crate) filename: &'a str,
    pub(crate) merge_type: Option<&'a str>,
    pub(crate) body: &'a [u8],
}

/// `Ok(None)` when `data` does not start with a MIME header block.
pub(crate) fn parse_top_level(data: &[u8]) -> Result<Option<Multipart>, BootstrapError> {
    let Some(headers) = header_block(data) else {
        return Ok(None);
    };
    let first_line = data.split(|b| *b == b'\n').next().unwrap_or_default();
    let eol = if first_line.ends_with(b"\r") { "\r\n" } else { "\n" };
    let is_mime =
        headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-type") || n.eq_ignore_ascii_case("mime-version"));
    if !is_mime {
        return Ok(None);
    }
    let Some((_, content_type)) = headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("content-type")) else {
        return Err(BootstrapError::unsupported("MIME message without a Content-Type"));
    };
    let mut params = content_type.split(';');
    let media_type = params.next().unwrap_or_default().trim();
    if !media_type.to_ascii_lowercase().starts_with("multipart/") {
        return Err(BootstrapError::unsupported("MIME message that is not multipart"));
    }
    let boundary = params
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("boundary"))
        .map(|(_, v)| v.trim().trim_matches('"').to_owned())
        .filter(|b| !b.is_empty() && b.len() <= 70)
        .ok_or_else(|| BootstrapError::malformed("MIME multipart", "missing or invalid boundary parameter"))?;
    Ok(Some(Multipart { boundary, eol }))
}

/// Parses the header block at the start of `data`: unfolded `(name, value)`
/// pairs, or `None` when the first line is not a header field.
fn header_block(data: &[u8]) -> Option<Vec<(String, String)>> {
    let mut headers: Vec<(String, String)> = Vec::new();
    for raw in data.split(|b| *b == b'\n') {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.is_empty() {
            break;
        }
        let line = std::str::from_utf8(line).ok()?;
        if line.starts_with([' ', '\t']) {
            let (_, value) = headers.last_mut()?;
            value.push(' ');
            value.push_str(line.trim());
            continue;
        }
        let (name, value) = line.split_once(':')?;
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return None;
        }
        headers.push((name.to_owned(), value.trim().to_owned()));
    }
    (!headers.is_empty()).then_some(headers)
}

/// Inserts `part` before the closing delimiter of `data`; every existing
/// byte stays where it was.
pub(crate) fn append_part(data: &[u8], multipart: &Multipart, part: &Part<'_>) -> Vec<u8> {
    let eol = multipart.eol;
    let delimiter = format!("--{}", multipart.boundary);
    let closing = format!("\n{delimiter}--");
    let rendered = render_part(&delimiter, part, eol);
    let mut out = Vec::with_capacity(data.len() + rendered.len() + 64);
    match find_last(data, closing.as_bytes()) {
        Some(at) => {
            // Insert right after the line break that belongs to the closing delimiter.
            out.extend_from_slice(&data[..=at]);
            out.extend_from_slice(&rendered);
            out.extend_from_slice(&data[at + 1..]);
        }
        None => {
            // No closing delimiter: the last part ran to the end. The line
            // break added here belongs to the new delimiter, so that part's
            // body is unchanged.
            out.extend_from_slice(data);
            out.extend_from_slice(eol.as_bytes());
            out.extend_from_slice(&rendered);
            out.extend_from_slice(format!("{delimiter}--{eol}").as_bytes());
        }
    }
    out
}

/// Builds a new `multipart/mixed` message from `parts`.
pub(crate) fn build(parts: &[Part<'_>]) -> Vec<u8> {
    let boundary = choose_boundary(parts);
    let delimiter = format!("--{boundary}");
    let mut out = format!("Content-Type: multipart/mixed; boundary=\"{boundary}\"\nMIME-Version: 1.0\n\n").into_bytes();
    for part in parts {
        out.extend_from_slice(&render_part(&delimiter, part, "\n"));
    }
    out.extend_from_slice(format!("{delimiter}--\n").as_bytes());
    out
}

/// `--boundary`, the part's headers, a blank line, the body and the line
/// break that belongs to the next delimiter.
fn render_part(delimiter: &str, part: &Part<'_>, eol: &str) -> Vec<u8> {
    let seven_bit = is_seven_bit(part.body);
    let charset = if seven_bit { "us-ascii" } else { "utf-8" };
    let encoding = if seven_bit { "7bit" } else { "base64" };
    let mut out = format!(
        "{delimiter}{eol}Content-Type: {}; charset=\"{charset}\"{eol}MIME-Version: 1.0{eol}\
         Content-Transfer-Encoding: {encoding}{eol}\
         Content-Disposition: attachment; filename=\"{}\"{eol}",
        part.content_type, part.filename
    );
    if let Some(merge_type) = part.merge_type {
        out.push_str(&format!("Merge-Type: {merge_type}{eol}"));
    }
    out.push_str(eol);
    let mut out = out.into_bytes();
    if seven_bit {
        out.extend_from_slice(part.body);
    } else {
        for chunk in STANDARD.encode(part.body).as_bytes().chunks(76) {
            out.extend_from_slice(chunk);
            out.extend_from_slice(eol.as_bytes());
        }
    }
    out.extend_from_slice(eol.as_bytes());
    out
}

/// Printable ASCII with LF line breaks and lines of at most 998 bytes: safe
/// to carry unencoded, so the original bytes are what cloud-init reads.
fn is_seven_bit(body: &[u8]) -> bool {
    body.iter().all(|b| matches!(b, b'\n' | b'\t' | 0x20..=0x7e))
        && body.split(|b| *b == b'\n').all(|line| line.len() <= 998)
}

/// A boundary that occurs in no part body.
fn choose_boundary(parts: &[Part<'_>]) -> String {
    let mut n = 0u32;
    loop {
        let candidate =
            if n == 0 { "MACHINE-DRIVER-BOUNDARY".to_owned() } else { format!("MACHINE-DRIVER-BOUNDARY-{n}") };
        let needle = format!("--{candidate}");
        if !parts.iter().any(|p| find_last(p.body, needle.as_bytes()).is_some()) {
            return candidate;
        }
        n += 1;
    }
}

fn find_last(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    haystack.windows(needle.len()).rposition(|w| w == needle)
}
