//! Errors that stop the server (configuration, binding, serving).

use std::path::PathBuf;

/// Why the server could not start or stopped with a failure.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A flag has a bad value. Exit code 2.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The provider could not be set up. Exit code 1.
    #[error("provider setup failed: {0}")]
    Provider(String),
    /// Something other than a socket exists at the socket path.
    #[error("refusing to replace {0}: it exists and is not a socket")]
    NotASocket(PathBuf),
    /// A live server already answers on the socket.
    #[error("socket {0} is in use by a running server")]
    SocketInUse(PathBuf),
    /// Binding failed.
    #[error("cannot listen on {0}: {1}")]
    Bind(String, #[source] std::io::Error),
    /// Telemetry could not be set up.
    #[error("telemetry setup failed: {0}")]
    Telemetry(String),
    /// The gRPC server failed.
    #[error("gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}

impl ServeError {
    /// Process exit code: 2 for configuration errors, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            ServeError::Config(_) => 2,
            _ => 1,
        }
    }
}
