//! DeleteMachine on Compute Engine: one instances.delete; OK when already gone.

use machine_driver_api::{CallContext, DeletedMachine, DriverError, MachineRef};

use crate::credentials::GcpCredentials;
use crate::driver::GcpDriver;
use crate::errors::GceFailure;

impl GcpDriver {
    /// DeleteMachine: instances.delete; OK when already gone.
    pub(crate) async fn delete(&self, ctx: &CallContext, req: MachineRef) -> Result<DeletedMachine, DriverError> {
        let key = GcpCredentials::from_secret(&req.secret, "secret")?;
        let target = self.locate(&req, &key)?;
        let api = self.pool.api(&key, ctx).await?;
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
        self.recent.forget(&target);
        self.pending_inserts.forget(&target);
        self.failed_inserts.forget(&target);
        self.deleted.record(target.clone(), ());
        match deleted {
            Ok(_) => {
                tracing::info!(provider_id = %target.provider_id(), "instance deletion started");
                Ok(DeletedMachine { last_known_state: String::new(), already_gone: false })
            }
            Err(f) if f.cloud().is_some_and(GceFailure::is_not_found) => {
                Ok(DeletedMachine { last_known_state: String::new(), already_gone: true })
            }
            Err(f) => Err(f.into_driver_error()),
        }
    }
}
