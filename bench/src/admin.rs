//! The fake cloud's admin API (`docs/fake-admin-api.md`), through the one typed
//! client every tool shares (`fake-cloud-support`): counters by operation and
//! by class (the fake classifies its own operations), rate limit, latency,
//! inventory.

pub(crate) use fake_cloud_support::{AdminClient as Admin, CallCounts, OpClass};

/// Reads (describe/get/list, operation polls) among `calls`, as the fake classifies them.
pub(crate) fn reads(calls: &CallCounts) -> u64 {
    calls.of_class(OpClass::Read)
}

/// Live instances in the fake's inventory.
pub(crate) async fn live_instances(admin: &Admin) -> Result<usize, String> {
    Ok(admin.instances().await?.into_iter().filter(|i| i.live).count())
}
