//! InitializeMachine on OpenStack: every pod CIDR as an allowed address pair
//! on the server's pod network ports (the Go provider did this at the end of
//! its create, replacing the list once per CIDR, so with dual stack only the
//! last CIDR survived). Convergent: the merged list is written only to a port
//! that lacks a CIDR, and a repeat writes nothing.
//!
//! Cost: none right after this process created the server (its ports were
//! made with the pairs); otherwise one `GET /ports?device_id=` (and, while
//! Nova has not bound the ports to the server yet, one `GET /ports?name=`)
//! and one `PUT` per port that lacks a CIDR. A young server without its ports
//! yet answers UNAVAILABLE, and MCM retries.

use machine_driver_api::{CallContext, DriverError, InitializedMachine, MachineRef};

use crate::driver::OpenStackDriver;
use crate::errors::RETRY_SOON;
use crate::naming::{parse_provider_id, provider_id};
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
        // Known complete (this process's create made the ports with every pod CIDR): no call.
        if let Some(pid) = req.machine.provider_id.as_deref() {
            let (region, id) = parse_provider_id(pid)?;
            if self.pairs_complete.get(&id).is_some() {
                let name = self.recent.get(&id).map(|c| c.name).unwrap_or_else(|| req.machine.name.clone());
                return Ok(InitializedMachine {
                    provider_id: provider_id(&region, &id),
                    node_name: name,
                    applied_steps: Vec::new(),
                });
            }
        }
        // By id: Neutron shows the server's ports even while Nova does not list a new server yet.
        let creds = crate::credentials::OsCredentials::from_secret(&req.secret, "secret")?;
        let (api, id, name) = match req.machine.provider_id.as_deref() {
            Some(pid) => {
                let (region, id) = parse_provider_id(pid)?;
                (self.pool.api(&creds, &region, ctx)?, id, req.machine.name.clone())
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
            // then the machine's own ports are found by their name.
            attached = ports::named(&api, &name)
                .await?
                .into_iter()
                .filter(|p| p.device_id.is_empty() || p.device_id == id)
                .collect();
        }
        let pod_networks = self.pod_network_ids(&api, &creds, &spec).await?;
        let pod_ports: Vec<_> = attached.iter().filter(|p| pod_networks.contains(&p.network_id)).collect();
        if pod_ports.is_empty() {
            if self.recent.contains(&id) || req.machine.is_young() {
                return Err(DriverError::unavailable(
                    "PORTS_NOT_ATTACHED",
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
