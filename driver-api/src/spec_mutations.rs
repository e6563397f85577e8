//! Random structured mutations of providerSpecs, for the property test every
//! provider runs on its own spec (`providers/<cloud>/tests/spec_mutations.rs`):
//! each input is a seed class with one to three changes at random places
//! (a key removed, a value replaced by another kind of value, a key added,
//! a list emptied or grown), or its JSON text cut or with a byte changed, and
//! [`check_refusals`] asserts that the provider's spec check never panics and
//! refuses only with INVALID_ARGUMENT naming a `providerSpec...` field.
//!
//! It complements the coverage-guided `fuzz/` targets: those cover the
//! SDK-free specs (the kit, OpenStack, Alicloud) under libFuzzer, while the
//! instrumented build of the AWS, GCP and Azure SDKs would not fit CI's time
//! (fuzz/README.md). The same seeds (`fuzz/corpus/provider_spec/`) start both.
//! The generator is deterministic for a given seed number, so a failure names
//! the input and reproduces.

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::{Value, json};

use crate::{DriverError, ErrorKind};

/// A small deterministic generator (xorshift64*): reproducible inputs
/// without a dependency.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, in_100: u64) -> bool {
        self.next() % 100 < in_100
    }
}

/// Values a mutation puts in place of another: every JSON kind, edge numbers,
/// blank, long, control and non-ASCII strings.
fn replacement(rng: &mut Rng) -> Value {
    match rng.below(18) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(false),
        3 => json!(0),
        4 => json!(-1),
        5 => json!(i64::MAX),
        6 => json!(u64::MAX),
        7 => json!(1.5e308),
        8 => json!(""),
        9 => json!("   "),
        10 => json!("x".repeat(300)),
        11 => json!("a/b?c=d&e#f%2F"),
        12 => json!("\u{0}\u{7f}é😀"),
        13 => json!([]),
        14 => json!({}),
        15 => json!([null, 1, "x"]),
        16 => json!({"k": "v", "": null}),
        _ => json!(-0.0),
    }
}

/// The keys a mutation adds: one unknown to every spec, and names specs use.
const KEYS: [&str; 8] = ["zzUnknownKey", "tags", "labels", "name", "type", "size", "", "Name"];

/// Applies one change at a random place in `v`.
fn mutate_value(v: &mut Value, rng: &mut Rng, depth: usize) {
    let descend = depth < 6 && rng.chance(70);
    match v {
        Value::Object(map) if !map.is_empty() => {
            let key = map.keys().nth(rng.below(map.len())).cloned().unwrap_or_default();
            if descend && let Some(child) = map.get_mut(&key) {
                return mutate_value(child, rng, depth + 1);
            }
            match rng.below(3) {
                0 => {
                    map.remove(&key);
                }
                1 => {
                    map.insert(key, replacement(rng));
                }
                _ => {
                    map.insert(KEYS[rng.below(KEYS.len())].to_owned(), replacement(rng));
                }
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let i = rng.below(items.len());
            if descend {
                return mutate_value(&mut items[i], rng, depth + 1);
            }
            match rng.below(3) {
                0 => {
                    items.remove(i);
                }
                1 => items.push(items[i].clone()),
                _ => items[i] = replacement(rng),
            }
        }
        Value::Object(map) => {
            map.insert(KEYS[rng.below(KEYS.len())].to_owned(), replacement(rng));
        }
        other => *other = replacement(rng),
    }
}

/// `count` inputs made from `seeds` (deterministic for `seed`): most are a
/// seed with one to three structured changes, serialized; about one in ten is
/// a seed's text cut short or with one byte changed.
pub fn mutations(seeds: &[Value], count: usize, seed: u64) -> Vec<Vec<u8>> {
    assert!(!seeds.is_empty(), "spec mutations need at least one seed class");
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|_| {
            let mut v = seeds[rng.below(seeds.len())].clone();
            if rng.chance(10) {
                let mut text = serde_json::to_vec(&v).unwrap_or_default();
                if !text.is_empty() {
                    let at = rng.below(text.len());
                    if rng.chance(50) {
                        text.truncate(at);
                    } else {
                        text[at] = (rng.next() & 0xff) as u8;
                    }
                }
                return text;
            }
            for _ in 0..=rng.below(3) {
                mutate_value(&mut v, &mut rng, 0);
            }
            serde_json::to_vec(&v).unwrap_or_default()
        })
        .collect()
}

/// Runs `check` on every input and panics, naming the input, when it panics or
/// refuses with anything but INVALID_ARGUMENT naming a `providerSpec...`
/// field. Answers how many inputs were refused and how many accepted, so the
/// caller can assert that both kinds occurred (a check that refuses
/// everything, or nothing, would pass trivially).
pub fn check_refusals(who: &str, inputs: &[Vec<u8>], check: impl Fn(&[u8]) -> Result<(), DriverError>) -> Refusals {
    let mut seen = Refusals::default();
    for input in inputs {
        let shown = String::from_utf8_lossy(input);
        match catch_unwind(AssertUnwindSafe(|| check(input))) {
            Err(_) => panic!("{who}: the spec check panicked on {shown}"),
            Ok(Ok(())) => seen.accepted += 1,
            Ok(Err(e)) => {
                let field = e.field().unwrap_or_default();
                assert!(
                    e.kind() == ErrorKind::InvalidArgument && field.starts_with("providerSpec"),
                    "{who}: refused {shown} with {:?} naming {field:?} (expected INVALID_ARGUMENT naming a \
                     providerSpec field): {}",
                    e.kind(),
                    e.message()
                );
                seen.refused += 1;
            }
        }
    }
    seen
}

/// How [`check_refusals`]'s inputs were answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refusals {
    /// Inputs the check accepted.
    pub accepted: usize,
    /// Inputs the check refused, each naming its field.
    pub refused: usize,
}

/// The seed classes of `cloud` in `fuzz/corpus/provider_spec/` (the files
/// named `<cloud>.json` and `<cloud>-*.json`), read from the workspace whose
/// root is `workspace`. Panics when there is none or one is not JSON: the
/// seeds are part of the test.
pub fn corpus_seeds(workspace: &std::path::Path, cloud: &str) -> Vec<Value> {
    let dir = workspace.join("fuzz/corpus/provider_spec");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut seeds: Vec<(String, Value)> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name().and_then(|n| n.to_str()).is_some_and(|name| {
                name == format!("{cloud}.json") || (name.starts_with(&format!("{cloud}-")) && name.ends_with(".json"))
            })
        })
        .map(|path| {
            let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let value = serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path.display().to_string(), value)
        })
        .collect();
    assert!(!seeds.is_empty(), "no seed class for {cloud} in {}", dir.display());
    seeds.sort_by(|a, b| a.0.cmp(&b.0));
    seeds.into_iter().map(|(_, v)| v).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed() -> Value {
        json!({"region": "r", "tags": {"a": "1"}, "disks": [{"size": 50}], "flag": true})
    }

    #[test]
    fn the_same_seed_number_gives_the_same_inputs_and_they_differ_from_the_seed() {
        let a = mutations(&[seed()], 200, 7);
        assert_eq!(a, mutations(&[seed()], 200, 7));
        assert_ne!(a, mutations(&[seed()], 200, 8));
        let original = serde_json::to_vec(&seed()).unwrap();
        assert!(a.iter().filter(|i| **i != original).count() > 150, "most inputs change the seed");
        assert!(a.iter().any(|i| serde_json::from_slice::<Value>(i).is_err()), "some inputs are not JSON");
    }

    #[test]
    fn a_wrong_refusal_or_a_panic_fails_and_names_the_input() {
        let inputs = mutations(&[seed()], 50, 1);
        let unnamed = catch_unwind(|| {
            check_refusals("t", &inputs, |_| {
                Err(DriverError::new(ErrorKind::InvalidArgument, "INVALID", "no field named"))
            })
        });
        assert!(unnamed.is_err(), "a refusal without a providerSpec field must fail");
        let panics = catch_unwind(|| check_refusals("t", &inputs, |_| panic!("boom")));
        assert!(panics.is_err());
        let counted = check_refusals("t", &inputs, |raw| {
            if raw.len() % 2 == 0 { Ok(()) } else { Err(DriverError::invalid_argument("providerSpec.region", "odd")) }
        });
        assert_eq!(counted.accepted + counted.refused, inputs.len());
    }
}
