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

use std::collections::{HashMap, HashSet};
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

/// The coalescers of one driver.
#[derive(Debug)]
pub(crate) struct VmLookups {
    by_group: KeyedCache<GroupKey, Coalescer<String, VirtualMachine>>,
}

impl Default for VmLookups {
    fn default() -> Self {
        Self { by_group: KeyedCache::new(MAX_COALESCERS) }
    }
}

impl VmLookups {
    /// The VM `target` names, `None` when ARM does not show it.
    pub(crate) async fn get(
        &self,
        api: &Api<'_>,
        creds: &AzureCredentials,
        target: &VmRef,
    ) -> Result<Option<VirtualMachine>, DriverError> {
        let key = (
            creds.fingerprint,
            api.cloud().to_string(),
            target.subscription.clone(),
            target.resource_group.to_ascii_lowercase(),
        );
        let coalescer = self.by_group.get_or_insert_with(&key, || {
            let fetch = batch_fetch(api.shared(), target.subscription.clone(), target.resource_group.clone());
            Coalescer::new(
                "compute virtualMachines.get/virtualMachines.list",
                fetch,
                MAX_BATCH_NAMES,
                BATCHES_IN_FLIGHT,
            )
        });
        coalescer.get_within(api.context(), target.name.clone()).await
    }
}

/// One name: `virtualMachines.get` (404 = absent); more: the group's VM list, every page.
fn batch_fetch(shared: SharedApi, subscription: String, resource_group: String) -> BatchFn<String, VirtualMachine> {
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
            let wanted: HashSet<String> = names.iter().map(|n| n.to_ascii_lowercase()).collect();
            let by_lower: HashMap<String, String> = names.iter().map(|n| (n.to_ascii_lowercase(), n.clone())).collect();
            let all = list_vms(&api, &subscription, &resource_group).await?;
            Ok(all
                .into_iter()
                .filter_map(|vm| {
                    let lower = vm.resource.name.as_deref()?.to_ascii_lowercase();
                    wanted.contains(&lower).then(|| (by_lower[&lower].clone(), vm))
                })
                .collect())
        })
    })
}

/// Every VM of a resource group (every page); none when the group does not exist.
pub(crate) async fn list_vms(
    api: &Api<'_>,
    subscription: &str,
    resource_group: &str,
) -> Result<Vec<VirtualMachine>, DriverError> {
    type ListResult = azure_mgmt_compute::package_2024_07_01::models::VirtualMachineListResult;
    let mut url = api.arm_url(
        &format!(
            "/subscriptions/{subscription}/resourceGroups/{resource_group}/providers/Microsoft.Compute/virtualMachines"
        ),
        COMPUTE_API_VERSION,
    );
    let mut vms = Vec::new();
    for _ in 0..MAX_PAGES {
        let page = match api.get_raw("compute", "virtualMachines.list", &url).await {
            Ok(p) => p,
            Err(CallFailure::Cloud(_, f)) if f.is_not_found() => return Ok(vms),
            Err(e) => return Err(e.into()),
        };
        let page: ListResult = serde_json::from_slice(&page.body)
            .map_err(|_| DriverError::internal("compute virtualMachines.list answered a body that is not a VM list"))?;
        vms.extend(page.value);
        match page.next_link.filter(|l| !l.is_empty()) {
            Some(next) => {
                url = azure_core::Url::parse(&next).map_err(|_| {
                    DriverError::internal("compute virtualMachines.list answered a nextLink that is not a URL")
                })?;
            }
            None => return Ok(vms),
        }
    }
    Err(DriverError::internal(format!("compute virtualMachines.list: more than {MAX_PAGES} pages")))
}

/// The NIC coalescers of one driver.
#[derive(Debug)]
pub(crate) struct NicLookups {
    by_group: KeyedCache<GroupKey, Coalescer<String, NetworkInterface>>,
}

impl Default for NicLookups {
    fn default() -> Self {
        Self { by_group: KeyedCache::new(MAX_COALESCERS) }
    }
}

impl NicLookups {
    /// The NIC `nic_name` in `target`'s resource group, `None` when ARM does not show it.
    pub(crate) async fn get(
        &self,
        api: &Api<'_>,
        creds: &AzureCredentials,
        target: &VmRef,
        nic_name: &str,
    ) -> Result<Option<NetworkInterface>, DriverError> {
        let key = (
            creds.fingerprint,
            api.cloud().to_string(),
            target.subscription.clone(),
            target.resource_group.to_ascii_lowercase(),
        );
        let coalescer = self.by_group.get_or_insert_with(&key, || {
            let fetch = nic_batch_fetch(api.shared(), target.subscription.clone(), target.resource_group.clone());
            Coalescer::new(
                "network networkInterfaces.get/networkInterfaces.list",
                fetch,
                MAX_BATCH_NAMES,
                BATCHES_IN_FLIGHT,
            )
        });
        coalescer.get_within(api.context(), nic_name.to_string()).await
    }
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
            let by_lower: HashMap<String, String> = names.iter().map(|n| (n.to_ascii_lowercase(), n.clone())).collect();
            let all = list_nics(&api, &subscription, &resource_group).await?;
            Ok(all
                .into_iter()
                .filter_map(|nic| {
                    let lower = nic.resource.name.as_deref()?.to_ascii_lowercase();
                    by_lower.get(&lower).map(|name| (name.clone(), nic))
                })
                .collect())
        })
    })
}

/// Every NIC of a resource group (every page); none when the group does not exist.
async fn list_nics(
    api: &Api<'_>,
    subscription: &str,
    resource_group: &str,
) -> Result<Vec<NetworkInterface>, DriverError> {
    type ListResult = azure_mgmt_network::package_2024_03::models::NetworkInterfaceListResult;
    let mut url = api.arm_url(
        &format!(
            "/subscriptions/{subscription}/resourceGroups/{resource_group}/providers/Microsoft.Network/networkInterfaces"
        ),
        NETWORK_API_VERSION,
    );
    let mut nics = Vec::new();
    for _ in 0..MAX_PAGES {
        let page = match api.get_raw("network", "networkInterfaces.list", &url).await {
            Ok(p) => p,
            Err(CallFailure::Cloud(_, f)) if f.is_not_found() => return Ok(nics),
            Err(e) => return Err(e.into()),
        };
        let page: ListResult = serde_json::from_slice(&page.body).map_err(|_| {
            DriverError::internal("network networkInterfaces.list answered a body that is not a NIC list")
        })?;
        nics.extend(page.value);
        match page.next_link.filter(|l| !l.is_empty()) {
            Some(next) => {
                url = azure_core::Url::parse(&next).map_err(|_| {
                    DriverError::internal("network networkInterfaces.list answered a nextLink that is not a URL")
                })?;
            }
            None => return Ok(nics),
        }
    }
    Err(DriverError::internal(format!("network networkInterfaces.list: more than {MAX_PAGES} pages")))
}
