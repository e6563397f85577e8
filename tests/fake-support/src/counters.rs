//! Per-operation call counters, as served by `GET /_admin/calls`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::faults::{FaultKind, Phase};
use crate::operations::OpClass;

/// Counts of cloud API requests since the last reset: the body of
/// `GET /_admin/calls`, served by the fakes and read by [`AdminClient`](crate::AdminClient).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallCounts {
    /// Requests by exact cloud operation name.
    #[serde(default)]
    pub calls: BTreeMap<String, u64>,
    /// Requests by operation class (`create`, `read`, `write`, `delete`), as
    /// the fake classifies its operations; nobody else keeps a copy of the lists.
    #[serde(default)]
    pub classes: BTreeMap<OpClass, u64>,
    /// All requests.
    #[serde(default)]
    pub total: u64,
    /// Requests refused by the rate limit.
    #[serde(default)]
    pub throttled: u64,
    /// Requests answered with an injected fault (`POST /_admin/faults`), by
    /// fault kind, in either phase; rate-limit refusals are in `throttled` only.
    #[serde(default)]
    pub injected: BTreeMap<FaultKind, u64>,
    /// Of the injected faults, those of phase `after`: the call took effect
    /// and its answer was replaced by the error (a lost answer).
    #[serde(default)]
    pub lost_answers: u64,
}

impl CallCounts {
    /// Records one request of `operation`, of `class` when the fake classifies it.
    pub fn record(&mut self, operation: &str, class: Option<OpClass>) {
        *self.calls.entry(operation.to_owned()).or_default() += 1;
        if let Some(class) = class {
            *self.classes.entry(class).or_default() += 1;
        }
        self.total += 1;
    }

    /// Records that a request was refused by the rate limit.
    pub fn record_throttled(&mut self) {
        self.throttled += 1;
    }

    /// Records that an injected fault of `kind` struck a request in `phase`.
    pub fn record_injected(&mut self, kind: FaultKind, phase: Phase) {
        *self.injected.entry(kind).or_default() += 1;
        if phase == Phase::After {
            self.lost_answers += 1;
        }
    }

    /// Requests answered with an injected fault, all kinds.
    pub fn injected_total(&self) -> u64 {
        self.injected.values().sum()
    }

    /// The count for one operation (0 when never called).
    pub fn of(&self, operation: &str) -> u64 {
        self.calls.get(operation).copied().unwrap_or(0)
    }

    /// The count for one operation class (0 when never called).
    pub fn of_class(&self, class: OpClass) -> u64 {
        self.classes.get(&class).copied().unwrap_or(0)
    }

    /// `Op×n, Op×n` in name order, or `none`.
    pub fn breakdown(&self) -> String {
        if self.calls.is_empty() {
            return "none".into();
        }
        self.calls.iter().map(|(op, n)| format!("{op}×{n}")).collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_operation_and_serializes_in_documented_shape() {
        let mut counts = CallCounts::default();
        counts.record("RunInstances", Some(OpClass::Create));
        counts.record("RunInstances", Some(OpClass::Create));
        counts.record("DescribeInstances", Some(OpClass::Read));
        counts.record("SomethingUnclassified", None);
        counts.record_throttled();
        counts.record_injected(FaultKind::Throttle, Phase::Before);
        counts.record_injected(FaultKind::Internal, Phase::After);
        counts.record_injected(FaultKind::Throttle, Phase::Before);
        assert_eq!((counts.injected_total(), counts.lost_answers), (3, 1));
        assert_eq!(counts.of("RunInstances"), 2);
        assert_eq!(counts.of("TerminateInstances"), 0);
        assert_eq!((counts.of_class(OpClass::Create), counts.of_class(OpClass::Delete)), (2, 0));
        assert_eq!(counts.breakdown(), "DescribeInstances×1, RunInstances×2, SomethingUnclassified×1");
        let json = serde_json::to_value(&counts).expect("serialize");
        assert_eq!(
            json,
            serde_json::json!({
                "calls": {"RunInstances": 2, "DescribeInstances": 1, "SomethingUnclassified": 1},
                "classes": {"create": 2, "read": 1},
                "total": 4,
                "throttled": 1,
                "injected": {"throttle": 2, "internal": 1},
                "lost_answers": 1
            })
        );
        let back: CallCounts = serde_json::from_value(json).expect("deserialize");
        assert_eq!(back, counts);
    }
}
