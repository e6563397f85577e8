//! `--spawn`: starts a provider binary, on its embedded fake cloud or on an external one,
//! waits for it, restarts it on request, stops it.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use machine_driver_proto::v1::ProbeRequest;
use tokio::process::{Child, Command};

use crate::connection::Connection;
use crate::process::{free_port, log_tail, send_sigterm};

/// Which cloud the spawned driver talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloudBackend {
    /// The driver's in-process fake (`--embedded-fake`), listening on this port; it dies
    /// with the driver.
    Embedded {
        /// Port of `--embedded-fake-listen 127.0.0.1:<port>`.
        port: u16,
    },
    /// A cloud (fake) running on its own, passed as `--cloud-endpoint`; it outlives restarts.
    External {
        /// Base URL, e.g. `http://127.0.0.1:8089`.
        endpoint: String,
    },
}

impl CloudBackend {
    /// The fake admin API of this backend (`<base>/_admin`).
    pub fn fake_admin_url(&self) -> String {
        match self {
            Self::Embedded { port } => format!("http://127.0.0.1:{port}/_admin"),
            Self::External { endpoint } => format!("{}/_admin", endpoint.trim_end_matches('/')),
        }
    }

    /// Whether the cloud's state (instances, faults) survives a restart of the driver.
    pub fn survives_driver_restart(&self) -> bool {
        matches!(self, Self::External { .. })
    }
}

/// How a driver is stopped before a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// SIGKILL: a crash; in-memory state is lost and the socket file stays behind.
    Crash,
    /// SIGTERM: a graceful shutdown that must exit successfully.
    Graceful,
}

impl StopMode {
    /// The signal's name, for messages.
    pub fn signal(self) -> &'static str {
        match self {
            Self::Crash => "SIGKILL",
            Self::Graceful => "SIGTERM",
        }
    }
}

/// The driver's command-line arguments (without the binary).
pub fn driver_args(socket: &Path, backend: &CloudBackend, allow_list: &[String], extra: &[String]) -> Vec<String> {
    let mut args = vec!["--endpoint".to_string(), format!("unix://{}", socket.display())];
    match backend {
        CloudBackend::Embedded { port } => {
            args.extend(["--embedded-fake".to_string(), "--embedded-fake-listen".to_string()]);
            args.push(format!("127.0.0.1:{port}"));
        }
        CloudBackend::External { endpoint } => {
            args.extend(["--cloud-endpoint".to_string(), endpoint.clone()]);
        }
    }
    if !allow_list.is_empty() {
        args.extend(["--share-image-allow-list".to_string(), allow_list.join(",")]);
    }
    args.extend(extra.iter().cloned());
    args
}

/// A driver child process with its socket and log in a private temporary directory.
#[derive(Debug)]
pub struct SpawnedDriver {
    child: Child,
    binary: PathBuf,
    args: Vec<String>,
    backend: CloudBackend,
    dir: tempfile::TempDir,
    socket: PathBuf,
    log: PathBuf,
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

/// Starts `binary args` with stdout and stderr appended to `log`.
fn launch(binary: &Path, args: &[String], log: &Path) -> Result<Child, String> {
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("opening {}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| format!("log file: {e}"))?;
    Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", binary.display()))
}

impl SpawnedDriver {
    /// Starts the driver on `backend` ([`CloudBackend::Embedded`] on a free port when `None`):
    /// `binary --endpoint unix://<tmp>/sock/driver.sock <backend flags>
    /// [--share-image-allow-list L] <extra>`, with stdout and stderr captured to a log file,
    /// and waits until the socket answers Probe with ready = true.
    pub async fn start(
        binary: &Path,
        backend: Option<CloudBackend>,
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
        File::create(&log).map_err(|e| format!("creating {}: {e}", log.display()))?;
        let backend = match backend {
            Some(b) => b,
            None => CloudBackend::Embedded { port: free_port().map_err(|e| format!("finding a free port: {e}"))? },
        };
        let args = driver_args(&socket, &backend, allow_list, extra);
        let child = launch(binary, &args, &log)?;
        let mut me = Self { child, binary: binary.to_path_buf(), args, backend, dir, socket, log };
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

    /// The cloud the driver talks to.
    pub fn backend(&self) -> &CloudBackend {
        &self.backend
    }

    /// The fake admin API URL of the driver's cloud.
    pub fn fake_admin_url(&self) -> String {
        self.backend.fake_admin_url()
    }

    /// The last `lines` lines of the driver's captured output (all its runs).
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    /// Appends a marker line to the driver's log, so restarts are visible in the tail.
    fn mark_log(&self, line: &str) {
        if let Ok(mut f) = OpenOptions::new().append(true).open(&self.log) {
            let _ = writeln!(f, "--- conformance: {line} ---");
        }
    }

    /// Stops the driver (`how`), then starts it again with the same arguments and socket
    /// path and waits until it answers a ready Probe. A graceful stop must exit successfully
    /// within `grace`; after a crash the stale socket file is left for the driver to handle.
    pub async fn restart(&mut self, how: StopMode, grace: Duration, startup: Duration) -> Result<(), SpawnFailure> {
        let fail = |me: &Self, reason: String| SpawnFailure { reason, log_tail: me.log_tail(40) };
        if let Ok(Some(status)) = self.child.try_wait() {
            return Err(fail(self, format!("driver had already exited before the restart ({status})")));
        }
        match how {
            StopMode::Crash => {
                self.child.kill().await.map_err(|e| fail(self, format!("SIGKILL of the driver: {e}")))?;
            }
            StopMode::Graceful => {
                if let Err(e) = self.terminate(grace).await {
                    return Err(fail(self, e));
                }
            }
        }
        self.mark_log(&format!("driver stopped with {}, restarting", how.signal()));
        self.child = launch(&self.binary, &self.args, &self.log).map_err(|e| fail(self, e))?;
        self.wait_ready(startup).await.map_err(|e| fail(self, format!("after {}: {e}", how.signal())))
    }

    /// Sends SIGTERM and waits up to `grace` for a successful exit; kills the driver if it
    /// does not exit.
    async fn terminate(&mut self, grace: Duration) -> Result<(), String> {
        let Some(pid) = self.child.id() else {
            return Err("driver had already exited before SIGTERM".into());
        };
        send_sigterm(pid)?;
        let status = match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => return Err(format!("waiting for the driver: {e}")),
            Err(_) => {
                let _ = self.child.kill().await;
                return Err(format!("driver did not exit within {grace:?} after SIGTERM (killed)"));
            }
        };
        if status.success() { Ok(()) } else { Err(format!("driver exited with {status} after SIGTERM")) }
    }

    /// Sends SIGTERM and checks that the driver exits successfully within `grace` and removes
    /// its socket. Kills it if it does not exit.
    pub async fn stop(&mut self, grace: Duration) -> Result<(), String> {
        self.terminate(grace).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn embedded_backend_args() {
        let args = driver_args(
            Path::new("/tmp/x/sock/driver.sock"),
            &CloudBackend::Embedded { port: 4242 },
            &strings(&["img-a", "img-b"]),
            &strings(&["--log", "debug"]),
        );
        assert_eq!(
            args,
            strings(&[
                "--endpoint",
                "unix:///tmp/x/sock/driver.sock",
                "--embedded-fake",
                "--embedded-fake-listen",
                "127.0.0.1:4242",
                "--share-image-allow-list",
                "img-a,img-b",
                "--log",
                "debug",
            ])
        );
    }

    #[test]
    fn external_backend_args_use_cloud_endpoint_and_no_embedded_fake() {
        let backend = CloudBackend::External { endpoint: "http://127.0.0.1:8089".into() };
        let args = driver_args(Path::new("/s/driver.sock"), &backend, &[], &[]);
        assert_eq!(
            args,
            strings(&["--endpoint", "unix:///s/driver.sock", "--cloud-endpoint", "http://127.0.0.1:8089"])
        );
    }

    #[test]
    fn admin_urls_and_restartability() {
        let embedded = CloudBackend::Embedded { port: 9 };
        let external = CloudBackend::External { endpoint: "http://127.0.0.1:8089/".into() };
        assert_eq!(embedded.fake_admin_url(), "http://127.0.0.1:9/_admin");
        assert_eq!(external.fake_admin_url(), "http://127.0.0.1:8089/_admin");
        assert!(!embedded.survives_driver_restart());
        assert!(external.survives_driver_restart());
        assert_eq!(StopMode::Crash.signal(), "SIGKILL");
        assert_eq!(StopMode::Graceful.signal(), "SIGTERM");
    }
}
