//! Per-call context handed from the server to provider code.

use std::time::Duration;
use tokio::time::Instant;

/// What a provider knows about the RPC it is serving: its name and its deadline.
///
/// The deadline is the caller's `grpc-timeout` when one was sent, otherwise the
/// server's default. Provider code bounds its own waits with [`CallContext::remaining`]
/// so that it answers before the caller gives up.
#[derive(Debug, Clone)]
pub struct CallContext {
    rpc: &'static str,
    deadline: Instant,
}

impl CallContext {
    /// A context for `rpc` that must answer by `deadline`.
    pub fn new(rpc: &'static str, deadline: Instant) -> Self {
        Self { rpc, deadline }
    }

    /// A context with `timeout` from now (tests and tools).
    pub fn with_timeout(rpc: &'static str, timeout: Duration) -> Self {
        Self::new(rpc, Instant::now() + timeout)
    }

    /// The RPC being served, e.g. "CreateMachine".
    pub fn rpc(&self) -> &'static str {
        self.rpc
    }

    /// When the caller stops waiting.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Time left until the deadline (zero once it passed).
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}
