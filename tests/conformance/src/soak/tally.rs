//! What the soak counts while machines run: every answer per RPC by code, the retries,
//! and the answers and observations that fail the run (with a few samples).

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use crate::soak::rpc::Rpc;

/// How many examples of each kind of problem are kept for the report.
const SAMPLES: usize = 8;

/// A count with its first few examples.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sampled {
    /// How many happened.
    pub count: u64,
    /// The first [`SAMPLES`] descriptions.
    pub samples: Vec<String>,
}

impl Sampled {
    fn add(&mut self, what: String) {
        self.count += 1;
        if self.samples.len() < SAMPLES {
            self.samples.push(what);
        }
    }

    /// `n: first; second; ...` or `0`.
    pub fn describe(&self) -> String {
        if self.count == 0 { "0".into() } else { format!("{}: {}", self.count, self.samples.join("; ")) }
    }
}

/// The counts of a run so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Answers per RPC by code label (`OK`, `UNAVAILABLE`, `transport:UNAVAILABLE`).
    pub answers: BTreeMap<Rpc, BTreeMap<String, u64>>,
    /// Calls made again after an error answer, per RPC.
    pub retried: BTreeMap<Rpc, u64>,
    /// Answers a transient fault must not produce (INTERNAL, INVALID_ARGUMENT, ...).
    pub forbidden: Sampled,
    /// Contract breaches seen in OK answers or in the flow: NOT_FOUND for a machine whose VM
    /// was created, a providerID that changes, an OK create without providerID, "not
    /// visible yet" for a VM the same driver process deleted.
    pub breaches: Sampled,
    /// Deleted machines whose status, after a driver restart, answered "not visible yet"
    /// (OK, pending `await-visibility`) instead of NOT_FOUND while the fake showed no live
    /// instance: a restarted driver cannot tell a deleted young machine from one whose VM
    /// the cloud does not show yet (driver.proto allows it for 10 minutes after creation).
    pub unseen_after_restart: u64,
}

impl Counts {
    /// Every call of `rpc`.
    pub fn calls(&self, rpc: Rpc) -> u64 {
        self.answers.get(&rpc).map_or(0, |codes| codes.values().sum())
    }
}

/// [`Counts`] shared by every machine of a run.
#[derive(Debug, Default)]
pub struct Tally(Mutex<Counts>);

impl Tally {
    fn with<R>(&self, f: impl FnOnce(&mut Counts) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Counts one answer of `rpc` under `label`.
    pub fn answer(&self, rpc: Rpc, label: &str) {
        self.with(|c| *c.answers.entry(rpc).or_default().entry(label.to_string()).or_default() += 1);
    }

    /// Counts a call of `rpc` about to be made again after an error.
    pub fn retried(&self, rpc: Rpc) {
        self.with(|c| *c.retried.entry(rpc).or_default() += 1);
    }

    /// Records a forbidden answer.
    pub fn forbidden(&self, what: String) {
        self.with(|c| c.forbidden.add(what));
    }

    /// Records a contract breach.
    pub fn breach(&self, what: String) {
        self.with(|c| c.breaches.add(what));
    }

    /// Counts a deleted machine answered "not visible yet" after a restart.
    pub fn unseen_after_restart(&self) {
        self.with(|c| c.unseen_after_restart += 1);
    }

    /// A copy of the counts.
    pub fn snapshot(&self) -> Counts {
        self.with(|c| c.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_answers_retries_and_keeps_few_samples() {
        let t = Tally::default();
        t.answer(Rpc::Create, "OK");
        t.answer(Rpc::Create, "UNAVAILABLE");
        t.answer(Rpc::Create, "UNAVAILABLE");
        t.retried(Rpc::Create);
        for i in 0..20 {
            t.forbidden(format!("INTERNAL {i}"));
        }
        let c = t.snapshot();
        assert_eq!(c.calls(Rpc::Create), 3);
        assert_eq!(c.calls(Rpc::Delete), 0);
        assert_eq!(c.answers[&Rpc::Create]["UNAVAILABLE"], 2);
        assert_eq!(c.retried[&Rpc::Create], 1);
        assert_eq!(c.forbidden.count, 20);
        assert_eq!(c.forbidden.samples.len(), SAMPLES);
        assert!(c.forbidden.describe().starts_with("20: INTERNAL 0; INTERNAL 1"));
        assert_eq!(c.breaches.describe(), "0");
    }
}
