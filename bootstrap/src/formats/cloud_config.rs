//! `#cloud-config`: `write_files` entries for the rendered files, added to an
//! existing document by inserting text (the user's bytes are never
//! re-serialised) and verified by parsing the result back.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use yaml_rust2::yaml::Hash;
use yaml_rust2::{Yaml, YamlLoader};

use crate::error::BootstrapError;
use crate::render::RenderedFile;

const FORMAT: &str = "cloud-config";
const KEY: &str = "write_files";

/// A complete `#cloud-config` document holding only the rendered files.
pub(crate) fn fresh(files: &[RenderedFile]) -> String {
    format!("#cloud-config\n{KEY}:\n{}", items_text(files, "", "\n"))
}

/// Adds the files to `write_files` of `data`.
///
/// `Ok(None)` when the document's layout does not allow a verified textual
/// insertion (flow style, quoted key, ...): the caller then delivers the
/// files as a separate cloud-config part instead.
pub(crate) fn merge(data: &[u8], files: &[RenderedFile]) -> Result<Option<Vec<u8>>, BootstrapError> {
    let text = std::str::from_utf8(data)
        .map_err(|e| BootstrapError::malformed(FORMAT, format!("not UTF-8 at byte {}", e.valid_up_to())))?;
    let root = parse_root(text)?;
    let key = Yaml::String(KEY.to_owned());
    let mut expected = root.clone();
    let had_key = match expected.get_mut(&key) {
        Some(Yaml::Array(items)) => {
            items.extend(items_yaml(files));
            true
        }
        Some(value @ Yaml::Null) => {
            *value = Yaml::Array(items_yaml(files));
            true
        }
        Some(_) => {
            return Err(BootstrapError::malformed(FORMAT, "`write_files` is not a list"));
        }
        None => {
            expected.insert(key, Yaml::Array(items_yaml(files)));
            false
        }
    };
    let Some(candidate) = insert_text(text, files, had_key) else {
        return Ok(None);
    };
    let verified = matches!(
        YamlLoader::load_from_str(&candidate).as_deref(),
        Ok([Yaml::Hash(merged)]) if *merged == expected
    );
    Ok(verified.then(|| candidate.into_bytes()))
}

/// The document's root mapping (empty for a document of comments only).
fn parse_root(text: &str) -> Result<Hash, BootstrapError> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| {
        BootstrapError::malformed(
            FORMAT,
            format!("invalid YAML at line {} column {}: {}", e.marker().line(), e.marker().col() + 1, e.info()),
        )
    })?;
    match docs.as_slice() {
        [] | [Yaml::Null] => Ok(Hash::new()),
        [Yaml::Hash(root)] => Ok(root.clone()),
        [_] => Err(BootstrapError::malformed(FORMAT, "the document is not a mapping")),
        _ => Err(BootstrapError::malformed(FORMAT, "more than one YAML document")),
    }
}

/// The document with the entries inserted at the end of the top-level
/// `write_files` block sequence, or a new `write_files` key appended.
fn insert_text(text: &str, files: &[RenderedFile], had_key: bool) -> Option<String> {
    let eol = if text.lines().next().is_some_and(|l| l.ends_with('\r')) { "\r\n" } else { "\n" };
    let mut out = String::with_capacity(text.len() + 4096);
    if !had_key {
        out.push_str(text);
        if !text.is_empty() && !text.ends_with('\n') {
            out.push_str(eol);
        }
        out.push_str(&format!("{KEY}:{eol}"));
        out.push_str(&items_text(files, "", eol));
        return Some(out);
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let key_line = lines.iter().position(|l| is_block_key_line(l))?;
    let mut indent: Option<&str> = None;
    let mut end = lines.len();
    for (i, line) in lines.iter().enumerate().skip(key_line + 1) {
        let content = line.trim_end_matches(['\n', '\r']);
        let trimmed = content.trim_start_matches([' ', '\t']);
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let leading = &content[..content.len() - trimmed.len()];
        let is_item = trimmed == "-" || trimmed.starts_with("- ");
        if leading.is_empty() && !is_item {
            end = i;
            break;
        }
        if is_item && indent.is_none() {
            indent = Some(leading);
        }
    }
    let before: String = lines[..end].concat();
    out.push_str(&before);
    if !before.ends_with('\n') {
        out.push_str(eol);
    }
    out.push_str(&items_text(files, indent.unwrap_or(""), eol));
    out.push_str(&lines[end..].concat());
    Some(out)
}

/// `write_files:` at column 0 with nothing but a comment after the colon.
fn is_block_key_line(line: &str) -> bool {
    let Some(rest) = line.strip_prefix(KEY) else {
        return false;
    };
    let Some(after_colon) = rest.trim_start_matches([' ', '\t']).strip_prefix(':') else {
        return false;
    };
    let after = after_colon.trim();
    after.is_empty() || (after.starts_with('#') && after_colon.starts_with([' ', '\t']))
}

/// Base64 of the content, wrapped at 76 characters (cloud-init's decoder
/// skips the line breaks).
fn wrapped_base64(content: &[u8]) -> Vec<String> {
    STANDARD.encode(content).as_bytes().chunks(76).map(|c| String::from_utf8_lossy(c).into_owned()).collect()
}

fn items_text(files: &[RenderedFile], indent: &str, eol: &str) -> String {
    let mut out = String::new();
    for f in files {
        let path = quoted(&f.path);
        let mode = quoted(&f.octal_mode());
        out.push_str(&format!("{indent}- path: {path}{eol}"));
        out.push_str(&format!("{indent}  owner: \"root:root\"{eol}"));
        out.push_str(&format!("{indent}  permissions: {mode}{eol}"));
        out.push_str(&format!("{indent}  encoding: b64{eol}"));
        out.push_str(&format!("{indent}  content: |{eol}"));
        for line in wrapped_base64(&f.content) {
            out.push_str(&format!("{indent}    {line}{eol}"));
        }
    }
    out
}

/// The values [`items_text`] denotes, for verification.
fn items_yaml(files: &[RenderedFile]) -> Vec<Yaml> {
    files
        .iter()
        .map(|f| {
            let mut item = Hash::new();
            let mut put = |k: &str, v: String| {
                item.insert(Yaml::String(k.to_owned()), Yaml::String(v));
            };
            put("path", f.path.clone());
            put("owner", "root:root".to_owned());
            put("permissions", f.octal_mode());
            put("encoding", "b64".to_owned());
            put("content", wrapped_base64(&f.content).iter().map(|l| format!("{l}\n")).collect());
            Yaml::Hash(item)
        })
        .collect()
}

/// A YAML double-quoted scalar (JSON string syntax is valid YAML).
fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}
