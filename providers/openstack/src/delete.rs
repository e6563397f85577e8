//! DeleteMachine on OpenStack: the machine's server (`DELETE /servers/{id}`),
//! then the machine's ports (`GET /ports?name=<machine>`: each attached to
//! that server, and each free one carrying the class's cluster and role
//! tags). Nova deletes the boot volume with the server (the driver makes it
//! with `delete_on_termination`). No waiting for the server to be gone (the
//! Go provider polls up to 20 minutes inside the call). Gone already is OK.
//!
//! Only a server the class's markers prove the machine's is deleted
//! ([`crate::ownership`]); a foreign one is answered as already gone, and
//! neither it nor any of its ports is touched. By providerID the server's
//! record is judged: the one this process created, or adopted from Nova's
//! record, in the last 10 minutes under the same credentials and region (no
//! call; never one adopted on its port's markers while Nova did not show
//! it), else one `GET /servers/{id}`, read alongside the ports
//! when the request names the machine (the Go provider reads it too, and
//! requires both metadata keys). Without a providerID the machine's servers
//! are found by name (duplicates too) and each judged.
//!
//! A machine the Go provider made with a `rootDiskType` class also has a boot
//! volume Nova keeps after the server: it is deleted once the server is gone
//! ([`crate::go_volumes`], as the Go provider's `deleteVolume`).
//!
//! Cost: 3 calls for a machine with one port this process made or adopted
//! in the last 10 minutes; 4 for any other (the orphan collector's, a
//! restarted process's), the read being the ownership check; for a Go-made
//! machine of a `rootDiskType` class, or one whose server Nova no longer
//! shows, the volume clean-up's calls besides. A server of no
//! known name (an orphan collected by providerID alone) is read before its
//! ports are.

use machine_driver_api::{CallContext, CallFailure, DeletedMachine, DriverError, MachineRef, MarkedVm, Ownership};

use crate::clients::{Api, Call, Verb};
use crate::credentials::OsCredentials;
use crate::driver::OpenStackDriver;
use crate::lookup::{find_machine, get_server};
use crate::naming::{parse_provider_id, request_id};
use crate::os::keystone::Service;
use crate::os::model::Port;
use crate::ownership::{log_foreign, port_is_mine};
use crate::ports;
use crate::spec::OpenStackSpec;

impl OpenStackDriver {
    /// DeleteMachine (see the module docs).
    pub(crate) async fn delete(&self, ctx: &CallContext, req: MachineRef) -> Result<DeletedMachine, DriverError> {
        let creds = OsCredentials::from_secret(&req.secret, "secret")?;
        // Without the class's markers nothing can be proven the machine's: refused before any call.
        let spec = OpenStackSpec::parse(&req.class.provider_spec)?;
        let markers = spec.markers()?;
        let mut name = req.machine.name.clone();
        // Servers of the machine the Go provider made (no uid): a `rootDiskType`
        // class left a boot volume of theirs that Nova keeps ([`crate::go_volumes`]).
        let mut go_made: Vec<String> = Vec::new();
        // The servers judged the machine's, the server the providerID names when Nova
        // no longer shows it (its marked ports are still the machine's), and the ports
        // of the machine's name when read alongside.
        let (api, ids, gone, mut named_ports): (Api<'_>, Vec<String>, Option<String>, Option<Vec<Port>>) =
            match req.machine.provider_id.as_deref() {
                Some(pid) => {
                    let (region, id) = parse_provider_id(pid)?;
                    let api = self.pool.api(&creds, &region, ctx)?;
                    let (server, named_ports) = match self.made.get(&api.scoped(&id)) {
                        Some(record) => (Some(record), None),
                        None if !name.is_empty() => {
                            let (server, named) = tokio::join!(get_server(&api, &id), ports::named(&api, &name));
                            (server?, Some(named?))
                        }
                        None => (get_server(&api, &id).await?, None),
                    };
                    match server {
                        Some(server) => match markers.judge(&server, &req.machine) {
                            Ownership::Mine => {
                                if server.machine_uid().is_none() {
                                    go_made.push(id.clone());
                                }
                                if name.is_empty() {
                                    name = server.name;
                                }
                                (api, vec![id], None, named_ports)
                            }
                            Ownership::Foreign(why) => {
                                log_foreign("delete", &server, why);
                                return Ok(DeletedMachine { last_known_state: String::new(), already_gone: true });
                            }
                        },
                        // Nova does not show it: nothing is deleted unread. It is
                        // remembered as deleted (and no longer as a create of a moment
                        // ago), so that a status poll answers NOT_FOUND, not "not visible
                        // yet"; a server that still shows up later carries its markers
                        // and is listed for MCM's orphan collection.
                        None => {
                            self.recent.forget(&api.scoped(&id));
                            self.deleted.record(id.clone(), ());
                            (api, Vec::new(), Some(id), named_ports)
                        }
                    }
                }
                None => {
                    if name.is_empty() {
                        return Err(DriverError::invalid_argument(
                            "machine.providerID",
                            "is required without a machine name",
                        ));
                    }
                    let api = self.pool.api(&creds, &spec.region, ctx)?;
                    // Every server of the machine (duplicates included), also one the Go provider made.
                    let found = find_machine(&api, &markers, &req.machine).await?;
                    go_made.extend(found.mine.iter().filter(|s| s.machine_uid().is_none()).map(|s| s.id.clone()));
                    (api, found.mine.into_iter().map(|s| s.id).collect(), None, None)
                }
            };
        let mut already_gone = true;
        for id in &ids {
            already_gone &= !self.delete_server(&api, id).await?;
        }
        if name.is_empty() {
            return Ok(DeletedMachine { last_known_state: String::new(), already_gone });
        }
        let named_ports = match named_ports.take() {
            Some(p) => p,
            None => ports::named(&api, &name).await?,
        };
        for port in named_ports {
            // Attached to a server judged the machine's; else (free, or on the server
            // the providerID named, now gone) only when the port carries both markers.
            let of_deleted = ids.contains(&port.device_id);
            let free = port.device_id.is_empty() || gone.as_deref() == Some(port.device_id.as_str());
            if of_deleted || (free && port_is_mine(&markers, &port, &req.machine)) {
                ports::delete(&api, &port.id).await?;
                already_gone = false;
            }
        }
        // A Go-made server deleted now, or none shown any more (an earlier
        // call deleted it, or it went on its own): its boot volume, if any.
        let root_disk_type = spec.root_disk_type.as_deref().is_some_and(|t| !t.trim().is_empty());
        if root_disk_type && (!go_made.is_empty() || ids.is_empty()) {
            let deleted: Vec<String> = go_made.into_iter().filter(|id| ids.contains(id)).collect();
            if self.delete_go_volumes(&api, &markers, &req.machine, &name, &deleted).await? {
                already_gone = false;
            }
        }
        Ok(DeletedMachine { last_known_state: String::new(), already_gone })
    }

    /// `DELETE /servers/{id}`; true when the server existed.
    pub(crate) async fn delete_server(&self, api: &Api<'_>, id: &str) -> Result<bool, DriverError> {
        let path = format!("/servers/{}", request_id("machine.providerID", id)?);
        let key = api.scoped(id);
        self.recent.forget(&key);
        self.made.forget(&key);
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
