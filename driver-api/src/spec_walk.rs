//! The providerSpec keys a spec type accepts, found by walking its
//! `Deserialize` implementation (a tracing deserializer that answers every
//! struct with all of its fields), so that a field added to the type is seen
//! by the tests that every accepted key is applied or listed as ignored.
//!
//! Paths are the JSON keys (serde renames included) joined by `.`, with `[]`
//! for a list's elements: `networkInterfaces[].subnetID`. Only leaves are
//! listed (a nested object's own key is not); a map (`tags`) and a list of
//! scalars (`securityGroupIDs`) are leaves.
//!
//! The other side of those tests is the provider's README: [`readme_table`]
//! reads the field table under a heading (first cells in the notation of
//! [`expand_notation`], normalised as [`normalise_readme_path`] says), and
//! [`merge_patch`] builds the probe classes that change one key at a time.

use std::cell::RefCell;
use std::collections::BTreeSet;

use serde::de::value::{Error, StrDeserializer};
use serde::de::{DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};

/// Every leaf key path `T` accepts, or why walking it failed (a type whose
/// `Deserialize` refuses the zero values the walk feeds it).
pub fn field_paths<T: DeserializeOwned>() -> Result<BTreeSet<String>, String> {
    let out = RefCell::new(BTreeSet::new());
    let tracer = Tracer { prefix: String::new(), leaf: String::new(), out: &out };
    T::deserialize(tracer).map_err(|e| format!("walking the spec type failed: {e}"))?;
    Ok(out.into_inner())
}

/// Deserializes one value at a path: structs with all of their fields, lists
/// with one element, maps empty, scalars with a zero value.
struct Tracer<'a> {
    /// The path children are named under.
    prefix: String,
    /// What is recorded when this value is a leaf (a list's element records its list).
    leaf: String,
    out: &'a RefCell<BTreeSet<String>>,
}

impl Tracer<'_> {
    fn record(&self) {
        if !self.leaf.is_empty() {
            self.out.borrow_mut().insert(self.leaf.clone());
        }
    }
}

macro_rules! scalar {
    ($($method:ident => $visit:ident($($value:expr)?)),* $(,)?) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            self.record();
            visitor.$visit($($value)?)
        })*
    };
}

impl<'de> serde::Deserializer<'de> for Tracer<'_> {
    type Error = Error;

    scalar! {
        deserialize_any => visit_unit(),
        deserialize_ignored_any => visit_unit(),
        deserialize_unit => visit_unit(),
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_i8(0),
        deserialize_i16 => visit_i16(0),
        deserialize_i32 => visit_i32(0),
        deserialize_i64 => visit_i64(0),
        deserialize_u8 => visit_u8(0),
        deserialize_u16 => visit_u16(0),
        deserialize_u32 => visit_u32(0),
        deserialize_u64 => visit_u64(0),
        deserialize_f32 => visit_f32(0.0),
        deserialize_f64 => visit_f64(0.0),
        deserialize_char => visit_char('x'),
        deserialize_str => visit_str(""),
        deserialize_string => visit_string(String::new()),
        deserialize_identifier => visit_str(""),
        deserialize_bytes => visit_bytes(&[]),
        deserialize_byte_buf => visit_byte_buf(Vec::new()),
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, Error> {
        self.record();
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let element = Tracer { prefix: format!("{}[]", self.prefix), leaf: self.leaf.clone(), out: self.out };
        visitor.visit_seq(One(Some(element)))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.record();
        visitor.visit_map(Fields { fields: Vec::new(), next: 0, prefix: String::new(), out: self.out })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_map(Fields { fields: without_case_aliases(fields), next: 0, prefix: self.prefix, out: self.out })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        _variants: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Error> {
        Err(serde::de::Error::custom(format!("enum {name} at {}: not walked", self.leaf)))
    }
}

/// A list with one element.
struct One<'a>(Option<Tracer<'a>>);

impl<'de> SeqAccess<'de> for One<'_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        self.0.take().map(|t| seed.deserialize(t)).transpose()
    }
}

/// `fields` without the names that differ from an earlier one only in case.
/// serde's derived field list holds each field's aliases too (sorted with its
/// name), and feeding a field twice is a `duplicate field` error; the specs'
/// aliases are case variants (`ipv6accessType` for `ipv6AccessType`). An alias
/// of another spelling still fails the walk, loudly.
fn without_case_aliases(fields: &'static [&'static str]) -> Vec<&'static str> {
    let mut seen = BTreeSet::new();
    fields.iter().copied().filter(|f| seen.insert(f.to_ascii_lowercase())).collect()
}

/// A struct's fields, each once.
struct Fields<'a> {
    fields: Vec<&'static str>,
    next: usize,
    prefix: String,
    out: &'a RefCell<BTreeSet<String>>,
}

impl Fields<'_> {
    fn child(&self, field: &str) -> String {
        if self.prefix.is_empty() { field.to_string() } else { format!("{}.{field}", self.prefix) }
    }
}

impl<'de> MapAccess<'de> for Fields<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        let Some(field) = self.fields.get(self.next) else { return Ok(None) };
        let key: StrDeserializer<'_, Error> = field.into_deserializer();
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some(&field) = self.fields.get(self.next) else {
            return Err(serde::de::Error::custom("a value was asked for after the last field"));
        };
        self.next += 1;
        let path = self.child(field);
        seed.deserialize(Tracer { prefix: path.clone(), leaf: path, out: self.out })
    }
}

/// One row of a markdown table in a README (see [`readme_table`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRow<'a> {
    /// The field paths the first cell names: every backquoted token of it,
    /// expanded with [`expand_notation`] and normalised with
    /// [`normalise_readme_path`], in the order written.
    pub paths: Vec<String>,
    /// The row's cells, trimmed, the first cell included.
    pub cells: Vec<&'a str>,
}

/// The rows of the markdown tables in the section of `readme` whose heading
/// is exactly `heading` (the heading's text without its `#`s, trimmed; any
/// level), up to the next heading. Each table's first two lines (header and
/// separator) are skipped; every other row must name at least one field in
/// backquotes in its first cell. Lines inside fenced code blocks are neither
/// headings nor rows. A cell is split at every `|` (no escaping).
///
/// Fails when no heading or more than one heading is `heading`, when the
/// section has no rows, or when a row's first cell names no field or writes
/// one in a notation [`expand_notation`] does not read.
pub fn readme_table<'a>(readme: &'a str, heading: &str) -> Result<Vec<TableRow<'a>>, String> {
    let mut rows = Vec::new();
    let (mut found, mut inside, mut fenced) = (0usize, false, false);
    // Line of the current table (0: header, 1: separator), None outside a table.
    let mut table_line: Option<usize> = None;
    for line in readme.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if line.starts_with('#') {
            inside = line.trim_start_matches('#').trim() == heading;
            found += usize::from(inside);
            table_line = None;
            continue;
        }
        if !line.starts_with('|') {
            table_line = None;
            continue;
        }
        let index = table_line.map_or(0, |i| i + 1);
        table_line = Some(index);
        if !inside || index < 2 {
            continue;
        }
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        let first = cells.first().copied().unwrap_or("");
        let mut paths = Vec::new();
        for token in first.split('`').skip(1).step_by(2) {
            paths.extend(expand_notation(token)?.iter().map(|p| normalise_readme_path(p)));
        }
        if paths.is_empty() {
            return Err(format!("README section {heading:?}: the row {line:?} names no field in backquotes"));
        }
        rows.push(TableRow { paths, cells });
    }
    match (found, rows.is_empty()) {
        (0, _) => Err(format!("README has no heading {heading:?}")),
        (1, false) => Ok(rows),
        (1, true) => Err(format!("README section {heading:?} has no table rows")),
        (n, _) => Err(format!("README has {n} headings {heading:?}")),
    }
}

/// Every field path the tables under `heading` name (see [`readme_table`]),
/// each once.
pub fn readme_paths(readme: &str, heading: &str) -> Result<BTreeSet<String>, String> {
    Ok(readme_table(readme, heading)?.into_iter().flat_map(|row| row.paths).collect())
}

/// A README path as [`field_paths`] names it: a trailing `[]` (a README may
/// write a list of values as `tags[]`) is dropped, since the walk names a
/// list of scalars by its own key (`tags`). Case is kept: the walk yields the
/// JSON names as the spec type spells them (serde renames applied, case
/// aliases dropped), and the README must spell them the same.
pub fn normalise_readme_path(path: &str) -> String {
    path.strip_suffix("[]").unwrap_or(path).to_string()
}

/// The field paths one backquoted README token names, in the notation
/// `a.b`, `list[].c`, `a{b, c{d, e}}`, `list[]{b, c.d}`: a `{...}` holds a
/// comma-separated list whose paths are each prefixed with the name before
/// it and a `.`. A name is segments of ASCII letters, digits and `_`, each
/// optionally ending in `[]`, joined by `.`; whitespace around names is
/// allowed. `disks[]{boot, encryption{kmsKeyName}}` names `disks[].boot` and
/// `disks[].encryption.kmsKeyName`.
///
/// Fails on anything else (an empty or malformed name, an unclosed `{`,
/// text after the list), naming the token.
pub fn expand_notation(token: &str) -> Result<Vec<String>, String> {
    let chars: Vec<char> = token.chars().collect();
    let mut at = 0;
    let mut out = Vec::new();
    expand_list(&chars, &mut at, "", &mut out)
        .map_err(|why| format!("README field notation {token:?} not understood: {why}"))?;
    match chars.get(at) {
        None => Ok(out),
        Some(c) => Err(format!("README field notation {token:?} not understood: unexpected {c:?} at {at}")),
    }
}

/// One comma-separated list of `name` / `name{list}` items under `prefix`,
/// read from `chars[*at..]`; stops before the first character that does not
/// continue the list.
fn expand_list(chars: &[char], at: &mut usize, prefix: &str, out: &mut Vec<String>) -> Result<(), String> {
    loop {
        skip_whitespace(chars, at);
        let start = *at;
        while chars.get(*at).is_some_and(|&c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']')) {
            *at += 1;
        }
        let name: String = chars.get(start..*at).unwrap_or_default().iter().collect();
        if !valid_name(&name) {
            return Err(format!("{name:?} at {start} is not a field name"));
        }
        let path = if prefix.is_empty() { name } else { format!("{prefix}.{name}") };
        skip_whitespace(chars, at);
        if chars.get(*at) == Some(&'{') {
            *at += 1;
            expand_list(chars, at, &path, out)?;
            skip_whitespace(chars, at);
            if chars.get(*at) != Some(&'}') {
                return Err(format!("the {{ after {path:?} is not closed"));
            }
            *at += 1;
            skip_whitespace(chars, at);
        } else {
            out.push(path);
        }
        if chars.get(*at) != Some(&',') {
            return Ok(());
        }
        *at += 1;
    }
}

fn skip_whitespace(chars: &[char], at: &mut usize) {
    while chars.get(*at).is_some_and(|c| c.is_whitespace()) {
        *at += 1;
    }
}

/// Segments of ASCII letters, digits and `_`, each optionally ending in `[]`, joined by `.`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|segment| {
            let base = segment.strip_suffix("[]").unwrap_or(segment);
            !base.is_empty() && base.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// Applies `patch` to `target` as a JSON Merge Patch (RFC 7396): an object
/// patch merges member by member into `target` (made an object first if it
/// is not one), a `null` member removes the member, any other patch value
/// (arrays included) replaces `target`. The spec coverage tests build their
/// probe classes with it.
pub fn merge_patch(target: &mut serde_json::Value, patch: &serde_json::Value) {
    let serde_json::Value::Object(members) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = serde_json::Value::Object(serde_json::Map::new());
    }
    if let serde_json::Value::Object(target_members) = target {
        for (key, value) in members {
            if value.is_null() {
                target_members.remove(key);
            } else {
                merge_patch(target_members.entry(key.clone()).or_insert(serde_json::Value::Null), value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[allow(dead_code)]
    #[serde(rename_all = "camelCase")]
    struct Inner {
        #[serde(rename = "subnetID")]
        subnet_id: String,
        groups: Vec<String>,
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Outer {
        name: Option<String>,
        inner: Option<Inner>,
        list: Vec<Inner>,
        tags: std::collections::BTreeMap<String, String>,
        count: i32,
        ignored: Option<serde::de::IgnoredAny>,
    }

    #[test]
    fn walks_every_leaf_with_json_names() {
        let paths: Vec<String> = super::field_paths::<Outer>().expect("walk").into_iter().collect();
        assert_eq!(
            paths,
            vec![
                "count",
                "ignored",
                "inner.groups",
                "inner.subnetID",
                "list[].groups",
                "list[].subnetID",
                "name",
                "tags",
            ]
        );
    }

    #[test]
    fn reads_the_rows_of_the_table_under_the_exact_heading() {
        let readme = "# X\n## Fields and more\n| field | x |\n|---|---|\n| `z` | y |\n\
            ## Fields\n| field | where |\n|---|---|\n| `a.b` | RunInstances `A` |\n| `c` (old), `d[]{e, f}` | ignored |\n\
            ```sh\n# not a heading\n| `g` | in a code block |\n```\n## Next\n| `h` | x |\n";
        let rows = super::readme_table(readme, "Fields").expect("the table");
        let paths: Vec<&[String]> = rows.iter().map(|r| r.paths.as_slice()).collect();
        assert_eq!(paths, [&["a.b".to_string()][..], &["c".into(), "d[].e".into(), "d[].f".into()][..]]);
        assert_eq!(rows[1].cells, ["`c` (old), `d[]{e, f}`", "ignored"]);
        let all: Vec<String> = super::readme_paths(readme, "Fields").expect("the paths").into_iter().collect();
        assert_eq!(all, ["a.b", "c", "d[].e", "d[].f"]);
    }

    #[test]
    fn a_missing_doubled_or_empty_section_or_a_row_without_a_field_fails() {
        let table = "|a|b|\n|---|---|\n| `x` | y |\n";
        assert!(super::readme_table(&format!("## Other\n{table}"), "Fields").is_err());
        assert!(super::readme_table(&format!("## Fields\n{table}## Fields\n{table}"), "Fields").is_err());
        assert!(super::readme_table("## Fields\ntext only\n", "Fields").is_err());
        assert!(super::readme_table("## Fields\n|a|b|\n|---|---|\n| x | y |\n", "Fields").is_err());
        assert!(super::readme_table("## Fields\n|a|b|\n|---|---|\n| `x{` | y |\n", "Fields").is_err());
        assert!(super::readme_table(&format!("## Fields\n{table}"), "Fields").is_ok());
    }

    #[test]
    fn expands_the_brace_notation() {
        let expand = |t: &str| super::expand_notation(t).expect("valid notation");
        assert_eq!(
            expand("disks[]{boot, encryption{kmsKeyName, kmsKeyServiceAccount}}"),
            ["disks[].boot", "disks[].encryption.kmsKeyName", "disks[].encryption.kmsKeyServiceAccount"]
        );
        assert_eq!(expand("a.b{c, d{e, f}}"), ["a.b.c", "a.b.d.e", "a.b.d.f"]);
        assert_eq!(expand(" x { y.z } , w "), ["x.y.z", "w"]);
        assert_eq!(expand("tags[]"), ["tags[]"]);
        for bad in ["", "a{", "a{b", "a}", "a,", "a{}", "a b", "a..b", "[]", "a[x]", "a-b", "é"] {
            assert!(super::expand_notation(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn a_trailing_list_marker_is_dropped_case_is_kept() {
        assert_eq!(super::normalise_readme_path("tags[]"), "tags");
        assert_eq!(super::normalise_readme_path("disks[].labels"), "disks[].labels");
        assert_eq!(super::normalise_readme_path("ipv6AccessType"), "ipv6AccessType");
    }

    #[test]
    fn merge_patch_follows_rfc_7396() {
        use serde_json::json;
        let patched = |mut t: serde_json::Value, p: serde_json::Value| {
            super::merge_patch(&mut t, &p);
            t
        };
        assert_eq!(patched(json!({"a": "b"}), json!({"a": "c"})), json!({"a": "c"}));
        assert_eq!(patched(json!({"a": "b", "b": "c"}), json!({"a": null})), json!({"b": "c"}));
        assert_eq!(patched(json!({"a": [{"b": "c"}]}), json!({"a": [1]})), json!({"a": [1]}));
        assert_eq!(patched(json!({"a": {"b": "c"}}), json!({"a": {"b": "d", "c": null}})), json!({"a": {"b": "d"}}));
        assert_eq!(patched(json!({"a": "foo"}), json!({"a": {"bb": {"ccc": null}}})), json!({"a": {"bb": {}}}));
        assert_eq!(patched(json!(["a"]), json!({"a": "b"})), json!({"a": "b"}));
        assert_eq!(patched(json!({"a": "b"}), json!(["c"])), json!(["c"]));
    }
}
