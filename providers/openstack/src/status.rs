//! GetMachineStatus on OpenStack (the Go provider answers UNIMPLEMENTED, so
//! MCM calls its 20-minute CreateMachine on every pass): one server read,
//! shared with concurrent polls ([`crate::lookup`]: a batched list, or a
//! recent prefix list of up to 2 s ago), by the machine's name when there is
//! no providerID. A server this process deleted in the last minutes is read
//! alone when a list answered for it (the list may predate the delete).
//!
//! Every answer is for a server the class's markers prove the machine's
//! ([`crate::ownership`]): another cluster's server, one made by hand, or one
//! of another machine is NOT_FOUND, by providerID and by name alike.
//!
//! BUILD is OK, `vm_state` `pending` (the node has not joined yet); ERROR
//! answers Nova's fault ("No valid host was found" is RESOURCE_EXHAUSTED), so
//! the machine is replaced rather than waited for. A server made by the Go
//! provider (no uid in its metadata) may lack pod CIDRs in its ports' address
//! pairs: its ports are read and the step reported pending; the driver's own
//! servers get their pairs with their ports.

use machine_driver_api::{
    AbsentVm, CallContext, DriverError, ErrorKind, MachineRef, MachineStatus, Ownership, foreign_not_found,
};

use crate::clients::Api;
use crate::create::addresses;
use crate::credentials::OsCredentials;
use crate::driver::OpenStackDriver;
use crate::lookup::{at_most_one, find_machine, get_server};
use crate::naming::{MACHINE_UID_KEY, parse_provider_id, provider_id};
use crate::os::model::Server;
use crate::ownership::log_foreign;
use crate::ports::{self, ADDRESS_PAIRS_STEP};
use crate::spec::OpenStackSpec;

/// Where a machine's server is.
pub(crate) struct Located<'a> {
    /// The call handle in the server's region.
    pub(crate) api: Api<'a>,
    /// The server id, when the providerID gave it.
    pub(crate) id: Option<String>,
    /// The server, when Nova shows it and it is the machine's ([`crate::ownership`]).
    pub(crate) server: Option<Server>,
    /// The request's class.
    pub(crate) spec: OpenStackSpec,
}

impl OpenStackDriver {
    /// The machine's server: by providerID (coalesced), else by name; judged
    /// by the class's markers either way. A server that is not the
    /// machine's is NOT_FOUND ([`foreign_not_found`]), so MCM never adopts it.
    pub(crate) async fn locate<'a>(&self, ctx: &'a CallContext, req: &MachineRef) -> Result<Located<'a>, DriverError> {
        let creds = OsCredentials::from_secret(&req.secret, "secret")?;
        // Every path checks the class: its markers tell the machine's servers from others'.
        let spec = OpenStackSpec::parse(&req.class.provider_spec)?;
        let markers = spec.markers()?;
        match req.machine.provider_id.as_deref() {
            Some(pid) => {
                let (region, id) = parse_provider_id(pid)?;
                let api = self.pool.api(&creds, &region, ctx)?;
                let server = match self.lookups.get(&api, creds.fingerprint, &id, &req.machine.name).await? {
                    // A list (up to LIST_REUSE old) may predate this process's delete of the server: read it alone.
                    Some(found) if found.listed && self.deleted.contains(&id) => get_server(&api, &id).await?,
                    found => found.map(|f| f.server),
                };
                if let Some(server) = &server
                    && let Ownership::Foreign(why) = markers.judge(server, &req.machine)
                {
                    log_foreign("status", server, why);
                    return Err(foreign_not_found(format!("server {}", provider_id(&region, &id)), why));
                }
                Ok(Located { api, id: Some(id), server, spec })
            }
            None => {
                if req.machine.name.is_empty() {
                    return Err(DriverError::invalid_argument(
                        "machine.providerID",
                        "is required without a machine name",
                    ));
                }
                let api = self.pool.api(&creds, &spec.region, ctx)?;
                let judged = find_machine(&api, &markers, &req.machine).await?;
                if judged.mine.is_empty()
                    && let Some(why) = judged.foreign
                {
                    // Not the foreign server's id: the request did not name it.
                    return Err(foreign_not_found(format!("the server named {}", req.machine.name), why));
                }
                let server = at_most_one(judged.mine, &req.machine.name)?;
                Ok(Located { api, id: None, server, spec })
            }
        }
    }

    /// GetMachineStatus (see the module docs).
    pub(crate) async fn status(&self, ctx: &CallContext, req: MachineRef) -> Result<MachineStatus, DriverError> {
        let Located { api, id, server, spec } = self.locate(ctx, &req).await?;
        let region = api.region().to_string();
        if let Some(server) = server {
            self.recent.forget(&api.scoped(&server.id));
            if server.status.eq_ignore_ascii_case("ERROR") && !server.is_deleting() {
                return Err(server_error(&server));
            }
            let complete = self.pairs_complete.get(&server.id).is_some();
            let pending = if server.metadata.contains_key(MACHINE_UID_KEY) || server.is_deleting() || complete {
                Vec::new()
            } else {
                self.pending_pairs(&api, &req, &spec, &server).await?
            };
            return Ok(MachineStatus {
                provider_id: provider_id(&region, &server.id),
                node_name: server.name.clone(),
                addresses: if server.is_deleting() { Vec::new() } else { addresses(&server) },
                pending_steps: pending,
                vm_state: vm_state(&server),
            });
        }
        let Some(id) = id else {
            return Err(DriverError::not_found(format!("server of machine {}", req.machine.name)));
        };
        let pid = provider_id(&region, &id);
        let created = self.recent.get(&api.scoped(&id));
        let node_name = created.as_ref().map_or(req.machine.name.as_str(), |c| c.name.as_str()).to_string();
        AbsentVm::new(&req.machine, format!("server {pid}"))
            .created(created.map(|_| pid))
            .deleted(self.deleted.contains(&id))
            .status(&node_name)
    }

    /// The address-pairs step when a pod network port of the server lacks a pod CIDR.
    async fn pending_pairs(
        &self,
        api: &Api<'_>,
        req: &MachineRef,
        spec: &OpenStackSpec,
        server: &Server,
    ) -> Result<Vec<String>, DriverError> {
        let cidrs = spec.pod_cidrs();
        let attached = ports::of_server(api, &server.id).await?;
        let creds = OsCredentials::from_secret(&req.secret, "secret")?;
        let pod_networks = self.pod_network_ids(api, &creds, spec).await?;
        let missing = attached
            .iter()
            .filter(|p| pod_networks.contains(&p.network_id))
            .any(|p| !ports::missing_pairs(p, &cidrs).is_empty());
        if missing {
            return Ok(vec![ADDRESS_PAIRS_STEP.to_string()]);
        }
        self.pairs_complete.insert(server.id.clone(), std::sync::Arc::new(()));
        Ok(Vec::new())
    }

    /// The ids of the class's pod networks.
    pub(crate) async fn pod_network_ids(
        &self,
        api: &Api<'_>,
        creds: &OsCredentials,
        spec: &OpenStackSpec,
    ) -> Result<Vec<String>, DriverError> {
        let mut out = Vec::new();
        for (i, (plan, pod)) in spec.port_plans().into_iter().enumerate() {
            if pod {
                let field = format!("providerSpec.spec.networks[{i}]");
                out.push(self.resolver.network(creds.fingerprint, api, &plan.network, &field).await?);
            }
        }
        Ok(out)
    }
}

/// The server's state in the words every provider uses where they apply
/// (`pending`, `running`, `deleting`; the tools wait for `running`), else
/// Nova's status lowercased (`shutoff`, `paused`, ...).
fn vm_state(server: &Server) -> String {
    if server.is_deleting() {
        return "deleting".into();
    }
    match server.status.to_ascii_uppercase().as_str() {
        "BUILD" => "pending".into(),
        "ACTIVE" => "running".into(),
        other => other.to_ascii_lowercase(),
    }
}

/// The answer for a server in ERROR: its fault, "No valid host was found"
/// and quota faults as RESOURCE_EXHAUSTED.
pub(crate) fn server_error(server: &Server) -> DriverError {
    let message = server.fault.as_ref().map(|f| f.message.trim()).filter(|m| !m.is_empty()).unwrap_or("no fault given");
    let exhausted = message.contains("No valid host") || message.to_ascii_lowercase().contains("quota");
    let (kind, reason) = if exhausted {
        (ErrorKind::ResourceExhausted, "NoValidHost")
    } else {
        (ErrorKind::FailedPrecondition, "ServerError")
    };
    let message: String = message.chars().take(machine_driver_api::MAX_CLOUD_MESSAGE).collect();
    let message = format!("server {} is in ERROR: {message}", server.id);
    DriverError::new(kind, reason, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::model::Fault;

    #[test]
    fn error_servers_answer_their_fault() {
        let server = |message: &str| Server {
            id: "s-1".into(),
            status: "ERROR".into(),
            fault: Some(Fault { message: message.into() }),
            ..Default::default()
        };
        let e = server_error(&server("No valid host was found. There are not enough hosts available."));
        assert_eq!(e.kind(), ErrorKind::ResourceExhausted);
        assert!(e.message().contains("No valid host was found"), "{}", e.message());
        assert_eq!(server_error(&server("Build of instance aborted")).kind(), ErrorKind::FailedPrecondition);
    }
}
