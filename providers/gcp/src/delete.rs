//! DeleteMachine on Compute Engine: the instance is read (the coalesced
//! status read, [`crate::lookup`]) and judged ([`crate::ownership`]); only
//! this machine's instance gets an `instances.delete`. OK when already gone.

use machine_driver_api::{CallContext, DeletedMachine, DriverError, MachineRef, Ownership};

use crate::credentials::GcpCredentials;
use crate::driver::{GcpDriver, Inserter};
use crate::errors::GceFailure;
use crate::ownership;
use crate::spec::GcpProviderSpec;

/// The answer for an instance that is not there, or not this machine's.
fn already_gone() -> DeletedMachine {
    DeletedMachine { last_known_state: String::new(), already_gone: true }
}

impl GcpDriver {
    /// DeleteMachine, by providerID or by name alike: one read, then
    /// `instances.delete` when the instance is this machine's. An instance that
    /// is another cluster's, hand-made or an earlier machine's is left alone and
    /// answered as already gone (MCM then lets go of the machine, as it does
    /// for an instance that does not exist). An instance Compute does not show
    /// is gone, unless this process inserted it a moment ago (not visible yet)
    /// for a request of the same class markers and credentials as this one
    /// ([`GcpDriver::inserted_by`]): that one is deleted all the same. An
    /// unseen instance another class or other credentials inserted is answered
    /// as gone, and its insert record is left for its own requests.
    pub(crate) async fn delete(&self, ctx: &CallContext, req: MachineRef) -> Result<DeletedMachine, DriverError> {
        let spec = GcpProviderSpec::parse(&req.class.provider_spec)?;
        let markers = spec.markers()?;
        let key = GcpCredentials::from_secret(&req.secret, "secret")?;
        let Some(target) = Self::locate(&req, &key, &spec)? else {
            // No GCE instance can have this name: nothing to delete.
            return Ok(already_gone());
        };
        let api = self.pool.api(&key, ctx).await?;
        match self.lookups.get(&api, &key, &target).await? {
            Some(instance) => {
                if let Ownership::Foreign(why) = ownership::judge(&markers, &instance, &req.machine) {
                    tracing::warn!(
                        provider_id = %target.provider_id(), %why,
                        "delete: the instance is not this machine's; left untouched"
                    );
                    return Ok(already_gone());
                }
            }
            None if self.inserted_by(&target, &Inserter::new(&markers, &key)) => {
                tracing::debug!(provider_id = %target.provider_id(), "delete: inserted a moment ago, not visible yet");
            }
            None if self.recent.contains(&target) => {
                tracing::info!(
                    provider_id = %target.provider_id(),
                    "delete: not visible, and inserted for another class or other credentials; not deleted"
                );
                return Ok(already_gone());
            }
            None => {
                self.forget_insert(&target);
                return Ok(already_gone());
            }
        }
        let deleted = api
            .call("instances.delete", || {
                api.clients
                    .instances
                    .delete()
                    .set_project(&target.project)
                    .set_zone(&target.zone)
                    .set_instance(&target.name)
                    .send()
            })
            .await;
        self.forget_insert(&target);
        match deleted {
            Ok(_) => {
                tracing::info!(provider_id = %target.provider_id(), "instance deletion started");
                Ok(DeletedMachine { last_known_state: String::new(), already_gone: false })
            }
            Err(f) if f.cloud().is_some_and(GceFailure::is_not_found) => Ok(already_gone()),
            Err(f) => Err(f.into_driver_error()),
        }
    }

    /// Forgets the insert of `target` and remembers its delete (a young
    /// machine's instance that is gone now is NOT_FOUND, not "not visible yet").
    fn forget_insert(&self, target: &crate::naming::InstanceRef) {
        self.recent.forget(target);
        self.pending_inserts.forget(target);
        self.failed_inserts.forget(target);
        self.deleted.record(target.clone(), ());
    }
}
