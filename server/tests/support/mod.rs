//! A test-only provider and helpers to run the real server on a real Unix socket.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use machine_driver_api::*;
use machine_driver_proto::v1 as pb;
use machine_driver_proto::v1::machine_driver_service_client::MachineDriverServiceClient;
use machine_driver_server::{CloudArgs, LogFormat, ServerArgs};
use tokio::sync::{Mutex, oneshot};
use tonic::transport::Channel;

/// What the test driver saw, shared with the test.
#[derive(Debug, Default)]
pub struct Seen {
    pub calls: AtomicUsize,
    /// Calls inside provider code right now, and the most there ever were at once.
    pub in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
    pub last_remaining: Mutex<Option<Duration>>,
    pub last_user_data: Mutex<Vec<u8>>,
}

/// An in-memory driver whose behaviour is steered by the machine name:
/// `err-<kind>` fails with that kind, `slow-<ms>` sleeps, anything else succeeds.
#[derive(Debug, Clone, Default)]
pub struct TestDriver {
    pub seen: Arc<Seen>,
}

fn steer(name: &str) -> Option<DriverError> {
    let kind = name.strip_prefix("err-")?;
    let kind = match kind {
        "invalid" => {
            return Some(DriverError::invalid_argument("providerSpec.machineType", "is not a known machine type"));
        }
        "notfound" => ErrorKind::NotFound,
        "exists" => ErrorKind::AlreadyExists,
        "duplicate" => ErrorKind::Duplicate,
        "throttle" => {
            return Some(DriverError::unavailable(
                "RequestLimitExceeded",
                "cloud throttled the request",
                Duration::from_secs(5),
            ));
        }
        "capacity" => ErrorKind::ResourceExhausted,
        "auth" => ErrorKind::Unauthenticated,
        "denied" => ErrorKind::PermissionDenied,
        "precondition" => ErrorKind::FailedPrecondition,
        "internal" => ErrorKind::Internal,
        _ => return None,
    };
    Some(DriverError::new(kind, "TEST_REASON", format!("steered failure {kind:?}")))
}

impl TestDriver {
    async fn enter(&self, ctx: &CallContext, name: &str) -> Result<()> {
        self.seen.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.seen.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.seen.max_in_flight.fetch_max(now, Ordering::SeqCst);
        *self.seen.last_remaining.lock().await = Some(ctx.remaining());
        if let Some(ms) = name.strip_prefix("slow-").and_then(|m| m.parse().ok()) {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        self.seen.in_flight.fetch_sub(1, Ordering::SeqCst);
        match steer(name) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Provider for TestDriver {
    const BINARY: &'static str = "machine-driver-test";
    const ABOUT: &'static str = "Test-only driver.";

    async fn connect(_options: CloudOptions) -> Result<Self> {
        Ok(Self::default())
    }
}

impl Driver for TestDriver {
    fn info(&self) -> DriverInfo {
        DriverInfo {
            name: "test.machine-driver.gardener.cloud".into(),
            version: "0.0.0-test".into(),
            provider: "test",
            capabilities: Capabilities {
                initialize_machine: true,
                list_machines: true,
                get_volume_ids: true,
                share_image: true,
                revoke_image_share: true,
                update_machine: true,
            },
            max_user_data_bytes: 1024,
            secret_keys: SecretKeys::all_of(&[&["accessKeyID", "providerAccessKeyId"]]),
        }
    }

    async fn create_machine(&self, ctx: &CallContext, req: CreateMachine) -> Result<CreatedMachine> {
        self.enter(ctx, &req.machine.name).await?;
        *self.seen.last_user_data.lock().await = req.user_data.0.clone();
        Ok(CreatedMachine {
            provider_id: format!("test:///{}", req.machine.uid),
            node_name: req.machine.name.clone(),
            last_known_state: "created".into(),
            addresses: vec![Address::new(AddressType::InternalIp, "10.0.0.1")],
        })
    }

    async fn get_machine_status(&self, ctx: &CallContext, req: MachineRef) -> Result<MachineStatus> {
        self.enter(ctx, &req.machine.name).await?;
        // A pretend cloud read, so that tests see its `cloud_call` span and metrics under the RPC.
        let read = async { Ok::<(), std::convert::Infallible>(()) };
        let _ = cloud_call(CloudCall { provider: "test", service: "test", operation: "GetInstance" }, read).await;
        Ok(MachineStatus {
            provider_id: format!("test:///{}", req.machine.name),
            node_name: req.machine.name,
            addresses: vec![],
            pending_steps: vec!["disable-source-dest-check".into()],
            vm_state: "running".into(),
        })
    }

    async fn initialize_machine(&self, ctx: &CallContext, req: MachineRef) -> Result<InitializedMachine> {
        self.enter(ctx, &req.machine.name).await?;
        Ok(InitializedMachine {
            provider_id: "test:///x".into(),
            node_name: req.machine.name,
            applied_steps: vec!["disable-source-dest-check".into()],
        })
    }

    async fn delete_machine(&self, ctx: &CallContext, req: MachineRef) -> Result<DeletedMachine> {
        self.enter(ctx, &req.machine.name).await?;
        Ok(DeletedMachine { last_known_state: "deleted".into(), already_gone: req.machine.name.is_empty() })
    }

    async fn list_machines(&self, ctx: &CallContext, _req: ListMachines) -> Result<Vec<(String, String)>> {
        self.enter(ctx, "").await?;
        Ok(vec![("test:///a".into(), "a".into())])
    }

    fn get_volume_ids(&self, specs: &[serde_json::Value]) -> Result<Vec<String>> {
        self.seen.calls.fetch_add(1, Ordering::SeqCst);
        Ok(specs
            .iter()
            .filter_map(|s| s.pointer("/csi/volumeHandle").and_then(|v| v.as_str()).map(String::from))
            .collect())
    }

    /// Tags from the class's `tags` against a VM that has `{"team": "a"}`;
    /// `machineType` against `m1`: the kit's plan decides the answer.
    async fn update_machine(&self, ctx: &CallContext, req: UpdateMachine) -> Result<UpdatedMachine> {
        self.enter(ctx, &req.machine.name).await?;
        let spec: serde_json::Value = serde_json::from_slice(&req.class.provider_spec).unwrap_or_default();
        let tags_of = |v: &serde_json::Value| -> std::collections::BTreeMap<String, String> {
            v.get("tags")
                .and_then(|t| t.as_object())
                .map(|t| t.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
                .unwrap_or_default()
        };
        let previous =
            req.previous_class.as_ref().map(|c| tags_of(&serde_json::from_slice(&c.provider_spec).unwrap_or_default()));
        let on_vm = [("team".to_owned(), "a".to_owned())].into();
        let plan_vm = TagPlan::new(&on_vm, &tags_of(&spec), previous.as_ref());
        let mut plan = UpdatePlan::new(req.machine.provider_id.unwrap_or_default(), req.validate_only);
        plan.tags("providerSpec.tags", [("the VM", &plan_vm)]);
        let machine_type = spec.get("machineType").and_then(|t| t.as_str()).unwrap_or("m1");
        plan.compare_replacement("providerSpec.machineType", "m1", machine_type);
        plan.finish()
    }

    async fn share_image(&self, ctx: &CallContext, req: ShareImage) -> Result<SharedImage> {
        self.enter(ctx, "").await?;
        Ok(SharedImage {
            image_id: req.image,
            granted_now: req.owner_secret.is_some(),
            consumer_account: req.consumer_account.unwrap_or_default(),
        })
    }

    async fn revoke_image_share(&self, ctx: &CallContext, req: RevokeImageShare) -> Result<RevokedImageShare> {
        self.enter(ctx, "").await?;
        // The owner's keys reach the driver: revoked_now says they did.
        Ok(RevokedImageShare {
            revoked_now: req.owner_secret.has("accessKeyID"),
            consumer_account: req.consumer_account.unwrap_or_default(),
        })
    }

    async fn list_image_shares(&self, ctx: &CallContext, req: ListImageShares) -> Result<ImageShares> {
        self.enter(ctx, "").await?;
        Ok(ImageShares { consumer_accounts: vec![req.image], public: req.owner_secret.has("accessKeyID") })
    }
}

/// A unique socket path in the temp dir.
pub fn socket_path(tag: &str) -> PathBuf {
    let n = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    std::env::temp_dir().join(format!("mds-{tag}-{}-{n}.sock", std::process::id()))
}

/// Server flags for tests.
pub fn args(socket: &std::path::Path) -> ServerArgs {
    ServerArgs {
        endpoint: format!("unix://{}", socket.display()),
        socket_mode: 0o660,
        metrics_listen: None,
        log_format: LogFormat::Text,
        log: "info".into(),
        otlp_endpoint: None,
        trace_filter: "info,machine_driver_api=debug".into(),
        default_timeout: Duration::from_secs(10),
        max_concurrent_calls: 16,
        request_body_timeout: Duration::from_secs(10),
        max_buffered_request_bytes: 256 << 20,
        max_connections: 64,
        max_streams_per_connection: 400,
        http2_keepalive_interval: Duration::from_secs(30),
        http2_keepalive_timeout: Duration::from_secs(10),
        shutdown_grace: Duration::from_secs(5),
        share_image_allow_list: vec!["img-allowed".into()],
        registry_config: None,
        strict_provider_spec: false,
        cloud: CloudArgs {
            cloud_endpoint: None,
            cloud_rate_limit: 0.0,
            cloud_burst: 1,
            embedded_fake: false,
            embedded_fake_listen: "127.0.0.1:0".parse().expect("addr"),
        },
    }
}

/// A running server; `stop()` triggers graceful shutdown.
pub struct Running {
    pub socket: PathBuf,
    pub driver: TestDriver,
    stop: Option<oneshot::Sender<()>>,
    pub done: tokio::task::JoinHandle<Result<(), machine_driver_server::ServeError>>,
}

impl Running {
    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// Starts the real server with the test driver and waits for its socket.
pub async fn start(tag: &str, tweak: impl FnOnce(&mut ServerArgs)) -> Running {
    let socket = socket_path(tag);
    let mut a = args(&socket);
    tweak(&mut a);
    let driver = TestDriver::default();
    let (tx, rx) = oneshot::channel::<()>();
    let d = driver.clone();
    let done = tokio::spawn(async move {
        machine_driver_server::serve(
            a,
            d,
            async {
                let _ = rx.await;
            },
            None,
        )
        .await
    });
    for _ in 0..200 {
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Running { socket, driver, stop: Some(tx), done }
}

/// A channel to a Unix socket.
pub async fn channel(socket: &std::path::Path) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("unix://{}", socket.display()))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect")
}

/// A driver client.
pub async fn client(socket: &std::path::Path) -> MachineDriverServiceClient<Channel> {
    MachineDriverServiceClient::new(channel(socket).await)
}

/// A well-formed machine / class / secret for `name`.
pub fn parts(name: &str) -> (Option<pb::Machine>, Option<pb::MachineClass>, Option<pb::SecretData>) {
    (
        Some(pb::Machine {
            name: name.into(),
            uid: format!("uid-{name}"),
            namespace: "ns".into(),
            ..Default::default()
        }),
        Some(pb::MachineClass {
            name: "class".into(),
            provider_spec: r#"{"machineType":"m"}"#.to_string(),
            ..Default::default()
        }),
        Some(pb::SecretData { data: [("accessKeyID".to_string(), b"AKID".to_vec())].into_iter().collect() }),
    )
}

/// A create request for `name`.
pub fn create(name: &str) -> pb::CreateMachineRequest {
    let (machine, machine_class, secret) = parts(name);
    pb::CreateMachineRequest { machine, machine_class, secret }
}

/// A status request for `name`.
pub fn status(name: &str) -> pb::GetMachineStatusRequest {
    let (machine, machine_class, secret) = parts(name);
    pb::GetMachineStatusRequest { machine, machine_class, secret }
}
