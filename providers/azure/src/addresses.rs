//! The machine's addresses: its primary NIC's private IP.
//!
//! ARM's VM answers carry no IP; the NIC's does, and the NIC is made by the
//! VM PUT, whose answer has none either. GetMachineStatus reports it (the
//! machine controller takes a machine's addresses from the status poll that
//! makes it Available). A NIC's dynamic private IP stays for the NIC's life,
//! so the address is remembered per VM (bounded, least recently used
//! dropped): a status poll reads it only for a VM whose address this process
//! has not learnt yet, and then:
//!
//! - for a VM read alone (the full VM, which names its primary NIC): 1
//!   `networkInterfaces.get`, or, for such polls arriving together, 1
//!   `networkInterfaces.list` of the resource group shared by all of them
//!   ([`crate::lookup::NicLookups`]);
//! - for VMs read in a batch from ARM's generic resource list (no NIC name):
//!   1 Azure Resource Graph query of the group, made by the batch itself when
//!   one of its VMs has no remembered address ([`crate::lookup`],
//!   [`crate::graph`]); the addresses of every VM ARM listed are remembered
//!   from that answer. The graph lags ARM by seconds: a VM it does not show
//!   yet gets no address in this answer and nothing is remembered, so a later
//!   poll asks again. Graph absence never makes a VM gone; only ARM's answer does.
//!
//! No call is made when the address is remembered.

use std::sync::Arc;

use machine_driver_api::{Address, AddressType, KeyedCache};

use crate::clients::Api;
use crate::credentials::AzureCredentials;
use crate::driver::AzureDriver;
use crate::lookup::FoundVm;
use crate::naming::VmRef;
use crate::vm::{NetworkInterface, VirtualMachine};

/// Most VMs whose addresses are remembered.
pub(crate) const MAX_REMEMBERED: usize = 16_384;

/// Subscription, resource group and VM name, lowercase: what a remembered
/// address is keyed by (a coalesced batch knows no location).
pub(crate) type AddressKey = (String, String, String);

/// The remembered addresses of VMs.
pub(crate) type RememberedAddresses = KeyedCache<AddressKey, Vec<Address>>;

/// The key of a VM's remembered addresses.
pub(crate) fn address_key(subscription: &str, resource_group: &str, name: &str) -> AddressKey {
    (subscription.to_ascii_lowercase(), resource_group.to_ascii_lowercase(), name.to_ascii_lowercase())
}

fn key_of(target: &VmRef) -> AddressKey {
    address_key(&target.subscription, &target.resource_group, &target.name)
}

impl AzureDriver {
    /// The addresses of `target`'s VM as a status read `found` it:
    /// remembered; else for a full VM read from its primary NIC. A listed
    /// one has what its batch remembered from Resource Graph (nothing when
    /// the graph does not show it yet: a later poll asks again).
    pub(crate) async fn addresses_of(
        &self,
        api: &Api<'_>,
        creds: &AzureCredentials,
        target: &VmRef,
        found: &FoundVm,
    ) -> Vec<Address> {
        match found {
            FoundVm::Full(vm) => self.nic_addresses(api, creds, target, vm).await,
            FoundVm::Listed(_) => self.addresses.get(&key_of(target)).map(|known| known.to_vec()).unwrap_or_default(),
        }
    }

    /// The addresses of `vm` (remembered, or read from its primary NIC and
    /// remembered). Empty when the NIC cannot be read: the answer goes on without.
    pub(crate) async fn nic_addresses(
        &self,
        api: &Api<'_>,
        creds: &AzureCredentials,
        target: &VmRef,
        vm: &VirtualMachine,
    ) -> Vec<Address> {
        if let Some(known) = self.addresses.get(&key_of(target)) {
            return known.to_vec();
        }
        let Some(nic_name) = primary_nic_name(vm) else { return Vec::new() };
        let nic = match self.nic_lookups.get(api, creds, target, &nic_name).await {
            Ok(nic) => nic,
            Err(e) => {
                tracing::debug!(vm = %target.name, error = %e, "reading the VM's NIC failed");
                None
            }
        };
        let addresses: Vec<Address> = nic
            .as_ref()
            .and_then(private_ip)
            .map(|ip| vec![Address::new(AddressType::InternalIp, ip)])
            .unwrap_or_default();
        self.remember_addresses(target, &addresses);
        addresses
    }

    /// Remembers the addresses of a VM this process created.
    pub(crate) fn remember_addresses(&self, target: &VmRef, addresses: &[Address]) {
        if addresses.is_empty() {
            self.addresses.remove(&key_of(target));
        } else {
            self.addresses.insert(key_of(target), Arc::new(addresses.to_vec()));
        }
    }

    /// Forgets a VM's addresses (deleted, failed).
    pub(crate) fn forget_addresses(&self, target: &VmRef) {
        self.addresses.remove(&key_of(target));
    }
}

/// The name of a VM's primary NIC (the first one when none is marked primary).
fn primary_nic_name(vm: &VirtualMachine) -> Option<String> {
    let nics = &vm.properties.as_ref()?.network_profile.as_ref()?.network_interfaces;
    let nic = nics
        .iter()
        .find(|n| n.properties.as_ref().and_then(|p| p.primary).unwrap_or(false))
        .or_else(|| nics.first())?;
    nic.sub_resource.id.as_deref()?.rsplit('/').next().filter(|n| !n.is_empty()).map(str::to_string)
}

/// The primary private IP of a NIC answer.
pub(crate) fn private_ip(nic: &NetworkInterface) -> Option<String> {
    nic.properties
        .as_ref()?
        .ip_configurations
        .iter()
        .find_map(|c| c.properties.as_ref().and_then(|p| p.private_ip_address.clone()))
}
