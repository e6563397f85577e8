//! The contract's answers for a machine whose VM the cloud does not show
//! ([`AbsentVm`]), and for a machine with more than one live VM
//! ([`DriverError::duplicate_vms`]): written once here, so that every
//! provider answers them alike.
//!
//! A VM the cloud does not show is, in this order:
//! 1. *on its way* when this process created it less than
//!    [`VISIBILITY_GRACE`](crate::VISIBILITY_GRACE) ago (the provider's
//!    [`RecentCreates`](crate::RecentCreates) holds the create): clouds are
//!    eventually consistent, and a read right after a create may miss the VM;
//! 2. *gone* when this process deleted it in that time (a list read before the
//!    delete must not make it come back);
//! 3. *on its way* when the machine has a providerID and is younger than the
//!    grace ([`Machine::is_young`], from the request's creation time: this
//!    holds after a driver restart too, when no memory of the create is left);
//! 4. *gone* otherwise.
//!
//! GetMachineStatus answers *on its way* OK, not initialized, pending step
//! [`AWAIT_VISIBILITY`](crate::AWAIT_VISIBILITY)
//! ([`MachineStatus::not_visible_yet`]), and *gone* NOT_FOUND; an RPC that
//! needs the VM to act on it (InitializeMachine) answers *on its way*
//! UNAVAILABLE with [`RETRY_SOON`](crate::RETRY_SOON), and *gone* NOT_FOUND
//! ([`AbsentVm::unavailable`]).

use std::fmt;

use crate::{DriverError, ErrorKind, Machine, MachineStatus, RETRY_SOON, Result};

/// The reason of [`DriverError::duplicate_vms`]: more than one live VM
/// belongs to one machine (OUT_OF_RANGE on the wire).
pub const DUPLICATE_VMS: &str = "DUPLICATE_VMS";

/// A machine's VM that the cloud does not show, with what this process knows
/// of it: the one answer of the module's rules ([`AbsentVm::status`],
/// [`AbsentVm::unavailable`]).
#[derive(Debug)]
#[must_use = "an AbsentVm answers nothing until status or unavailable is called"]
pub struct AbsentVm<'a> {
    machine: &'a Machine,
    what: String,
    created: Option<String>,
    deleted: bool,
}

impl<'a> AbsentVm<'a> {
    /// The VM of `machine` that the cloud does not show; `what` names it in a
    /// NOT_FOUND message (e.g. `instance <providerID>`). Neither
    /// created nor deleted by this process until [`created`](Self::created)
    /// or [`deleted`](Self::deleted) say otherwise.
    pub fn new(machine: &'a Machine, what: impl fmt::Display) -> Self {
        Self { machine, what: what.to_string(), created: None, deleted: false }
    }

    /// `Some(provider_id)` when this process created the VM within the
    /// visibility grace (its `RecentCreates` holds the create): the VM's
    /// providerID, answered back by [`status`](Self::status).
    pub fn created(mut self, provider_id: Option<String>) -> Self {
        self.created = provider_id;
        self
    }

    /// `true` when this process deleted the VM within the grace: a young
    /// machine's VM is then gone, not on its way.
    pub fn deleted(mut self, deleted: bool) -> Self {
        self.deleted = deleted;
        self
    }

    /// The providerID of a VM on its way (rules 1 and 3 of the module docs);
    /// `None` when it is gone.
    fn on_its_way(&self) -> Option<&str> {
        if let Some(created) = &self.created {
            return Some(created);
        }
        let young = !self.deleted && self.machine.is_young();
        self.machine.provider_id.as_deref().filter(|_| young)
    }

    /// True when the VM is on its way (a create of a moment ago, or a young
    /// machine's), false when it is gone.
    pub fn is_on_its_way(&self) -> bool {
        self.on_its_way().is_some()
    }

    /// GetMachineStatus's answer: OK, not visible yet (with `node_name`) for
    /// a VM on its way; NOT_FOUND naming it when it is gone.
    pub fn status(self, node_name: &str) -> Result<MachineStatus> {
        match self.on_its_way() {
            Some(provider_id) => Ok(MachineStatus::not_visible_yet(provider_id.to_string(), node_name.to_string())),
            None => Err(DriverError::not_found(&self.what)),
        }
    }

    /// The answer of an RPC that needs the VM: UNAVAILABLE `reason` with
    /// `message` and [`RETRY_SOON`] for a VM on its way; NOT_FOUND naming it
    /// when it is gone.
    pub fn unavailable(self, reason: &str, message: impl Into<String>) -> DriverError {
        if self.is_on_its_way() {
            DriverError::unavailable(reason, message, RETRY_SOON)
        } else {
            DriverError::not_found(&self.what)
        }
    }
}

impl DriverError {
    /// OUT_OF_RANGE ([`ErrorKind::Duplicate`]), reason [`DUPLICATE_VMS`]:
    /// more than one live VM belongs to `machine` (its name). `vms` names
    /// them (their ids), listed sorted so that the message is the same on
    /// every call: `machine <name> is backed by <n> live VMs: <id>, <id>`.
    /// The one duplicate answer of every provider; MCM does not pick one.
    pub fn duplicate_vms<V: fmt::Display>(machine: &str, vms: impl IntoIterator<Item = V>) -> Self {
        let mut ids: Vec<String> = vms.into_iter().map(|v| v.to_string()).collect();
        ids.sort_unstable();
        Self::new(
            ErrorKind::Duplicate,
            DUPLICATE_VMS,
            format!("machine {machine} is backed by {} live VMs: {}", ids.len(), ids.join(", ")),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::{AWAIT_VISIBILITY, VISIBILITY_GRACE};

    fn machine(provider_id: Option<&str>, age: Option<Duration>) -> Machine {
        Machine {
            name: "m-1".into(),
            provider_id: provider_id.map(str::to_string),
            created_at: age.map(|a| SystemTime::now() - a),
            ..Machine::default()
        }
    }

    fn on_its_way(answer: Result<MachineStatus>) -> (String, String) {
        let s = answer.expect("not visible yet");
        assert_eq!(s.pending_steps, [AWAIT_VISIBILITY]);
        assert_eq!(s.vm_state, "pending");
        (s.provider_id, s.node_name)
    }

    fn gone(answer: Result<MachineStatus>) -> String {
        let e = answer.expect_err("NOT_FOUND");
        assert_eq!((e.kind(), e.reason()), (ErrorKind::NotFound, "NOT_FOUND"));
        e.message().to_string()
    }

    const OLD: Option<Duration> = Some(Duration::from_secs(11 * 60));
    const YOUNG: Option<Duration> = Some(Duration::from_secs(1));

    #[test]
    fn a_create_of_a_moment_ago_is_on_its_way_even_for_an_old_machine() {
        let m = machine(None, OLD);
        let answer = AbsentVm::new(&m, "instance p-9").created(Some("p-9".into())).status("node-9");
        assert_eq!(on_its_way(answer), ("p-9".into(), "node-9".into()));
        // The create is this process's own: a delete recorded since does not hide it (rule 1 first).
        let answer = AbsentVm::new(&m, "instance p-9").created(Some("p-9".into())).deleted(true).status("n");
        assert_eq!(on_its_way(answer).0, "p-9");
    }

    #[test]
    fn a_young_machine_with_a_provider_id_is_on_its_way_unless_deleted_here() {
        let m = machine(Some("p-1"), YOUNG);
        assert_eq!(on_its_way(AbsentVm::new(&m, "instance p-1").status("node-1")), ("p-1".into(), "node-1".into()));
        assert_eq!(gone(AbsentVm::new(&m, "instance p-1").deleted(true).status("node-1")), "instance p-1 not found");
    }

    #[test]
    fn otherwise_gone() {
        for m in [
            machine(Some("p-1"), OLD),
            machine(Some("p-1"), None),
            machine(None, YOUNG),
            machine(Some("p-1"), Some(VISIBILITY_GRACE + Duration::from_secs(1))),
        ] {
            assert_eq!(gone(AbsentVm::new(&m, "VM p-1").created(None).status("n")), "VM p-1 not found", "{m:?}");
            assert!(!AbsentVm::new(&m, "VM p-1").is_on_its_way());
        }
    }

    #[test]
    fn an_rpc_needing_the_vm_retries_soon_while_it_is_on_its_way() {
        let young = machine(Some("p-1"), YOUNG);
        let e = AbsentVm::new(&young, "server p-1")
            .unavailable(crate::reasons::NOT_VISIBLE_YET, "server p-1 is not visible yet");
        assert_eq!(
            (e.kind(), e.reason(), e.retry_after()),
            (ErrorKind::Unavailable, crate::reasons::NOT_VISIBLE_YET, Some(RETRY_SOON))
        );
        assert_eq!(e.message(), "server p-1 is not visible yet");
        let old = machine(Some("p-1"), OLD);
        let e = AbsentVm::new(&old, "server p-1").created(Some("p-1".into())).unavailable("R", "m");
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        let e = AbsentVm::new(&old, "server p-1").unavailable("R", "m");
        assert_eq!((e.kind(), e.message()), (ErrorKind::NotFound, "server p-1 not found"));
        let e = AbsentVm::new(&young, "server p-1").deleted(true).unavailable("R", "m");
        assert_eq!(e.kind(), ErrorKind::NotFound);
    }

    #[test]
    fn duplicates_have_one_reason_and_one_message_whatever_the_order() {
        let e = DriverError::duplicate_vms("m-1", ["i-b", "i-a"]);
        assert_eq!((e.kind(), e.reason()), (ErrorKind::Duplicate, DUPLICATE_VMS));
        assert_eq!(e.message(), "machine m-1 is backed by 2 live VMs: i-a, i-b");
        assert_eq!(DriverError::duplicate_vms("m-1", ["i-a", "i-b"]).message(), e.message());
    }
}
