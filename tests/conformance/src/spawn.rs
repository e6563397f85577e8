//! `--spawn`: starts a provider binary on its embedded fake cloud, waits for it, stops it.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use machine_driver_proto::v1::ProbeRequest;
use tokio::process::{Child, Command};

use crate::connection::Connection;

/// A driver child process with its socket and log in a private temporary directory.
#[derive(Debug)]
pub struct SpawnedDriver {
    child: Child,
    dir: tempfile::TempDir,
    socket: PathBuf,
    log: PathBuf,
    fake_admin_url: String,
}

/// Why the driver could not be started, with the end of its output.
#[derive(Debug, Clone)]
pub struct SpawnFailure {
    /// What went wrong.
    pub reason: String,
    /// The last lines of the driver's captured output (empty if it never ran).
    pub log_tail: String,
}

impl From<String> for SpawnFailure {
    fn from(reason: String) -> Self {
        Self { reason, log_tail: String::new() }
    }
}

/// A free TCP port on 127.0.0.1 (bound, then released for the child).
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl SpawnedDriver {
    /// Starts `binary --endpoint unix://<tmp>/sock/driver.sock --embedded-fake
    /// --embedded-fake-listen 127.0.0.1:<free port> [--share-image-allow-list L] <extra>`,
    /// with stdout and stderr captured to a log file, and waits until the socket answers
    /// Probe with ready = true.
    pub async fn start(
        binary: &Path,
        allow_list: &[String],
        extra: &[String],
        startup: Duration,
    ) -> Result<Self, SpawnFailure> {
        let dir = tempfile::Builder::new()
            .prefix("conformance-")
            .tempdir()
            .map_err(|e| format!("creating a temporary directory: {e}"))?;
        let sock_dir = dir.path().join("sock");
        std::fs::create_dir(&sock_dir).map_err(|e| format!("creating {}: {e}", sock_dir.display()))?;
        let socket = sock_dir.join("driver.sock");
        let log = dir.path().join("driver.log");
        let out = File::create(&log).map_err(|e| format!("creating {}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| format!("log file: {e}"))?;
        let port = free_port().map_err(|e| format!("finding a free port: {e}"))?;

        let mut cmd = Command::new(binary);
        cmd.arg("--endpoint")
            .arg(format!("unix://{}", socket.display()))
            .arg("--embedded-fake")
            .arg("--embedded-fake-listen")
            .arg(format!("127.0.0.1:{port}"));
        if !allow_list.is_empty() {
            cmd.arg("--share-image-allow-list").arg(allow_list.join(","));
        }
        cmd.args(extra).stdin(Stdio::null()).stdout(out).stderr(err).kill_on_drop(true);
        let child = cmd.spawn().map_err(|e| format!("starting {}: {e}", binary.display()))?;
        let mut me = Self { child, dir, socket, log, fake_admin_url: format!("http://127.0.0.1:{port}/_admin") };
        match me.wait_ready(startup).await {
            Ok(()) => Ok(me),
            Err(reason) => {
                let _ = me.child.kill().await;
                Err(SpawnFailure { reason, log_tail: me.log_tail(40) })
            }
        }
    }

    async fn wait_ready(&mut self, startup: Duration) -> Result<(), String> {
        let started = Instant::now();
        let mut last = String::from("socket not created");
        while started.elapsed() < startup {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("driver exited during startup ({status})"));
            }
            if self.socket.exists() {
                match Connection::connect(&self.endpoint()).await {
                    Ok(conn) => match conn.identity.clone().probe(ProbeRequest {}).await {
                        Ok(r) if r.get_ref().ready => return Ok(()),
                        Ok(_) => last = "Probe answered ready = false".into(),
                        Err(s) => last = format!("Probe: {}", s.message()),
                    },
                    Err(e) => last = e,
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("driver not ready after {startup:?}: {last}"))
    }

    /// The driver's endpoint, `unix:///...`.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The embedded fake's admin API URL.
    pub fn fake_admin_url(&self) -> &str {
        &self.fake_admin_url
    }

    /// The last `lines` lines of the driver's captured output.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Sends SIGTERM and checks that the driver exits successfully within `grace` and removes
    /// its socket. Kills it if it does not exit.
    pub async fn stop(&mut self, grace: Duration) -> Result<(), String> {
        let Some(pid) = self.child.id() else {
            return Err("driver had already exited before SIGTERM".into());
        };
        // SIGTERM through kill(1): the crate forbids unsafe code, so no libc::kill.
        let sent = std::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
        if !sent.is_ok_and(|s| s.success()) {
            return Err(format!("could not send SIGTERM to pid {pid}"));
        }
        let status = match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => return Err(format!("waiting for the driver: {e}")),
            Err(_) => {
                let _ = self.child.kill().await;
                return Err(format!("driver did not exit within {grace:?} after SIGTERM (killed)"));
            }
        };
        if !status.success() {
            return Err(format!("driver exited with {status} after SIGTERM"));
        }
        if self.socket.exists() {
            return Err(format!("driver left its socket {} behind", self.socket.display()));
        }
        let leftovers: Vec<String> = std::fs::read_dir(self.dir.path().join("sock"))
            .map(|rd| rd.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        if !leftovers.is_empty() {
            return Err(format!("driver left files in its socket directory: {leftovers:?}"));
        }
        Ok(())
    }
}
