//! ListMachines: every page of DescribeInstances filtered by the class's
//! cluster and role tag keys, each instance passed through the kit's
//! `lists` (both markers; [`crate::ownership`]); providerID → machine name
//! (the `Name` tag). MCM's orphan collection deletes what this returns and no
//! Machine claims, so nothing else may be listed.

use machine_driver_api::{CallContext, ListMachines, Result};

use crate::driver::AwsDriver;
use crate::ownership::Tagged;
use crate::{lookup, provider_id, tags};

impl AwsDriver {
    pub(crate) async fn list(&self, ctx: &CallContext, req: ListMachines) -> Result<Vec<(String, String)>> {
        let (spec, markers) = crate::ownership::class(&req.class.provider_spec)?;
        let c = self.clients(ctx, &req.secret, &spec.region).await?;
        let found = lookup::all_matching(ctx, &c, tags::list_filters(&markers)).await?;
        let mut out: Vec<(String, String)> = found
            .iter()
            .filter(|i| tags::is_live(i) && markers.lists(&Tagged(i.tags())))
            .filter_map(|i| {
                let id = i.instance_id()?;
                Some((
                    provider_id::encode(&spec.region, id),
                    tags::tag_value(i, tags::NAME_TAG).unwrap_or_default().to_string(),
                ))
            })
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }
}
