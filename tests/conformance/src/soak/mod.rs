//! The soak: many machines through the whole lifecycle at once, driven as MCM drives them,
//! while the fake cloud fails a share of all calls (throttling, 5xx, lost answers, capacity
//! errors, invisible new instances) and the driver is killed with SIGKILL and restarted
//! several times; then checks that nothing a transient fault or a crash may not cause
//! happened (see the README, "Soak").
//!
//! - [`config`]: the flags; [`fault_mix`]: the fault rules; [`retry`]: MCM's retry periods;
//! - [`machine`]: one machine's lifecycle; [`client`]: the calls, each answer judged by
//!   [`answer`] and counted in [`tally`];
//! - [`restarts`]: when the driver is killed; [`ledger`]: instances per machine name;
//! - [`summary`]: the figures and the block printed at the end.

pub mod answer;
pub mod client;
pub mod config;
pub mod fault_mix;
pub mod ledger;
pub mod machine;
pub mod restarts;
pub mod retry;
pub mod rpc;
pub mod summary;
pub mod tally;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use machine_driver_proto::v1::{Capability, Machine};
use tokio::task::JoinSet;

use crate::context::{Ctx, MACHINE_PREFIX, NAMESPACE};
use crate::fake_admin::FakeAdmin;
use crate::outcome::{Outcome, ScenarioReport, Stop};
use crate::restart::Restarter;
use crate::scenarios::expect_no_leftovers;

use self::client::{Epoch, SoakClient};
use self::config::SoakConfig;
use self::ledger::Ledger;
use self::machine::{Lane, MachineOutcome};
use self::restarts::{MILESTONES_PER_MACHINE, Progress, Restarts};
use self::summary::Figures;
use self::tally::Tally;

/// How often the fake's inventory is sampled for the duplicate check.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// Names of the checks, in report order.
pub const CHECKS: [&str; 6] = [
    "soak/lifecycle-completed",
    "soak/restarts",
    "soak/no-duplicates",
    "soak/no-leaks",
    "soak/no-forbidden-answers",
    "soak/no-contract-breaches",
];

/// What a soak runs against.
#[derive(Debug, Clone)]
pub struct SoakTarget {
    /// Class, secret, deadline and capabilities (its connection is not used).
    pub ctx: Ctx,
    /// The spawned driver.
    pub restarter: Restarter,
    /// The standalone fake's admin API.
    pub fake: FakeAdmin,
    /// For the summary: `machine-driver-<cloud> 0.1.0 (provider <cloud>)`.
    pub driver: String,
    /// For the summary: the fake's binary name.
    pub fake_name: String,
}

/// The checks' reports and the figures of the run.
#[derive(Debug, Clone)]
pub struct SoakResult {
    /// One report per check of [`CHECKS`] (or a single `soak/setup` failure).
    pub reports: Vec<ScenarioReport>,
    /// The figures; `None` when the run could not start.
    pub figures: Option<Figures>,
}

fn report(name: &str, outcome: Outcome, duration: Duration) -> ScenarioReport {
    ScenarioReport { name: name.to_string(), outcome, duration }
}

fn verdict(problems: Vec<String>) -> Outcome {
    if problems.is_empty() { Outcome::Pass } else { Outcome::Fail(problems.join("; ")) }
}

/// The soak's machines: `conf-soak-<run>-<index>` with random uids, created now.
fn machines(prefix: &str, n: usize) -> Vec<Machine> {
    (0..n)
        .map(|i| Machine {
            name: format!("{prefix}{i:04}"),
            namespace: NAMESPACE.to_string(),
            uid: uuid::Uuid::new_v4().to_string(),
            creation_time: Some(prost_types::Timestamp::from(std::time::SystemTime::now())),
            ..Default::default()
        })
        .collect()
}

/// Samples the fake's inventory into a ledger until the run is finished.
async fn sample(fake: FakeAdmin, prefix: String, progress: Arc<Progress>) -> Ledger {
    let mut ledger = Ledger::new(&prefix);
    loop {
        if let Ok(inventory) = fake.inventory().await {
            ledger.observe(&inventory);
        }
        if progress.is_finished() {
            return ledger;
        }
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
}

async fn prepare(target: &SoakTarget, config: &SoakConfig) -> Result<(), String> {
    let fake = &target.fake;
    fake.clean_settings().await?;
    for call in &target.ctx.settings.provider.fake_setup {
        fake.post(&call.path, call.body.clone()).await?;
    }
    fake.reset_calls().await?;
    fake.set_invisible_ms(config.invisible_ms).await?;
    fault_mix::inject(fake, config.fault_rate).await.map(|_| ())
}

/// Runs the soak and its checks; the caller prints the reports and the figures' block.
pub async fn run(target: SoakTarget, config: SoakConfig) -> SoakResult {
    if let Err(e) = prepare(&target, &config).await {
        let _ = target.fake.clean_settings().await;
        return SoakResult { reports: vec![report("soak/setup", Outcome::Fail(e), Duration::ZERO)], figures: None };
    }
    let started = Instant::now();
    let run_id: String = uuid::Uuid::new_v4().simple().to_string().chars().take(6).collect();
    let prefix = format!("{MACHINE_PREFIX}soak-{run_id}-");
    let config = Arc::new(config);
    let tally = Arc::new(Tally::default());
    let epoch = Arc::new(Epoch::default());
    let progress = Arc::new(Progress::default());
    let lane = Lane {
        client: SoakClient::new(target.ctx.clone(), target.restarter.clone(), epoch.clone(), tally.clone()),
        fake: target.fake.clone(),
        config: config.clone(),
        progress: progress.clone(),
        initialize: target.ctx.has(Capability::InitializeMachine),
        deadline: started + config.timeout,
    };

    let sampler = tokio::spawn(sample(target.fake.clone(), prefix.clone(), progress.clone()));
    let plan = restarts::plan(config.restarts, config.machines * MILESTONES_PER_MACHINE, config.seed);
    let killer = tokio::spawn(restarts::drive(target.restarter.clone(), plan, progress.clone(), epoch.clone()));
    let all = machines(&prefix, config.machines);
    let names: BTreeSet<String> = all.iter().map(|m| m.name.clone()).collect();
    let mut workers = JoinSet::new();
    for m in all {
        let lane = lane.clone();
        workers.spawn(async move { lane.lifecycle(m).await });
    }
    let mut outcomes: Vec<MachineOutcome> = Vec::new();
    while let Some(joined) = workers.join_next().await {
        outcomes.push(joined.unwrap_or_else(|e| MachineOutcome {
            problem: Some(format!("machine task panicked: {e}")),
            ..Default::default()
        }));
    }
    progress.finish();
    let restarts = killer
        .await
        .unwrap_or_else(|e| Restarts { error: Some(format!("restart task panicked: {e}")), ..Default::default() });
    let mut ledger = sampler.await.unwrap_or_else(|_| Ledger::new(&prefix));
    let wall = started.elapsed();

    // The end of the faults: what follows runs on a healthy cloud.
    let settle = target.fake.clean_settings().await;
    let calls = target.fake.calls().await.unwrap_or_default();
    if let Ok(inventory) = target.fake.inventory().await {
        ledger.observe(&inventory);
    }
    let leftovers = clean_up_unfinished(&target, &outcomes).await;
    let counts = tally.snapshot();

    let mut reports = Vec::new();
    let unfinished: Vec<String> =
        outcomes.iter().filter_map(|o| o.problem.as_ref().map(|p| format!("{}: {p}", o.name))).collect();
    let mut lifecycle = Vec::new();
    if !unfinished.is_empty() {
        let shown: Vec<String> = unfinished.iter().take(5).cloned().collect();
        lifecycle.push(format!(
            "{} of {} machines did not get through: {}",
            unfinished.len(),
            outcomes.len(),
            shown.join("; ")
        ));
    }
    if let Err(e) = settle {
        lifecycle.push(format!("clearing the faults: {e}"));
    }
    reports.push(report(CHECKS[0], verdict(lifecycle), wall));

    let mut restart_problems = Vec::new();
    if let Some(e) = &restarts.error {
        restart_problems.push(e.clone());
    }
    if restarts.done < config.restarts {
        restart_problems.push(format!("{} restarts done, {} required", restarts.done, config.restarts));
    }
    reports.push(report(CHECKS[1], verdict(restart_problems), Duration::ZERO));

    let mut duplicate_problems = Vec::new();
    let duplicates = ledger.duplicates();
    if !duplicates.is_empty() {
        duplicate_problems.push(format!(
            "{} machines have more than one instance: {}",
            duplicates.len(),
            duplicates.join(", ")
        ));
    }
    let created: Vec<&str> = outcomes.iter().filter(|o| o.created).map(|o| o.name.as_str()).collect();
    let unseen = ledger.never_seen(created);
    if !unseen.is_empty() {
        duplicate_problems
            .push(format!("machines reported created but never in the fake's inventory: {}", unseen.join(", ")));
    }
    let strangers = ledger.strangers(&names);
    if !strangers.is_empty() {
        duplicate_problems.push(format!("instances named like no machine of the run: {}", strangers.join(", ")));
    }
    reports.push(report(CHECKS[2], verdict(duplicate_problems), Duration::ZERO));

    let leak_started = Instant::now();
    let leak = match expect_no_leftovers(&target.fake, &prefix, target.ctx.settings.wait).await {
        Ok(()) => verdict(leftovers),
        Err(Stop::Fail(why) | Stop::Skip(why)) => verdict(leftovers.into_iter().chain([why]).collect()),
    };
    reports.push(report(CHECKS[3], leak, leak_started.elapsed()));
    let forbidden = if counts.forbidden.count == 0 {
        Outcome::Pass
    } else {
        Outcome::Fail(format!("answers a transient fault must not produce: {}", counts.forbidden.describe()))
    };
    reports.push(report(CHECKS[4], forbidden, Duration::ZERO));
    let breaches = if counts.breaches.count == 0 { Outcome::Pass } else { Outcome::Fail(counts.breaches.describe()) };
    reports.push(report(CHECKS[5], breaches, Duration::ZERO));

    let count = |f: fn(&MachineOutcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
    let figures = Figures {
        driver: target.driver.clone(),
        fake: target.fake_name.clone(),
        flags: config.flags(),
        machines: config.machines,
        created: count(|o| o.created),
        initialized: count(|o| o.initialized),
        deleted: count(|o| o.deleted),
        gone: count(|o| o.gone),
        duplicates: duplicates.len(),
        instances: ledger.instances(),
        restarts,
        calls,
        counts,
        failed_checks: reports
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Fail(_)))
            .map(|r| r.name.clone())
            .collect(),
        checks: reports.len(),
        wall,
    };
    SoakResult { reports, figures: Some(figures) }
}

/// Deletes (faults cleared) every machine that did not get through, so that the leak check
/// tells a driver that leaks from a run that merely ran out of time; returns what failed.
async fn clean_up_unfinished(target: &SoakTarget, outcomes: &[MachineOutcome]) -> Vec<String> {
    let mut ctx = target.ctx.clone();
    ctx.conn = target.restarter.connection().await;
    let mut problems = Vec::new();
    for o in outcomes.iter().filter(|o| !o.gone && !o.machine.uid.is_empty()) {
        if let Err(Stop::Fail(why) | Stop::Skip(why)) = ctx.must_delete(&o.machine).await {
            problems.push(format!("deleting unfinished {}: {why}", o.name));
        }
    }
    problems
}
