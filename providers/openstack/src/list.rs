//! ListMachines on OpenStack: the project's servers (`GET /servers/detail`,
//! every page; Nova cannot filter by metadata) kept when their metadata holds
//! the class's cluster and role keys (the kit's [`machine_driver_api::ClusterMarkers::lists`],
//! see [`crate::ownership`]: a server with the cluster key alone, another
//! cluster's, or one made by hand is never listed, so the orphan collector
//! never deletes it), plus the ports of the cluster and role
//! (`GET /ports?tags=<cluster>,<role>`) that belong to no server: a create
//! refused in a way the driver could not clean up after, or a server deleted
//! outside the driver. Such a port is listed under its machine name with the
//! providerID of the port, so the orphan collector's DeleteMachine (which
//! deletes the machine's free ports) removes it. Boot volumes need no entry:
//! Nova deletes them with their server.

use std::collections::BTreeSet;

use machine_driver_api::{CallContext, DriverError, ListMachines};

use crate::credentials::OsCredentials;
use crate::driver::OpenStackDriver;
use crate::lookup::list_servers;
use crate::naming::provider_id;
use crate::ports;
use crate::spec::OpenStackSpec;

impl OpenStackDriver {
    /// ListMachines: providerID → machine name.
    pub(crate) async fn list(
        &self,
        ctx: &CallContext,
        req: ListMachines,
    ) -> Result<Vec<(String, String)>, DriverError> {
        let spec = OpenStackSpec::parse(&req.class.provider_spec)?;
        let markers = spec.markers()?;
        let creds = OsCredentials::from_secret(&req.secret, "secret")?;
        let api = self.pool.api(&creds, &spec.region, ctx)?;
        // Neutron's `tags` filter is "all of" (the keys hold no comma: Nova's key syntax).
        let tags = [("tags", format!("{},{}", markers.cluster(), markers.role()))];
        let (servers, tagged_ports) = tokio::join!(list_servers(&api, &[]), ports::list(&api, &tags));
        let mut out = Vec::new();
        let mut names = BTreeSet::new();
        for s in servers? {
            if markers.lists(&s) {
                names.insert(s.name.clone());
                out.push((provider_id(&spec.region, &s.id), s.name));
            }
        }
        for p in tagged_ports? {
            if p.device_id.is_empty() && !p.name.is_empty() && !names.contains(&p.name) && markers.lists(&p) {
                out.push((provider_id(&spec.region, &p.id), p.name));
            }
        }
        Ok(out)
    }
}
