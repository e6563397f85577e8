//! ListMachines on Azure: one generic resource list of the resource group
//! filtered by type (VMs, NICs, disks; every page; filtered by type, ARM
//! answers each with its `tags`), judged by the kit ([`crate::ownership`]):
//! the VMs carrying the class's cluster and role markers, and the NICs and
//! disks that outlived their VM, when their own tags carry both markers,
//! mapped back to the machine name. A NIC or disk whose same-named VM exists
//! is the VM's to decide: listed with it when it is this cluster's, never
//! when it is not. An untagged leftover (the driver's own NICs and disks
//! carry no tags, [`crate::ownership`]) is not listed: its name alone does
//! not tell whose it is.
//!
//! The Go provider asks Resource Graph, which lags behind ARM and has to be
//! paged by `$skipToken`; ARM's own list is strongly consistent. A NIC or
//! disk whose VM is gone is listed under the VM's name, so that the orphan
//! collector's DeleteMachine (which deletes leftovers too) removes it.

use std::collections::{BTreeMap, HashMap};

use machine_driver_api::{CallContext, DriverError, ListMachines};
use serde::Deserialize;

use crate::credentials::AzureCredentials;
use crate::driver::AzureDriver;
use crate::lookup::RESOURCES_API_VERSION;
use crate::naming::{VmRef, data_disk_suffix, owner_vm};
use crate::ownership::Marks;
use crate::paged::list_all;
use crate::spec::AzureProviderSpec;

/// The types a machine is made of.
const RESOURCE_TYPES_FILTER: &str = "resourceType eq 'Microsoft.Compute/virtualMachines' or resourceType eq 'Microsoft.Network/networkInterfaces' or resourceType eq 'Microsoft.Compute/disks'";

/// A resource of the generic list, as much of it as ListMachines needs.
#[derive(Deserialize)]
struct GenericResource {
    #[serde(default)]
    name: String,
    #[serde(default, rename = "type")]
    resource_type: String,
    #[serde(default)]
    tags: Marks,
}

impl AzureDriver {
    /// ListMachines: providerID → machine name for every VM of the class's
    /// cluster and role, and for the tagged NICs and disks such a machine
    /// left behind (see the module docs).
    pub(crate) async fn list(
        &self,
        ctx: &CallContext,
        req: ListMachines,
    ) -> Result<Vec<(String, String)>, DriverError> {
        let (spec, markers) = AzureProviderSpec::parse_with_markers(&req.class.provider_spec)?;
        let creds = AzureCredentials::from_secret(&req.secret, "secret")?;
        let api = self.pool.api(&creds, spec.cloud(), ctx)?;
        let suffixes: Vec<String> = spec.properties.storage_profile.data_disks.iter().map(data_disk_suffix).collect();
        let mut url = api.arm_url(
            &["subscriptions", &creds.subscription_id, "resourceGroups", &spec.resource_group, "resources"],
            RESOURCES_API_VERSION,
        );
        url.query_pairs_mut().append_pair("$filter", RESOURCE_TYPES_FILTER);
        let resources: Vec<GenericResource> = list_all(&api, "resources", "resources.listByResourceGroup", url).await?;
        // Each machine name (lowercase, as ARM compares names) with its VM's verdict, when the VM exists.
        let vms: HashMap<String, bool> = resources
            .iter()
            .filter(|r| r.resource_type.eq_ignore_ascii_case("Microsoft.Compute/virtualMachines"))
            .map(|r| (r.name.to_ascii_lowercase(), markers.lists(&r.tags)))
            .collect();
        let mut machines = BTreeMap::new();
        for r in &resources {
            let Some(vm) = owner_vm(&r.resource_type, &r.name, &suffixes) else { continue };
            let listed = match vms.get(&vm.to_ascii_lowercase()) {
                // The VM exists: its own verdict decides, for it and what is named after it.
                Some(vm_listed) => *vm_listed,
                // A leftover of a VM that is gone: its own tags decide.
                None => markers.lists(&r.tags),
            };
            if !listed {
                continue;
            }
            let target = VmRef {
                subscription: creds.subscription_id.clone(),
                resource_group: spec.resource_group.clone(),
                location: spec.location.clone(),
                name: vm.clone(),
            };
            machines.insert(target.provider_id(), vm);
        }
        Ok(machines.into_iter().collect())
    }
}
