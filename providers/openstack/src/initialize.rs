//! InitializeMachine on OpenStack: every pod CIDR as an allowed address pair
//! on the server's pod network ports (the Go provider did this at the end of
//! its create, replacing the list once per CIDR, so with dual stack only the
//! last CIDR survived). Convergent: the merged list is written only to a port
//! that lacks a CIDR, and a repeat writes nothing.
//!
//! The server is judged first ([`crate::ownership`]): one that is not the
//! machine's is NOT_FOUND, and none of its ports is read or written.
//!
//! Cost: none right after this process created the server (its record is at
//! hand and its ports were made with the pairs); otherwise one `GET
//! /servers/{id}` (by name: the name lookup), one `GET /ports?device_id=` (and, while
//! Nova has not bound the ports to the server yet, one `GET /ports?name=`)
//! and one `PUT` per port that lacks a CIDR. A young server without its ports
//! yet answers UNAVAILABLE, and MCM retries.

use machine_driver_api::{
    AbsentVm, CallContext, DriverError, InitializedMachine, MachineRef, Ownership, foreign_not_found,
};

use crate::driver::OpenStackDriver;
use crate::errors::RETRY_SOON;
use crate::lookup::get_server;
use crate::naming::{parse_provider_id, provider_id};
use crate::ownership::{log_foreign, port_is_mine};
use crate::ports::{self, ADDRESS_PAIRS_STEP};
use crate::spec::OpenStackSpec;
use crate::status::Located;

impl OpenStackDriver {
    /// InitializeMachine (see the module docs).
    pub(crate) async fn initialize(
        &self,
        ctx: &CallContext,
        req: MachineRef,
    ) -> Result<InitializedMachine, DriverError> {
        let spec = OpenStackSpec::parse(&req.class.provider_spec)?;
        let markers = spec.markers()?;
        let creds = crate::credentials::OsCredentials::from_secret(&req.secret, "secret")?;
        let (api, id, name) = match req.machine.provider_id.as_deref() {
            Some(pid) => {
                let (region, id) = parse_provider_id(pid)?;
                let api = self.pool.api(&creds, &region, ctx)?;
                // The server's record: this process's own (no call; never one made up for an
                // adoption through a port), else read; judged before any port is touched.
                let server = match self.made.get(&api.scoped(&id)) {
                    Some(record) => record,
                    None => match get_server(&api, &id).await? {
                        Some(server) => server,
                        None => {
                            let pid = provider_id(&region, &id);
                            return Err(AbsentVm::new(&req.machine, format!("server {pid}"))
                                .created(self.recent.contains(&api.scoped(&id)).then_some(pid))
                                .deleted(self.deleted.contains(&id))
                                .unavailable(
                                    machine_driver_api::reasons::NOT_VISIBLE_YET,
                                    format!("server {id} is not visible in Nova yet"),
                                ));
                        }
                    },
                };
                if let Ownership::Foreign(why) = markers.judge(&server, &req.machine) {
                    log_foreign("initialize", &server, why);
                    return Err(foreign_not_found(format!("server {}", provider_id(&region, &id)), why));
                }
                // Known complete (this process's create made the ports with every pod CIDR): no further call.
                if self.pairs_complete.get(&id).is_some() {
                    return Ok(InitializedMachine {
                        provider_id: provider_id(&region, &id),
                        node_name: server.name,
                        applied_steps: Vec::new(),
                    });
                }
                (api, id, server.name)
            }
            None => match self.locate(ctx, &req).await? {
                Located { api, server: Some(s), .. } => (api, s.id, s.name),
                Located { .. } => {
                    return Err(DriverError::not_found(format!("server of machine {}", req.machine.name)));
                }
            },
        };
        let mut attached = ports::of_server(&api, &id).await?;
        if attached.is_empty() && !name.is_empty() {
            // Nova binds a port to its server once a compute host takes the server: until
            // then the machine's own ports are found by their name (a free one only with both markers).
            attached = ports::named(&api, &name)
                .await?
                .into_iter()
                .filter(|p| p.device_id == id || (p.device_id.is_empty() && port_is_mine(&markers, p, &req.machine)))
                .collect();
        }
        let pod_networks = self.pod_network_ids(&api, &creds, &spec).await?;
        let pod_ports: Vec<_> = attached.iter().filter(|p| pod_networks.contains(&p.network_id)).collect();
        if pod_ports.is_empty() {
            if self.recent.contains(&api.scoped(&id)) || req.machine.is_young() {
                return Err(DriverError::unavailable(
                    crate::errors::PORTS_NOT_ATTACHED,
                    format!("server {id} has no port on a pod network yet"),
                    RETRY_SOON,
                ));
            }
            return Err(DriverError::not_found(format!("a port of server {id} on a pod network")));
        }
        let cidrs = spec.pod_cidrs();
        let mut wrote = false;
        for port in pod_ports {
            wrote |= ports::add_pairs(&api, port, &cidrs).await?;
        }
        self.pairs_complete.insert(id.clone(), std::sync::Arc::new(()));
        if wrote {
            tracing::info!(machine = %req.machine.name, server = %id, "pod CIDRs added as allowed address pairs");
        }
        Ok(InitializedMachine {
            provider_id: provider_id(api.region(), &id),
            node_name: name,
            applied_steps: if wrote { vec![ADDRESS_PAIRS_STEP.to_string()] } else { Vec::new() },
        })
    }
}
