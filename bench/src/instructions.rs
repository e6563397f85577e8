//! Optional phase (`--instructions`): instructions the driver executes per
//! GetMachineStatus poll, counted by valgrind's callgrind (`perf stat` needs
//! hardware counters, which virtual machines often lack). The driver runs
//! under `valgrind --tool=callgrind --instr-atstart=no` on an external fake
//! (so that the fake's instructions are not counted); instrumentation is
//! switched on with `callgrind_control -i on` after a warm-up, the counters
//! are zeroed, and two dumps are taken: after `N1` polls and, counters zeroed
//! by the first dump, after `N2` more. Instructions per poll =
//! (Ir of the second − Ir of the first) / (N2 − N1), which cancels what the
//! dump requests themselves cost.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use tokio::process::Command;

use crate::workload::{Sidecar, new_machine};

/// Polls before the first dump.
const N1: usize = 20;
/// Polls before the second dump.
const N2: usize = 120;
/// Polls made with instrumentation on before the counters are zeroed.
const WARMUP: usize = 5;
/// Bound of a create or of the machine's boot under valgrind.
const SLOW: Duration = Duration::from_secs(300);

/// What the phase measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Instructions {
    /// Polls before the first dump (N1) and before the second (N2).
    pub(crate) polls: [usize; 2],
    /// Instructions (Ir) of each dump, all driver threads together.
    pub(crate) ir: [u64; 2],
    /// (Ir₂ − Ir₁) / (N2 − N1).
    pub(crate) per_poll: f64,
    /// The same for GetVolumeIDs, an RPC without a cloud call: the per-RPC
    /// plumbing (gRPC, span, metrics, deadline) alone.
    pub(crate) per_floor_rpc: f64,
    /// Where the dumps were kept (`--callgrind-dir`), for `callgrind_annotate`.
    pub(crate) kept_in: Option<String>,
}

/// Whether `valgrind` and `callgrind_control` can be run; the reason otherwise.
pub(crate) async fn available() -> Result<(), String> {
    for tool in ["valgrind", "callgrind_control"] {
        let ok = Command::new(tool).arg("--version").output().await.is_ok_and(|o| o.status.success());
        if !ok {
            return Err(format!("{tool} not found"));
        }
    }
    Ok(())
}

/// The directory callgrind writes its dumps into: a temporary one, or one
/// kept for `callgrind_annotate` (`--callgrind-dir`).
#[derive(Debug)]
pub(crate) struct Callgrind {
    dir: DumpDir,
}

#[derive(Debug)]
enum DumpDir {
    Temporary(tempfile::TempDir),
    Kept(PathBuf),
}

impl Callgrind {
    /// A fresh dump directory: `keep` (created, emptied of earlier dumps) or a temporary one.
    pub(crate) fn new(keep: Option<&std::path::Path>) -> Result<Self, String> {
        let dir = match keep {
            Some(path) => {
                std::fs::create_dir_all(path).map_err(|e| format!("{}: {e}", path.display()))?;
                for old in std::fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))?.flatten() {
                    if old.file_name().to_string_lossy().starts_with("callgrind.out") {
                        std::fs::remove_file(old.path()).map_err(|e| format!("{}: {e}", old.path().display()))?;
                    }
                }
                DumpDir::Kept(path.to_path_buf())
            }
            None => DumpDir::Temporary(
                tempfile::Builder::new()
                    .prefix("bench-callgrind-")
                    .tempdir()
                    .map_err(|e| format!("temporary directory: {e}"))?,
            ),
        };
        Ok(Self { dir })
    }

    fn path(&self) -> &std::path::Path {
        match &self.dir {
            DumpDir::Temporary(t) => t.path(),
            DumpDir::Kept(p) => p,
        }
    }

    /// The kept directory, if any.
    fn kept(&self) -> Option<String> {
        match &self.dir {
            DumpDir::Temporary(_) => None,
            DumpDir::Kept(p) => Some(p.display().to_string()),
        }
    }

    /// The command the driver is started under.
    pub(crate) fn wrapper(&self) -> Vec<String> {
        vec![
            "valgrind".into(),
            "--tool=callgrind".into(),
            "--instr-atstart=no".into(),
            format!("--callgrind-out-file={}", self.path().join("callgrind.out").display()),
        ]
    }

    fn files(&self) -> Result<BTreeSet<PathBuf>, String> {
        let entries = std::fs::read_dir(self.path()).map_err(|e| format!("{}: {e}", self.path().display()))?;
        Ok(entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
    }

    /// Asks for a dump and returns its Ir total (waits for the new dump file).
    async fn dump(&self, pid: u32, label: &str) -> Result<u64, String> {
        let before = self.files()?;
        control(pid, &[&format!("--dump={label}")]).await?;
        for _ in 0..600 {
            let fresh: Vec<PathBuf> = self.files()?.difference(&before).cloned().collect();
            for path in fresh {
                if let Some(ir) = std::fs::read_to_string(&path).ok().as_deref().and_then(total_ir) {
                    return Ok(ir);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("no callgrind dump {label:?} appeared in {}", self.path().display()))
    }
}

/// `callgrind_control <args> <pid>`.
async fn control(pid: u32, args: &[&str]) -> Result<(), String> {
    let out = Command::new("callgrind_control")
        .args(args)
        .arg(pid.to_string())
        .output()
        .await
        .map_err(|e| format!("callgrind_control: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "callgrind_control {} {pid}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The Ir total of a callgrind dump (`totals:`, else `summary:`).
fn total_ir(dump: &str) -> Option<u64> {
    let field = |key: &str| {
        dump.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
    };
    field("totals:").or_else(|| field("summary:"))
}

/// Measures instructions per poll of a driver (process `pid`) running under `callgrind`.
pub(crate) async fn measure(sidecar: &Sidecar, pid: u32, callgrind: &Callgrind) -> Result<Instructions, String> {
    let mut m = new_machine("instructions", 0);
    sidecar.create_retrying(&mut m, SLOW).await?;
    sidecar.wait_running(&m, SLOW).await?;
    let poll = |count: usize| {
        let m = &m;
        async move {
            for i in 0..count {
                sidecar.status(m).await.map_err(|s| format!("GetMachineStatus (poll {i}): {}", s.message()))?;
            }
            Ok::<(), String>(())
        }
    };
    poll(WARMUP).await?;
    control(pid, &["-i", "on"]).await?;
    poll(WARMUP).await?;
    control(pid, &["--zero"]).await?;
    poll(N1).await?;
    let first = callgrind.dump(pid, "first").await?;
    poll(N2).await?;
    let second = callgrind.dump(pid, "second").await?;
    let floor = |count: usize| async move {
        for i in 0..count {
            sidecar.volume_ids().await.map_err(|s| format!("GetVolumeIDs (call {i}): {}", s.message()))?;
        }
        Ok::<(), String>(())
    };
    floor(N1).await?;
    let floor_first = callgrind.dump(pid, "floor-first").await?;
    floor(N2).await?;
    let floor_second = callgrind.dump(pid, "floor-second").await?;
    control(pid, &["-i", "off"]).await?;
    Ok(Instructions {
        polls: [N1, N2],
        ir: [first, second],
        per_poll: second.saturating_sub(first) as f64 / (N2 - N1) as f64,
        per_floor_rpc: floor_second.saturating_sub(floor_first) as f64 / (N2 - N1) as f64,
        kept_in: callgrind.kept(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_totals_then_summary() {
        assert_eq!(total_ir("version: 1\nevents: Ir\nsummary: 99\nfn=x\n1 2\ntotals: 1234\n"), Some(1234));
        assert_eq!(total_ir("events: Ir\nsummary: 77\n"), Some(77));
        assert_eq!(total_ir("events: Ir\n"), None);
    }
}
