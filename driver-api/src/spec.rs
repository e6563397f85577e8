//! Parsing a class's providerSpec into a provider's typed spec, as leniently as
//! the Go providers read it.
//!
//! Gardener's extensions write machine classes with Go's `encoding/json`:
//! `null` for unset pointer fields, `{}` for empty structs, and fields a
//! driver of another version may not know. The Go providers read them with
//! `encoding/json` too, which matches keys case-insensitively and skips
//! unknown keys. A driver that refused such a class would turn a version skew
//! into an outage (every RPC of the class failing, delete included), so
//! [`parse_provider_spec`] reads like Go does:
//!
//! - a `null` value is the same as an absent key (the field's default);
//! - a key matching a field only in case is that field (an exact match wins);
//! - an unknown key is skipped, logged once per class with its path, and
//!   counted in `machine_driver_provider_spec_unknown_fields_total{field}`;
//!   with [`set_strict_provider_spec`] (the server's `--strict-provider-spec`)
//!   it is refused instead, INVALID_ARGUMENT naming it.
//!
//! Type errors are still refused, naming the field
//! (`providerSpec.blockDevices[0].ebs.volumeSize: invalid type ...`).

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::DriverError;

static STRICT: AtomicBool = AtomicBool::new(false);

/// Most (class, field) pairs remembered for "logged once per class".
const MAX_WARNED: usize = 4096;

static WARNED: Mutex<Option<HashSet<(u64, String)>>> = Mutex::new(None);

/// Refuse unknown providerSpec keys (INVALID_ARGUMENT) instead of skipping
/// them with a warning. Process-wide; set once at start from the server's
/// `--strict-provider-spec`.
pub fn set_strict_provider_spec(strict: bool) {
    STRICT.store(strict, Ordering::Relaxed);
}

/// Parses raw providerSpec JSON into `T` the way Go's `encoding/json` would
/// (see the module docs), naming the offending field on error.
pub fn parse_provider_spec<T: DeserializeOwned>(raw: &[u8]) -> Result<T, DriverError> {
    parse(raw, STRICT.load(Ordering::Relaxed))
}

/// [`parse_provider_spec`] with an explicit strictness.
fn parse<T: DeserializeOwned>(raw: &[u8], strict: bool) -> Result<T, DriverError> {
    let value: Value =
        serde_json::from_slice(raw).map_err(|e| DriverError::invalid_argument("providerSpec", trim(e)))?;
    let unknown = RefCell::new(Vec::new());
    let parsed = serde_path_to_error::deserialize(Lenient { value, path: String::new(), unknown: &unknown });
    let unknown = unknown.into_inner();
    let spec = parsed.map_err(|e| {
        let path = e.path().to_string();
        let field =
            if path == "." || path.is_empty() { "providerSpec".to_string() } else { format!("providerSpec.{path}") };
        DriverError::invalid_argument(field, trim(e.into_inner()))
    })?;
    if let Some(first) = unknown.first() {
        if strict {
            return Err(DriverError::invalid_argument(
                format!("providerSpec.{first}"),
                "unknown field (refused because of --strict-provider-spec)",
            ));
        }
        report_unknown(raw, &unknown);
    }
    Ok(spec)
}

/// The message of a serde error without serde_json's " at line L column C" (noise in a Machine status).
fn trim(e: impl std::fmt::Display) -> String {
    let inner = e.to_string();
    match inner.rfind(" at line ") {
        Some(i) => inner[..i].to_string(),
        None => inner,
    }
}

/// Logs each unknown field once per class (by the spec's content) and counts it.
fn report_unknown(raw: &[u8], unknown: &[String]) {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    raw.hash(&mut h);
    let class = h.finish();
    let mut warned = WARNED.lock().unwrap_or_else(PoisonError::into_inner);
    let warned = warned.get_or_insert_with(HashSet::new);
    for field in unknown {
        metrics::counter!("machine_driver_provider_spec_unknown_fields_total", "field" => field.clone()).increment(1);
        if warned.len() >= MAX_WARNED {
            warned.clear();
        }
        if warned.insert((class, field.clone())) {
            tracing::warn!(
                field = %format!("providerSpec.{field}"),
                "providerSpec has a field this driver does not know: ignored (a newer Gardener extension, or a typo?)"
            );
        }
    }
}

/// A JSON value deserialized like Go's `encoding/json`, recording the paths of
/// the keys it skips.
struct Lenient<'u> {
    value: Value,
    path: String,
    unknown: &'u RefCell<Vec<String>>,
}

impl<'u> Lenient<'u> {
    fn child(&self, value: Value, segment: &str) -> Self {
        let path = if self.path.is_empty() { segment.to_string() } else { format!("{}.{segment}", self.path) };
        Self { value, path, unknown: self.unknown }
    }

    /// The object's entries with nulls dropped and keys matched to `fields` as Go does.
    fn struct_entries(&self, object: Map<String, Value>, fields: &'static [&'static str]) -> Vec<(String, Value)> {
        let mut out: Vec<(String, Value)> = Vec::with_capacity(object.len());
        let exact: HashSet<&'static str> = fields.iter().copied().filter(|f| object.contains_key(*f)).collect();
        let mut taken: HashSet<&'static str> = HashSet::new();
        for (key, value) in object {
            if value.is_null() {
                continue;
            }
            let name = if exact.contains(key.as_str()) {
                Some(key)
            } else {
                // Go: an exact match wins; otherwise the first case-insensitive one.
                match fields
                    .iter()
                    .find(|f| f.eq_ignore_ascii_case(&key) && !exact.contains(**f) && !taken.contains(**f))
                {
                    Some(f) => {
                        taken.insert(f);
                        Some(f.to_string())
                    }
                    None => {
                        let path = if self.path.is_empty() { key } else { format!("{}.{key}", self.path) };
                        self.unknown.borrow_mut().push(path);
                        None
                    }
                }
            };
            if let Some(name) = name {
                out.push((name, value));
            }
        }
        out
    }

    /// Visits `pairs` as a map whose values are read leniently too.
    fn visit_entries<'de, V: Visitor<'de>>(
        &self,
        pairs: Vec<(String, Value)>,
        visitor: V,
    ) -> Result<V::Value, serde_json::Error> {
        let entries: Vec<(String, Lenient<'u>)> = pairs
            .into_iter()
            .map(|(k, v)| {
                let child = self.child(v, &k);
                (k, child)
            })
            .collect();
        visitor.visit_map(Entries { entries: entries.into_iter(), next: None })
    }
}

impl<'de, 'u> de::Deserializer<'de> for Lenient<'u> {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.value {
            Value::Array(_) => self.deserialize_seq(visitor),
            Value::Object(_) => self.deserialize_map(visitor),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        if self.value.is_null() { visitor.visit_none() } else { visitor.visit_some(self) }
    }

    fn deserialize_seq<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value, Self::Error> {
        match std::mem::take(&mut self.value) {
            Value::Array(items) => {
                let items: Vec<Lenient<'u>> = items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| Lenient { value: v, path: format!("{}[{i}]", self.path), unknown: self.unknown })
                    .collect();
                visitor.visit_seq(Seq { items: items.into_iter() })
            }
            other => other.deserialize_seq(visitor),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value, Self::Error> {
        match std::mem::take(&mut self.value) {
            Value::Object(object) => self.visit_entries(object.into_iter().collect(), visitor),
            other => other.deserialize_map(visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        mut self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match std::mem::take(&mut self.value) {
            Value::Object(object) => {
                let pairs = self.struct_entries(object, fields);
                self.visit_entries(pairs, visitor)
            }
            other => other.deserialize_struct(name, fields, visitor),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.value.deserialize_enum(name, variants, visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct tuple tuple_struct identifier ignored_any
    }
}

struct Seq<'u> {
    items: std::vec::IntoIter<Lenient<'u>>,
}

impl<'de, 'u> SeqAccess<'de> for Seq<'u> {
    type Error = serde_json::Error;

    fn next_element_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>, Self::Error> {
        self.items.next().map(|item| seed.deserialize(item)).transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Entries<'u> {
    entries: std::vec::IntoIter<(String, Lenient<'u>)>,
    next: Option<Lenient<'u>>,
}

impl<'de, 'u> MapAccess<'de> for Entries<'u> {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Self::Error> {
        match self.entries.next() {
            Some((key, value)) => {
                self.next = Some(value);
                seed.deserialize(key.into_deserializer()).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Self::Error> {
        match self.next.take() {
            Some(value) => seed.deserialize(value),
            None => Err(de::Error::custom("value requested before its key")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Spec {
        machine_type: String,
        #[serde(default)]
        disks: Vec<Disk>,
        #[serde(default)]
        cpu_options: Option<CpuOptions>,
        #[serde(default)]
        tags: BTreeMap<String, String>,
        #[serde(default, alias = "IoOptimized")]
        io_optimized: Option<String>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Disk {
        size_gb: u32,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct CpuOptions {
        core_count: Option<i32>,
        amd_sev_snp: Option<String>,
    }

    #[test]
    fn names_nested_field_of_a_type_error() {
        let err = parse_provider_spec::<Spec>(br#"{"machineType":"m","disks":[{"sizeGb":"big"}]}"#).unwrap_err();
        assert_eq!(err.field(), Some("providerSpec.disks[0].sizeGb"));
        assert!(!err.message().contains("line"), "{}", err.message());
    }

    #[test]
    fn names_missing_field() {
        let err = parse_provider_spec::<Spec>(br#"{"disks":[]}"#).unwrap_err();
        assert!(err.message().contains("missing field `machineType`"), "{}", err.message());
        let bad_json = parse_provider_spec::<Spec>(b"{").unwrap_err();
        assert_eq!(bad_json.field(), Some("providerSpec"));
    }

    #[test]
    fn reads_classes_as_go_writes_them() {
        // nulls for unset pointers, {} for empty structs, keys in another case, unknown keys.
        let raw = br#"{"MachineType":"m","disks":null,"cpuOptions":{"coreCount":null,"amdSevSnp":"enabled"},
            "tags":{"Name":"x","kubernetes.io/role/node":"1"},"IoOptimized":"optimized",
            "apiVersion":"v1","advancedMachineFeatures":{}}"#;
        let spec = parse_provider_spec::<Spec>(raw).unwrap();
        assert_eq!(spec.machine_type, "m");
        assert!(spec.disks.is_empty());
        let cpu = spec.cpu_options.unwrap();
        assert_eq!((cpu.core_count, cpu.amd_sev_snp.as_deref()), (None, Some("enabled")));
        assert_eq!(spec.tags.get("Name").map(String::as_str), Some("x"), "map keys keep their case");
        assert_eq!(spec.io_optimized.as_deref(), Some("optimized"), "aliases are known fields");
    }

    #[test]
    fn an_exact_key_wins_over_a_case_insensitive_one() {
        let spec = parse_provider_spec::<Spec>(br#"{"MACHINETYPE":"upper","machineType":"exact"}"#).unwrap();
        assert_eq!(spec.machine_type, "exact");
    }

    #[test]
    fn unknown_fields_are_recorded_with_their_path_and_refused_when_strict() {
        let raw = br#"{"machineType":"m","disks":[{"sizeGb":1,"useAliasIPs":true}],"bogus":1}"#;
        let unknown = RefCell::new(Vec::new());
        let value: Value = serde_json::from_slice(raw).unwrap();
        let spec: Spec =
            serde_path_to_error::deserialize(Lenient { value, path: String::new(), unknown: &unknown }).unwrap();
        assert_eq!(spec.disks[0].size_gb, 1);
        let mut got = unknown.into_inner();
        got.sort();
        assert_eq!(got, vec!["bogus".to_string(), "disks[0].useAliasIPs".to_string()]);

        let err = parse::<Spec>(raw, true).unwrap_err();
        assert!(err.field().is_some_and(|f| f.starts_with("providerSpec.")), "{err:?}");
        assert!(parse::<Spec>(raw, false).is_ok());
    }
}
