//! The figures of a soak run and the summary block printed at its end (plain text, meant to
//! be pasted into a README as it is).

use std::fmt::Write as _;
use std::time::Duration;

use crate::fake_admin::{Calls, OpClass};
use crate::soak::restarts::Restarts;
use crate::soak::rpc::Rpc;
use crate::soak::tally::Counts;

/// Everything the summary block shows.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// The driver: `machine-driver-<cloud> 0.1.0 (provider <cloud>)`.
    pub driver: String,
    /// The fake cloud binary's name.
    pub fake: String,
    /// The soak flags of the run (seed included).
    pub flags: String,
    /// Machines in the run.
    pub machines: usize,
    /// Machines whose VM was created (or adopted), initialized, deleted, gone.
    pub created: usize,
    /// Machines that reached initialized.
    pub initialized: usize,
    /// Machines whose delete was accepted.
    pub deleted: usize,
    /// Machines whose VM was reported gone.
    pub gone: usize,
    /// Machines with more than one instance.
    pub duplicates: usize,
    /// Instances the fake made for the run's machines.
    pub instances: usize,
    /// The restarts.
    pub restarts: Restarts,
    /// The fake's counters over the run.
    pub calls: Calls,
    /// The soak's own counts.
    pub counts: Counts,
    /// Names of failed checks.
    pub failed_checks: Vec<String>,
    /// Checks run.
    pub checks: usize,
    /// Wall time of the run (machines and restarts, not the final checks).
    pub wall: Duration,
}

fn per(n: u64, machines: usize) -> f64 {
    n as f64 / machines.max(1) as f64
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { 100.0 * part as f64 / whole as f64 }
}

impl Figures {
    /// The summary block: one `label  value` line each, between marker lines.
    pub fn block(&self) -> String {
        let mut b = String::new();
        let mut line = |label: &str, value: String| {
            let _ = writeln!(b, "{label:<21}{value}");
        };
        line("driver", format!("{} on {}", self.driver, self.fake));
        line("flags", self.flags.clone());
        line(
            "machines",
            format!(
                "{}: {} created, {} initialized, {} deleted, {} gone",
                self.machines, self.created, self.initialized, self.deleted, self.gone
            ),
        );
        line(
            "instances",
            format!("{} for {} machines, {} machines with duplicates", self.instances, self.machines, self.duplicates),
        );
        let downtime: Duration = self.restarts.downtime.iter().sum();
        let mean = downtime.checked_div(self.restarts.done.max(1) as u32).unwrap_or_default();
        line(
            "restarts",
            format!("{} (SIGKILL), driver away {:.2} s on average", self.restarts.done, mean.as_secs_f64()),
        );
        let c = &self.calls;
        let classified: u64 = c.classes.values().sum();
        line(
            "cloud calls",
            format!(
                "{} = {:.1} per machine (create {:.1}, read {:.1}, write {:.1}, delete {:.1}, unclassified {:.1})",
                c.total,
                per(c.total, self.machines),
                per(c.of_class(OpClass::Create), self.machines),
                per(c.of_class(OpClass::Read), self.machines),
                per(c.of_class(OpClass::Write), self.machines),
                per(c.of_class(OpClass::Delete), self.machines),
                per(c.total.saturating_sub(classified), self.machines),
            ),
        );
        let kinds: Vec<String> = c.injected.iter().map(|(k, n)| format!("{} {n}", kind_word(*k))).collect();
        line(
            "faults injected",
            format!(
                "{} = {:.1} % of cloud calls ({}); {} of them lost answers (phase after)",
                c.injected_total(),
                percent(c.injected_total(), c.total),
                if kinds.is_empty() { "none".into() } else { kinds.join(", ") },
                c.lost_answers
            ),
        );
        let rpcs: Vec<String> = Rpc::ALL
            .iter()
            .map(|r| {
                format!("{r} {} ({} retried)", self.counts.calls(*r), self.counts.retried.get(r).copied().unwrap_or(0))
            })
            .collect();
        line("rpc calls", rpcs.join(", "));
        for rpc in Rpc::ALL {
            let codes = self
                .counts
                .answers
                .get(&rpc)
                .map(|codes| codes.iter().map(|(code, n)| format!("{code} {n}")).collect::<Vec<_>>().join(", "));
            line(&format!("  {}", rpc.name()), codes.unwrap_or_else(|| "no calls".into()));
        }
        line("forbidden codes", self.counts.forbidden.describe());
        line("breaches", self.counts.breaches.describe());
        line(
            "unseen after restart",
            format!(
                "{} deleted machines answered \"not visible yet\" by a restarted driver (gone in the fake)",
                self.counts.unseen_after_restart
            ),
        );
        line("wall time", format!("{:.1} s", self.wall.as_secs_f64()));
        line(
            "result",
            if self.failed_checks.is_empty() {
                format!("PASS ({} checks)", self.checks)
            } else {
                format!("FAIL: {}", self.failed_checks.join(", "))
            },
        );
        format!("--- soak summary ---\n{b}--- end of soak summary ---")
    }
}

fn kind_word(kind: crate::fake_admin::FaultKind) -> String {
    serde_json::to_value(kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_else(|| format!("{kind:?}"))
}

#[cfg(test)]
mod tests {
    use crate::fake_admin::FaultKind;

    use super::*;

    #[test]
    fn block_shows_the_figures() {
        let mut f = Figures {
            driver: "machine-driver-x 1 (provider x)".into(),
            fake: "fake-x".into(),
            machines: 4,
            ..Default::default()
        };
        f.calls.total = 40;
        f.calls.classes.insert(OpClass::Read, 30);
        f.calls.classes.insert(OpClass::Create, 10);
        f.calls.injected.insert(FaultKind::Throttle, 10);
        f.calls.injected.insert(FaultKind::Capacity, 2);
        f.calls.lost_answers = 1;
        f.counts.answers.entry(Rpc::Create).or_default().insert("OK".into(), 4);
        f.restarts.done = 2;
        f.restarts.downtime = vec![Duration::from_millis(300), Duration::from_millis(500)];
        f.checks = 6;
        let block = f.block();
        assert!(block.contains("40 = 10.0 per machine (create 2.5, read 7.5"), "{block}");
        assert!(block.contains("12 = 30.0 % of cloud calls (throttle 10, capacity 2); 1 of them lost"), "{block}");
        assert!(block.contains("2 (SIGKILL), driver away 0.40 s"), "{block}");
        assert!(block.contains("\n  CreateMachine      OK 4\n"), "{block}");
        assert!(block.contains("PASS (6 checks)"), "{block}");
        f.failed_checks.push("soak/no-leaks".into());
        assert!(f.block().contains("FAIL: soak/no-leaks"));
    }
}
