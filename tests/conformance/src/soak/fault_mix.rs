//! The mix of faults the fake injects during a soak, as probability rules whose total is
//! the configured rate for every classified cloud call.
//!
//! The fake tries its fault rules in order and rolls each matching one independently
//! (`fake-support` `FaultTable::strike`: `before` rules when the call arrives, `after` rules
//! once it took effect). For a rule to hit a share `a` of all calls after rules with shares
//! `a_1..a_k` were tried first, its probability must be `a / (1 - (a_1 + ... + a_k))`.
//! Rules are posted per operation class, so that capacity errors strike only creates while
//! every class still fails at the same total rate. Calls the fake does not classify
//! (none in a machine's lifecycle) are never faulted.

use crate::fake_admin::{FakeAdmin, FaultKind, FaultSpec, OpClass, Phase};

/// One share of the mix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    /// What the fake answers.
    pub kind: FaultKind,
    /// `Before`: the call fails without effect; `After`: it takes effect, its answer is lost.
    pub phase: Phase,
    /// Weight within the mix of the classes it applies to.
    pub weight: f64,
    /// Applies to `create` calls only (capacity errors).
    pub create_only: bool,
}

const fn share(kind: FaultKind, phase: Phase, weight: f64, create_only: bool) -> Share {
    Share { kind, phase, weight, create_only }
}

/// The mix: throttling 40 %, 503 15 %, 500 15 %, lost answers 20 % (half 503, half 500,
/// phase `after`), and on creates capacity errors 10 % (on other classes the remaining
/// shares are scaled up to fill the rate).
pub const MIX: [Share; 6] = [
    share(FaultKind::Throttle, Phase::Before, 0.40, false),
    share(FaultKind::Unavailable, Phase::Before, 0.15, false),
    share(FaultKind::Internal, Phase::Before, 0.15, false),
    share(FaultKind::Capacity, Phase::Before, 0.10, true),
    share(FaultKind::Unavailable, Phase::After, 0.10, false),
    share(FaultKind::Internal, Phase::After, 0.10, false),
];

/// The classes rules are posted for.
pub const CLASSES: [OpClass; 4] = [OpClass::Create, OpClass::Read, OpClass::Write, OpClass::Delete];

fn class_word(class: OpClass) -> &'static str {
    match class {
        OpClass::Create => "create",
        OpClass::Read => "read",
        OpClass::Write => "write",
        OpClass::Delete => "delete",
    }
}

/// The fault rules, in the order they must be posted, for a total rate `rate` (0..1) of every
/// class: per class, the `before` shares, then the `after` shares.
pub fn rules(rate: f64) -> Vec<FaultSpec> {
    if rate <= 0.0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for class in CLASSES {
        let shares: Vec<&Share> = MIX.iter().filter(|s| !s.create_only || class == OpClass::Create).collect();
        let total_weight: f64 = shares.iter().map(|s| s.weight).sum();
        let ordered =
            shares.iter().filter(|s| s.phase == Phase::Before).chain(shares.iter().filter(|s| s.phase == Phase::After));
        let mut taken = 0.0;
        for s in ordered {
            let absolute = rate * s.weight / total_weight;
            out.push(FaultSpec {
                operation: class_word(class).to_string(),
                kind: s.kind,
                times: None,
                probability: Some((absolute / (1.0 - taken)).clamp(0.0, 1.0)),
                phase: s.phase,
            });
            taken += absolute;
        }
    }
    out
}

/// Posts the rules of [`rules`] to the fake; returns how many.
pub async fn inject(fake: &FakeAdmin, rate: f64) -> Result<usize, String> {
    let rules = rules(rate);
    for rule in &rules {
        fake.add_fault_spec(rule).await?;
    }
    Ok(rules.len())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use fake_cloud_support::FaultTable;

    use super::*;

    /// Runs `calls` calls of `class` through a fake's fault table with real randomness:
    /// hits by (kind, phase).
    fn simulate(rate: f64, class: OpClass, calls: usize) -> HashMap<(FaultKind, Phase), usize> {
        let mut table = FaultTable::default();
        for rule in rules(rate) {
            table.add(&rule);
        }
        let mut hits = HashMap::new();
        for _ in 0..calls {
            let hit = table
                .strike("Op", Some(class), Phase::Before, rand::random::<f64>)
                .map(|k| (k, Phase::Before))
                .or_else(|| {
                    table.strike("Op", Some(class), Phase::After, rand::random::<f64>).map(|k| (k, Phase::After))
                });
            if let Some(key) = hit {
                *hits.entry(key).or_insert(0) += 1;
            }
        }
        hits
    }

    #[test]
    fn every_class_fails_at_the_total_rate() {
        let calls = 40_000;
        for class in CLASSES {
            let hits = simulate(0.3, class, calls);
            let rate = hits.values().sum::<usize>() as f64 / calls as f64;
            assert!((0.285..0.315).contains(&rate), "{class:?}: rate {rate}");
            let lost: usize = hits.iter().filter(|((_, p), _)| *p == Phase::After).map(|(_, n)| n).sum();
            let lost_share = lost as f64 / calls as f64;
            let expected = if class == OpClass::Create { 0.06 } else { 0.3 * 0.2 / 0.9 };
            assert!((lost_share - expected).abs() < 0.01, "{class:?}: lost {lost_share}, expected {expected}");
            let capacity = hits.get(&(FaultKind::Capacity, Phase::Before)).copied().unwrap_or(0);
            assert_eq!(capacity > 0, class == OpClass::Create, "{class:?}: capacity hits {capacity}");
        }
    }

    #[test]
    fn probabilities_compensate_for_earlier_rules() {
        let create: Vec<FaultSpec> = rules(0.5).into_iter().filter(|r| r.operation == "create").collect();
        assert_eq!(create.len(), 6);
        assert!(create[..4].iter().all(|r| r.phase == Phase::Before));
        assert!(create[4..].iter().all(|r| r.phase == Phase::After));
        // First rule: its own share; the last: its share of what the others left over.
        assert!((create[0].probability.unwrap_or(0.0) - 0.2).abs() < 1e-9);
        assert!((create[5].probability.unwrap_or(0.0) - 0.05 / 0.55).abs() < 1e-9);
        assert_eq!(rules(0.5).len(), 6 + 3 * 5);
        assert!(rules(0.0).is_empty());
    }
}
