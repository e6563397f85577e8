//! The gRPC floor's reference: a bare tonic server of the same
//! `MachineDriverService`, in its own process on a Unix socket, answering
//! GetVolumeIDs with an empty response at once and every other RPC
//! UNIMPLEMENTED. Tonic defaults (no layers, no limits) on a multi-thread
//! tokio runtime built like the driver's (`new_multi_thread().enable_all()`).
//!
//! The process is the bench binary itself, re-executed as
//! `machine-driver-bench --echo-server <socket path>` (hidden: not a flag of
//! the benchmark, see [`requested`]).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use machine_driver_conformance::connection::Connection;
use machine_driver_proto::v1::machine_driver_service_server::{MachineDriverService, MachineDriverServiceServer};
use machine_driver_proto::v1::{
    CreateMachineRequest, CreateMachineResponse, DeleteMachineRequest, DeleteMachineResponse, GetMachineStatusRequest,
    GetMachineStatusResponse, GetVolumeIDsRequest, GetVolumeIDsResponse, InitializeMachineRequest,
    InitializeMachineResponse, ListImageSharesRequest, ListImageSharesResponse, ListMachinesRequest,
    ListMachinesResponse, RevokeImageShareRequest, RevokeImageShareResponse, ShareImageRequest, ShareImageResponse,
    UpdateMachineRequest, UpdateMachineResponse,
};
use tokio::net::UnixListener;
use tokio::process::{Child, Command};
use tonic::{Request, Response, Status};

/// The hidden first argument that turns the bench binary into the echo server.
const ECHO_FLAG: &str = "--echo-server";

/// The socket path when the process was started as `<bin> --echo-server <path>`.
pub(crate) fn requested() -> Option<PathBuf> {
    let mut args = std::env::args_os().skip(1);
    match (args.next(), args.next()) {
        (Some(flag), Some(path)) if flag == ECHO_FLAG => Some(PathBuf::from(path)),
        _ => None,
    }
}

/// The echo service: GetVolumeIDs answers at once, the rest is UNIMPLEMENTED.
#[derive(Debug, Clone, Copy, Default)]
struct Echo;

/// UNIMPLEMENTED for an RPC the echo does not serve.
fn unimplemented<T>(rpc: &str) -> Result<Response<T>, Status> {
    Err(Status::unimplemented(format!("{rpc}: the echo server answers GetVolumeIDs only")))
}

#[tonic::async_trait]
impl MachineDriverService for Echo {
    async fn create_machine(
        &self,
        _: Request<CreateMachineRequest>,
    ) -> Result<Response<CreateMachineResponse>, Status> {
        unimplemented("CreateMachine")
    }

    async fn initialize_machine(
        &self,
        _: Request<InitializeMachineRequest>,
    ) -> Result<Response<InitializeMachineResponse>, Status> {
        unimplemented("InitializeMachine")
    }

    async fn get_machine_status(
        &self,
        _: Request<GetMachineStatusRequest>,
    ) -> Result<Response<GetMachineStatusResponse>, Status> {
        unimplemented("GetMachineStatus")
    }

    async fn delete_machine(
        &self,
        _: Request<DeleteMachineRequest>,
    ) -> Result<Response<DeleteMachineResponse>, Status> {
        unimplemented("DeleteMachine")
    }

    async fn list_machines(&self, _: Request<ListMachinesRequest>) -> Result<Response<ListMachinesResponse>, Status> {
        unimplemented("ListMachines")
    }

    async fn get_volume_i_ds(&self, _: Request<GetVolumeIDsRequest>) -> Result<Response<GetVolumeIDsResponse>, Status> {
        Ok(Response::new(GetVolumeIDsResponse::default()))
    }

    async fn share_image(&self, _: Request<ShareImageRequest>) -> Result<Response<ShareImageResponse>, Status> {
        unimplemented("ShareImage")
    }

    async fn revoke_image_share(
        &self,
        _: Request<RevokeImageShareRequest>,
    ) -> Result<Response<RevokeImageShareResponse>, Status> {
        unimplemented("RevokeImageShare")
    }

    async fn list_image_shares(
        &self,
        _: Request<ListImageSharesRequest>,
    ) -> Result<Response<ListImageSharesResponse>, Status> {
        unimplemented("ListImageShares")
    }

    async fn update_machine(
        &self,
        _: Request<UpdateMachineRequest>,
    ) -> Result<Response<UpdateMachineResponse>, Status> {
        unimplemented("UpdateMachine")
    }
}

/// The `main` of `--echo-server <socket>`: serves until killed (exit 1 if it cannot start).
pub(crate) fn serve_main(socket: &Path) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("echo server: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(socket)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo server: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Binds `socket` and serves the echo with tonic's defaults.
async fn serve(socket: &Path) -> Result<(), String> {
    let listener = UnixListener::bind(socket).map_err(|e| format!("binding {}: {e}", socket.display()))?;
    let incoming = futures::stream::unfold(listener, |l| async move {
        let accepted = l.accept().await.map(|(stream, _)| stream);
        Some((accepted, l))
    });
    tonic::transport::Server::builder()
        .add_service(MachineDriverServiceServer::new(Echo))
        .serve_with_incoming(incoming)
        .await
        .map_err(|e| format!("serving: {e}"))
}

/// The echo server child process (killed when dropped).
#[derive(Debug)]
pub(crate) struct EchoProcess {
    child: Child,
    _dir: tempfile::TempDir,
    socket: PathBuf,
}

impl EchoProcess {
    /// Re-executes this binary as `--echo-server <tmp>/echo.sock` and waits until the socket connects.
    pub(crate) async fn start(timeout: Duration) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| format!("the bench's own binary: {e}"))?;
        let dir = tempfile::Builder::new()
            .prefix("bench-echo-")
            .tempdir()
            .map_err(|e| format!("temporary directory: {e}"))?;
        let socket = dir.path().join("echo.sock");
        let log = dir.path().join("echo.log");
        let out = File::create(&log).map_err(|e| format!("creating {}: {e}", log.display()))?;
        let child = Command::new(&exe)
            .arg(ECHO_FLAG)
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting {} {ECHO_FLAG}: {e}", exe.display()))?;
        let mut me = Self { child, _dir: dir, socket };
        let started = Instant::now();
        while started.elapsed() < timeout {
            if let Ok(Some(status)) = me.child.try_wait() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!("echo server exited during startup ({status}): {}", text.trim()));
            }
            if tokio::net::UnixStream::connect(&me.socket).await.is_ok() {
                return Ok(me);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let _ = me.child.kill().await;
        Err(format!("echo server socket not connectable after {timeout:?}"))
    }

    /// A new gRPC connection to the echo over its Unix socket (the same client as the driver's).
    pub(crate) async fn connect(&self) -> Result<Connection, String> {
        Connection::connect(&format!("unix://{}", self.socket.display())).await
    }

    /// Kills the echo server and reaps it.
    pub(crate) async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}
