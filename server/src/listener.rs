//! Binding the gRPC endpoint: a Unix socket with the conventions of local
//! plugins (stale socket replaced, anything else refused, mode set, file removed
//! on shutdown), or TCP for debugging.

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::{TcpListener, UnixListener};

use crate::config::Endpoint;
use crate::error::ServeError;

/// A bound listener.
#[derive(Debug)]
pub(crate) enum Bound {
    /// Unix socket plus the guard that removes the file.
    Unix(UnixListener, SocketFileGuard),
    /// TCP listener.
    Tcp(TcpListener),
}

/// Removes the socket file when dropped (clean shutdown).
#[derive(Debug)]
pub(crate) struct SocketFileGuard(PathBuf);

impl Drop for SocketFileGuard {
    fn drop(&mut self) {
        // Only remove what is still a socket: never delete a file someone put there since.
        if is_socket(&self.0).unwrap_or(false) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

fn is_socket(path: &Path) -> io::Result<bool> {
    Ok(std::fs::symlink_metadata(path)?.file_type().is_socket())
}

/// Binds `endpoint`. A Unix socket path that exists must be a socket (stale sockets
/// from a previous run are removed); a regular file, directory or symlink there is
/// refused. The parent directory must exist (the supervisor owns it).
pub(crate) async fn bind(endpoint: &Endpoint, mode: u32) -> Result<Bound, ServeError> {
    match endpoint {
        Endpoint::Tcp(addr) => {
            let l = TcpListener::bind(addr).await.map_err(|e| ServeError::Bind(endpoint.to_string(), e))?;
            Ok(Bound::Tcp(l))
        }
        Endpoint::Unix(path) => {
            let bind_err = |e| ServeError::Bind(endpoint.to_string(), e);
            match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.file_type().is_socket() => {
                    if std::os::unix::net::UnixStream::connect(path).is_ok() {
                        return Err(ServeError::SocketInUse(path.clone()));
                    }
                    std::fs::remove_file(path).map_err(bind_err)?;
                }
                Ok(_) => return Err(ServeError::NotASocket(path.clone())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(bind_err(e)),
            }
            let listener = UnixListener::bind(path).map_err(bind_err)?;
            let guard = SocketFileGuard(path.clone());
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(bind_err)?;
            Ok(Bound::Unix(listener, guard))
        }
    }
}
