//! Binding the gRPC endpoint: a Unix socket with the conventions of local
//! plugins (stale socket replaced, anything else refused, mode set, file removed
//! on shutdown), or TCP for debugging; and the cap on open connections.

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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

/// The server's connection slots: a connection beyond them is closed as soon
/// as it is accepted, so that no peer can hold more than the cap.
#[derive(Debug)]
pub(crate) struct ConnectionSlots {
    slots: Arc<Semaphore>,
    max: usize,
    /// When a refusal was last logged (one warning per [`REFUSAL_LOG_EVERY`]).
    last_warned: Mutex<Option<Instant>>,
}

/// How often refused connections are logged at most.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

impl ConnectionSlots {
    /// `max` connections at once.
    pub(crate) fn new(max: usize) -> Self {
        Self { slots: Arc::new(Semaphore::new(max)), max, last_warned: Mutex::new(None) }
    }

    /// `io` holding a slot until it is dropped, or `None` (and `io` dropped:
    /// closed) when every slot is taken.
    pub(crate) fn admit<S>(&self, io: S) -> Option<Counted<S>> {
        match self.slots.clone().try_acquire_owned() {
            Ok(slot) => Some(Counted { inner: io, _slot: slot }),
            Err(_) => {
                metrics::counter!("machine_driver_connections_refused_total").increment(1);
                let mut last = self.last_warned.lock().unwrap_or_else(PoisonError::into_inner);
                if last.is_none_or(|t| t.elapsed() >= REFUSAL_LOG_EVERY) {
                    *last = Some(Instant::now());
                    tracing::warn!(
                        max_connections = self.max,
                        "connection refused: the server has --max-connections open (logged at most every 10 s)"
                    );
                }
                None
            }
        }
    }
}

/// An accepted connection holding one of the server's connection slots.
#[derive(Debug)]
pub(crate) struct Counted<S> {
    inner: S,
    _slot: OwnedSemaphorePermit,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

crate::io_delegate::delegate_write_and_connect!(Counted);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_beyond_the_cap_is_refused_until_one_closes() {
        let slots = ConnectionSlots::new(2);
        let a = slots.admit(1u8).expect("first");
        let _b = slots.admit(2u8).expect("second");
        assert!(slots.admit(3u8).is_none(), "third refused");
        drop(a);
        assert!(slots.admit(4u8).is_some(), "a slot is given back when its connection is dropped");
    }
}
