//! Injected faults: which calls they hit, how often, and in which phase.

use serde::{Deserialize, Serialize};

use crate::operations::{OpClass, OpSelector};

/// The cloud-neutral kind of an injected error; each fake maps it to its cloud's real error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultKind {
    /// Request throttling (EC2 `RequestLimitExceeded`, GCE `rateLimitExceeded`).
    Throttle,
    /// No capacity or quota for the requested machine.
    Capacity,
    /// The cloud cannot place the machine where it was asked: its size or a
    /// feature it asks for is not offered in that region or zone (EC2
    /// `Unsupported`, ARM `SkuNotAvailable`, ECS `Zone.NotOnSale`, Nova's
    /// "No valid host was found"). Each fake answers its cloud's own error.
    Placement,
    /// The service is temporarily unavailable.
    Unavailable,
    /// An internal server error.
    Internal,
    /// The credentials were rejected.
    Auth,
    /// The caller may not perform the operation.
    Permission,
    /// The request was refused as invalid (EC2 `InvalidParameterValue`, GCE `invalid`).
    Invalid,
}

/// When a fault strikes relative to the call's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The call fails and has no effect (default).
    #[default]
    Before,
    /// The call takes effect, then its answer is replaced by the error (a lost response).
    After,
}

/// One fault rule as posted to `POST /_admin/faults`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultSpec {
    /// Exact operation name, class word or `*`.
    pub operation: String,
    /// The kind of error to answer with.
    pub kind: FaultKind,
    /// How many matching calls it hits; absent = every matching call.
    #[serde(default)]
    pub times: Option<u32>,
    /// Probability that a matching call is hit; absent = 1.0.
    #[serde(default)]
    pub probability: Option<f64>,
    /// Before or after the call's effect.
    #[serde(default)]
    pub phase: Phase,
}

#[derive(Debug)]
struct ActiveFault {
    id: String,
    selector: OpSelector,
    kind: FaultKind,
    remaining: Option<u32>,
    probability: f64,
    phase: Phase,
}

/// The set of active faults, in the order they were added.
#[derive(Debug, Default)]
pub struct FaultTable {
    next_id: u64,
    faults: Vec<ActiveFault>,
}

impl FaultTable {
    /// Adds a fault and returns its id. `probability` is clamped to `0.0..=1.0`.
    pub fn add(&mut self, spec: &FaultSpec) -> String {
        self.next_id += 1;
        let id = format!("fault-{}", self.next_id);
        self.faults.push(ActiveFault {
            id: id.clone(),
            selector: OpSelector::parse(&spec.operation),
            kind: spec.kind,
            remaining: spec.times,
            probability: spec.probability.unwrap_or(1.0).clamp(0.0, 1.0),
            phase: spec.phase,
        });
        self.faults.retain(|f| f.remaining != Some(0));
        id
    }

    /// Removes every fault.
    pub fn clear(&mut self) {
        self.faults.clear();
    }

    /// Number of active faults (exhausted ones are removed).
    pub fn len(&self) -> usize {
        self.faults.len()
    }

    /// Whether no fault is active.
    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }

    /// Decides whether a call of `operation` in `phase` is hit.
    ///
    /// Faults are tried in insertion order; `roll` yields uniform numbers in `0.0..1.0`
    /// (one per matching fault tried). A hit consumes one of the fault's `times`.
    pub fn strike(
        &mut self,
        operation: &str,
        class: Option<OpClass>,
        phase: Phase,
        mut roll: impl FnMut() -> f64,
    ) -> Option<FaultKind> {
        let index = self.faults.iter().position(|fault| {
            fault.phase == phase
                && fault.remaining != Some(0)
                && fault.selector.matches(operation, class)
                && (fault.probability >= 1.0 || roll() < fault.probability)
        })?;
        let fault = &mut self.faults[index];
        let kind = fault.kind;
        if let Some(remaining) = fault.remaining.as_mut() {
            *remaining = remaining.saturating_sub(1);
            if *remaining == 0 {
                self.faults.remove(index);
            }
        }
        Some(kind)
    }

    /// The ids of the active faults (for diagnostics).
    pub fn ids(&self) -> Vec<String> {
        self.faults.iter().map(|f| f.id.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(operation: &str, times: Option<u32>, probability: Option<f64>, phase: Phase) -> FaultSpec {
        FaultSpec { operation: operation.into(), kind: FaultKind::Throttle, times, probability, phase }
    }

    fn always() -> f64 {
        0.0
    }

    #[test]
    fn times_limits_hits_then_fault_disappears() {
        let mut table = FaultTable::default();
        table.add(&spec("create", Some(2), None, Phase::Before));
        let hit = |t: &mut FaultTable| t.strike("RunInstances", Some(OpClass::Create), Phase::Before, always);
        assert_eq!(hit(&mut table), Some(FaultKind::Throttle));
        assert_eq!(hit(&mut table), Some(FaultKind::Throttle));
        assert_eq!(hit(&mut table), None);
        assert!(table.is_empty());
    }

    #[test]
    fn absent_times_hits_forever_and_other_classes_pass() {
        let mut table = FaultTable::default();
        table.add(&spec("RunInstances", None, None, Phase::Before));
        for _ in 0..50 {
            assert!(table.strike("RunInstances", Some(OpClass::Create), Phase::Before, always).is_some());
        }
        assert!(table.strike("DescribeInstances", Some(OpClass::Read), Phase::Before, always).is_none());
    }

    #[test]
    fn phase_must_match() {
        let mut table = FaultTable::default();
        table.add(&spec("*", Some(1), None, Phase::After));
        assert!(table.strike("X", None, Phase::Before, always).is_none());
        assert_eq!(table.len(), 1);
        assert!(table.strike("X", None, Phase::After, always).is_some());
        assert!(table.is_empty());
    }

    #[test]
    fn probability_gates_hits_without_consuming_times() {
        let mut table = FaultTable::default();
        table.add(&spec("*", Some(1), Some(0.3), Phase::Before));
        assert!(table.strike("X", None, Phase::Before, || 0.5).is_none());
        assert_eq!(table.len(), 1, "a miss must not consume times");
        assert!(table.strike("X", None, Phase::Before, || 0.1).is_some());
        assert!(table.is_empty());
    }

    #[test]
    fn probability_is_roughly_honoured_with_real_randomness() {
        let mut table = FaultTable::default();
        table.add(&spec("*", None, Some(0.5), Phase::Before));
        let hits = (0..2000).filter(|_| table.strike("X", None, Phase::Before, rand::random::<f64>).is_some()).count();
        assert!((800..1200).contains(&hits), "hits = {hits}");
    }

    #[test]
    fn zero_probability_never_hits() {
        let mut table = FaultTable::default();
        table.add(&spec("*", None, Some(0.0), Phase::Before));
        assert!((0..100).all(|_| table.strike("X", None, Phase::Before, rand::random::<f64>).is_none()));
    }

    #[test]
    fn first_matching_fault_wins_and_ids_are_unique() {
        let mut table = FaultTable::default();
        let a = table.add(&FaultSpec { kind: FaultKind::Capacity, ..spec("create", Some(1), None, Phase::Before) });
        let b = table.add(&spec("*", None, None, Phase::Before));
        assert_ne!(a, b);
        assert_eq!(
            table.strike("RunInstances", Some(OpClass::Create), Phase::Before, always),
            Some(FaultKind::Capacity)
        );
        assert_eq!(
            table.strike("RunInstances", Some(OpClass::Create), Phase::Before, always),
            Some(FaultKind::Throttle)
        );
    }

    #[test]
    fn spec_deserializes_with_defaults() {
        let parsed: FaultSpec = serde_json::from_str(r#"{"operation":"create","kind":"throttle"}"#).expect("parse");
        assert_eq!(parsed.phase, Phase::Before);
        assert_eq!(parsed.times, None);
        assert_eq!(parsed.probability, None);
        assert!(serde_json::from_str::<FaultSpec>(r#"{"operation":"x","kind":"bogus"}"#).is_err());
    }
}
