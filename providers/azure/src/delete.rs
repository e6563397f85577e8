//! DeleteMachine on Azure, by providerID alone (the spec gives the resource group).
//!
//! The VM is deleted with one DELETE: its NIC and disks were created with
//! `deleteOption: Delete` and go with it, so the call does not wait for the
//! deletion (ARM finishes it; a later status poll sees the VM gone). When the
//! VM is already gone, what an earlier failed attempt may have left is
//! deleted: every NIC generation, the OS disk and the spec's data disks.
//! A NIC Azure still keeps reserved answers UNAVAILABLE with the reservation's
//! delay, and MCM's retry removes it.

use futures::future::join_all;
use machine_driver_api::{CallContext, DeletedMachine, DriverError, MachineRef};

use crate::clients::Api;
use crate::create::{delete_nic, delete_vm};
use crate::credentials::AzureCredentials;
use crate::driver::AzureDriver;
use crate::naming::{NIC_GENERATIONS, VmRef, data_disk_name};
use crate::spec::AzureProviderSpec;

impl AzureDriver {
    /// DeleteMachine (see the module docs).
    pub(crate) async fn delete(&self, ctx: &CallContext, req: MachineRef) -> Result<DeletedMachine, DriverError> {
        let creds = AzureCredentials::from_secret(&req.secret, "secret")?;
        let (target, spec) = self.locate(&req, &creds)?;
        let api = self.pool.api(&creds, spec.cloud(), ctx)?;
        self.recent.forget(&target);
        self.forget_addresses(&target);
        let existed = delete_vm(&api, &target).await?;
        self.deleted.record(target.clone(), ());
        if existed {
            return Ok(DeletedMachine { last_known_state: String::new(), already_gone: false });
        }
        delete_leftovers(&api, &target, &spec).await?;
        Ok(DeletedMachine { last_known_state: String::new(), already_gone: true })
    }
}

/// Deletes the NICs and disks of a VM that is gone, all at once; the first failure is answered.
async fn delete_leftovers(api: &Api<'_>, target: &VmRef, spec: &AzureProviderSpec) -> Result<(), DriverError> {
    let nics: Vec<String> = (0..NIC_GENERATIONS).map(|g| target.nic_name(g)).collect();
    let mut disks = vec![target.os_disk_name()];
    disks.extend(spec.properties.storage_profile.data_disks.iter().map(|d| data_disk_name(&target.name, d)));
    let nic_deletes = join_all(nics.iter().map(|n| delete_nic(api, target, n)));
    let disk_deletes = join_all(disks.iter().map(|d| delete_disk(api, target, d)));
    let (nic_results, disk_results) = futures::join!(nic_deletes, disk_deletes);
    nic_results.into_iter().chain(disk_results).collect::<Result<Vec<()>, _>>().map(|_| ())
}

/// DELETEs a managed disk; OK when it is gone or was never there.
async fn delete_disk(api: &Api<'_>, target: &VmRef, disk: &str) -> Result<(), DriverError> {
    let answer = api
        .call("compute", "disks.delete", || {
            api.compute().disks_client().delete(&target.subscription, &target.resource_group, disk).send()
        })
        .await;
    match answer {
        Ok(_) => Ok(()),
        Err(machine_driver_api::CallFailure::Cloud(_, f)) if f.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}
