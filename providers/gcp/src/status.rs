//! GetMachineStatus on Compute Engine: one read, shared with concurrent polls
//! ([`crate::lookup`]), and an answer only for an instance that is this
//! machine's ([`crate::ownership`]); a Spot VM Compute reclaimed is
//! SPOT_RECLAIMED, decided from that same read ([`spot_reclaim`]).

use machine_driver_api::{AbsentVm, CallContext, DriverError, MachineRef, MachineStatus, Ownership, foreign_not_found};

use crate::credentials::GcpCredentials;
use crate::driver::{GcpDriver, Inserter};
use crate::instance::{addresses, spot_reclaim, status_word};
use crate::ownership;
use crate::spec::GcpProviderSpec;

impl GcpDriver {
    /// GetMachineStatus: the instance when it is this machine's (NOT_FOUND for
    /// another cluster's, a hand-made or an earlier machine's instance of the
    /// name, so that MCM does not adopt it; NOT_FOUND `SPOT_RECLAIMED` for this
    /// machine's Spot VM that Compute stopped), or, when Compute does not show
    /// it: the failure of its insert operation, "not visible yet" for an
    /// insert of a moment ago by a request of this class's markers and these
    /// credentials, or for a young machine, NOT_FOUND otherwise.
    pub(crate) async fn status(&self, ctx: &CallContext, req: MachineRef) -> Result<MachineStatus, DriverError> {
        let spec = GcpProviderSpec::parse(&req.class.provider_spec)?;
        let markers = spec.markers()?;
        let key = GcpCredentials::from_secret(&req.secret, "secret")?;
        let Some(target) = Self::locate(&req, &key, &spec)? else {
            return Err(DriverError::not_found(format!(
                "machine {:?}: no GCE instance can have this name",
                req.machine.name
            )));
        };
        let api = self.pool.api(&key, ctx).await?;
        if let Some(instance) = self.lookups.get(&api, &key, &target).await? {
            if let Ownership::Foreign(why) = ownership::judge(&markers, &instance, &req.machine) {
                tracing::info!(provider_id = %target.provider_id(), %why, "status: the instance is not this machine's");
                return Err(foreign_not_found(format!("instance {}", target.provider_id()), why));
            }
            // The insert may still fail while the instance provisions (a stockout
            // removes it): its operation stays remembered until read done.
            self.recent.forget(&target);
            if let Some(shown) = spot_reclaim(&instance) {
                tracing::info!(provider_id = %target.provider_id(), %shown, "status: Compute reclaimed the Spot VM");
                return Err(DriverError::spot_reclaimed(target.provider_id(), shown));
            }
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
        AbsentVm::new(&req.machine, format!("instance {}", target.provider_id()))
            .created(self.inserted_by(&target, &Inserter::new(&markers, &key)).then(|| target.provider_id()))
            .deleted(self.deleted.contains(&target))
            .status(&target.name)
    }
}
