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
//! - an unknown key is skipped, logged once per class (one warning listing at
//!   most 10 paths), and counted in
//!   `machine_driver_provider_spec_unknown_fields_total{field}`, whose label is
//!   the path with array indices dropped (`disks[].x`) for the first 64
//!   distinct paths of the process and `other` beyond them, so that no spec
//!   can grow the series without bound;
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

/// The unknown-field reports of this process (metric labels, classes warned about).
static REPORTS: Mutex<Option<UnknownFields>> = Mutex::new(None);

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

/// Logs the unknown fields once per class (by the spec's content) and counts them.
fn report_unknown(raw: &[u8], unknown: &[String]) {
    let mut reports = REPORTS.lock().unwrap_or_else(PoisonError::into_inner);
    reports.get_or_insert_with(UnknownFields::default).report(raw, unknown);
}

/// Distinct `field` label values of `machine_driver_provider_spec_unknown_fields_total`
/// a process records; every further field is counted under [`OTHER_FIELDS`].
const MAX_UNKNOWN_FIELD_LABELS: usize = 64;

/// The `field` label of unknown fields beyond the first [`MAX_UNKNOWN_FIELD_LABELS`]
/// distinct ones, and of any field path longer than [`MAX_LABELLED_FIELD_LEN`].
const OTHER_FIELDS: &str = "other";

/// Longest field path that gets a label of its own.
const MAX_LABELLED_FIELD_LEN: usize = 128;

/// Most classes remembered for "logged once per class" (forgotten all at once beyond it).
const MAX_WARNED_CLASSES: usize = 4096;

/// Most unknown field paths one warning lists (the rest are counted).
const MAX_WARNED_FIELDS: usize = 10;

/// Longest field path a warning shows (longer ones are cut).
const MAX_WARNED_FIELD_LEN: usize = 128;

/// What the unknown-field reports remember: bounded by construction, whatever
/// the specs hold (a spec can carry any number of keys of any length).
#[derive(Debug, Default)]
struct UnknownFields {
    /// The field labels given out so far, at most [`MAX_UNKNOWN_FIELD_LABELS`].
    labels: HashSet<String>,
    /// Classes (hashes of their spec) already warned about.
    warned: HashSet<u64>,
}

/// What one report did (for tests).
#[derive(Debug, Default, PartialEq, Eq)]
struct Reported {
    /// Whether a warning was logged.
    warned: bool,
    /// Fields counted under [`OTHER_FIELDS`].
    others: u64,
}

impl UnknownFields {
    /// Counts `unknown` (the paths of one spec's unknown fields) under bounded
    /// labels, and logs one warning for the class unless it already got one.
    fn report(&mut self, raw: &[u8], unknown: &[String]) -> Reported {
        let mut others = 0u64;
        for field in unknown {
            let label = label_of(field);
            if self.labels.contains(label.as_str())
                || (self.labels.len() < MAX_UNKNOWN_FIELD_LABELS
                    && label.len() <= MAX_LABELLED_FIELD_LEN
                    && self.labels.insert(label.clone()))
            {
                metrics::counter!("machine_driver_provider_spec_unknown_fields_total", "field" => label).increment(1);
            } else {
                others += 1;
            }
        }
        if others > 0 {
            metrics::counter!("machine_driver_provider_spec_unknown_fields_total", "field" => OTHER_FIELDS)
                .increment(others);
        }
        let warned = self.warn_once(raw, unknown);
        Reported { warned, others }
    }

    /// One warning per class, listing at most [`MAX_WARNED_FIELDS`] fields.
    fn warn_once(&mut self, raw: &[u8], unknown: &[String]) -> bool {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        raw.hash(&mut h);
        if self.warned.len() >= MAX_WARNED_CLASSES {
            self.warned.clear();
        }
        if !self.warned.insert(h.finish()) {
            return false;
        }
        let mut fields: Vec<String> = unknown.iter().take(MAX_WARNED_FIELDS).map(|f| shown_field(f)).collect();
        if unknown.len() > MAX_WARNED_FIELDS {
            fields.push(format!("and {} more", unknown.len() - MAX_WARNED_FIELDS));
        }
        tracing::warn!(
            fields = %fields.join(", "),
            count = unknown.len(),
            "providerSpec has fields this driver does not know: ignored (a newer Gardener extension, or a typo?)"
        );
        true
    }
}

/// The metric label of an unknown field's path: array indices dropped
/// (`disks[0].x` and `disks[1].x` are one field, `disks[].x`).
fn label_of(path: &str) -> String {
    let mut label = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                label.push('[');
            }
            ']' => {
                in_index = false;
                label.push(']');
            }
            c if in_index && c.is_ascii_digit() => {}
            c => label.push(c),
        }
    }
    label
}

/// `providerSpec.<path>` as a warning shows it, cut to [`MAX_WARNED_FIELD_LEN`] characters.
fn shown_field(path: &str) -> String {
    match path.char_indices().nth(MAX_WARNED_FIELD_LEN) {
        Some((cut, _)) => format!("providerSpec.{}...", &path[..cut]),
        None => format!("providerSpec.{path}"),
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

    /// Records the `field` label of every unknown-field counter series registered.
    #[derive(Debug, Default)]
    struct SeriesRecorder {
        series: Mutex<HashSet<String>>,
    }

    impl metrics::Recorder for SeriesRecorder {
        fn describe_counter(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}
        fn describe_gauge(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}
        fn describe_histogram(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}
        fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
            if key.name() == "machine_driver_provider_spec_unknown_fields_total" {
                let field = key.labels().find(|l| l.key() == "field").map(|l| l.value().to_string());
                self.series.lock().unwrap().insert(field.unwrap_or_default());
            }
            metrics::Counter::noop()
        }
        fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
            metrics::Gauge::noop()
        }
        fn register_histogram(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Histogram {
            metrics::Histogram::noop()
        }
    }

    /// A spec with `n` unknown keys named after `tag`, one of them in an array.
    fn spec_with_unknown_keys(tag: &str, n: usize) -> (Vec<u8>, Vec<String>) {
        let mut spec = serde_json::json!({"machineType": "m", "disks": [{"sizeGb": 1, "x": 1}, {"sizeGb": 2, "x": 2}]});
        let obj = spec.as_object_mut().unwrap();
        for i in 0..n {
            obj.insert(format!("{tag}-{i}"), Value::from(i));
        }
        let raw = serde_json::to_vec(&spec).unwrap();
        let unknown = RefCell::new(Vec::new());
        let value: Value = serde_json::from_slice(&raw).unwrap();
        let _: Spec =
            serde_path_to_error::deserialize(Lenient { value, path: String::new(), unknown: &unknown }).unwrap();
        (raw, unknown.into_inner())
    }

    #[test]
    fn unknown_field_series_and_warnings_are_bounded_whatever_the_specs_hold() {
        let recorder = SeriesRecorder::default();
        let mut reports = UnknownFields::default();
        let mut results = Vec::new();
        metrics::with_local_recorder(&recorder, || {
            // A class with only the array's unknown field comes first (so that it has a label whatever the key order).
            let (raw, unknown) = spec_with_unknown_keys("none", 0);
            assert_eq!(reports.report(&raw, &unknown), Reported { warned: true, others: 0 });
            for tag in ["a", "b", "c"] {
                let (raw, unknown) = spec_with_unknown_keys(tag, 5_000);
                assert_eq!(unknown.len(), 5_002, "5,000 top-level keys and disks[0].x, disks[1].x");
                results.push(reports.report(&raw, &unknown));
                // The same class again: counted, not logged again.
                results.push(reports.report(&raw, &unknown));
            }
        });
        let series = recorder.series.lock().unwrap().clone();
        assert!(series.len() <= MAX_UNKNOWN_FIELD_LABELS + 1, "{} series", series.len());
        assert!(series.contains(OTHER_FIELDS), "fields beyond the first {MAX_UNKNOWN_FIELD_LABELS} are `other`");
        assert!(series.contains("disks[].x"), "array indices are not part of the label: {series:?}");
        assert!(!series.iter().any(|s| s.starts_with("c-")), "the third spec's keys got no series of their own");
        let warnings: Vec<bool> = results.iter().map(|r| r.warned).collect();
        assert_eq!(warnings, [true, false, true, false, true, false], "one warning per class");
        assert_eq!(results[0].others, 5_000 - (MAX_UNKNOWN_FIELD_LABELS as u64 - 1));
        assert_eq!(results[2].others, 5_000, "only disks[].x has a label of its own");
        assert_eq!(results[4].others, 5_000);
        assert_eq!(reports.labels.len(), MAX_UNKNOWN_FIELD_LABELS);

        // A field path longer than the label limit is `other` even while labels are left.
        let mut fresh = UnknownFields::default();
        let long = "k".repeat(MAX_LABELLED_FIELD_LEN + 1);
        assert_eq!(fresh.report(b"{}", std::slice::from_ref(&long)).others, 1);
        assert!(fresh.labels.is_empty());
        assert_eq!(shown_field(&long).len(), "providerSpec.".len() + MAX_WARNED_FIELD_LEN + 3);
        assert_eq!(label_of("disks[12].ebs[3].x"), "disks[].ebs[].x");
    }
}
