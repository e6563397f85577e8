//! The machine's addresses: its primary NIC's private IP.
//!
//! ARM's VM answers carry no IP; the NIC's does, and the NIC is made by the
//! VM PUT, whose answer has no IP either. GetMachineStatus reports it (the
//! machine controller takes a machine's addresses from the status poll that
//! makes it Available). A NIC's dynamic private IP stays for the NIC's life,
//! so the address is remembered per VM (bounded, least recently used
//! dropped): a status poll reads the NIC only for a VM whose address this
//! process has not learnt yet, once it has one: 1 `networkInterfaces.get`,
//! or, for polls arriving together, 1 `networkInterfaces.list` of the
//! resource group shared by all of them ([`crate::lookup::NicLookups`]).

use std::sync::Arc;

use machine_driver_api::{Address, AddressType};

use crate::clients::Api;
use crate::credentials::AzureCredentials;
use crate::driver::AzureDriver;
use crate::naming::VmRef;
use crate::vm::{NetworkInterface, VirtualMachine};

/// Most VMs whose addresses are remembered.
pub(crate) const MAX_REMEMBERED: usize = 16_384;

impl AzureDriver {
    /// The addresses of `vm` (remembered, or read from its primary NIC and
    /// remembered). Empty when the NIC cannot be read: the answer goes on without.
    pub(crate) async fn addresses_of(
        &self,
        api: &Api<'_>,
        creds: &AzureCredentials,
        target: &VmRef,
        vm: &VirtualMachine,
    ) -> Vec<Address> {
        if let Some(known) = self.addresses.get(target) {
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
            self.addresses.remove(target);
        } else {
            self.addresses.insert(target.clone(), Arc::new(addresses.to_vec()));
        }
    }

    /// Forgets a VM's addresses (deleted, failed).
    pub(crate) fn forget_addresses(&self, target: &VmRef) {
        self.addresses.remove(target);
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
