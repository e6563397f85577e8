//! The driver child process: start it, time its socket readiness, read its
//! memory from `/proc`, stop it.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use machine_driver_conformance::connection::Connection;
use machine_driver_proto::v1::ProbeRequest;
use tokio::process::{Child, Command};

/// Where the driver gets its cloud from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CloudMode {
    /// `--embedded-fake` on a free port: the fake runs inside the driver process.
    EmbeddedFake,
    /// No fake: `--cloud-endpoint` names a closed local port. For footprint only (no cloud call is made).
    Unreachable,
    /// `--cloud-endpoint` to a fake cloud running as its own process (its base URL).
    External(String),
}

/// A started, ready driver.
#[derive(Debug)]
pub(crate) struct DriverProcess {
    child: Child,
    pid: u32,
    _dir: tempfile::TempDir,
    socket: PathBuf,
    log: PathBuf,
    cloud_url: String,
    /// From spawn until the Unix socket accepted a connection.
    pub(crate) socket_ready: Duration,
    /// From spawn until Probe answered ready = true.
    pub(crate) probe_ready: Duration,
}

/// Memory figures of a process, KiB.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Memory {
    /// Resident set size now (`VmRSS`).
    pub(crate) rss_kib: u64,
    /// Peak resident set size (`VmHWM`).
    pub(crate) hwm_kib: u64,
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("finding a free port: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| format!("finding a free port: {e}"))
}

impl DriverProcess {
    /// Starts `binary --endpoint unix://<tmp>/driver.sock <cloud flags> <extra>` with its
    /// output captured to a log file, and waits for a connectable socket, then a ready Probe.
    pub(crate) async fn start(
        binary: &Path,
        mode: CloudMode,
        extra: &[String],
        timeout: Duration,
    ) -> Result<Self, String> {
        Self::start_wrapped(&[], binary, mode, extra, timeout).await
    }

    /// [`DriverProcess::start`] under a wrapper command (`wrapper[0] wrapper[1..] binary ...`,
    /// e.g. valgrind, which keeps the process id); no wrapper when `wrapper` is empty.
    pub(crate) async fn start_wrapped(
        wrapper: &[String],
        binary: &Path,
        mode: CloudMode,
        extra: &[String],
        timeout: Duration,
    ) -> Result<Self, String> {
        let dir =
            tempfile::Builder::new().prefix("bench-").tempdir().map_err(|e| format!("temporary directory: {e}"))?;
        let socket = dir.path().join("driver.sock");
        let log = dir.path().join("driver.log");
        let out = File::create(&log).map_err(|e| format!("creating {}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| format!("log file: {e}"))?;
        let port = free_port()?;
        let cloud_url = match &mode {
            CloudMode::External(url) => url.trim_end_matches('/').to_string(),
            _ => format!("http://127.0.0.1:{port}"),
        };

        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(binary);
                c
            }
            None => Command::new(binary),
        };
        cmd.arg("--endpoint").arg(format!("unix://{}", socket.display()));
        match mode {
            CloudMode::EmbeddedFake => {
                cmd.arg("--embedded-fake").arg("--embedded-fake-listen").arg(format!("127.0.0.1:{port}"));
            }
            CloudMode::Unreachable | CloudMode::External(_) => {
                cmd.arg("--cloud-endpoint").arg(&cloud_url);
            }
        }
        cmd.args(extra).stdin(Stdio::null()).stdout(out).stderr(err).kill_on_drop(true);
        let started = Instant::now();
        let child = cmd.spawn().map_err(|e| format!("starting {}: {e}", binary.display()))?;
        let pid = child.id().ok_or("the driver exited at once")?;
        let mut me = Self {
            child,
            pid,
            _dir: dir,
            socket,
            log,
            cloud_url,
            socket_ready: Duration::ZERO,
            probe_ready: Duration::ZERO,
        };
        match me.wait_ready(started, timeout).await {
            Ok(()) => Ok(me),
            Err(e) => {
                let _ = me.child.kill().await;
                Err(format!("{e}\n--- driver log tail ---\n{}", me.log_tail(30)))
            }
        }
    }

    async fn wait_ready(&mut self, started: Instant, timeout: Duration) -> Result<(), String> {
        loop {
            if started.elapsed() > timeout {
                return Err(format!("driver socket not connectable after {timeout:?}"));
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("driver exited during startup ({status})"));
            }
            if tokio::net::UnixStream::connect(&self.socket).await.is_ok() {
                self.socket_ready = started.elapsed();
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let mut last = String::new();
        while started.elapsed() < timeout {
            match self.connect().await {
                Ok(conn) => match conn.identity.clone().probe(ProbeRequest {}).await {
                    Ok(r) if r.get_ref().ready => {
                        self.probe_ready = started.elapsed();
                        return Ok(());
                    }
                    Ok(_) => last = "Probe answered ready = false".into(),
                    Err(s) => last = format!("Probe: {}", s.message()),
                },
                Err(e) => last = e,
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Err(format!("driver not ready after {timeout:?}: {last}"))
    }

    /// A new gRPC connection over the driver's Unix socket.
    pub(crate) async fn connect(&self) -> Result<Connection, String> {
        Connection::connect(&format!("unix://{}", self.socket.display())).await
    }

    /// The fake cloud's API URL (`http://127.0.0.1:PORT`); its admin API is under `/_admin`.
    pub(crate) fn cloud_url(&self) -> &str {
        &self.cloud_url
    }

    /// The driver's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Current and peak resident memory of the driver process.
    pub(crate) fn memory(&self) -> Result<Memory, String> {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .map_err(|e| format!("reading /proc/{}/status: {e}", self.pid))?;
        parse_memory(&text).ok_or_else(|| format!("/proc/{}/status has no VmRSS/VmHWM", self.pid))
    }

    /// A `'static` reader of the driver's current VmRSS (KiB), for samplers.
    pub(crate) fn memory_probe(&self) -> impl Fn() -> Option<u64> + Send + 'static {
        let path = format!("/proc/{}/status", self.pid);
        move || std::fs::read_to_string(&path).ok().and_then(|t| parse_memory(&t)).map(|m| m.rss_kib)
    }

    /// The last `lines` lines of the driver's output.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    pub(crate) async fn stop(mut self, grace: Duration) -> Result<(), String> {
        // kill(1), because the workspace forbids unsafe code (no libc::kill).
        let sent = std::process::Command::new("kill").arg("-TERM").arg(self.pid.to_string()).status();
        if !sent.is_ok_and(|s| s.success()) {
            let _ = self.child.kill().await;
            return Err(format!("could not send SIGTERM to pid {}", self.pid));
        }
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(s)) if s.success() => Ok(()),
            Ok(Ok(s)) => Err(format!("driver exited with {s} after SIGTERM")),
            Ok(Err(e)) => Err(format!("waiting for the driver: {e}")),
            Err(_) => {
                let _ = self.child.kill().await;
                Err(format!("driver did not exit within {grace:?} after SIGTERM (killed)"))
            }
        }
    }
}

/// `VmRSS` and `VmHWM` (KiB) from the text of `/proc/PID/status`.
fn parse_memory(status: &str) -> Option<Memory> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some(Memory { rss_kib: field("VmRSS:")?, hwm_kib: field("VmHWM:")? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rss_and_hwm() {
        let text = "Name:\tx\nVmPeak:\t  100 kB\nVmHWM:\t    9000 kB\nVmRSS:\t    8000 kB\nThreads:\t3\n";
        let m = parse_memory(text).unwrap();
        assert_eq!((m.rss_kib, m.hwm_kib), (8000, 9000));
        assert!(parse_memory("Name:\tx\n").is_none());
    }

    #[test]
    fn own_process_memory_is_readable() {
        let text = std::fs::read_to_string("/proc/self/status").unwrap();
        let m = parse_memory(&text).unwrap();
        assert!(m.rss_kib > 0 && m.hwm_kib >= m.rss_kib);
    }
}
