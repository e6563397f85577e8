//! DeleteMachine on ECS: one `DeleteInstance` with `Force=true` per instance
//! of the machine, sent only for an instance the kit judges the machine's
//! ([`crate::ownership`]); a foreign one (another cluster's, hand-made, an
//! earlier machine's) is answered "already gone" and left alone. Gone
//! already → OK. An instance ECS will not delete yet (still
//! `Pending`/`Starting`: `IncorrectInstanceStatus`) answers UNAVAILABLE with a
//! retry delay, and MCM retries; one whose delete this process already sent
//! (now `Stopping`) is OK.
//!
//! By providerID (the Go provider deletes it unchecked): the instance's record
//! is judged first. It is at hand when this process read it lately (the
//! status poll MCM sends before deleting): 1 call in all; otherwise 1
//! `DescribeInstances` by id (shared with concurrent status polls) before the
//! `DeleteInstance`. Without a providerID: the instances of the machine's name
//! that the kit judges the machine's (its uid, or none: made by the Go
//! provider), read by name, whose records are then at hand.

use machine_driver_api::{CallContext, CallFailure, DeletedMachine, DriverError, MachineRef, Ownership};

use crate::clients::Api;
use crate::create::find_machine;
use crate::credentials::AccessKey;
use crate::driver::AlicloudDriver;
use crate::ecs::client::Params;
use crate::ecs::model::Empty;
use crate::naming::{parse_provider_id, provider_id};
use crate::spec::AlicloudProviderSpec;

impl AlicloudDriver {
    /// DeleteMachine (see the module docs).
    pub(crate) async fn delete(&self, ctx: &CallContext, req: MachineRef) -> Result<DeletedMachine, DriverError> {
        let key = AccessKey::from_secret(&req.secret, "secret")?;
        let gone = DeletedMachine { last_known_state: String::new(), already_gone: true };
        let Some(pid) = req.machine.provider_id.as_deref() else {
            let (spec, markers) = AlicloudProviderSpec::parse(&req.class.provider_spec)?;
            if req.machine.name.is_empty() {
                return Err(DriverError::invalid_argument("machine.providerID", "is required without a machine name"));
            }
            let api = self.pool.api(&key, &spec.region, ctx)?;
            // Every instance of the machine (duplicates included), also one the Go provider made.
            let mut already_gone = true;
            for instance in find_machine(&api, &spec.region, &markers, &req.machine).await? {
                already_gone &= self.delete_instance(&api, &instance.instance_id).await?;
            }
            return Ok(DeletedMachine { already_gone, ..gone });
        };
        let markers = AlicloudProviderSpec::markers_of(&req.class.provider_spec)?;
        let (region, id) = parse_provider_id(pid)?;
        let api = self.pool.api(&key, &region, ctx)?;
        let record = match self.records.get(key.fingerprint, &region, &id) {
            Some(at_hand) => Some(at_hand),
            None => {
                let read = self.lookups.get(&api, &key, &region, &id).await?;
                if let Some(instance) = &read {
                    self.records.record(key.fingerprint, &region, instance);
                }
                read
            }
        };
        let Some(instance) = record else {
            if !self.deleted.contains(&id) && self.recent.contains(&id) {
                // This process launched it a moment ago and ECS does not list it yet: judged
                // on a retry, never deleted unseen. (A young machine alone is not enough: ECS
                // forgets deleted instances, and after a restart the retries of a delete whose
                // answer was lost would be refused until the machine is 10 minutes old.)
                return Err(DriverError::unavailable(
                    machine_driver_api::reasons::NOT_VISIBLE_YET,
                    format!("instance {} is not visible in ECS yet", provider_id(&region, &id)),
                    crate::errors::RETRY_SOON,
                ));
            }
            // Gone: remembered, so that a status poll of the young machine answers
            // NOT_FOUND, not "not visible yet".
            self.deleted.record(id.clone(), ());
            return Ok(gone);
        };
        match markers.judge(&instance, &req.machine) {
            Ownership::Mine => {
                let already_gone = self.delete_instance(&api, &id).await?;
                Ok(DeletedMachine { already_gone, ..gone })
            }
            Ownership::Foreign(why) => {
                tracing::info!(instance = %provider_id(&region, &id), %why, "not this machine's instance: not deleted");
                Ok(gone)
            }
        }
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
