//! ListMachines: every page of DescribeInstances filtered by the class's
//! cluster and role tags; providerID → machine name (the `Name` tag).

use machine_driver_api::{CallContext, DriverError, ListMachines, Result};

use crate::driver::AwsDriver;
use crate::spec_validation::parse_and_validate;
use crate::{lookup, provider_id, tags};

impl AwsDriver {
    pub(crate) async fn list(&self, ctx: &CallContext, req: ListMachines) -> Result<Vec<(String, String)>> {
        let spec = parse_and_validate(&req.class.provider_spec)?;
        let (Some(cluster), Some(role)) = (spec.cluster_tag_key(), spec.role_tag_key()) else {
            return Err(DriverError::invalid_argument("providerSpec.tags", "cluster and role tags are required"));
        };
        let c = self.clients(ctx, &req.secret, &spec.region).await?;
        let found = lookup::all_matching(ctx, &c, tags::list_filters(cluster, role)).await?;
        let mut out: Vec<(String, String)> = found
            .iter()
            .filter(|i| tags::is_live(i))
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
