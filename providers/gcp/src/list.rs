//! ListMachines on Compute Engine: instances.list by the class's cluster and
//! role labels, every page.

use machine_driver_api::{CallContext, DriverError, ListMachines};

use crate::credentials::GcpCredentials;
use crate::driver::GcpDriver;
use crate::naming::{InstanceRef, MEMBERSHIP_LABEL_VALUE};
use crate::spec::GcpProviderSpec;

/// Page size of instances.list.
const LIST_PAGE_SIZE: u32 = 500;

impl GcpDriver {
    /// ListMachines: instances.list by the class's cluster and role labels, every page.
    pub(crate) async fn list(
        &self,
        ctx: &CallContext,
        req: ListMachines,
    ) -> Result<Vec<(String, String)>, DriverError> {
        let spec = GcpProviderSpec::parse(&req.class.provider_spec)?;
        let membership = spec.membership()?;
        let key = GcpCredentials::from_secret(&req.secret, "secret")?;
        let api = self.pool.api(&key, ctx).await?;
        let filter = format!(
            "labels.{}=\"{MEMBERSHIP_LABEL_VALUE}\" AND labels.{}=\"{MEMBERSHIP_LABEL_VALUE}\"",
            membership.cluster_tag, membership.role_tag
        );
        let mut out = Vec::new();
        let mut page_token = String::new();
        loop {
            let page = api
                .call("instances.list", || {
                    api.clients
                        .instances
                        .list()
                        .set_project(&key.project_id)
                        .set_zone(&spec.zone)
                        .set_filter(filter.clone())
                        .set_max_results(LIST_PAGE_SIZE)
                        .set_page_token(page_token.clone())
                        .send()
                })
                .await?;
            for instance in &page.items {
                if let Some(name) = instance.name.as_deref() {
                    let r = InstanceRef {
                        project: key.project_id.clone(),
                        zone: spec.zone.clone(),
                        name: name.to_string(),
                    };
                    out.push((r.provider_id(), name.to_string()));
                }
            }
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(t) if t != page_token => page_token = t,
                Some(_) => return Err(DriverError::internal("instances.list returned the same page token twice")),
                None => break,
            }
        }
        Ok(out)
    }
}
