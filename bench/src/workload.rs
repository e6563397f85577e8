//! The requests the benchmark sends through the sidecar: one machine class and
//! secret, fresh machines, and the four lifecycle RPCs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use machine_driver_conformance::connection::Connection;
use machine_driver_conformance::context::secret_data;
use machine_driver_conformance::settings::{read_provider_spec, read_secret};
use machine_driver_conformance::status_details::{describe, error_reason};
use machine_driver_proto::v1::{
    CreateMachineRequest, DeleteMachineRequest, GetMachineStatusRequest, GetMachineStatusResponse, GetVolumeIDsRequest,
    InitializeMachineRequest, Machine, MachineClass, SecretData, UpdateMachineRequest, UpdateMachineResponse,
};
use tonic::{Code, Request, Status};

/// Deadline of each RPC.
const RPC_TIMEOUT: Duration = Duration::from_secs(60);

/// Namespace of the benchmark's machines.
const NAMESPACE: &str = "bench";

/// AWS machines are spread over this many subnets: the fake's subnets hold 251
/// addresses each (like a real /24), far fewer than the 10,000-machine fleet
/// needs. Machines pick a subnet by uid, so the spread is uneven: 96 subnets
/// (24,096 addresses, about 104 machines each) keep the fullest one well
/// below 251 (48 did not: one filled up in a 10,000 run).
const AWS_SUBNETS: usize = 96;

/// The inputs of every request: classes, secret and the secret's raw key/value pairs.
#[derive(Debug, Clone)]
pub(crate) struct Inputs {
    /// Machine classes; each machine uses one, chosen by its uid (see [`Inputs::class_for`]).
    pub(crate) classes: Vec<MachineClass>,
    /// Secret sent with every request.
    pub(crate) secret: SecretData,
    /// The secret's string values (for the direct SDK client's credentials).
    pub(crate) secret_values: std::collections::BTreeMap<String, String>,
}

impl Inputs {
    /// Reads the class and secret, defaulting to the provider's examples.
    pub(crate) fn load(provider: &str, class: Option<&Path>, secret: Option<&Path>) -> Result<Self, String> {
        let examples = examples_dir(provider);
        let class_path = class.map(Path::to_path_buf).unwrap_or_else(|| examples.join("machine-class.json"));
        let secret_path = secret.map(Path::to_path_buf).unwrap_or_else(|| examples.join("secret.json"));
        let spec = read_provider_spec(&class_path)?;
        let secret_values = read_secret(&secret_path)?;
        let classes = spec_variants(provider, &spec)?
            .into_iter()
            .map(|provider_spec| MachineClass {
                name: "bench".into(),
                provider: provider.to_string(),
                provider_spec,
                ..Default::default()
            })
            .collect();
        Ok(Self { classes, secret: secret_data(&secret_values), secret_values })
    }
}

impl Inputs {
    /// The class of machine `m`: always the same one for the same uid.
    pub(crate) fn class_for(&self, m: &Machine) -> MachineClass {
        let hash = m.uid.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(usize::from(b)));
        self.classes.get(hash % self.classes.len().max(1)).cloned().unwrap_or_default()
    }
}

/// The provider specs machines are spread over: for AWS, the spec with its first
/// network interface's subnet varied over [`AWS_SUBNETS`] ids; otherwise the spec alone.
fn spec_variants(provider: &str, spec: &str) -> Result<Vec<String>, String> {
    let value: serde_json::Value = serde_json::from_str(spec).map_err(|e| format!("machine class: {e}"))?;
    let subnet = value.pointer("/networkInterfaces/0/subnetID").and_then(|v| v.as_str());
    let Some(subnet) = subnet.filter(|s| provider == "aws" && s.len() > 2 && s.is_ascii()) else {
        return Ok(vec![spec.to_string()]);
    };
    let stem = &subnet[..subnet.len() - 2];
    (0..AWS_SUBNETS)
        .map(|k| {
            let mut v = value.clone();
            if let Some(slot) = v.pointer_mut("/networkInterfaces/0/subnetID") {
                *slot = serde_json::Value::String(format!("{stem}{k:02x}"));
            }
            serde_json::to_string(&v).map_err(|e| format!("machine class: {e}"))
        })
        .collect()
}

/// The provider's `fakeSetup` admin calls (`examples/conformance.json`): what
/// its fake needs for a workload of this size (OpenStack's instance quota,
/// Azure's NIC reservation scaled down), as (path below `/_admin`, body).
pub(crate) fn fake_setup(provider: &str) -> Result<Vec<(String, serde_json::Value)>, String> {
    let path = examples_dir(provider).join("conformance.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(Vec::new());
    };
    let conf: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(conf
        .get("fakeSetup")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|call| {
            let path = call.get("path")?.as_str()?.to_string();
            Some((path, call.get("body").cloned().unwrap_or(serde_json::Value::Null)))
        })
        .collect())
}

/// `providers/<provider>/examples` under the current directory, else next to this crate.
pub(crate) fn examples_dir(provider: &str) -> PathBuf {
    let rel = PathBuf::from("providers").join(provider).join("examples");
    if rel.is_dir() {
        return rel;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

/// A new machine `bench-<tag>-<n>-<random>` with a random uid.
pub(crate) fn new_machine(tag: &str, n: usize) -> Machine {
    let uid = uuid::Uuid::new_v4();
    let suffix: String = uid.simple().to_string().chars().take(6).collect();
    Machine {
        name: format!("bench-{tag}-{n}-{suffix}"),
        namespace: NAMESPACE.into(),
        uid: uid.to_string(),
        ..Default::default()
    }
}

/// Codes after which the machine-controller retries the same call.
pub(crate) fn is_retryable(code: Code) -> bool {
    matches!(code, Code::Unavailable | Code::DeadlineExceeded | Code::Aborted)
}

/// Whether a status carries a cloud throttling reason (ErrorInfo or message).
pub(crate) fn is_throttling(status: &Status) -> bool {
    const REASONS: [&str; 4] = ["RequestLimitExceeded", "rateLimitExceeded", "Throttling", "RATE_LIMIT_EXCEEDED"];
    let reason = error_reason(status).unwrap_or_default();
    REASONS.iter().any(|r| reason.contains(r) || status.message().contains(r))
}

/// `CODE` or `CODE (reason)` of a failed call.
pub(crate) fn error_key(status: &Status) -> String {
    let code = machine_driver_conformance::status_details::code_name(status.code());
    match error_reason(status) {
        Some(r) if !r.is_empty() => format!("{code} ({r})"),
        _ => code.to_string(),
    }
}

/// The sidecar's MachineDriverService with the benchmark's inputs.
#[derive(Debug, Clone)]
pub(crate) struct Sidecar {
    conn: Connection,
    inputs: Inputs,
}

fn req<T>(msg: T) -> Request<T> {
    let mut r = Request::new(msg);
    r.set_timeout(RPC_TIMEOUT);
    r
}

impl Sidecar {
    /// Wraps a connection.
    pub(crate) fn new(conn: Connection, inputs: Inputs) -> Self {
        Self { conn, inputs }
    }

    /// The benchmark class of machine `m` (see [`Inputs::class_for`]).
    pub(crate) fn class_for(&self, m: &Machine) -> MachineClass {
        self.inputs.class_for(m)
    }

    /// CreateMachine; on success sets `m.provider_id`.
    pub(crate) async fn create(&self, m: &mut Machine) -> Result<(), Status> {
        let class = self.inputs.class_for(m);
        self.create_with(m, class).await
    }

    /// CreateMachine with `class` instead of the machine's benchmark class; on success sets `m.provider_id`.
    pub(crate) async fn create_with(&self, m: &mut Machine, class: MachineClass) -> Result<(), Status> {
        let r = CreateMachineRequest {
            machine: Some(m.clone()),
            machine_class: Some(class),
            secret: Some(self.inputs.secret.clone()),
        };
        let resp = self.conn.driver.clone().create_machine(req(r)).await?.into_inner();
        m.provider_id = resp.provider_id;
        Ok(())
    }

    /// CreateMachine retried on retryable errors for up to `within`; the last error otherwise.
    pub(crate) async fn create_retrying(&self, m: &mut Machine, within: Duration) -> Result<(), String> {
        let started = Instant::now();
        loop {
            match self.create(m).await {
                Ok(()) => return Ok(()),
                Err(s) if is_retryable(s.code()) && started.elapsed() < within => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(s) => return Err(format!("CreateMachine {}: {}", m.name, describe(&s))),
            }
        }
    }

    /// GetMachineStatus.
    pub(crate) async fn status(&self, m: &Machine) -> Result<GetMachineStatusResponse, Status> {
        let r = GetMachineStatusRequest {
            machine: Some(m.clone()),
            machine_class: Some(self.inputs.class_for(m)),
            secret: Some(self.inputs.secret.clone()),
        };
        Ok(self.conn.driver.clone().get_machine_status(req(r)).await?.into_inner())
    }

    /// Polls GetMachineStatus until the VM reports `running`/`RUNNING` (or `within` passes).
    pub(crate) async fn wait_running(&self, m: &Machine, within: Duration) -> Result<(), String> {
        let started = Instant::now();
        let mut last = String::new();
        while started.elapsed() < within {
            match self.status(m).await {
                Ok(s) if s.vm_state.eq_ignore_ascii_case("running") => return Ok(()),
                Ok(s) => last = format!("vm_state {:?}", s.vm_state),
                Err(s) => last = describe(&s),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("{} not running after {within:?}: {last}", m.name))
    }

    /// InitializeMachine.
    pub(crate) async fn initialize(&self, m: &Machine) -> Result<(), Status> {
        self.initialize_with(m, self.inputs.class_for(m)).await
    }

    /// InitializeMachine with `class` instead of the machine's benchmark class.
    pub(crate) async fn initialize_with(&self, m: &Machine, class: MachineClass) -> Result<(), Status> {
        let r = InitializeMachineRequest {
            machine: Some(m.clone()),
            machine_class: Some(class),
            secret: Some(self.inputs.secret.clone()),
        };
        self.conn.driver.clone().initialize_machine(req(r)).await.map(|_| ())
    }

    /// UpdateMachine of `m` to `class`, from `previous` (the class it was created or last updated with).
    pub(crate) async fn update(
        &self,
        m: &Machine,
        class: MachineClass,
        previous: MachineClass,
        validate_only: bool,
    ) -> Result<UpdateMachineResponse, Status> {
        let r = UpdateMachineRequest {
            machine: Some(m.clone()),
            machine_class: Some(class),
            secret: Some(self.inputs.secret.clone()),
            validate_only,
            previous_machine_class: Some(previous),
        };
        Ok(self.conn.driver.clone().update_machine(req(r)).await?.into_inner())
    }

    /// GetVolumeIDs of one CSI volume: an RPC that makes no cloud call, so its
    /// latency is the sidecar's floor (the gRPC hop and the per-RPC plumbing).
    pub(crate) async fn volume_ids(&self) -> Result<(), Status> {
        let r = GetVolumeIDsRequest {
            pv_specs_json: vec![r#"{"csi":{"driver":"bench.example.com","volumeHandle":"vol-bench"}}"#.into()],
        };
        self.conn.driver.clone().get_volume_i_ds(req(r)).await.map(|_| ())
    }

    /// DeleteMachine.
    pub(crate) async fn delete(&self, m: &Machine) -> Result<(), Status> {
        self.delete_with(m, self.inputs.class_for(m)).await
    }

    /// DeleteMachine with `class` instead of the machine's benchmark class.
    pub(crate) async fn delete_with(&self, m: &Machine, class: MachineClass) -> Result<(), Status> {
        let r = DeleteMachineRequest {
            machine: Some(m.clone()),
            machine_class: Some(class),
            secret: Some(self.inputs.secret.clone()),
        };
        self.conn.driver.clone().delete_machine(req(r)).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use tonic_types::{ErrorDetails, StatusExt};

    use super::*;

    #[test]
    fn machines_are_unique_and_named() {
        let a = new_machine("fleet", 3);
        let b = new_machine("fleet", 3);
        assert!(a.name.starts_with("bench-fleet-3-"));
        assert_ne!(a.uid, b.uid);
        assert_ne!(a.name, b.name);
    }

    #[test]
    fn throttling_is_recognised_by_reason() {
        let mut d = ErrorDetails::new();
        d.set_error_info("RequestLimitExceeded", "aws", HashMap::new());
        let s = Status::with_error_details(Code::Unavailable, "slow down", d);
        assert!(is_throttling(&s));
        assert_eq!(error_key(&s), "UNAVAILABLE (RequestLimitExceeded)");
        let other = Status::unavailable("backend error");
        assert!(!is_throttling(&other));
        assert_eq!(error_key(&other), "UNAVAILABLE");
    }

    #[test]
    fn inputs_default_to_the_provider_examples() {
        let i = Inputs::load("gcp", None, None).unwrap();
        assert_eq!(i.classes.len(), 1);
        assert_eq!(i.classes[0].provider, "gcp");
        assert!(i.secret.data.contains_key("serviceAccountJSON"));
    }

    #[test]
    fn aws_machines_are_spread_over_subnets_stably() {
        let i = Inputs::load("aws", None, None).unwrap();
        assert_eq!(i.classes.len(), AWS_SUBNETS);
        let subnet = |c: &MachineClass| {
            let v: serde_json::Value = serde_json::from_str(&c.provider_spec).unwrap();
            v["networkInterfaces"][0]["subnetID"].as_str().unwrap().to_string()
        };
        assert_eq!(subnet(&i.classes[0]), "subnet-0de0fa00000000000");
        assert_eq!(subnet(&i.classes[15]), "subnet-0de0fa0000000000f");
        let m = new_machine("x", 1);
        assert_eq!(i.class_for(&m), i.class_for(&m.clone()));
        let used: std::collections::BTreeSet<String> =
            (0..200).map(|n| subnet(&i.class_for(&new_machine("x", n)))).collect();
        assert!(used.len() > 8, "machines should land in many subnets: {used:?}");
    }
}
