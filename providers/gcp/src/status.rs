//! GetMachineStatus on Compute Engine: one read, shared with concurrent polls
//! ([`crate::lookup`]).

use machine_driver_api::{CallContext, DriverError, MachineRef, MachineStatus};

use crate::credentials::GcpCredentials;
use crate::driver::GcpDriver;
use crate::instance::{addresses, status_word};

impl GcpDriver {
    /// GetMachineStatus: the instance, or, when Compute does not show it: the
    /// failure of its insert operation, "not visible yet" for an insert of a
    /// moment ago or a young machine, NOT_FOUND otherwise.
    pub(crate) async fn status(&self, ctx: &CallContext, req: MachineRef) -> Result<MachineStatus, DriverError> {
        let key = GcpCredentials::from_secret(&req.secret, "secret")?;
        let target = self.locate(&req, &key)?;
        let api = self.pool.api(&key, ctx).await?;
        if let Some(instance) = self.lookups.get(&api, &key, &target).await? {
            // The insert may still fail while the instance provisions (a stockout
            // removes it): its operation stays remembered until read done.
            self.recent.forget(&target);
            return Ok(MachineStatus {
                provider_id: target.provider_id(),
                node_name: target.name.clone(),
                addresses: addresses(&instance),
                pending_steps: Vec::new(),
                vm_state: status_word(&instance),
            });
        }
        if let Some(failed) = self.insert_outcome(&api, &target).await {
            return Err(failed);
        }
        if self.recent.contains(&target) {
            return Ok(MachineStatus::not_visible_yet(target.provider_id(), target.name.clone()));
        }
        Some(&req.machine)
            .filter(|_| !self.deleted.contains(&target))
            .and_then(|m| m.young_not_visible_yet(&target.name))
            .ok_or_else(|| DriverError::not_found(format!("instance {}", target.provider_id())))
    }
}
