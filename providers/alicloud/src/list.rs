//! ListMachines on ECS: `DescribeInstances` filtered by the cluster and role
//! tags (key and value, as the Go provider), 100 per page (the Go provider
//! pages by ECS's default of 10: 50 calls for 500 nodes), every page.

use machine_driver_api::{CallContext, DriverError, ListMachines};

use crate::credentials::AccessKey;
use crate::driver::AlicloudDriver;
use crate::ecs::client::Params;
use crate::ecs::model::DescribeInstancesAnswer;
use crate::naming::provider_id;
use crate::spec::AlicloudProviderSpec;

/// ECS's largest page.
const PAGE_SIZE: u32 = 100;
/// Most pages one list follows.
const MAX_PAGES: usize = 1000;

impl AlicloudDriver {
    /// ListMachines: providerID → instance name.
    pub(crate) async fn list(
        &self,
        ctx: &CallContext,
        req: ListMachines,
    ) -> Result<Vec<(String, String)>, DriverError> {
        let spec = AlicloudProviderSpec::parse(&req.class.provider_spec)?;
        let key = AccessKey::from_secret(&req.secret, "secret")?;
        let api = self.pool.api(&key, &spec.region, ctx)?;
        let (Some((ck, cv)), Some((rk, rv))) = (spec.cluster_tag(), spec.role_tag()) else {
            return Err(DriverError::invalid_argument("providerSpec.tags", "must contain the cluster and role keys"));
        };
        let mut out = Vec::new();
        let mut token = String::new();
        for _ in 0..MAX_PAGES {
            let mut p = Params::default();
            p.set("RegionId", &spec.region)
                .set("Tag.1.Key", ck)
                .set("Tag.1.Value", cv)
                .set("Tag.2.Key", rk)
                .set("Tag.2.Value", rv)
                .set("MaxResults", PAGE_SIZE)
                .opt("NextToken", Some(token.as_str()));
            let page: DescribeInstancesAnswer = api.ecs("DescribeInstances", &p).await?;
            out.extend(
                page.instances
                    .instance
                    .into_iter()
                    .map(|i| (provider_id(&spec.region, &i.instance_id), i.instance_name)),
            );
            match page.next_token.filter(|t| !t.is_empty()) {
                // A list the orphan collector acts on must be whole: a token that does not advance is an error.
                Some(next) if next == token => {
                    return Err(DriverError::internal("ecs DescribeInstances answered the same NextToken again"));
                }
                Some(next) => token = next,
                None => return Ok(out),
            }
        }
        Err(DriverError::internal(format!("ecs DescribeInstances: more than {MAX_PAGES} pages")))
    }
}
