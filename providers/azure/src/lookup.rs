//! Reading one VM for GetMachineStatus, with concurrent reads of one
//! subscription and resource group coalesced into one list; the same for the
//! NIC or the Resource Graph row a VM's address is read from.
//!
//! A lone read goes out at once as one `virtualMachines.get` (the full VM);
//! reads arriving while a call is in flight queue up in a [`Coalescer`] (one
//! per credentials, subscription and resource group) and go out together as
//! one ARM generic resource list of the group filtered to VMs, with
//! `$expand=provisioningState` and `$top=1000`, every page: ARM's own record
//! (authoritative for existence, unlike Resource Graph), 1000 VMs a page, so
//! 10 calls answer 10,000 polls. (Compute's `virtualMachines.list` pages 50
//! full VMs: 200 calls.) The lookup's value is therefore a [`FoundVm`]: the
//! full VM, or a listed one with its name and provisioning state.
//!
//! Addresses ([`crate::addresses`]): a full VM names its primary NIC, read
//! with `networkInterfaces.get` (or `networkInterfaces.list` of the group for
//! several at once, [`NicLookups`]); a listed VM names none, so the batch
//! itself, when some VM it found (Succeeded) has no remembered address,
//! reads them with one Resource Graph query of the group ([`crate::graph`])
//! and remembers them, where each poll then finds its VM's: one graph query
//! per batch, none when every address is remembered. The query reads
//! every NIC of the group, so the addresses of all the VMs ARM listed are
//! remembered from it, and the next batches (polls beyond the server's
//! concurrency limit come in waves) need none. (A coalescer of
//! its own would send the first poll that wants an address alone, and the
//! rest as a second query: two graph queries per batch, each reading every
//! NIC of the group, against a quota of 15 queries per 5 seconds.) A VM the
//! graph does not show yet (it lags ARM) gets no address from this batch;
//! graph absence never makes a VM absent: only ARM's list does.
//!
//! The server serves a bounded number of calls at once, so 10,000 polls reach
//! the driver in waves, each a batch of its own; every batch listing the
//! whole group again would cost 10 pages a wave. So one batch of VM reads is
//! in flight per group, and a list of the group answers the batches (and
//! lone reads) that go out within [`LIST_REUSE`] of its start when it shows
//! every VM they ask for (a VM it does not show, for example one created
//! since, is read afresh: a list, or a `virtualMachines.get` alone): a
//! poll's answer is at most that much older than the poll. A fresh list for
//! polls lacking addresses sends the graph query alongside, and one group's
//! graph queries are [`GRAPH_REQUERY`] apart (the service's quota). 10,000
//! concurrent polls (release bench): one list of 10 pages, one graph query
//! of 10, two lone reads.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use machine_driver_api::{
    Address, AddressType, BatchFn, CallContext, CallFailure, Coalescer, DriverError, KeyedCache, RecentList,
};

use crate::addresses::{RememberedAddresses, address_key};
use crate::clients::{Api, SharedApi};
use crate::credentials::AzureCredentials;
use crate::naming::VmRef;
use crate::ownership::Marks;
use crate::paged::list_all;
use crate::vm::{self, NetworkInterface, Provisioning, VirtualMachine};

/// Most names one coalesced batch reads: one list of the group answers any
/// number of them (the answer map holds only the names asked for), so a batch
/// takes every poll waiting: a second batch would list the group again.
const MAX_BATCH_NAMES: usize = 10_000;
/// Coalesced batches of VM reads in flight at once per resource group: one,
/// as each lists the whole group (the batches queued behind it are answered
/// by its list, [`LIST_REUSE`]).
const VM_BATCHES_IN_FLIGHT: usize = 1;
/// Coalesced batches of NIC reads in flight at once per resource group.
const NIC_BATCHES_IN_FLIGHT: usize = 2;
/// Least time between two Resource Graph queries of one group. The service
/// allows 15 requests per user and 5 seconds, and one query of a 10,000-NIC
/// group is 10 of them (a page each); a NIC a query did not show yet is
/// behind the graph's lag, which a query right after would not cure either.
/// A poll that wants an address meanwhile answers without it, and a later
/// poll learns it.
pub const GRAPH_REQUERY: Duration = Duration::from_secs(5);
/// How long after its start a list of the group's VMs answers further
/// batches (when it shows every VM they ask for).
pub const LIST_REUSE: Duration = Duration::from_secs(2);
/// Most coalescers (one per credentials, subscription and resource group).
const MAX_COALESCERS: usize = 256;
/// API version of the generic resource list (as ListMachines).
pub(crate) const RESOURCES_API_VERSION: &str = "2021-04-01";
/// Page size of the generic resource list of VMs (ARM's most).
const RESOURCES_TOP: &str = "1000";
/// API version of the NIC list (the SDK's).
const NETWORK_API_VERSION: &str = "2024-03-01";

/// Credentials (fingerprint), cloud, subscription, resource group.
type GroupKey = ([u8; 32], String, String, String);

/// Coalescers of one kind of resource (VMs, NICs), one per credentials,
/// cloud, subscription and resource group.
#[derive(Debug)]
pub(crate) struct GroupLookups<V> {
    by_group: KeyedCache<GroupKey, Coalescer<String, V>>,
    /// Batches in flight at once per group.
    in_flight: usize,
}

impl<V> GroupLookups<V> {
    fn with_batches_in_flight(in_flight: usize) -> Self {
        Self { by_group: KeyedCache::new(MAX_COALESCERS), in_flight }
    }
}

impl Default for GroupLookups<FoundVm> {
    fn default() -> Self {
        Self::with_batches_in_flight(VM_BATCHES_IN_FLIGHT)
    }
}

impl Default for GroupLookups<NetworkInterface> {
    fn default() -> Self {
        Self::with_batches_in_flight(NIC_BATCHES_IN_FLIGHT)
    }
}

/// A VM as a status read found it.
#[derive(Debug, Clone)]
pub(crate) enum FoundVm {
    /// Read alone with `virtualMachines.get`: the whole VM (its NIC named).
    Full(Box<VirtualMachine>),
    /// Read in a batch from ARM's generic resource list.
    Listed(ListedVm),
}

/// A VM of ARM's generic resource list (`GenericResourceExpanded` with
/// `$expand=provisioningState`; filtered by type, ARM answers the `tags`
/// too): its name, state and what its tags say about its owner, kept compact
/// (a list of 10,000 VMs answers the polls of [`LIST_REUSE`]).
#[derive(Debug, Clone, serde::Deserialize)]
pub(crate) struct ListedVm {
    /// The VM's name.
    #[serde(default)]
    pub(crate) name: String,
    /// ARM's provisioning state (top-level when expanded).
    #[serde(rename = "provisioningState", default)]
    pub(crate) provisioning_state: Option<String>,
    /// Its marker tags and machine uid, judged by [`crate::ownership`].
    #[serde(rename = "tags", default)]
    pub(crate) marks: Marks,
}

impl ListedVm {
    /// The provisioning state, mapped as a full VM's is.
    fn provisioning(&self) -> Provisioning {
        vm::provisioning_of(self.provisioning_state.as_deref().unwrap_or(""))
    }
}

impl FoundVm {
    /// The provisioning state, mapped the same way for both forms.
    pub(crate) fn provisioning(&self) -> Provisioning {
        match self {
            Self::Full(vm) => vm::provisioning(vm),
            Self::Listed(listed) => listed.provisioning(),
        }
    }

    /// The full VM, when it was read alone.
    pub(crate) fn full(&self) -> Option<&VirtualMachine> {
        match self {
            Self::Full(vm) => Some(vm),
            Self::Listed(_) => None,
        }
    }
}

/// Coalesced VM reads ([`GroupLookups::get`]).
pub(crate) type VmLookups = GroupLookups<FoundVm>;
/// Coalesced NIC reads.
pub(crate) type NicLookups = GroupLookups<NetworkInterface>;

impl<V: Clone + Send + Sync + 'static> GroupLookups<V> {
    /// `name` in `target`'s resource group through the group's coalescer,
    /// made with `fetch` the first time.
    async fn get_named(
        &self,
        api: &Api<'_>,
        creds: &AzureCredentials,
        target: &VmRef,
        name: &str,
        what: &'static str,
        fetch: impl FnOnce(SharedApi, String, String) -> BatchFn<String, V>,
    ) -> Result<Option<V>, DriverError> {
        let coalescer = self.coalescer(api, creds, target, what, fetch);
        coalescer.get_within(api.context(), name.to_string()).await
    }

    /// The coalescer of `target`'s resource group, made with `fetch` the first time.
    fn coalescer(
        &self,
        api: &Api<'_>,
        creds: &AzureCredentials,
        target: &VmRef,
        what: &'static str,
        fetch: impl FnOnce(SharedApi, String, String) -> BatchFn<String, V>,
    ) -> Arc<Coalescer<String, V>> {
        let key = (
            creds.fingerprint,
            api.cloud().to_string(),
            target.subscription.clone(),
            target.resource_group.to_ascii_lowercase(),
        );
        self.by_group.get_or_insert_with(&key, || {
            let fetch = fetch(api.shared(), target.subscription.clone(), target.resource_group.clone());
            Coalescer::new(what, fetch, MAX_BATCH_NAMES, self.in_flight)
        })
    }
}

impl GroupLookups<FoundVm> {
    /// The VM `target` names, `None` when ARM does not show it. A batch reads
    /// from Resource Graph the addresses `remembered` lacks.
    pub(crate) async fn get(
        &self,
        api: &Api<'_>,
        creds: &AzureCredentials,
        target: &VmRef,
        remembered: &Arc<RememberedAddresses>,
    ) -> Result<Option<FoundVm>, DriverError> {
        let what = "compute virtualMachines.get/resources.listByResourceGroup";
        let remembered = Arc::clone(remembered);
        let fetch = move |shared, sub, rg| vm_batch_fetch(shared, sub, rg, remembered);
        self.get_named(api, creds, target, &target.name, what, fetch).await
    }
}

impl GroupLookups<NetworkInterface> {
    /// The NIC `nic_name` in `target`'s resource group, `None` when ARM does not show it.
    pub(crate) async fn get(
        &self,
        api: &Api<'_>,
        creds: &AzureCredentials,
        target: &VmRef,
        nic_name: &str,
    ) -> Result<Option<NetworkInterface>, DriverError> {
        let what = "network networkInterfaces.get/networkInterfaces.list";
        self.get_named(api, creds, target, nic_name, what, nic_batch_fetch).await
    }
}

/// The resources of `all` named in `names` (ARM names match case-insensitively),
/// under the names as asked.
fn named<V>(all: Vec<V>, names: &[String], name_of: impl Fn(&V) -> Option<&str>) -> HashMap<String, V> {
    let by_lower: HashMap<String, &String> = names.iter().map(|n| (n.to_ascii_lowercase(), n)).collect();
    all.into_iter()
        .filter_map(|v| {
            let asked = by_lower.get(&name_of(&v)?.to_ascii_lowercase())?;
            Some(((*asked).clone(), v))
        })
        .collect()
}

/// The addresses Resource Graph shows for the group, within [`GRAPH_DEADLINE`]
/// (the polls of the batch wait for it; they answer without addresses
/// rather than late).
async fn graph_read(
    api: &Api<'_>,
    subscription: &str,
    resource_group: &str,
) -> Result<HashMap<String, String>, DriverError> {
    let read = crate::graph::private_ips(api, subscription, resource_group);
    tokio::time::timeout(GRAPH_DEADLINE, read).await.unwrap_or_else(|_| {
        Err(DriverError::deadline_exceeded("resourcegraph resources did not answer within its deadline"))
    })
}

/// How long a batch waits for its Resource Graph query.
const GRAPH_DEADLINE: Duration = Duration::from_secs(5);

/// When the group's last Resource Graph query went out: the next waits
/// [`GRAPH_REQUERY`].
#[derive(Debug, Default)]
struct GraphPace {
    last: std::sync::Mutex<Option<Instant>>,
}

impl GraphPace {
    /// True (and the query counted as sent now) when the last one went out
    /// [`GRAPH_REQUERY`] ago or more.
    fn may_query(&self) -> bool {
        let mut last = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.is_some_and(|at| at.elapsed() < GRAPH_REQUERY) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }
}

/// The last list of the group when it answers (see [`LIST_REUSE`]);
/// otherwise one name: `virtualMachines.get` (404 = absent); more: the
/// group's generic resource list of VMs, every page; plus one Resource Graph
/// query when a VM found (Succeeded) has no address in `remembered`.
fn vm_batch_fetch(
    shared: SharedApi,
    subscription: String,
    resource_group: String,
    remembered: Arc<RememberedAddresses>,
) -> BatchFn<String, FoundVm> {
    // ARM names compare case-insensitively.
    let last_list = Arc::new(RecentList::new(LIST_REUSE, str::to_ascii_lowercase));
    let graph_pace = Arc::new(GraphPace::default());
    Arc::new(move |names: Vec<String>, ctx: CallContext| {
        let shared = shared.clone();
        let subscription = subscription.clone();
        let resource_group = resource_group.clone();
        let remembered = Arc::clone(&remembered);
        let last_list = Arc::clone(&last_list);
        let graph_pace = Arc::clone(&graph_pace);
        Box::pin(async move {
            let api = shared.bind(&ctx);
            let unremembered =
                |name: &str| remembered.get(&address_key(&subscription, &resource_group, name)).is_none();
            // A fresh list for polls some of which lack an address: the graph query goes
            // alongside (it reads every NIC of the group whatever the list shows), so the
            // batch takes the longer of the two, not both.
            let mut ips = None;
            let (list, found) = match last_list.answering(&names) {
                Some(reused) => reused,
                None if names.len() == 1 => {
                    let name = &names[0];
                    let target = VmRef { subscription, resource_group, location: String::new(), name: name.clone() };
                    let found = crate::create::get_vm(&api, &target, false).await?;
                    return Ok(found.into_iter().map(|vm| (name.clone(), FoundVm::Full(Box::new(vm)))).collect());
                }
                None => {
                    let started = Instant::now();
                    let vms = if names.iter().any(|n| unremembered(n)) && graph_pace.may_query() {
                        let graph = graph_read(&api, &subscription, &resource_group);
                        let (vms, read) = tokio::join!(list_vms(&api, &subscription, &resource_group), graph);
                        ips = Some(read);
                        vms?
                    } else {
                        list_vms(&api, &subscription, &resource_group).await?
                    };
                    last_list.keep(started, vms.into_iter().map(|vm| (vm.name.clone(), vm)), &names)
                }
            };
            // Only a VM ARM lists as Succeeded takes an address from the graph: a VM made
            // again under its name is Creating while the lagging graph may still show the
            // NIC of the generation before.
            let settled = |vm: &ListedVm| vm.provisioning() == Provisioning::Succeeded;
            let wanting = found.iter().any(|(name, vm)| settled(vm) && unremembered(name));
            if ips.is_none() && wanting && graph_pace.may_query() {
                ips = Some(graph_read(&api, &subscription, &resource_group).await);
            }
            if let Some(read) = ips {
                match read {
                    Ok(ips) => {
                        // The query read every NIC of the group: remember the address of every VM
                        // ARM listed (existence from ARM, never from the graph), so that this
                        // batch's polls and those of the next batches find it remembered.
                        for vm in list.values().filter(|vm| settled(vm)) {
                            if let Some(ip) = ips.get(&vm.name.to_ascii_lowercase()) {
                                let address = vec![Address::new(AddressType::InternalIp, ip.clone())];
                                remembered
                                    .insert(address_key(&subscription, &resource_group, &vm.name), Arc::new(address));
                            }
                        }
                    }
                    // The VMs are answered without addresses; a later poll asks again.
                    Err(e) => tracing::debug!(error = %e, "reading addresses from Resource Graph failed"),
                }
            }
            Ok(found.into_iter().map(|(name, vm)| (name, FoundVm::Listed(vm))).collect())
        })
    })
}

/// One name: `networkInterfaces.get` (404 = absent); more: the group's NIC list, every page.
fn nic_batch_fetch(
    shared: SharedApi,
    subscription: String,
    resource_group: String,
) -> BatchFn<String, NetworkInterface> {
    Arc::new(move |names: Vec<String>, ctx: CallContext| {
        let shared = shared.clone();
        let subscription = subscription.clone();
        let resource_group = resource_group.clone();
        Box::pin(async move {
            let api = shared.bind(&ctx);
            if let [name] = names.as_slice() {
                let answer = api
                    .call("network", "networkInterfaces.get", || {
                        api.network().network_interfaces_client().get(&resource_group, name, &subscription).send()
                    })
                    .await;
                return match answer {
                    Ok(a) => {
                        let nic = a.into_body().await.map_err(|_| {
                            DriverError::internal("network networkInterfaces.get answered a body that is not a NIC")
                        })?;
                        Ok(std::iter::once((name.clone(), nic)).collect())
                    }
                    Err(CallFailure::Cloud(_, f)) if f.is_not_found() => Ok(HashMap::new()),
                    Err(e) => Err(e.into()),
                };
            }
            let all = list_nics(&api, &subscription, &resource_group).await?;
            Ok(named(all, &names, |nic| nic.resource.name.as_deref()))
        })
    })
}

/// Every VM of a resource group with its provisioning state: ARM's generic
/// resource list filtered to VMs, 1000 a page, every page; none when the
/// group does not exist.
async fn list_vms(api: &Api<'_>, subscription: &str, resource_group: &str) -> Result<Vec<ListedVm>, DriverError> {
    let mut url = api.arm_url(
        &["subscriptions", subscription, "resourceGroups", resource_group, "resources"],
        RESOURCES_API_VERSION,
    );
    url.query_pairs_mut()
        .append_pair("$filter", "resourceType eq 'Microsoft.Compute/virtualMachines'")
        .append_pair("$expand", "provisioningState")
        .append_pair("$top", RESOURCES_TOP);
    list_all(api, "resources", "resources.listByResourceGroup", url).await
}

/// Every NIC of a resource group (every page); none when the group does not exist.
async fn list_nics(
    api: &Api<'_>,
    subscription: &str,
    resource_group: &str,
) -> Result<Vec<NetworkInterface>, DriverError> {
    let url = api.arm_url(
        &[
            "subscriptions",
            subscription,
            "resourceGroups",
            resource_group,
            "providers",
            "Microsoft.Network",
            "networkInterfaces",
        ],
        NETWORK_API_VERSION,
    );
    list_all(api, "network", "networkInterfaces.list", url).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_matches_case_insensitively_under_the_asked_names() {
        let all = vec!["VM-A".to_string(), "vm-b".to_string(), "other".to_string()];
        let asked = vec!["vm-a".to_string(), "VM-B".to_string(), "absent".to_string()];
        let got = named(all, &asked, |v| Some(v.as_str()));
        assert_eq!(got.len(), 2);
        assert_eq!(got["vm-a"], "VM-A");
        assert_eq!(got["VM-B"], "vm-b");
    }

    #[test]
    fn listed_vms_map_their_provisioning_state_as_full_ones() {
        let listed: ListedVm =
            serde_json::from_value(serde_json::json!({"name": "vm-1", "type": "Microsoft.Compute/virtualMachines", "provisioningState": "Failed"}))
                .unwrap();
        assert_eq!(FoundVm::Listed(listed).provisioning(), Provisioning::Failed);
        let bare: ListedVm = serde_json::from_value(serde_json::json!({"name": "vm-2"})).unwrap();
        assert_eq!(FoundVm::Listed(bare).provisioning(), Provisioning::InProgress);
    }
}
