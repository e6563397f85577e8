//! `--spawn-fake`: starts a standalone fake cloud (`fake-ec2`, `fake-gce`) before the driver,
//! so that its state outlives driver restarts, and stops it last.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::process::{free_port, log_tail, send_sigterm, wait_http_ok};
use crate::spawn::{CloudBackend, SpawnFailure};

/// A fake cloud child process listening on 127.0.0.1, with its log in a temporary directory.
#[derive(Debug)]
pub struct SpawnedFake {
    child: Child,
    endpoint: String,
    _dir: tempfile::TempDir,
    log: PathBuf,
}

/// The fake's command-line arguments (without the binary).
pub fn fake_args(port: u16) -> Vec<String> {
    vec!["--listen".to_string(), format!("127.0.0.1:{port}")]
}

impl SpawnedFake {
    /// Starts `binary --listen 127.0.0.1:<free port>` and waits until
    /// `http://127.0.0.1:<port>/_admin/calls` answers.
    pub async fn start(binary: &Path, startup: Duration) -> Result<Self, SpawnFailure> {
        let dir = tempfile::Builder::new()
            .prefix("conformance-fake-")
            .tempdir()
            .map_err(|e| format!("creating a temporary directory: {e}"))?;
        let log = dir.path().join("fake.log");
        let out = File::create(&log).map_err(|e| format!("creating {}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| format!("log file: {e}"))?;
        let port = free_port().map_err(|e| format!("finding a free port: {e}"))?;
        let child = Command::new(binary)
            .args(fake_args(port))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", binary.display()))?;
        let mut me = Self { child, endpoint: format!("http://127.0.0.1:{port}"), _dir: dir, log };
        let ready = wait_http_ok(&format!("{}/calls", me.backend().fake_admin_url()), startup).await;
        let ready = match (ready, me.child.try_wait()) {
            (_, Ok(Some(status))) => Err(format!("fake cloud exited during startup ({status})")),
            (r, _) => r,
        };
        match ready {
            Ok(()) => Ok(me),
            Err(reason) => {
                let _ = me.child.kill().await;
                Err(SpawnFailure { reason: format!("fake cloud: {reason}"), log_tail: me.log_tail(40) })
            }
        }
    }

    /// The backend to start the driver on: `--cloud-endpoint http://127.0.0.1:<port>`.
    pub fn backend(&self) -> CloudBackend {
        CloudBackend::External { endpoint: self.endpoint.clone() }
    }

    /// The last `lines` lines of the fake's captured output.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    /// Sends SIGTERM and waits up to `grace`; kills the fake if it does not exit.
    pub async fn stop(&mut self, grace: Duration) -> Result<(), String> {
        let Some(pid) = self.child.id() else {
            return Err("fake cloud had already exited".into());
        };
        send_sigterm(pid)?;
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("waiting for the fake cloud: {e}")),
            Err(_) => {
                let _ = self.child.kill().await;
                Err(format!("fake cloud did not exit within {grace:?} after SIGTERM (killed)"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listens_on_loopback_port() {
        assert_eq!(fake_args(8089), vec!["--listen".to_string(), "127.0.0.1:8089".to_string()]);
    }
}
