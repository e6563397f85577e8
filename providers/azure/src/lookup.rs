//! Reading one VM for GetMachineStatus, with concurrent reads of one
//! subscription and resource group coalesced into one VM list; the same for
//! the NIC a VM's address is read from.
//!
//! A lone read goes out at once as one `virtualMachines.get`; reads arriving
//! while a call is in flight queue up in a [`Coalescer`] (one per
//! credentials, subscription and resource group) and go out together as one
//! `virtualMachines.list` of the resource group, every page: one call (per
//! page) answers every poll of a worker pool, however many machines it has.
//! NICs alike (`networkInterfaces.get`, or `networkInterfaces.list` of the
//! group): a VM's NIC is made by its PUT, so a fleet's first polls after its
//! creates (or after a restart) learn every address from one list.

use std::collections::HashMap;
use std::sync::Arc;

use machine_driver_api::{BatchFn, CallContext, CallFailure, Coalescer, DriverError, KeyedCache};

use crate::clients::{Api, SharedApi};
use crate::credentials::AzureCredentials;
use crate::naming::VmRef;
use crate::vm::{NetworkInterface, VirtualMachine};

/// Most names one coalesced batch reads: one list of the group answers any
/// number of them (the answer map holds only the names asked for), so a batch
/// takes every poll waiting: a second batch would list the group again.
const MAX_BATCH_NAMES: usize = 10_000;
/// Coalesced batches in flight at once per resource group.
const BATCHES_IN_FLIGHT: usize = 2;
/// Most coalescers (one per credentials, subscription and resource group).
const MAX_COALESCERS: usize = 256;
/// Most pages one list follows: a guard against a nextLink loop, far beyond
/// any resource group (ARM's page size is its own choice: 50 VMs for Compute).
const MAX_PAGES: usize = 5000;
/// API version of the VM list (the SDK's).
const COMPUTE_API_VERSION: &str = "2024-07-01";
/// API version of the NIC list (the SDK's).
const NETWORK_API_VERSION: &str = "2024-03-01";

/// Credentials (fingerprint), cloud, subscription, resource group.
type GroupKey = ([u8; 32], String, String, String);

/// Coalescers of one kind of resource (VMs, NICs), one per credentials,
/// cloud, subscription and resource group.
#[derive(Debug)]
pub(crate) struct GroupLookups<V> {
    by_group: KeyedCache<GroupKey, Coalescer<String, V>>,
}

impl<V> Default for GroupLookups<V> {
    fn default() -> Self {
        Self { by_group: KeyedCache::new(MAX_COALESCERS) }
    }
}

/// Coalesced VM reads ([`GroupLookups::vm`]).
pub(crate) type VmLookups = GroupLookups<VirtualMachine>;
/// Coalesced NIC reads ([`GroupLookups::nic`]).
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
        fetch: fn(SharedApi, String, String) -> BatchFn<String, V>,
    ) -> Result<Option<V>, DriverError> {
        let key = (
            creds.fingerprint,
            api.cloud().to_string(),
            target.subscription.clone(),
            target.resource_group.to_ascii_lowercase(),
        );
        let coalescer = self.by_group.get_or_insert_with(&key, || {
            let fetch = fetch(api.shared(), target.subscription.clone(), target.resource_group.clone());
            Coalescer::new(what, fetch, MAX_BATCH_NAMES, BATCHES_IN_FLIGHT)
        });
        coalescer.get_within(api.context(), name.to_string()).await
    }
}

impl GroupLookups<VirtualMachine> {
    /// The VM `target` names, `None` when ARM does not show it.
    pub(crate) async fn get(
        &self,
        api: &Api<'_>,
        creds: &AzureCredentials,
        target: &VmRef,
    ) -> Result<Option<VirtualMachine>, DriverError> {
        let what = "compute virtualMachines.get/virtualMachines.list";
        self.get_named(api, creds, target, &target.name, what, vm_batch_fetch).await
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

/// One name: `virtualMachines.get` (404 = absent); more: the group's VM list, every page.
fn vm_batch_fetch(shared: SharedApi, subscription: String, resource_group: String) -> BatchFn<String, VirtualMachine> {
    Arc::new(move |names: Vec<String>, ctx: CallContext| {
        let shared = shared.clone();
        let subscription = subscription.clone();
        let resource_group = resource_group.clone();
        Box::pin(async move {
            let api = shared.bind(&ctx);
            if let [name] = names.as_slice() {
                let target = VmRef { subscription, resource_group, location: String::new(), name: name.clone() };
                let found = crate::create::get_vm(&api, &target, false).await?;
                return Ok(found.into_iter().map(|vm| (name.clone(), vm)).collect());
            }
            let all = list_vms(&api, &subscription, &resource_group).await?;
            Ok(named(all, &names, |vm| vm.resource.name.as_deref()))
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

/// One page of an ARM list.
#[derive(serde::Deserialize)]
#[serde(bound(deserialize = "T: serde::de::DeserializeOwned"))]
struct Page<T> {
    #[serde(default = "Vec::new")]
    value: Vec<T>,
    #[serde(rename = "nextLink", default)]
    next_link: Option<String>,
}

/// Every item of an ARM list at `url` (every page, `nextLink` followed);
/// none when the resource group does not exist. `what` names the list in
/// errors and in the call counters.
async fn list_all<T: serde::de::DeserializeOwned>(
    api: &Api<'_>,
    service: &'static str,
    operation: &'static str,
    mut url: azure_core::Url,
) -> Result<Vec<T>, DriverError> {
    let mut items = Vec::new();
    for _ in 0..MAX_PAGES {
        let page = match api.get_raw(service, operation, &url).await {
            Ok(p) => p,
            Err(CallFailure::Cloud(_, f)) if f.is_not_found() => return Ok(items),
            Err(e) => return Err(e.into()),
        };
        let page: Page<T> = serde_json::from_slice(&page.body)
            .map_err(|_| DriverError::internal(format!("{service} {operation} answered a body that is not a list")))?;
        items.extend(page.value);
        match page.next_link.filter(|l| !l.is_empty()) {
            Some(next) => {
                url = azure_core::Url::parse(&next).map_err(|_| {
                    DriverError::internal(format!("{service} {operation} answered a nextLink that is not a URL"))
                })?;
            }
            None => return Ok(items),
        }
    }
    Err(DriverError::internal(format!("{service} {operation}: more than {MAX_PAGES} pages")))
}

/// Every VM of a resource group (every page); none when the group does not exist.
pub(crate) async fn list_vms(
    api: &Api<'_>,
    subscription: &str,
    resource_group: &str,
) -> Result<Vec<VirtualMachine>, DriverError> {
    let url = api.arm_url(
        &format!(
            "/subscriptions/{subscription}/resourceGroups/{resource_group}/providers/Microsoft.Compute/virtualMachines"
        ),
        COMPUTE_API_VERSION,
    );
    list_all(api, "compute", "virtualMachines.list", url).await
}

/// Every NIC of a resource group (every page); none when the group does not exist.
async fn list_nics(
    api: &Api<'_>,
    subscription: &str,
    resource_group: &str,
) -> Result<Vec<NetworkInterface>, DriverError> {
    let url = api.arm_url(
        &format!(
            "/subscriptions/{subscription}/resourceGroups/{resource_group}/providers/Microsoft.Network/networkInterfaces"
        ),
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
    fn pages_read_their_items_and_next_link() {
        let page: Page<serde_json::Value> =
            serde_json::from_str(r#"{"value": [{"name": "a"}], "nextLink": "https://x/next"}"#).expect("page");
        assert_eq!(page.value.len(), 1);
        assert_eq!(page.next_link.as_deref(), Some("https://x/next"));
        let last: Page<serde_json::Value> = serde_json::from_str(r#"{}"#).expect("empty page");
        assert!(last.value.is_empty() && last.next_link.is_none());
    }
}
