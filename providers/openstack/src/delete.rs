//! DeleteMachine on OpenStack: by providerID alone, `DELETE /servers/{id}`,
//! then the machine's ports (`GET /ports?name=<machine>`, each free or
//! attached to that server deleted). Nova deletes the boot volume with the
//! server (the driver makes it with `delete_on_termination`). No waiting for
//! the server to be gone (the Go provider polls up to 20 minutes inside the
//! call). Gone already is OK. Without a providerID the machine's servers are
//! found by name and uid, as the Go provider finds them by name.
//!
//! Cost: 3 calls for a machine with one port; a machine name unknown to the
//! caller (an orphan collected by providerID alone) costs one server read.

use machine_driver_api::{CallContext, CallFailure, DeletedMachine, DriverError, MachineRef};

use crate::clients::{Api, Call, Verb};
use crate::credentials::OsCredentials;
use crate::driver::OpenStackDriver;
use crate::lookup::{find_machine, get_server};
use crate::naming::parse_provider_id;
use crate::os::keystone::Service;
use crate::ports;
use crate::spec::OpenStackSpec;

impl OpenStackDriver {
    /// DeleteMachine (see the module docs).
    pub(crate) async fn delete(&self, ctx: &CallContext, req: MachineRef) -> Result<DeletedMachine, DriverError> {
        let creds = OsCredentials::from_secret(&req.secret, "secret")?;
        let pid = req.machine.provider_id.as_deref();
        let mut name = req.machine.name.clone();
        let (api, ids) = match pid {
            Some(pid) => {
                let (region, id) = parse_provider_id(pid)?;
                let api = self.pool.api(&creds, &region, ctx)?;
                if name.is_empty() {
                    name = get_server(&api, &id).await?.map(|s| s.name).unwrap_or_default();
                }
                (api, vec![id])
            }
            None => {
                let spec = OpenStackSpec::parse(&req.class.provider_spec)?;
                if name.is_empty() {
                    return Err(DriverError::invalid_argument(
                        "machine.providerID",
                        "is required without a machine name",
                    ));
                }
                let api = self.pool.api(&creds, &spec.region, ctx)?;
                let (cluster_key, _) = spec.cluster_tag().unwrap_or_default();
                // Every server of the machine (duplicates included), also one the Go provider made.
                let found = find_machine(&api, cluster_key, &name, &req.machine.uid).await?;
                (api, found.into_iter().map(|s| s.id).collect())
            }
        };
        let mut already_gone = true;
        for id in &ids {
            already_gone &= !self.delete_server(&api, id).await?;
        }
        // With the class at hand, a free port must carry its cluster key: a port
        // of that name in another cluster of the project is not this machine's.
        let cluster_key = OpenStackSpec::parse(&req.class.provider_spec)
            .ok()
            .and_then(|s| s.cluster_tag().map(|(k, _)| k.to_string()));
        if !name.is_empty() {
            for port in ports::named(&api, &name).await? {
                let ours = cluster_key.as_ref().is_none_or(|k| port.tags.contains(k));
                if ids.contains(&port.device_id) || (port.device_id.is_empty() && ours) {
                    ports::delete(&api, &port.id).await?;
                    already_gone = false;
                }
            }
        }
        Ok(DeletedMachine { last_known_state: String::new(), already_gone })
    }

    /// `DELETE /servers/{id}`; true when the server existed.
    async fn delete_server(&self, api: &Api<'_>, id: &str) -> Result<bool, DriverError> {
        self.recent.forget(&id.to_string());
        let path = format!("/servers/{id}");
        let existed = match api.raw(Call::new(Service::Compute, "servers.delete", Verb::Delete, &path), &[], None).await
        {
            Ok(_) => true,
            Err(CallFailure::Cloud(_, f)) if f.is_not_found() => false,
            Err(e) => return Err(e.into()),
        };
        self.deleted.record(id.to_string(), ());
        Ok(existed)
    }
}
