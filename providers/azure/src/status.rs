//! GetMachineStatus on Azure: one read, shared with concurrent polls
//! ([`crate::lookup`]): a lone poll reads the full VM, polls arriving together
//! read ARM's generic resource list of the group (name and provisioning
//! state); both map the provisioning state the same way, and a `Failed` VM
//! is read again with its instance view for the failure. The addresses come
//! from [`crate::addresses`].
//!
//! Either record carries the VM's tags, and a VM that is not this machine's
//! ([`crate::ownership`]) is NOT_FOUND, so that MCM never adopts another
//! cluster's VM or one made by hand.
//!
//! Spot classes (`priority` `Spot` or `Low`): only a VM's instance view shows
//! that Azure evicted it (`PowerState/deallocated` with `evictionPolicy`
//! `Deallocate`; provisioning stays `Succeeded`), and neither the plain GET
//! nor the generic list carries it. So a Spot class's poll is always the one
//! `virtualMachines.get` with `$expand=instanceView` (one call, as a lone
//! poll of any class; not shared in a batch), and a Spot VM of this machine
//! that Azure deallocated is answered [`DriverError::spot_reclaimed`]
//! (NOT_FOUND, reason `SPOT_RECLAIMED`, the power state in the message). A
//! `Delete` eviction leaves no VM: plain NOT_FOUND. Other classes read as
//! before.

use machine_driver_api::{
    AbsentVm, CallContext, DriverError, MachineRef, MachineStatus, MarkedVm, Ownership, foreign_not_found,
};

use crate::clients::Api;
use crate::credentials::AzureCredentials;
use crate::driver::AzureDriver;
use crate::lookup::FoundVm;
use crate::naming::VmRef;
use crate::ownership::{judge_found, marks_found};
use crate::vm::{self, Provisioning};

impl AzureDriver {
    /// GetMachineStatus: the VM's state; a `Failed` VM answers its failure
    /// (the Go provider answers OK for it, and MCM never replaces the
    /// machine); a Spot VM Azure evicted (deallocated) answers SPOT_RECLAIMED;
    /// not visible yet for a create of a moment ago or a young machine;
    /// NOT_FOUND otherwise, and for a VM that is not this machine's.
    pub(crate) async fn status(&self, ctx: &CallContext, req: MachineRef) -> Result<MachineStatus, DriverError> {
        let creds = AzureCredentials::from_secret(&req.secret, "secret")?;
        let (target, spec, markers) = self.locate(&req, &creds)?;
        let api = self.pool.api(&creds, spec.cloud(), ctx)?;
        let found = if spec.is_spot() {
            // Only the instance view shows a Spot VM's eviction (its power state); neither the
            // plain GET nor the group's generic list carries it: the one GET asks for it.
            crate::create::get_vm(&api, &target, true).await?.map(|vm| FoundVm::Full(Box::new(vm)))
        } else {
            match self.lookups.get(&api, &creds, &target, &self.addresses).await? {
                // A list (up to LIST_REUSE old) may predate this process's delete of the VM: read it alone.
                Some(listed) if listed.full().is_none() && self.deleted.contains(&target) => {
                    crate::create::get_vm(&api, &target, false).await?.map(|vm| FoundVm::Full(Box::new(vm)))
                }
                found => found,
            }
        };
        let foreign = |found: &FoundVm| match judge_found(&markers, found, &req.machine) {
            Ownership::Mine => None,
            Ownership::Foreign(why) => Some(foreign_not_found(format!("VM {}", target.provider_id()), why)),
        };
        if let Some(found) = found {
            if let Some(not_found) = foreign(&found) {
                return Err(not_found);
            }
            self.recent.forget(&target);
            // A Spot VM Azure evicted and kept (deallocated): this machine's VM no longer runs.
            if let Some(shown) = found.full().and_then(vm::reclaimed) {
                return Err(DriverError::spot_reclaimed(target.provider_id(), shown));
            }
            let state = found.provisioning();
            // A Spot class's read carries the instance view with the failure already.
            if state == Provisioning::Failed
                && let Some(read) = found.full().filter(|vm| vm::has_instance_view(vm))
            {
                return Err(crate::create::failed_vm_error(read));
            }
            if state == Provisioning::Failed {
                // Neither the GET nor the list carries the instance view with the failure's code: read it.
                let fresh = crate::create::get_vm(&api, &target, true).await?.map(|vm| FoundVm::Full(Box::new(vm)));
                // The VM may have been made again since the list: judged again.
                if let Some(not_found) = fresh.as_ref().and_then(foreign) {
                    return Err(not_found);
                }
                match fresh {
                    Some(FoundVm::Full(vm)) if vm::provisioning(&vm) == Provisioning::Failed => {
                        return Err(crate::create::failed_vm_error(&vm));
                    }
                    // No longer failed (a list up to LIST_REUSE old, or ARM's record behind
                    // Compute's): answered from the fresh read.
                    Some(fresh) => return Ok(self.answer(&api, &creds, &target, &fresh, &req.machine.uid).await),
                    // Gone since: answered as absent below.
                    None => {}
                }
            } else {
                return Ok(self.answer(&api, &creds, &target, &found, &req.machine.uid).await);
            }
        }
        AbsentVm::new(&req.machine, format!("VM {}", target.provider_id()))
            .created(self.recent.contains(&target).then(|| target.provider_id()))
            .deleted(self.deleted.contains(&target))
            .status(&target.name)
    }

    /// The status of a VM found not failed, polled for the machine of uid
    /// `machine_uid`: its state and (unless it is being deleted) its addresses.
    async fn answer(
        &self,
        api: &Api<'_>,
        creds: &AzureCredentials,
        target: &VmRef,
        found: &FoundVm,
        machine_uid: &str,
    ) -> MachineStatus {
        let state = found.provisioning();
        let vm_state = match state {
            Provisioning::Succeeded => "running",
            Provisioning::InProgress => "creating",
            Provisioning::Deleting => "deleting",
            Provisioning::Failed => "failed",
        };
        // The NIC and disks of a create of this process: tagged now that the VM is there
        // (when it is the VM that create made: the VM's uid tag says so).
        if matches!(state, Provisioning::InProgress | Provisioning::Succeeded) && self.tags_to_apply.contains(target) {
            let marks = marks_found(found);
            self.tags_to_apply.apply(api, target, machine_uid, marks.machine_uid()).await;
        }
        MachineStatus {
            provider_id: target.provider_id(),
            node_name: target.name.clone(),
            // A VM on its way out needs no address (and its NIC goes with it).
            addresses: match state {
                Provisioning::Deleting => Vec::new(),
                _ => self.addresses_of(api, creds, target, found).await,
            },
            pending_steps: Vec::new(),
            vm_state: vm_state.to_string(),
        }
    }
}
