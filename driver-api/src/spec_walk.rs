//! The providerSpec keys a spec type accepts, found by walking its
//! `Deserialize` implementation (a tracing deserializer that answers every
//! struct with all of its fields), so that a field added to the type is seen
//! by the tests that every accepted key is applied or listed as ignored.
//!
//! Paths are the JSON keys (serde renames included) joined by `.`, with `[]`
//! for a list's elements: `networkInterfaces[].subnetID`. Only leaves are
//! listed (a nested object's own key is not); a map (`tags`) and a list of
//! scalars (`securityGroupIDs`) are leaves.

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

/// The first backquoted word of each row of the markdown table under
/// `heading` in `readme`, with the row's cells.
pub fn readme_table<'a>(readme: &'a str, heading: &str) -> Vec<(String, Vec<&'a str>)> {
    let mut rows = Vec::new();
    let mut inside = false;
    for line in readme.lines() {
        if line.starts_with('#') {
            inside = line.trim_start_matches('#').trim() == heading;
            continue;
        }
        if !inside || !line.starts_with("| `") {
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if let Some(key) = cells.first().and_then(|c| c.split('`').nth(1)) {
            rows.push((key.to_string(), cells));
        }
    }
    rows
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
    fn reads_the_first_column_of_a_readme_table() {
        let readme = "# X\n## Fields\n| field | where |\n|---|---|\n| `a.b` | RunInstances `A` |\n| `c` (old) | ignored |\n## Next\n| `d` | x |\n";
        let rows = super::readme_table(readme, "Fields");
        let keys: Vec<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, vec!["a.b", "c"]);
        assert_eq!(rows[1].1[1], "ignored");
    }
}
