//! ListMachines on Azure: one generic resource list of the resource group
//! filtered by type (VMs, NICs, disks; every page), kept when they carry the
//! cluster and role tags, the NICs and disks that outlived their VM mapped
//! back to machine names. (ARM answers a list filtered by tag without the
//! tags, so the role could not be checked; a Gardener resource group holds
//! one cluster.)
//!
//! The Go provider asks Resource Graph, which lags behind ARM and has to be
//! paged by `$skipToken`; ARM's own list by tag is strongly consistent. A NIC
//! or disk whose VM is gone is listed under the VM's name, so that the orphan
//! collector's DeleteMachine (which deletes leftovers too) removes it.

use std::collections::BTreeMap;

use machine_driver_api::{CallContext, DriverError, ListMachines};
use serde::Deserialize;

use crate::credentials::AzureCredentials;
use crate::driver::AzureDriver;
use crate::lookup::RESOURCES_API_VERSION;
use crate::naming::{VmRef, data_disk_suffix, owner_vm};
use crate::paged::list_all;
use crate::spec::AzureProviderSpec;

/// The types a machine is made of.
const RESOURCE_TYPES_FILTER: &str = "resourceType eq 'Microsoft.Compute/virtualMachines' or resourceType eq 'Microsoft.Network/networkInterfaces' or resourceType eq 'Microsoft.Compute/disks'";
#[derive(Deserialize)]
struct GenericResource {
    #[serde(default)]
    name: String,
    #[serde(default, rename = "type")]
    resource_type: String,
    #[serde(default)]
    tags: BTreeMap<String, String>,
}

impl AzureDriver {
    /// ListMachines: providerID → machine name for every VM of the class's
    /// cluster and role, and for every NIC or disk of such a machine.
    pub(crate) async fn list(
        &self,
        ctx: &CallContext,
        req: ListMachines,
    ) -> Result<Vec<(String, String)>, DriverError> {
        let spec = AzureProviderSpec::parse(&req.class.provider_spec)?;
        let creds = AzureCredentials::from_secret(&req.secret, "secret")?;
        let api = self.pool.api(&creds, spec.cloud(), ctx)?;
        let (Some(cluster_tag), Some(role_tag)) = (spec.cluster_tag(), spec.role_tag()) else {
            return Err(DriverError::invalid_argument("providerSpec.tags", "must contain the cluster and role keys"));
        };
        let suffixes: Vec<String> = spec.properties.storage_profile.data_disks.iter().map(data_disk_suffix).collect();
        let mut url = api.arm_url(
            &format!("/subscriptions/{}/resourceGroups/{}/resources", creds.subscription_id, spec.resource_group),
            RESOURCES_API_VERSION,
        );
        url.query_pairs_mut().append_pair("$filter", RESOURCE_TYPES_FILTER);
        let resources: Vec<GenericResource> = list_all(&api, "resources", "resources.listByResourceGroup", url).await?;
        let mut machines = BTreeMap::new();
        for r in resources {
            let tagged = |key: &str| r.tags.keys().any(|k| k.eq_ignore_ascii_case(key));
            let ours = tagged(cluster_tag) && tagged(role_tag);
            let Some(vm) = owner_vm(&r.resource_type, &r.name, &suffixes).filter(|_| ours) else { continue };
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
