//! The four RPCs of a machine's lifecycle, as the soak names and counts them.

use std::fmt;

/// One RPC the soak drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rpc {
    /// `CreateMachine`.
    Create,
    /// `InitializeMachine`.
    Initialize,
    /// `GetMachineStatus`.
    Status,
    /// `DeleteMachine`.
    Delete,
}

impl Rpc {
    /// Every RPC, in lifecycle order.
    pub const ALL: [Rpc; 4] = [Rpc::Create, Rpc::Initialize, Rpc::Status, Rpc::Delete];

    /// The RPC's name in the contract.
    pub fn name(self) -> &'static str {
        match self {
            Rpc::Create => "CreateMachine",
            Rpc::Initialize => "InitializeMachine",
            Rpc::Status => "GetMachineStatus",
            Rpc::Delete => "DeleteMachine",
        }
    }
}

impl fmt::Display for Rpc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
