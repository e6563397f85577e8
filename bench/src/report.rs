//! Everything one run measured, as Markdown and as JSON.

use std::fmt::Write as _;

use serde::Serialize;

use crate::instructions::Instructions;
use crate::phases::fleet::{Fleet, FleetRound};
use crate::phases::footprint::{BinarySize, Startups};
use crate::phases::lifecycle::Lifecycle;
use crate::phases::overhead::Overhead;
use crate::phases::throughput::Throughput;
use crate::phases::update::Update;
use crate::targets::Target;

/// The machine the run was made on.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct MachineInfo {
    /// CPUs available to the process.
    pub(crate) cpus: usize,
    /// `model name` from /proc/cpuinfo.
    pub(crate) cpu_model: String,
    /// MemTotal, MiB.
    pub(crate) memory_mib: u64,
}

impl MachineInfo {
    /// Reads the local machine.
    pub(crate) fn local() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Self {
            cpus: std::thread::available_parallelism().map(usize::from).unwrap_or(0),
            cpu_model: cpuinfo
                .lines()
                .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split(':').nth(1)))
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            memory_mib: meminfo
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map_or(0, |kib| kib / 1024),
        }
    }
}

/// Phase 5's figures, gathered from several processes.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Footprint {
    /// Startups without a fake (the production shape).
    pub(crate) startups: Option<Startups>,
    /// Spawn → socket connectable of the processes started with the embedded fake, ms.
    pub(crate) socket_ready_with_fake_ms: Vec<f64>,
    /// Idle VmRSS of the driver with its embedded fake (no calls made yet), KiB.
    pub(crate) idle_rss_with_fake_kib: Option<u64>,
    /// VmHWM after the largest fleet round, KiB (driver and embedded fake holding the fleet).
    pub(crate) peak_rss_under_load_kib: Option<u64>,
    /// Concurrent calls of that round.
    pub(crate) peak_load_concurrency: usize,
    /// VmHWM after the fleet round on the driver without its embedded fake (the driver alone), KiB.
    pub(crate) peak_rss_without_fake_kib: Option<u64>,
    /// Concurrent calls of that round.
    pub(crate) peak_load_without_fake_concurrency: usize,
    /// Binary size.
    pub(crate) binary: Option<BinarySize>,
}

/// One run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// The command that produced it.
    pub(crate) command: String,
    /// The driver binary.
    pub(crate) driver: String,
    /// `GetPluginInfo.provider`.
    pub(crate) provider: String,
    /// `GetPluginInfo` name and version.
    pub(crate) plugin: String,
    /// Tiny sizes (`--quick`).
    pub(crate) quick: bool,
    /// Where it ran.
    pub(crate) machine: MachineInfo,
    /// Phase 1.
    pub(crate) overhead: Option<Overhead>,
    /// Phase 1 again with the fake's answers delayed by `cloud_latency_ms` (a modeled cloud).
    pub(crate) overhead_with_latency: Option<Overhead>,
    /// The delay of that repeat, ms.
    pub(crate) cloud_latency_ms: u64,
    /// Phase 2.
    pub(crate) lifecycle: Option<Lifecycle>,
    /// Phase 2b: UpdateMachine.
    pub(crate) update: Option<Update>,
    /// Phase 3.
    pub(crate) fleet: Option<Fleet>,
    /// Phase 3's round on the driver without its embedded fake (the fake as its own process).
    pub(crate) fleet_external: Option<Fleet>,
    /// Instructions per GetMachineStatus poll (`--instructions`).
    pub(crate) instructions: Option<Instructions>,
    /// Why `instructions` is missing although asked for (e.g. valgrind not found).
    pub(crate) instructions_note: Option<String>,
    /// Phase 4.
    pub(crate) throughput: Option<Throughput>,
    /// Phase 5.
    pub(crate) footprint: Footprint,
    /// The targets.
    pub(crate) targets: Vec<Target>,
    /// Phases that broke.
    pub(crate) errors: Vec<String>,
}

impl Report {
    /// A report with nothing measured yet.
    pub(crate) fn empty(provider: &str) -> Self {
        Self {
            command: String::new(),
            driver: String::new(),
            provider: provider.to_string(),
            plugin: String::new(),
            quick: false,
            machine: MachineInfo::default(),
            overhead: None,
            overhead_with_latency: None,
            cloud_latency_ms: 0,
            lifecycle: None,
            update: None,
            fleet: None,
            fleet_external: None,
            instructions: None,
            instructions_note: None,
            throughput: None,
            footprint: Footprint::default(),
            targets: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// The Markdown rendering.
    pub(crate) fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = self.write_markdown(&mut s);
        s
    }

    fn write_markdown(&self, s: &mut String) -> std::fmt::Result {
        writeln!(s, "## {} ({})\n", self.provider, self.plugin)?;
        writeln!(s, "`{}`\n", self.command)?;
        let m = &self.machine;
        writeln!(
            s,
            "Machine: {} CPUs ({}), {} MiB RAM. Driver binary: `{}`.\n",
            m.cpus, m.cpu_model, m.memory_mib, self.driver
        )?;

        if !self.targets.is_empty() {
            writeln!(s, "### Targets\n\n| target | figure | verdict |\n|---|---|---|")?;
            for t in &self.targets {
                writeln!(s, "| {} | {} | {} |", t.target, t.figure, t.verdict.word())?;
            }
            writeln!(s)?;
        }

        if let Some(o) = &self.overhead {
            writeln!(
                s,
                "### 1. Overhead: lone GetMachineStatus, sequential, K = {} (after {} warm-up)\n",
                o.iterations, o.warmup
            )?;
            write_overhead(s, o)?;
        }
        if let Some(o) = &self.overhead_with_latency {
            writeln!(
                s,
                "#### 1b. The same with every fake answer delayed by {} ms (a modeled cloud round trip), K = {}\n",
                self.cloud_latency_ms, o.iterations
            )?;
            write_overhead(s, o)?;
        }

        if let Some(l) = &self.lifecycle {
            writeln!(
                s,
                "### 2. Cloud calls per lifecycle step\n\n| step | outcome | attempts | calls | reads | by operation |\n|---|---|---|---|---|---|"
            )?;
            for st in &l.steps {
                writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} |",
                    st.step,
                    st.outcome,
                    st.attempts,
                    st.calls.total,
                    st.reads,
                    st.calls.breakdown()
                )?;
            }
            writeln!(s, "| **total** | | | **{}** | | |", l.total_calls)?;
            if !l.initialize_advertised {
                writeln!(s, "\nInitializeMachine skipped: the driver does not advertise INITIALIZE_MACHINE.")?;
            }
            writeln!(s)?;
        }

        if let Some(u) = &self.update {
            write_update(s, u)?;
        }

        if let Some(f) = &self.fleet {
            writeln!(
                s,
                "### 3. Fleet polling: N machines, N concurrent GetMachineStatus (driver with its embedded fake)\n"
            )?;
            write_fleet(s, f)?;
        }
        if let Some(f) = &self.fleet_external {
            writeln!(
                s,
                "#### 3b. Fleet polling on the driver WITHOUT its embedded fake (the fake as its own process)\n"
            )?;
            write_fleet(s, f)?;
        }

        if let Some(t) = &self.throughput {
            writeln!(
                s,
                "### 4. Creates under a cloud rate limit of {}/s (burst {}) in the fake and in the driver\n",
                t.rate_per_second, t.burst
            )?;
            writeln!(s, "| measure | value |\n|---|---|")?;
            writeln!(s, "| concurrent callers | {} |", t.concurrency)?;
            writeln!(s, "| duration | {:.2} s |", t.seconds)?;
            writeln!(s, "| creates OK | {} |", t.creates_ok)?;
            writeln!(
                s,
                "| creates per second | {:.2} (at most {:.2} at {:.2} calls per create) |",
                t.creates_per_second, t.max_creates_per_second, t.calls_per_create
            )?;
            writeln!(
                s,
                "| cloud requests accepted / allowed | {} / {:.0} = {:.1}% |",
                t.accepted_calls, t.allowed_calls, t.used_percent
            )?;
            writeln!(s, "| requests throttled by the fake | {} |", t.calls.throttled)?;
            writeln!(s, "| throttling errors that reached the caller | {} |", t.throttling_errors)?;
            let errors = if t.errors.is_empty() {
                "none".to_string()
            } else {
                t.errors.iter().map(|(k, v)| format!("{k}×{v}")).collect::<Vec<_>>().join(", ")
            };
            writeln!(s, "| all failed creates | {errors} |")?;
            writeln!(
                s,
                "| create latency p50 / p99 | {:.1} / {:.1} ms |",
                t.create_latency.p50_ms, t.create_latency.p99_ms
            )?;
            writeln!(s, "| by operation | {} |\n", t.calls.breakdown())?;
        }

        let f = &self.footprint;
        if f.startups.is_none() && f.binary.is_none() && f.socket_ready_with_fake_ms.is_empty() {
            return write_errors(s, &self.errors);
        }
        writeln!(s, "### 5. Footprint\n\n| measure | value |\n|---|---|")?;
        if let Some(st) = &f.startups {
            writeln!(
                s,
                "| spawn → socket connectable, no fake (median; samples) | {:.1} ms; {} |",
                st.socket_ready_median_ms,
                join_f(&st.socket_ready_ms)
            )?;
            writeln!(s, "| spawn → Probe ready, no fake (samples) | {} |", join_f(&st.probe_ready_ms))?;
            writeln!(
                s,
                "| idle RSS, no fake (median; samples) | {:.1} MiB; {} |",
                mib(st.idle_rss_median_kib),
                st.idle_rss_kib.iter().map(|k| format!("{:.1}", mib(*k))).collect::<Vec<_>>().join(", ")
            )?;
        }
        if !f.socket_ready_with_fake_ms.is_empty() {
            writeln!(
                s,
                "| spawn → socket connectable, with embedded fake | {} ms |",
                join_f(&f.socket_ready_with_fake_ms)
            )?;
        }
        if let Some(k) = f.idle_rss_with_fake_kib {
            writeln!(s, "| idle RSS, with embedded fake | {:.1} MiB |", mib(k))?;
        }
        if let Some(k) = f.peak_rss_under_load_kib {
            writeln!(
                s,
                "| peak RSS (VmHWM) after {} concurrent calls, with embedded fake holding the fleet | {:.1} MiB |",
                f.peak_load_concurrency,
                mib(k)
            )?;
        }
        if let Some(k) = f.peak_rss_without_fake_kib {
            writeln!(
                s,
                "| peak RSS (VmHWM) after {} concurrent calls, driver alone (fake in its own process) | {:.1} MiB |",
                f.peak_load_without_fake_concurrency,
                mib(k)
            )?;
        }
        if let Some(b) = &f.binary {
            let kind = if b.release {
                "release binary"
            } else {
                "binary size (the benchmarked DEBUG binary; no --release-binary given)"
            };
            writeln!(s, "| {kind} `{}` | {:.1} MiB |", b.path, b.bytes as f64 / (1024.0 * 1024.0))?;
        }
        writeln!(s)?;

        if let Some(i) = &self.instructions {
            writeln!(
                s,
                "### 6. Instructions per GetMachineStatus poll (callgrind, driver on an external fake)\n\n{:.0} instructions per poll = ({} − {}) / ({} − {}) (Ir of a dump after N2 polls minus one after N1 polls, all driver threads).\n",
                i.per_poll, i.ir[1], i.ir[0], i.polls[1], i.polls[0]
            )?;
            writeln!(
                s,
                "{:.0} instructions per GetVolumeIDs call (no cloud call: the per-RPC plumbing alone), measured the same way.\n",
                i.per_floor_rpc
            )?;
            if let Some(dir) = &i.kept_in {
                writeln!(s, "Dumps kept in `{dir}` (`callgrind_annotate --inclusive=yes <dump>`).\n")?;
            }
        } else if let Some(note) = &self.instructions_note {
            writeln!(s, "### 6. Instructions per GetMachineStatus poll\n\n{note}\n")?;
        }

        write_errors(s, &self.errors)
    }
}

/// The list of phases that broke, if any.
fn write_errors(s: &mut String, errors: &[String]) -> std::fmt::Result {
    if !errors.is_empty() {
        writeln!(s, "### Errors\n")?;
        for e in errors {
            writeln!(s, "- {e}")?;
        }
        writeln!(s)?;
    }
    Ok(())
}

/// The fields of an answer in short: those not UNCHANGED named, the UNCHANGED ones counted.
fn fields_summary(changes: &[crate::phases::update::Change]) -> String {
    let mut parts: Vec<String> =
        changes.iter().filter(|f| f.outcome != "UNCHANGED").map(|f| format!("`{}` {}", f.field, f.outcome)).collect();
    let unchanged = changes.iter().filter(|f| f.outcome == "UNCHANGED").count();
    if unchanged > 0 {
        let named = if parts.is_empty() { "" } else { "other " };
        parts.push(format!("{unchanged} {named}UNCHANGED"));
    }
    if parts.is_empty() { "none".into() } else { parts.join(", ") }
}

/// The UpdateMachine table: one row per call, then the fields of each answer.
fn write_update(s: &mut String, u: &Update) -> std::fmt::Result {
    writeln!(s, "### 2b. Cloud calls of one UpdateMachine\n")?;
    if !u.advertised {
        return writeln!(s, "Not measured: the driver does not advertise CAPABILITY_UPDATE_MACHINE.\n");
    }
    if let Some(note) = &u.note {
        return writeln!(s, "Not measured: {note}.\n");
    }
    let removable =
        u.removable.as_deref().map(|k| format!(" (the class created with tag `{k}` added)")).unwrap_or_default();
    writeln!(s, "Edit: `update.tagsPatch` `{}`{removable}.\n", u.tags_patch)?;
    writeln!(
        s,
        "| call | outcome | attempts | calls | reads | writes | by operation | fields |\n|---|---|---|---|---|---|---|---|"
    )?;
    for c in &u.calls {
        writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            c.step,
            c.outcome,
            c.attempts,
            c.calls.total,
            c.reads,
            c.writes,
            c.calls.breakdown(),
            fields_summary(&c.changes)
        )?;
    }
    writeln!(s)?;
    for c in &u.calls {
        for f in c.changes.iter().filter(|f| !f.detail.is_empty()) {
            writeln!(s, "- {}: `{}` {}: {}", c.step, f.field, f.outcome, f.detail)?;
        }
    }
    writeln!(s)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn join_f(v: &[f64]) -> String {
    v.iter().map(|x| format!("{x:.1}")).collect::<Vec<_>>().join(", ")
}

/// The table of one overhead measurement.
fn write_overhead(s: &mut String, o: &Overhead) -> std::fmt::Result {
    writeln!(s, "| path | p50 ms | p99 ms | max ms |\n|---|---|---|---|")?;
    writeln!(
        s,
        "| sidecar: GetMachineStatus over the Unix socket | {:.3} | {:.3} | {:.3} |",
        o.sidecar.p50_ms, o.sidecar.p99_ms, o.sidecar.max_ms
    )?;
    if let Some(d) = &o.direct {
        writeln!(
            s,
            "| direct: {} | {:.3} | {:.3} | {:.3} |",
            d.call, d.latency.p50_ms, d.latency.p99_ms, d.latency.max_ms
        )?;
    }
    writeln!(
        s,
        "| floor: GetVolumeIDs over the Unix socket (no cloud call) | {:.3} | {:.3} | {:.3} |",
        o.floor.p50_ms, o.floor.p99_ms, o.floor.max_ms
    )?;
    writeln!(
        s,
        "| echo: the same GetVolumeIDs answered by a bare tonic server | {:.3} | {:.3} | {:.3} |",
        o.echo.p50_ms, o.echo.p99_ms, o.echo.max_ms
    )?;
    if let Some(d) = &o.direct {
        writeln!(s, "| **ratio sidecar/direct** | **{:.2}** | **{:.2}** | |", d.ratio_p50, d.ratio_p99)?;
    }
    writeln!(s, "| **ratio floor/echo** | **{:.2}** | **{:.2}** | |\n", o.floor_echo_p50, o.floor_echo_p99)?;
    match &o.direct {
        Some(d) => writeln!(
            s,
            "Added over the direct call: {:.3} ms at p50, {:.3} ms at p99; the floor (an RPC without a cloud call) is {:.3} ms at p50. Cloud requests per sidecar poll: {:.2}.\n",
            d.added_p50_ms, d.added_p99_ms, o.floor.p50_ms, o.sidecar_cloud_calls_per_poll
        )?,
        None => writeln!(
            s,
            "No direct SDK client for this provider in this build: no sidecar/direct comparison. Cloud requests per sidecar poll: {:.2}.\n",
            o.sidecar_cloud_calls_per_poll
        )?,
    }
    Ok(())
}

/// The rounds table of one fleet measurement and how the fleet was built.
fn write_fleet(s: &mut String, f: &Fleet) -> std::fmt::Result {
    writeln!(
        s,
        "| N | cloud calls | by operation | p50 ms | p99 ms | max ms | wall ms | errors | peak RSS MiB (sampled) | VmHWM MiB |\n|---|---|---|---|---|---|---|---|---|---|"
    )?;
    for r in &f.rounds {
        write_round(s, r)?;
    }
    let b = &f.build;
    writeln!(
        s,
        "\nFleet built through the sidecar (client-side limit off): {} creates, {} in flight, {:.1} s, {:.2} cloud calls per create.\n",
        b.created, b.concurrency, b.seconds, b.cloud_calls_per_create
    )
}

/// One row of the fleet table.
fn write_round(s: &mut String, r: &FleetRound) -> std::fmt::Result {
    let errors = if r.errors.is_empty() {
        "0".to_string()
    } else {
        r.errors.iter().map(|(k, v)| format!("{k}×{v}")).collect::<Vec<_>>().join(", ")
    };
    writeln!(
        s,
        "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.0} | {} | {:.1} | {:.1} |",
        r.machines,
        r.calls.total,
        r.calls.breakdown(),
        r.latency.p50_ms,
        r.latency.p99_ms,
        r.latency.max_ms,
        r.wall_ms,
        errors,
        mib(r.rss_peak_sampled_kib),
        mib(r.hwm_after_kib)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_report_renders_and_serialises() {
        let mut r = Report::empty("gcp");
        r.errors.push("phase x broke".into());
        r.targets = crate::targets::check(&r);
        let md = r.markdown();
        assert!(md.contains("## gcp"));
        assert!(md.contains("| not measured |"));
        assert!(md.contains("- phase x broke"));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["provider"], "gcp");
        assert_eq!(json["targets"][0]["verdict"], "NOT_MEASURED");
    }

    #[test]
    fn update_table_summarises_the_fields() {
        use crate::phases::update::Change;
        let change = |field: &str, outcome: &str, detail: &str| Change {
            field: field.into(),
            outcome: outcome.into(),
            detail: detail.into(),
        };
        let changes = [
            change("providerSpec.tags", "APPLIED", "set a on the VM"),
            change("providerSpec.machineType", "UNCHANGED", ""),
            change("providerSpec.region", "UNCHANGED", ""),
        ];
        assert_eq!(fields_summary(&changes), "`providerSpec.tags` APPLIED, 2 other UNCHANGED");
        assert_eq!(fields_summary(&changes[1..]), "2 UNCHANGED");
        assert_eq!(fields_summary(&[]), "none");
        let mut r = Report::empty("gcp");
        r.update = Some(Update::skipped(false, None));
        assert!(r.markdown().contains("does not advertise CAPABILITY_UPDATE_MACHINE"));
    }
}
