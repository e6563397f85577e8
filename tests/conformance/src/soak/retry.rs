//! When MCM's machine controller calls again after an error: the delay the answer asks for
//! (RetryInfo), else MCM's period for the RPC and code (`docs/mcm-adapter.md`, "How MCM
//! reacts, per call and code"); the soak multiplies either by its time scale.

use std::time::Duration;

use tonic::{Code, Status};
use tonic_types::StatusExt;

use crate::soak::answer::Origin;
use crate::soak::rpc::Rpc;

/// MCM's retry periods (`machineutils`): short 5 s, medium 3 min, long 10 min.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// 5 s: transient codes, and every pass after progress.
    Short,
    /// 3 min: codes MCM does not expect to clear by themselves (create, status).
    Medium,
    /// 10 min: `ResourceExhausted` on create/status, any non-transient code on delete.
    Long,
}

impl Period {
    /// The period unscaled, as MCM waits it.
    pub fn duration(self) -> Duration {
        match self {
            Period::Short => Duration::from_secs(5),
            Period::Medium => Duration::from_secs(180),
            Period::Long => Duration::from_secs(600),
        }
    }
}

/// Codes after which MCM retries in 5 s whatever the RPC.
pub fn is_transient(code: Code) -> bool {
    matches!(code, Code::Unknown | Code::DeadlineExceeded | Code::Aborted | Code::Unavailable)
}

/// MCM's period after `rpc` failed with `code`. A transport failure (the sidecar died under
/// the call) reaches MCM as `Unavailable`: short.
pub fn mcm_period(rpc: Rpc, code: Code, origin: Origin) -> Period {
    if origin == Origin::Transport || is_transient(code) {
        return Period::Short;
    }
    match (rpc, code) {
        (Rpc::Initialize, _) => Period::Short,
        (Rpc::Delete, _) => Period::Long,
        (Rpc::Create | Rpc::Status, Code::ResourceExhausted) => Period::Long,
        (Rpc::Create | Rpc::Status, _) => Period::Medium,
    }
}

/// The delay the answer asks for (`google.rpc.RetryInfo`), if any.
pub fn asked_delay(status: &Status) -> Option<Duration> {
    status.get_error_details().retry_info().and_then(|r| r.retry_delay)
}

/// The unscaled delay before the next call: RetryInfo when the answer carries one,
/// else [`mcm_period`].
pub fn delay_after(rpc: Rpc, status: &Status, origin: Origin) -> Duration {
    asked_delay(status).unwrap_or_else(|| mcm_period(rpc, status.code(), origin).duration())
}

#[cfg(test)]
mod tests {
    use tonic_types::ErrorDetails;

    use super::*;

    #[test]
    fn periods_follow_mcm_tables() {
        let d = Origin::Driver;
        assert_eq!(mcm_period(Rpc::Create, Code::Unavailable, d), Period::Short);
        assert_eq!(mcm_period(Rpc::Create, Code::ResourceExhausted, d), Period::Long);
        assert_eq!(mcm_period(Rpc::Create, Code::Internal, d), Period::Medium);
        assert_eq!(mcm_period(Rpc::Status, Code::DeadlineExceeded, d), Period::Short);
        assert_eq!(mcm_period(Rpc::Status, Code::PermissionDenied, d), Period::Medium);
        assert_eq!(mcm_period(Rpc::Initialize, Code::NotFound, d), Period::Short);
        assert_eq!(mcm_period(Rpc::Delete, Code::Internal, d), Period::Long);
        assert_eq!(mcm_period(Rpc::Delete, Code::Aborted, d), Period::Short);
        assert_eq!(mcm_period(Rpc::Delete, Code::Internal, Origin::Transport), Period::Short);
        assert_eq!(Period::Long.duration(), Duration::from_secs(600));
    }

    #[test]
    fn retry_info_wins_over_the_period() {
        let mut details = ErrorDetails::new();
        details.set_retry_info(Some(Duration::from_secs(2)));
        let asked = Status::with_error_details(Code::Unavailable, "throttled", details);
        assert_eq!(delay_after(Rpc::Create, &asked, Origin::Driver), Duration::from_secs(2));
        let bare = Status::resource_exhausted("no capacity");
        assert_eq!(delay_after(Rpc::Create, &bare, Origin::Driver), Duration::from_secs(600));
    }
}
