//! DeleteMachine on ECS: by providerID alone, one `DeleteInstance` with
//! `Force=true` (1 call). Gone already → OK. An instance ECS will not delete
//! yet (still `Pending`/`Starting`: `IncorrectInstanceStatus`) answers
//! UNAVAILABLE with a retry delay, and MCM retries; one whose delete this
//! process already sent (now `Stopping`) is OK. Without a providerID the
//! instance carrying the machine's uid tag is deleted, or without a uid the
//! instances of the machine's name in the cluster (as the Go provider).

use machine_driver_api::{CallContext, CallFailure, DeletedMachine, DriverError, MachineRef};

use crate::clients::Api;
use crate::create::find_machine;
use crate::credentials::AccessKey;
use crate::driver::AlicloudDriver;
use crate::ecs::client::Params;
use crate::ecs::model::Empty;
use crate::naming::parse_provider_id;
use crate::spec::AlicloudProviderSpec;

impl AlicloudDriver {
    /// DeleteMachine (see the module docs).
    pub(crate) async fn delete(&self, ctx: &CallContext, req: MachineRef) -> Result<DeletedMachine, DriverError> {
        let key = AccessKey::from_secret(&req.secret, "secret")?;
        let pid = req.machine.provider_id.as_deref();
        let gone = || DeletedMachine { last_known_state: String::new(), already_gone: true };
        let targets: Vec<(String, String)> = match pid {
            Some(pid) => vec![parse_provider_id(pid)?],
            None => {
                let spec = AlicloudProviderSpec::parse(&req.class.provider_spec)?;
                let api = self.pool.api(&key, &spec.region, ctx)?;
                // Every instance of the machine (duplicates included), also one the Go provider made.
                if req.machine.name.is_empty() {
                    return Err(DriverError::invalid_argument(
                        "machine.providerID",
                        "is required without a machine name",
                    ));
                }
                let found = find_machine(&api, &spec, &req.machine.name, &req.machine.uid).await?;
                found.into_iter().map(|i| (spec.region.clone(), i.instance_id)).collect()
            }
        };
        if targets.is_empty() {
            return Ok(gone());
        }
        let mut already_gone = true;
        for (region, id) in targets {
            let api = self.pool.api(&key, &region, ctx)?;
            already_gone &= self.delete_instance(&api, &id).await?;
        }
        Ok(DeletedMachine { last_known_state: String::new(), already_gone })
    }

    /// One `DeleteInstance`; true when the instance was gone already. A refusal
    /// for the instance's state is OK when this process's delete of it was
    /// accepted (it is stopping on its way out), UNAVAILABLE otherwise (still starting).
    async fn delete_instance(&self, api: &Api<'_>, id: &str) -> Result<bool, DriverError> {
        self.recent.forget(&id.to_string());
        let mut p = Params::default();
        p.set("InstanceId", id).set("Force", true);
        match api.ecs::<Empty>("DeleteInstance", &p).await {
            Ok(_) => {
                self.deleted.record(id.to_string(), ());
                Ok(false)
            }
            Err(CallFailure::Cloud(_, f)) if f.is_not_found() => {
                self.deleted.record(id.to_string(), ());
                Ok(true)
            }
            Err(CallFailure::Cloud(_, f)) if f.is_incorrect_status() && self.deleted.contains(&id.to_string()) => {
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }
}
