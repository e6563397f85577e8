//! Judging one error answer: did the driver give it, or did the transport (a killed
//! sidecar), and is it an answer a transient fault may produce.

use tonic::{Code, Status};
use tonic_types::StatusExt;

use crate::soak::rpc::Rpc;
use crate::status_details::code_name;

/// `google.rpc.ErrorInfo.domain` of every error the driver itself answers (driver.proto).
pub const DRIVER_DOMAIN: &str = "machinedriver";

/// Who produced an error status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The driver: the status carries ErrorInfo of domain `machinedriver`.
    Driver,
    /// The client or the connection (no driver details): e.g. the sidecar was killed
    /// under the call, or was not listening yet.
    Transport,
}

/// The origin of `status`.
pub fn origin(status: &Status) -> Origin {
    match status.get_error_details().error_info() {
        Some(info) if info.domain == DRIVER_DOMAIN => Origin::Driver,
        _ => Origin::Transport,
    }
}

/// The label an error answer is counted under: `UNAVAILABLE`, or `transport:UNAVAILABLE`.
pub fn label(code: Code, origin: Origin) -> String {
    match origin {
        Origin::Driver => code_name(code).to_string(),
        Origin::Transport => format!("transport:{}", code_name(code)),
    }
}

/// Why an error answer is one that injected throttling, 5xx, lost answers, capacity errors,
/// invisible instances and driver kills must never produce; `None` when it is acceptable.
///
/// From the driver: UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED and CANCELLED always;
/// NOT_FOUND from GetMachineStatus and DeleteMachine (the caller checks when it is
/// wrong); RESOURCE_EXHAUSTED from CreateMachine (injected capacity errors). Anything
/// else (INTERNAL and INVALID_ARGUMENT above all, but also OUT_OF_RANGE: two VMs) is
/// forbidden. From the transport: anything while the driver is being restarted, only
/// UNAVAILABLE, DEADLINE_EXCEEDED and CANCELLED otherwise.
pub fn forbidden(rpc: Rpc, code: Code, origin: Origin, during_restart: bool) -> Option<String> {
    let ok = match origin {
        Origin::Transport => {
            during_restart || matches!(code, Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled)
        }
        Origin::Driver => match code {
            Code::Unavailable | Code::DeadlineExceeded | Code::Aborted | Code::Cancelled => true,
            Code::NotFound => matches!(rpc, Rpc::Status | Rpc::Delete),
            Code::ResourceExhausted => rpc == Rpc::Create,
            _ => false,
        },
    };
    if ok {
        return None;
    }
    let from = match origin {
        Origin::Driver => "answered",
        Origin::Transport => "failed in transport, outside any restart, with",
    };
    Some(format!("{rpc} {from} {}", code_name(code)))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use tonic_types::ErrorDetails;

    use super::*;

    fn driver_status(code: Code) -> Status {
        let mut d = ErrorDetails::new();
        d.set_error_info("THROTTLED", DRIVER_DOMAIN, HashMap::new());
        Status::with_error_details(code, "x", d)
    }

    #[test]
    fn origin_is_read_from_error_info() {
        assert_eq!(origin(&driver_status(Code::Unavailable)), Origin::Driver);
        assert_eq!(origin(&Status::unavailable("connection refused")), Origin::Transport);
        let mut d = ErrorDetails::new();
        d.set_error_info("X", "elsewhere", HashMap::new());
        assert_eq!(origin(&Status::with_error_details(Code::Internal, "x", d)), Origin::Transport);
        assert_eq!(label(Code::Unavailable, Origin::Transport), "transport:UNAVAILABLE");
        assert_eq!(label(Code::NotFound, Origin::Driver), "NOT_FOUND");
    }

    #[test]
    fn internal_and_invalid_argument_are_forbidden_from_the_driver() {
        for rpc in Rpc::ALL {
            assert!(forbidden(rpc, Code::Internal, Origin::Driver, true).is_some());
            assert!(forbidden(rpc, Code::InvalidArgument, Origin::Driver, false).is_some());
            assert!(forbidden(rpc, Code::Unavailable, Origin::Driver, false).is_none());
        }
        assert!(forbidden(Rpc::Status, Code::OutOfRange, Origin::Driver, false).is_some());
        assert!(forbidden(Rpc::Create, Code::ResourceExhausted, Origin::Driver, false).is_none());
        assert!(forbidden(Rpc::Delete, Code::ResourceExhausted, Origin::Driver, false).is_some());
        assert!(forbidden(Rpc::Status, Code::NotFound, Origin::Driver, false).is_none());
        assert!(forbidden(Rpc::Initialize, Code::NotFound, Origin::Driver, false).is_some());
    }

    #[test]
    fn transport_failures_are_tolerated_around_restarts_only() {
        assert!(forbidden(Rpc::Create, Code::Internal, Origin::Transport, true).is_none());
        assert!(forbidden(Rpc::Create, Code::Unknown, Origin::Transport, true).is_none());
        assert!(forbidden(Rpc::Create, Code::Internal, Origin::Transport, false).is_some());
        assert!(forbidden(Rpc::Create, Code::Unavailable, Origin::Transport, false).is_none());
    }
}
