//! Reading one instance by id for GetMachineStatus, with concurrent reads of
//! one access key and region coalesced into one `DescribeInstances` of up to
//! 100 ids (ECS's limit for `InstanceIds`).

use std::collections::HashMap;
use std::sync::Arc;

use machine_driver_api::{BatchFn, CallContext, Coalescer, DriverError, KeyedCache};

use crate::clients::{Api, SharedApi};
use crate::credentials::AccessKey;
use crate::ecs::client::Params;
use crate::ecs::model::{DescribeInstancesAnswer, Instance};

/// ECS's most ids per `DescribeInstances`.
pub(crate) const MAX_BATCH_IDS: usize = 100;
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

/// One `DescribeInstances` with the batch's ids (a JSON array, as ECS takes them).
fn batch_fetch(shared: SharedApi, region: String) -> BatchFn<String, Instance> {
    Arc::new(move |ids: Vec<String>, ctx: CallContext| {
        let shared = shared.clone();
        let region = region.clone();
        Box::pin(async move {
            let api = shared.bind(&ctx);
            let mut p = Params::default();
            p.set("RegionId", &region)
                .set("InstanceIds", serde_json::to_string(&ids).unwrap_or_default())
                .set("PageSize", MAX_BATCH_IDS);
            let answer: DescribeInstancesAnswer = api.ecs("DescribeInstances", &p).await?;
            Ok(answer.instances.instance.into_iter().map(|i| (i.instance_id.clone(), i)).collect::<HashMap<_, _>>())
        })
    })
}
