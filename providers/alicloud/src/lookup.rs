//! Reading instances: one by id for GetMachineStatus (and a delete by
//! providerID without the record at hand), with concurrent reads of one access
//! key and region coalesced into one `DescribeInstances` of up to 100 ids
//! (ECS's limit for `InstanceIds`); and every page of a filtered
//! `DescribeInstances` ([`describe_all`], through the kit's `PageTokens`).

use std::collections::HashMap;
use std::sync::Arc;

use machine_driver_api::{BatchFn, CallContext, Coalescer, DriverError, KeyedCache, PageTokens};

use crate::clients::{Api, SharedApi};
use crate::credentials::AccessKey;
use crate::ecs::client::Params;
use crate::ecs::model::{DescribeInstancesAnswer, Instance};
use crate::naming::is_instance_id;

/// ECS's most ids per `DescribeInstances`.
pub(crate) const MAX_BATCH_IDS: usize = 100;
/// ECS's largest `MaxResults`.
const PAGE_SIZE: u32 = 100;
/// Coalesced batches in flight at once per key and region.
const BATCHES_IN_FLIGHT: usize = 2;
/// Most coalescers.
const MAX_COALESCERS: usize = 256;

/// The coalescers of one driver, per access key and region.
#[derive(Debug)]
pub(crate) struct InstanceLookups {
    by_region: KeyedCache<([u8; 32], String), Coalescer<String, Instance>>,
}

impl Default for InstanceLookups {
    fn default() -> Self {
        Self { by_region: KeyedCache::new(MAX_COALESCERS) }
    }
}

impl InstanceLookups {
    /// The instance `id`, `None` when ECS does not show it.
    pub(crate) async fn get(
        &self,
        api: &Api<'_>,
        key: &AccessKey,
        region: &str,
        id: &str,
    ) -> Result<Option<Instance>, DriverError> {
        let coalescer = self.by_region.get_or_insert_with(&(key.fingerprint, region.to_string()), || {
            Coalescer::new(
                "ecs DescribeInstances",
                batch_fetch(api.shared(), region.to_string()),
                MAX_BATCH_IDS,
                BATCHES_IN_FLIGHT,
            )
        });
        coalescer.get_within(api.context(), id.to_string()).await
    }
}

/// One `DescribeInstances` with the batch's ids (a JSON array, as ECS takes
/// them). The ids come from parsed providerIDs; any other string is left out
/// here too (answered as not found), so nothing but `i-<alphanumerics>` is
/// ever serialized into the array.
fn batch_fetch(shared: SharedApi, region: String) -> BatchFn<String, Instance> {
    Arc::new(move |ids: Vec<String>, ctx: CallContext| {
        let shared = shared.clone();
        let region = region.clone();
        Box::pin(async move {
            let ids: Vec<String> = ids.into_iter().filter(|id| is_instance_id(id)).collect();
            if ids.is_empty() {
                return Ok(HashMap::new());
            }
            let ids_json = serde_json::to_string(&ids)
                .map_err(|_| DriverError::internal("serializing the DescribeInstances ids failed"))?;
            let api = shared.bind(&ctx);
            let mut p = Params::default();
            p.set("RegionId", &region).set("InstanceIds", ids_json).set("PageSize", MAX_BATCH_IDS);
            let answer: DescribeInstancesAnswer = api.ecs("DescribeInstances", &p).await?;
            Ok(answer.instances.instance.into_iter().map(|i| (i.instance_id.clone(), i)).collect::<HashMap<_, _>>())
        })
    })
}

/// Every instance `DescribeInstances` answers with the parameters `filter`
/// (each filter value its own parameter), [`PAGE_SIZE`] a page, every page.
pub(crate) async fn describe_all(api: &Api<'_>, filter: &Params) -> Result<Vec<Instance>, DriverError> {
    let mut tokens = PageTokens::new("ecs.DescribeInstances");
    let mut out = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let mut p = filter.clone();
        p.set("MaxResults", PAGE_SIZE).opt("NextToken", next.as_deref());
        let page: DescribeInstancesAnswer = api.ecs("DescribeInstances", &p).await?;
        out.extend(page.instances.instance);
        match tokens.next(page.next_token.as_deref())? {
            Some(token) => next = Some(token),
            None => return Ok(out),
        }
    }
}
