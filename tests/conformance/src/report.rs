//! Human-readable output: one line per scenario and the summary line.

use crate::outcome::{Outcome, ScenarioReport};

/// Counts of scenario outcomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Scenarios that passed.
    pub passed: usize,
    /// Scenarios that failed.
    pub failed: usize,
    /// Scenarios that were skipped.
    pub skipped: usize,
}

impl Summary {
    /// Counts the outcomes of `reports`.
    pub fn of(reports: &[ScenarioReport]) -> Self {
        let mut s = Summary::default();
        for r in reports {
            match r.outcome {
                Outcome::Pass => s.passed += 1,
                Outcome::Fail(_) => s.failed += 1,
                Outcome::Skip(_) => s.skipped += 1,
            }
        }
        s
    }

    /// The summary line, printed alone as the last line: `N passed, N failed, N skipped`.
    pub fn line(&self) -> String {
        format!("{} passed, {} failed, {} skipped", self.passed, self.failed, self.skipped)
    }
}

/// The result line of one scenario: `PASS name (12 ms)`, `FAIL name: reason`, `SKIP name: why`.
/// Reasons are flattened to one line.
pub fn result_line(report: &ScenarioReport) -> String {
    let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    match &report.outcome {
        Outcome::Pass => format!("PASS {} ({} ms)", report.name, report.duration.as_millis()),
        Outcome::Fail(why) => format!("FAIL {}: {}", report.name, one_line(why)),
        Outcome::Skip(why) => format!("SKIP {}: {}", report.name, one_line(why)),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn report(name: &str, outcome: Outcome) -> ScenarioReport {
        ScenarioReport { name: name.into(), outcome, duration: Duration::from_millis(12) }
    }

    #[test]
    fn lines_have_the_documented_shape() {
        assert_eq!(result_line(&report("identity/probe", Outcome::Pass)), "PASS identity/probe (12 ms)");
        assert_eq!(
            result_line(&report("a", Outcome::Fail("got\nUNKNOWN   twice".into()))),
            "FAIL a: got UNKNOWN twice"
        );
        assert_eq!(result_line(&report("b", Outcome::Skip("no fake".into()))), "SKIP b: no fake");
    }

    #[test]
    fn summary_counts_each_outcome() {
        let reports = [
            report("a", Outcome::Pass),
            report("b", Outcome::Pass),
            report("c", Outcome::Fail("x".into())),
            report("d", Outcome::Skip("y".into())),
        ];
        let s = Summary::of(&reports);
        assert_eq!(s, Summary { passed: 2, failed: 1, skipped: 1 });
        assert_eq!(s.line(), "2 passed, 1 failed, 1 skipped");
        assert_eq!(Summary::of(&[]).line(), "0 passed, 0 failed, 0 skipped");
    }
}
