//! Runs the selected scenarios one after another, each with its own tracker, and cleans
//! up after each: fake settings first, then every tracked machine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::connection::{Capabilities, Connection};
use crate::context::Ctx;
use crate::fake_admin::FakeAdmin;
use crate::filter::Filter;
use crate::outcome::{Outcome, ScenarioReport};
use crate::restart::Restarter;
use crate::scenario::Scenario;
use crate::scenarios::LEAK_CHECK;
use crate::settings::Settings;
use crate::tracker::Tracker;

/// The driver under test and the suite's inputs.
#[derive(Debug, Clone)]
pub struct Suite {
    /// Clients of the driver.
    pub conn: Connection,
    /// Inputs.
    pub settings: Arc<Settings>,
    /// Advertised capabilities.
    pub caps: Capabilities,
    /// The fake cloud's admin API, if any.
    pub fake: Option<FakeAdmin>,
    /// `GetPluginInfo.provider`.
    pub provider: String,
    /// Restarts the driver (only with `--spawn` and `--spawn-fake`); after a restart the
    /// scenarios and the cleanup use its connection instead of `conn`.
    pub restarter: Option<Restarter>,
}

/// Whether the scenario `name` runs under `filter`: the leak check honours only `--skip`.
pub fn selected(filter: &Filter, name: &str) -> bool {
    if name == LEAK_CHECK { !filter.skipped(name) } else { filter.selects(name) }
}

impl Suite {
    /// Runs every selected scenario in order, calling `on_report` after each.
    pub async fn run(
        &self,
        scenarios: &[Scenario],
        filter: &Filter,
        mut on_report: impl FnMut(&ScenarioReport),
    ) -> Vec<ScenarioReport> {
        if let Some(fake) = &self.fake {
            // A previous, interrupted run may have left settings behind.
            let _ = fake.clean_settings().await;
            for call in &self.settings.provider.fake_setup {
                if let Err(e) = fake.post(&call.path, call.body.clone()).await {
                    eprintln!("fakeSetup {}: {e}", call.path);
                }
            }
        }
        let mut reports = Vec::new();
        for s in scenarios.iter().filter(|s| selected(filter, s.name)) {
            let report = self.run_one(s).await;
            on_report(&report);
            reports.push(report);
        }
        reports
    }

    /// The connection to the driver's latest run.
    async fn current_conn(&self) -> Connection {
        match &self.restarter {
            Some(r) => r.connection().await,
            None => self.conn.clone(),
        }
    }

    /// Upper bound of one scenario, cleanup excluded.
    fn scenario_timeout(&self) -> Duration {
        self.settings.wait * 10 + self.settings.rpc_timeout
    }

    async fn run_one(&self, s: &Scenario) -> ScenarioReport {
        let started = Instant::now();
        if let Some(why) = s.skip_reason(&self.caps, self.fake.is_some()) {
            return ScenarioReport { name: s.name.to_string(), outcome: Outcome::Skip(why), duration: Duration::ZERO };
        }
        let mut ctx = Ctx {
            conn: self.current_conn().await,
            settings: self.settings.clone(),
            caps: self.caps.clone(),
            fake: self.fake.clone(),
            tracker: Tracker::default(),
            provider: self.provider.clone(),
            short: s.short,
            restarter: self.restarter.clone(),
        };
        let task = tokio::spawn((s.run)(ctx.clone()));
        let mut outcome = match tokio::time::timeout(self.scenario_timeout(), task).await {
            Ok(Ok(result)) => Outcome::from(result),
            Ok(Err(join)) => Outcome::Fail(format!("scenario panicked: {join}")),
            Err(_) => Outcome::Fail(format!("scenario timed out after {:?}", self.scenario_timeout())),
        };
        // The scenario may have restarted the driver: clean up through its latest run.
        ctx.conn = self.current_conn().await;
        let cleanup = cleanup(&ctx).await;
        if let (Err(why), Outcome::Pass | Outcome::Skip(_)) = (&cleanup, &outcome) {
            outcome = Outcome::Fail(format!("cleanup: {why}"));
        } else if let (Err(why), Outcome::Fail(reason)) = (&cleanup, &outcome) {
            outcome = Outcome::Fail(format!("{reason}; cleanup: {why}"));
        }
        ScenarioReport { name: s.name.to_string(), outcome, duration: started.elapsed() }
    }
}

/// Undoes fake settings, then deletes every tracked machine (retrying retryable errors).
async fn cleanup(ctx: &Ctx) -> Result<(), String> {
    let mut problems = Vec::new();
    if let Some(fake) = &ctx.fake
        && let Err(e) = fake.clean_settings().await
    {
        problems.push(e);
    }
    for m in ctx.tracker.machines() {
        if let Err(crate::outcome::Stop::Fail(why) | crate::outcome::Stop::Skip(why)) = ctx.must_delete(&m).await {
            problems.push(format!("deleting {}: {why}", m.name));
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leak_check_ignores_run_but_honours_skip() {
        let f = Filter::new(Some("^lifecycle/"), None).unwrap();
        assert!(selected(&f, "lifecycle/full"));
        assert!(!selected(&f, "identity/probe"));
        assert!(selected(&f, LEAK_CHECK));
        let f = Filter::new(None, Some("leak")).unwrap();
        assert!(!selected(&f, LEAK_CHECK));
    }
}
