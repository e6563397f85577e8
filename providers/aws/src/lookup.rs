//! Finding instances: by id, by the machine's tags, and by filters across pages.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use aws_sdk_ec2::types::{Filter, Instance};
use machine_driver_api::{
    BatchFn, CallContext, ClusterMarkers, DriverError, Machine, Ownership, PageTokens, RateLimiter, Result,
    foreign_not_found,
};

use crate::aws_call;
use crate::clients::AwsClients;
use crate::ownership::Tagged;
use crate::tags;

/// Page size of filtered DescribeInstances calls (EC2's maximum).
const PAGE_SIZE: i32 = 1000;

/// Most instance ids in one coalesced DescribeInstances (EC2 takes up to 200 filter values).
pub(crate) const BATCH_SIZE: usize = 200;
/// Coalesced DescribeInstances calls in flight at once per account and region.
pub(crate) const BATCHES_IN_FLIGHT: usize = 2;

/// One instance by id, in whatever state; `None` when EC2 does not show it
/// (never launched, long gone, or not visible yet). Concurrent lookups of one
/// account and region share DescribeInstances calls (see [`batch_fetch`]).
pub(crate) async fn by_id(ctx: &CallContext, c: &AwsClients, instance_id: &str) -> Result<Option<Instance>> {
    c.instances_by_id.get_within(ctx, instance_id.to_string()).await
}

/// The batched read behind [`by_id`]: one DescribeInstances with the filter
/// `instance-id` over up to [`BATCH_SIZE`] ids. The filter form (unlike
/// `InstanceIds`) answers ids EC2 does not know by leaving them out instead of
/// failing the whole call with `InvalidInstanceID.NotFound`.
pub(crate) fn batch_fetch(
    ec2: aws_sdk_ec2::Client,
    limiter: Arc<RateLimiter>,
    credentials_refused: Arc<AtomicBool>,
) -> BatchFn<String, Instance> {
    Arc::new(move |ids: Vec<String>, ctx: CallContext| {
        let ec2 = ec2.clone();
        let limiter = limiter.clone();
        let refused = credentials_refused.clone();
        Box::pin(async move {
            let filter = Filter::builder().name("instance-id").set_values(Some(ids)).build();
            let mut found = HashMap::new();
            let mut token: Option<String> = None;
            let mut pages = PageTokens::new("ec2.DescribeInstances");
            loop {
                let req = ec2
                    .describe_instances()
                    .filters(filter.clone())
                    .max_results(PAGE_SIZE)
                    .set_next_token(token.take());
                let page = aws_call::call(&ctx, &limiter, "ec2", "DescribeInstances", || req.clone().send()).await;
                let page = aws_call::noting_refusal(page, &refused)?;
                for i in page.reservations().iter().flat_map(|r| r.instances()) {
                    if let Some(id) = i.instance_id() {
                        found.insert(id.to_string(), i.clone());
                    }
                }
                match pages.next(page.next_token())? {
                    Some(t) => token = Some(t),
                    None => return Ok(found),
                }
            }
        })
    })
}

/// Every instance matching `filters`, following NextToken to the last page
/// (bounded, and stopped on a repeated token: [`PageTokens`]).
pub(crate) async fn all_matching(ctx: &CallContext, c: &AwsClients, filters: Vec<Filter>) -> Result<Vec<Instance>> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = PageTokens::new("ec2.DescribeInstances");
    loop {
        let req = c
            .ec2
            .describe_instances()
            .set_filters(Some(filters.clone()))
            .max_results(PAGE_SIZE)
            .set_next_token(token.take());
        let page = aws_call::ec2(ctx, c, "DescribeInstances", || req.clone().send()).await?;
        out.extend(page.reservations().iter().flat_map(|r| r.instances()).cloned());
        match pages.next(page.next_token())? {
            Some(t) => token = Some(t),
            None => return Ok(out),
        }
    }
}

/// The live instances of a machine found by its tags (`Name`, cluster and
/// role tag keys), narrowed to those the kit judges this machine's. Empty
/// when the machine has no name.
pub(crate) async fn by_machine_tags(
    ctx: &CallContext,
    c: &AwsClients,
    markers: &ClusterMarkers,
    machine: &Machine,
) -> Result<Vec<Instance>> {
    if machine.name.is_empty() {
        return Ok(Vec::new());
    }
    let found = all_matching(ctx, c, tags::machine_filters(markers, &machine.name)).await?;
    Ok(found
        .into_iter()
        .filter(tags::is_live)
        .filter(|i| match markers.judge(&Tagged(i.tags()), machine) {
            Ownership::Mine => true,
            Ownership::Foreign(why) => {
                tracing::debug!(machine = %machine.name, instance_id = i.instance_id().unwrap_or_default(), %why,
                    "an instance of the machine's name is not this machine's; left alone");
                false
            }
        })
        .collect())
}

/// How a machine's instance was (not) found.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// Exactly one live instance.
    Live(Box<Instance>),
    /// The providerID's instance exists but is shutting down or terminated, and
    /// no other live one: that instance, not yet judged (a Spot reclaim is told
    /// from it, [`crate::spot::dead_answer`]).
    Dead(Box<Instance>),
    /// EC2 shows nothing for this machine.
    Missing,
}

/// Finds the one live instance of a machine: by providerID's instance id
/// first (one call), then by tags. More than one live instance → OUT_OF_RANGE.
/// A live instance of the providerID that the kit does not judge this
/// machine's is NOT_FOUND (`foreign_not_found`); found by tags, it is skipped.
pub(crate) async fn machine_instance(
    ctx: &CallContext,
    c: &AwsClients,
    markers: &ClusterMarkers,
    machine: &Machine,
    instance_id: Option<&str>,
) -> Result<Lookup> {
    let mut dead = None;
    if let Some(id) = instance_id {
        match by_id(ctx, c, id).await? {
            Some(i) if tags::is_live(&i) => {
                return match markers.judge(&Tagged(i.tags()), machine) {
                    Ownership::Mine => Ok(Lookup::Live(Box::new(i))),
                    Ownership::Foreign(why) => Err(foreign_not_found(format!("instance {id}"), why)),
                };
            }
            Some(i) => dead = Some(Box::new(i)),
            None => {}
        }
    }
    let mut live = by_machine_tags(ctx, c, markers, machine).await?;
    match (live.len(), dead) {
        (0, Some(i)) => Ok(Lookup::Dead(i)),
        (0, None) => Ok(Lookup::Missing),
        (1, _) => Ok(Lookup::Live(Box::new(live.remove(0)))),
        _ => Err(DriverError::duplicate_vms(&machine.name, live.iter().filter_map(|i| i.instance_id()))),
    }
}
