//! ListMachines on Compute Engine: every instance of the secret's project in
//! the spec's zone (`instances.list`, 500 a page, every page, no filter),
//! returned when the kit's rule lists it ([`crate::ownership::lists`]: the
//! class's cluster and role markers, as network tags or this sidecar's labels).
//!
//! Why no server-side filter: instances the Go provider made carry the
//! markers only as network tags, and Compute's list filter is documented for
//! scalar fields and labels, not for the items of `tags` (nor does the fake
//! take one); a label filter would miss them, so their orphans would never be
//! collected after a migration. The Go provider lists the zone unfiltered too.
//! The cost is one call per 500 instances of the project's zone, once per
//! orphan-collection period.

use machine_driver_api::{CallContext, DriverError, ListMachines, PageTokens};

use crate::credentials::GcpCredentials;
use crate::driver::GcpDriver;
use crate::naming::{InstanceRef, is_gce_name};
use crate::ownership;
use crate::spec::GcpProviderSpec;

/// Page size of instances.list (the API's maximum).
const LIST_PAGE_SIZE: u32 = 500;

impl GcpDriver {
    /// ListMachines: the zone's instances that carry the class's markers, every page.
    pub(crate) async fn list(
        &self,
        ctx: &CallContext,
        req: ListMachines,
    ) -> Result<Vec<(String, String)>, DriverError> {
        let spec = GcpProviderSpec::parse(&req.class.provider_spec)?;
        let markers = spec.markers()?;
        let key = GcpCredentials::from_secret(&req.secret, "secret")?;
        let api = self.pool.api(&key, ctx).await?;
        let mut out = Vec::new();
        let mut tokens = PageTokens::new("compute.instances.list");
        let mut page_token = String::new();
        loop {
            let page = api
                .call("instances.list", || {
                    api.clients
                        .instances
                        .list()
                        .set_project(&key.project_id)
                        .set_zone(&spec.zone)
                        .set_max_results(LIST_PAGE_SIZE)
                        .set_page_token(page_token.clone())
                        .send()
                })
                .await?;
            for instance in page.items.iter().filter(|i| ownership::lists(&markers, i)) {
                if let Some(name) = instance.name.as_deref().filter(|n| is_gce_name(n)) {
                    let r = InstanceRef {
                        project: key.project_id.clone(),
                        zone: spec.zone.clone(),
                        name: name.to_string(),
                    };
                    out.push((r.provider_id(), name.to_string()));
                }
            }
            match tokens.next(page.next_page_token.as_deref())? {
                Some(t) => page_token = t,
                None => break,
            }
        }
        Ok(out)
    }
}
