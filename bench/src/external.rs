//! The provider's fake cloud as its own process (for figures of the driver
//! alone): the binary named by `"fake"` in
//! `providers/<provider>/examples/conformance.json`, found next to the driver
//! binary, started by the conformance suite's `SpawnedFake`
//! (`--listen 127.0.0.1:<free port>`). The driver then gets `--cloud-endpoint`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use machine_driver_conformance::spawn::CloudBackend;
use machine_driver_conformance::spawn_fake::SpawnedFake;

use crate::process::{CloudMode, DriverProcess};
use crate::workload::examples_dir;

/// Grace given to the fake after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A fake cloud process and its base URL.
#[derive(Debug)]
pub(crate) struct ExternalFake {
    fake: SpawnedFake,
    url: String,
}

/// The fake's binary name from `conformance.json` (`"fake": "fake-ec2"`).
fn fake_name(conformance_json: &str) -> Result<String, String> {
    let conf: serde_json::Value = serde_json::from_str(conformance_json).map_err(|e| e.to_string())?;
    conf.get("fake")
        .and_then(serde_json::Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| "no \"fake\" key".to_string())
}

/// The provider's fake binary: `<driver's directory>/<conformance.json "fake">`.
pub(crate) fn fake_binary(driver: &Path, provider: &str) -> Result<PathBuf, String> {
    let path = examples_dir(provider).join("conformance.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let name = fake_name(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let dir = driver.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let binary = dir.join(&name);
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(format!("{} not found (build it: cargo build -p {name})", binary.display()))
    }
}

impl ExternalFake {
    /// Starts the provider's fake next to `driver` and waits until its admin API answers.
    pub(crate) async fn start(driver: &Path, provider: &str, timeout: Duration) -> Result<Self, String> {
        let binary = fake_binary(driver, provider)?;
        let fake = SpawnedFake::start(&binary, timeout)
            .await
            .map_err(|f| format!("{}: {}\n--- fake log tail ---\n{}", binary.display(), f.reason, f.log_tail))?;
        let url = match fake.backend() {
            CloudBackend::External { endpoint } => endpoint,
            CloudBackend::Embedded { port } => format!("http://127.0.0.1:{port}"),
        };
        Ok(Self { fake, url })
    }

    /// How the driver reaches it: `--cloud-endpoint <url>`.
    pub(crate) fn mode(&self) -> CloudMode {
        CloudMode::External(self.url.clone())
    }

    /// SIGTERM, then SIGKILL after a grace period.
    pub(crate) async fn stop(mut self) -> Result<(), String> {
        self.fake.stop(STOP_GRACE).await
    }
}

/// The provider a driver binary serves (`GetPluginInfo.provider`), asked of a
/// driver started without a fake.
pub(crate) async fn provider_of(driver: &Path, timeout: Duration) -> Result<String, String> {
    let d = DriverProcess::start(driver, CloudMode::Unreachable, &[], timeout).await?;
    let info = match d.connect().await {
        Ok(conn) => conn.describe().await.map(|(info, _)| info.provider),
        Err(e) => Err(e),
    };
    d.stop(STOP_GRACE).await?;
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_name_comes_from_conformance_json() {
        assert_eq!(fake_name(r#"{"fake":"fake-ec2","x":1}"#).unwrap(), "fake-ec2");
        assert!(fake_name(r#"{"x":1}"#).is_err());
        assert!(fake_name("not json").is_err());
    }

    #[test]
    fn every_provider_example_names_its_fake() {
        let providers = Path::new(env!("CARGO_MANIFEST_DIR")).join("../providers");
        let mut seen = 0;
        for entry in std::fs::read_dir(providers).unwrap() {
            let path = entry.unwrap().path().join("examples/conformance.json");
            if let Ok(text) = std::fs::read_to_string(&path) {
                assert!(fake_name(&text).unwrap().starts_with("fake-"), "{}", path.display());
                seen += 1;
            }
        }
        assert!(seen > 0);
    }
}
