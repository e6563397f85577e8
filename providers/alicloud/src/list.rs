//! ListMachines on ECS: `DescribeInstances` of the instances tagged with the
//! class's cluster marker key (any value), 100 per page (the Go provider pages
//! by ECS's default of 10: 50 calls for 500 nodes), every page through the
//! kit's `PageTokens`; each instance is then returned only when the kit's
//! `ClusterMarkers::lists` says so (both the cluster and the role marker):
//! MCM's orphan collection deletes what this answers and no Machine claims.

use machine_driver_api::{CallContext, DriverError, ListMachines};

use crate::credentials::AccessKey;
use crate::driver::AlicloudDriver;
use crate::ecs::client::Params;
use crate::lookup::describe_all;
use crate::naming::provider_id;
use crate::spec::AlicloudProviderSpec;

impl AlicloudDriver {
    /// ListMachines: providerID → instance name.
    pub(crate) async fn list(
        &self,
        ctx: &CallContext,
        req: ListMachines,
    ) -> Result<Vec<(String, String)>, DriverError> {
        let (spec, markers) = AlicloudProviderSpec::parse(&req.class.provider_spec)?;
        let key = AccessKey::from_secret(&req.secret, "secret")?;
        let api = self.pool.api(&key, &spec.region, ctx)?;
        let mut filter = Params::default();
        filter.set("RegionId", &spec.region).set("Tag.1.Key", markers.cluster());
        let found = describe_all(&api, &filter).await?;
        Ok(found
            .into_iter()
            .filter(|i| markers.lists(i))
            .map(|i| (provider_id(&spec.region, &i.instance_id), i.instance_name))
            .collect())
    }
}
