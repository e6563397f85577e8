//! Per-operation call counters, as served by `GET /_admin/calls`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Counts of cloud API requests since the last reset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallCounts {
    /// Requests by exact cloud operation name.
    pub calls: BTreeMap<String, u64>,
    /// All requests.
    pub total: u64,
    /// Requests refused by the rate limit.
    pub throttled: u64,
}

impl CallCounts {
    /// Records one request of `operation`.
    pub fn record(&mut self, operation: &str) {
        *self.calls.entry(operation.to_owned()).or_default() += 1;
        self.total += 1;
    }

    /// Records that a request was refused by the rate limit.
    pub fn record_throttled(&mut self) {
        self.throttled += 1;
    }

    /// The count for one operation (0 when never called).
    pub fn of(&self, operation: &str) -> u64 {
        self.calls.get(operation).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_operation_and_serializes_in_documented_shape() {
        let mut counts = CallCounts::default();
        counts.record("RunInstances");
        counts.record("RunInstances");
        counts.record("DescribeInstances");
        counts.record_throttled();
        assert_eq!(counts.of("RunInstances"), 2);
        assert_eq!(counts.of("TerminateInstances"), 0);
        let json = serde_json::to_value(&counts).expect("serialize");
        assert_eq!(
            json,
            serde_json::json!({"calls": {"RunInstances": 2, "DescribeInstances": 1}, "total": 3, "throttled": 1})
        );
    }
}
