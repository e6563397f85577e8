//! Behaviour settings posted to the admin API: latency, consistency, timing, rate limit.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::operations::{OpClass, OpSelector};

/// Body of `POST /_admin/latency`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencySpec {
    /// Exact operation name, class word or `*`.
    pub operation: String,
    /// Added delay in milliseconds; 0 removes the rule for this operation selector.
    pub ms: u64,
}

/// Latency rules; every matching rule's delay adds up.
#[derive(Debug, Default)]
pub struct LatencyRules {
    rules: Vec<(String, OpSelector, Duration)>,
}

impl LatencyRules {
    /// Sets (or with `ms: 0` removes) the delay for one selector.
    pub fn set(&mut self, spec: &LatencySpec) {
        self.rules.retain(|(text, _, _)| text != &spec.operation);
        if spec.ms > 0 {
            self.rules.push((
                spec.operation.clone(),
                OpSelector::parse(&spec.operation),
                Duration::from_millis(spec.ms),
            ));
        }
    }

    /// The total delay for a call of `operation`.
    pub fn delay_for(&self, operation: &str, class: Option<OpClass>) -> Duration {
        self.rules
            .iter()
            .filter(|(_, selector, _)| selector.matches(operation, class))
            .map(|(_, _, delay)| *delay)
            .sum()
    }
}

/// Body of `POST /_admin/rate-limit`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateLimitSpec {
    /// Tokens added per second; 0 disables the limit.
    pub per_second: f64,
    /// Bucket size; absent = `per_second`.
    #[serde(default)]
    pub burst: Option<f64>,
}

/// Body of `POST /_admin/consistency`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consistency {
    /// How long a newly created instance stays invisible to reads.
    pub invisible_ms: u64,
}

impl Consistency {
    /// The invisibility window as a duration.
    pub fn invisible(&self) -> Duration {
        Duration::from_millis(self.invisible_ms)
    }
}

/// Body of `POST /_admin/timing`: instance state transition delays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timing {
    /// How long an instance stays pending/provisioning before running.
    #[serde(default = "default_transition_ms")]
    pub boot_ms: u64,
    /// How long an instance stays shutting-down/stopping before terminated/gone.
    #[serde(default = "default_transition_ms")]
    pub stop_ms: u64,
    /// How long a cloud's long-running operation (a GCE zone operation, ...)
    /// runs before it is done; absent = the fake's own rule (each fake's
    /// README says which, e.g. fake-gce: an insert is done at half of
    /// `boot_ms`, a delete after `stop_ms`). Lets a test make operations take
    /// as long as on the real cloud (tens of seconds) to see a client's polling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_ms: Option<u64>,
}

fn default_transition_ms() -> u64 {
    300
}

impl Default for Timing {
    fn default() -> Self {
        Self { boot_ms: default_transition_ms(), stop_ms: default_transition_ms(), operation_ms: None }
    }
}

impl Timing {
    /// Boot delay as a duration.
    pub fn boot(&self) -> Duration {
        Duration::from_millis(self.boot_ms)
    }

    /// Stop delay as a duration.
    pub fn stop(&self) -> Duration {
        Duration::from_millis(self.stop_ms)
    }

    /// Operation duration, when one is set.
    pub fn operation(&self) -> Option<Duration> {
        self.operation_ms.map(Duration::from_millis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_rules_add_up_and_zero_removes() {
        let mut rules = LatencyRules::default();
        rules.set(&LatencySpec { operation: "*".into(), ms: 20 });
        rules.set(&LatencySpec { operation: "create".into(), ms: 5 });
        assert_eq!(rules.delay_for("RunInstances", Some(OpClass::Create)), Duration::from_millis(25));
        assert_eq!(rules.delay_for("DescribeInstances", Some(OpClass::Read)), Duration::from_millis(20));
        rules.set(&LatencySpec { operation: "*".into(), ms: 0 });
        assert_eq!(rules.delay_for("DescribeInstances", Some(OpClass::Read)), Duration::ZERO);
        rules.set(&LatencySpec { operation: "create".into(), ms: 7 });
        assert_eq!(rules.delay_for("RunInstances", Some(OpClass::Create)), Duration::from_millis(7));
    }

    #[test]
    fn timing_defaults() {
        let timing: Timing = serde_json::from_str(r#"{"boot_ms": 10}"#).expect("parse");
        assert_eq!(timing, Timing { boot_ms: 10, stop_ms: 300, operation_ms: None });
        assert_eq!(Timing::default().boot(), Duration::from_millis(300));
        let timing: Timing = serde_json::from_str(r#"{"operation_ms": 20000}"#).expect("parse");
        assert_eq!(timing.operation(), Some(Duration::from_secs(20)));
        assert_eq!((timing.boot_ms, timing.stop_ms), (300, 300));
    }
}
