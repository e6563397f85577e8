//! GetMachineStatus on Azure: one read, shared with concurrent polls
//! ([`crate::lookup`]).

use machine_driver_api::{CallContext, DriverError, MachineRef, MachineStatus};

use crate::credentials::AzureCredentials;
use crate::driver::AzureDriver;
use crate::vm::{self, Provisioning};

impl AzureDriver {
    /// GetMachineStatus: the VM's state; a `Failed` VM answers its failure
    /// (the Go provider answers OK for it, and MCM never replaces the
    /// machine); not visible yet for a create of a moment ago or a young
    /// machine; NOT_FOUND otherwise.
    pub(crate) async fn status(&self, ctx: &CallContext, req: MachineRef) -> Result<MachineStatus, DriverError> {
        let creds = AzureCredentials::from_secret(&req.secret, "secret")?;
        let (target, spec) = self.locate(&req, &creds)?;
        let api = self.pool.api(&creds, spec.cloud(), ctx)?;
        if let Some(found) = self.lookups.get(&api, &creds, &target).await? {
            self.recent.forget(&target);
            let state = vm::provisioning(&found);
            if state == Provisioning::Failed {
                // The list does not carry the instance view with the failure's code: read it.
                let viewed = crate::create::get_vm(&api, &target, true).await?.unwrap_or(found);
                return Err(crate::create::failed_vm_error(&viewed));
            }
            let vm_state = match state {
                Provisioning::Succeeded => "running",
                Provisioning::InProgress => "creating",
                Provisioning::Deleting => "deleting",
                Provisioning::Failed => "failed",
            };
            return Ok(MachineStatus {
                provider_id: target.provider_id(),
                node_name: target.name.clone(),
                // A VM on its way out needs no address (and its NIC goes with it).
                addresses: match state {
                    Provisioning::Deleting => Vec::new(),
                    _ => self.addresses_of(&api, &creds, &target, &found).await,
                },
                pending_steps: Vec::new(),
                vm_state: vm_state.to_string(),
            });
        }
        if self.recent.contains(&target) {
            return Ok(MachineStatus::not_visible_yet(target.provider_id(), target.name.clone()));
        }
        Some(&req.machine)
            .filter(|_| !self.deleted.contains(&target))
            .and_then(|m| m.young_not_visible_yet(&target.name))
            .ok_or_else(|| DriverError::not_found(format!("VM {}", target.provider_id())))
    }
}
