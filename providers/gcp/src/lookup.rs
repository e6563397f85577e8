//! Reading one instance by name for GetMachineStatus, with concurrent reads of
//! one project and zone coalesced into batched `instances.list` calls.
//!
//! Compute has no multi-get by name, but `instances.list` takes a regular
//! expression filter (`name eq "RE2"`, matching the whole name). A lone read
//! goes out at once as one `instances.get`, as before; reads arriving while a
//! call is in flight queue up in a [`Coalescer`] (one per credentials, project
//! and zone) and go out together as one `instances.list` with the filter
//! `name eq "PREFIX(?:s1|s2|...)"` (the names' common prefix, then the rest of
//! each name).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use google_cloud_compute_v1::model::Instance;
use machine_driver_api::{
    BatchFn, CallContext, Coalescer, DriverError, ErrorKind, KeyedCache, PageTokens, common_prefix, common_prefix_len,
};

use crate::clients::{Api, SharedApi};
use crate::credentials::GcpCredentials;
use crate::errors::GceFailure;
use crate::naming::{InstanceRef, is_gce_name};

/// Most names one coalesced batch reads. A batch whose filter would exceed
/// [`MAX_FILTER_CHARS`] is split into several `instances.list` calls.
pub(crate) const MAX_BATCH_NAMES: usize = 200;

/// Longest `filter` of one coalesced `instances.list`, in characters. The
/// filter travels in the URL query; percent-encoded (`|`, `"` and the brackets
/// take three characters each) it stays under about 6 KB: a conservative size
/// for a URL (Compute documents no limit). Typical machine names (a long
/// shared prefix, then ~12 characters) fit [`MAX_BATCH_NAMES`] into one filter
/// of about 2,600 characters.
pub(crate) const MAX_FILTER_CHARS: usize = 4000;

/// Coalesced batches in flight at once per credentials, project and zone.
const BATCHES_IN_FLIGHT: usize = 2;

/// Page size of the batched `instances.list` (the API's maximum).
const LIST_PAGE_SIZE: u32 = 500;

/// Most coalescers (one per credentials, project and zone).
const MAX_COALESCERS: usize = 256;

/// Characters of `name eq "` + `(?:` + `)"` around the names.
const FILTER_FRAME_CHARS: usize = 14;

/// Credentials (key fingerprint), the generation of their clients (rebuilt
/// clients get new coalescers), project, zone.
type ZoneKey = ([u8; 32], u64, String, String);

/// The coalescers of one driver, created on first use per credentials, project and zone.
#[derive(Debug)]
pub(crate) struct InstanceLookups {
    by_zone: KeyedCache<ZoneKey, Coalescer<String, Instance>>,
    /// Set once Compute refused the batched name filter: batches are then read
    /// with one `instances.get` per name (see [`batch_fetch`]).
    filter_refused: Arc<AtomicBool>,
}

impl Default for InstanceLookups {
    fn default() -> Self {
        Self { by_zone: KeyedCache::new(MAX_COALESCERS), filter_refused: Arc::default() }
    }
}

impl InstanceLookups {
    /// The instance `target` names, `None` when Compute does not show it (never
    /// created, gone, or not visible yet). Waits no longer than `api`'s deadline.
    pub(crate) async fn get(
        &self,
        api: &Api<'_>,
        key: &GcpCredentials,
        target: &InstanceRef,
    ) -> Result<Option<Instance>, DriverError> {
        if !is_gce_name(&target.name) {
            // `GcpDriver::locate` lets only GCE names through (a name filter
            // carries them unescaped); never read anything else.
            return Err(DriverError::invalid_argument("machine.name", "is not a GCE instance name"));
        }
        let coalescer = self.coalescer(api, key, target);
        coalescer.get_within(api.context(), target.name.clone()).await
    }

    fn coalescer(&self, api: &Api<'_>, key: &GcpCredentials, target: &InstanceRef) -> Arc<Coalescer<String, Instance>> {
        let zone_key = (key.fingerprint, api.clients.generation, target.project.clone(), target.zone.clone());
        self.by_zone.get_or_insert_with(&zone_key, || {
            let fetch = batch_fetch(
                api.shared(),
                target.project.clone(),
                target.zone.clone(),
                Arc::clone(&self.filter_refused),
            );
            Coalescer::new("compute instances.get/instances.list", fetch, MAX_BATCH_NAMES, BATCHES_IN_FLIGHT)
        })
    }
}

/// The batched read: a batch of one name is one `instances.get` (404 = absent);
/// more names are `instances.list` calls with a name filter, every page (404,
/// an unknown project or zone = all absent). Any other failure fails the whole
/// batch with the classified error, except a refused filter (INVALID_ARGUMENT:
/// the driver built it, not the caller): that batch and every later one are
/// read with one `instances.get` per name, and a warning says so once.
fn batch_fetch(
    shared: SharedApi,
    project: String,
    zone: String,
    filter_refused: Arc<AtomicBool>,
) -> BatchFn<String, Instance> {
    Arc::new(move |names: Vec<String>, ctx: CallContext| {
        let shared = shared.clone();
        let project = project.clone();
        let zone = zone.clone();
        let filter_refused = Arc::clone(&filter_refused);
        Box::pin(async move {
            let api = shared.bind(&ctx);
            let mut found = HashMap::new();
            for chunk in filter_chunks(names) {
                match chunk.as_slice() {
                    names if names.len() > 1 && !filter_refused.load(Ordering::Relaxed) => {
                        match list_named(&api, &project, &zone, names, &mut found).await {
                            Ok(()) => {}
                            Err(e) if e.kind() == ErrorKind::InvalidArgument => {
                                if !filter_refused.swap(true, Ordering::Relaxed) {
                                    tracing::warn!(
                                        %project, %zone, error = %e,
                                        "Compute refused the batched instances.list name filter; \
                                         status polls are read one instances.get each from now on"
                                    );
                                }
                                get_each(&api, &project, &zone, names, &mut found).await?;
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    names => get_each(&api, &project, &zone, names, &mut found).await?,
                }
            }
            Ok(found)
        })
    })
}

/// One `instances.get` per name (a batch of one, or any batch once the name filter was refused).
async fn get_each(
    api: &Api<'_>,
    project: &str,
    zone: &str,
    names: &[String],
    found: &mut HashMap<String, Instance>,
) -> Result<(), DriverError> {
    for name in names {
        if let Some(instance) = get_one(api, project, zone, name).await? {
            found.insert(name.clone(), instance);
        }
    }
    Ok(())
}

/// One `instances.get`; `Ok(None)` on 404.
async fn get_one(api: &Api<'_>, project: &str, zone: &str, name: &str) -> Result<Option<Instance>, DriverError> {
    let got = api
        .call("instances.get", || {
            api.clients.instances.get().set_project(project).set_zone(zone).set_instance(name).send()
        })
        .await;
    match got {
        Ok(instance) => Ok(Some(instance)),
        Err(f) if f.cloud().is_some_and(GceFailure::is_not_found) => Ok(None),
        Err(f) => Err(f.into_driver_error()),
    }
}

/// `instances.list` filtered to `names`, following `nextPageToken`; adds what it finds to `found`.
async fn list_named(
    api: &Api<'_>,
    project: &str,
    zone: &str,
    names: &[String],
    found: &mut HashMap<String, Instance>,
) -> Result<(), DriverError> {
    let wanted: HashSet<&str> = names.iter().map(String::as_str).collect();
    let filter = name_filter(names);
    let mut tokens = PageTokens::new("compute.instances.list");
    let mut page_token = String::new();
    loop {
        let listed = api
            .call("instances.list", || {
                api.clients
                    .instances
                    .list()
                    .set_project(project)
                    .set_zone(zone)
                    .set_filter(filter.clone())
                    .set_max_results(LIST_PAGE_SIZE)
                    .set_page_token(page_token.clone())
                    .send()
            })
            .await;
        let page = match listed {
            Ok(page) => page,
            // Project or zone unknown: every name is absent, as a 404 of instances.get says.
            Err(f) if f.cloud().is_some_and(GceFailure::is_not_found) => return Ok(()),
            Err(f) => return Err(f.into_driver_error()),
        };
        for instance in page.items {
            if let Some(name) = instance.name.clone().filter(|n| wanted.contains(n.as_str())) {
                found.insert(name, instance);
            }
        }
        match tokens.next(page.next_page_token.as_deref())? {
            Some(t) => page_token = t,
            None => return Ok(()),
        }
    }
}

/// Splits (sorted) names into groups whose [`name_filter`] stays within
/// [`MAX_FILTER_CHARS`]; sorting puts names with long common prefixes together.
pub(crate) fn filter_chunks(mut names: Vec<String>) -> Vec<Vec<String>> {
    names.sort_unstable();
    names.dedup();
    let mut chunks = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut total = 0;
    for name in names {
        if let Some(first) = current.first() {
            let prefix = common_prefix_len(first, &name);
            let k = current.len() + 1;
            let len = FILTER_FRAME_CHARS + prefix + (total + name.len()).saturating_sub(k * prefix) + (k - 1);
            if len > MAX_FILTER_CHARS || k > MAX_BATCH_NAMES {
                chunks.push(std::mem::take(&mut current));
                total = 0;
            }
        }
        total += name.len();
        current.push(name);
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// `name eq "PREFIX(?:s1|s2|...)"`: the regex filter selecting exactly `names`.
///
/// The names are GCE names (`[a-z]([-a-z0-9]*[a-z0-9])?`, checked before a
/// name is coalesced), which hold no regex metacharacter, so they go into the
/// pattern unescaped: a backslash could also be read by the filter's own
/// string syntax, and Compute does not document how it treats one.
pub(crate) fn name_filter(names: &[String]) -> String {
    let prefix = common_prefix(names.iter().map(String::as_str));
    let rest: Vec<&str> = names.iter().map(|n| &n[prefix.len()..]).collect();
    format!("name eq \"{prefix}(?:{})\"", rest.join("|"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn filter_factors_out_the_common_prefix() {
        let f = name_filter(&names(&["shoot-worker-a1", "shoot-worker-b22", "shoot-worker-a2"]));
        assert_eq!(f, "name eq \"shoot-worker-(?:a1|b22|a2)\"");
        assert_eq!(name_filter(&names(&["vm-1", "vm-12"])), "name eq \"vm-1(?:|2)\"");
        assert_eq!(name_filter(&names(&["a", "b"])), "name eq \"(?:a|b)\"");
    }

    #[test]
    fn chunks_respect_both_bounds_and_keep_every_name() {
        // 500 names of 60 characters with short common prefixes: the filter bound bites.
        let long: Vec<String> = (0..500).map(|i| format!("m{i:03}-{}", "x".repeat(55))).collect();
        let chunks = filter_chunks(long.clone());
        assert!(chunks.len() > 3, "{} chunks", chunks.len());
        let mut seen: Vec<String> = Vec::new();
        for c in &chunks {
            assert!(c.len() <= MAX_BATCH_NAMES);
            let f = name_filter(c);
            assert!(f.len() <= MAX_FILTER_CHARS, "{} chars", f.len());
            seen.extend(c.iter().cloned());
        }
        let mut expected = long;
        expected.sort();
        assert_eq!(seen, expected);

        // 450 short names sharing a prefix: the name bound bites (200 + 200 + 50).
        let short: Vec<String> = (0..450).map(|i| format!("shoot-worker-{i:04}")).collect();
        let sizes: Vec<usize> = filter_chunks(short).iter().map(Vec::len).collect();
        assert_eq!(sizes, [200, 200, 50]);
        assert_eq!(filter_chunks(names(&["b", "a", "b"])), vec![names(&["a", "b"])]);
    }

    #[test]
    fn predicted_filter_length_is_exact() {
        // The chunker's arithmetic must agree with the filter actually built.
        let group = names(&["node-a1", "node-a22", "node-b1"]);
        let prefix = common_prefix_len(&group[0], &group[2]);
        let total: usize = group.iter().map(String::len).sum();
        let predicted = FILTER_FRAME_CHARS + prefix + total - group.len() * prefix + group.len() - 1;
        assert_eq!(predicted, name_filter(&group).len());
    }
}
