//! DeleteMachine on Azure, by name or by providerID (the spec gives the
//! resource group, the secret the subscription).
//!
//! The VM is read first, with one fresh `virtualMachines.get` of its own
//! (never a status poll's coalesced read, nor the group list a status batch
//! keeps for [`crate::lookup::LIST_REUSE`]: the DELETE that follows goes by
//! name, so the verdict must be on the VM as it is now, not as it was up to
//! that long ago), and judged ([`crate::ownership`]): a VM of the name that
//! is not this machine's (another cluster's, made by hand, or tagged with
//! another machine's uid) is answered `already_gone` and nothing is deleted,
//! neither the VM nor the NICs and disks named after it. A delete by
//! providerID is judged the same way: the read is one call and the VM record
//! is what the verdict needs (the Go provider deletes unread). This machine's
//! VM is deleted with one DELETE: its NIC and disks were created with
//! `deleteOption: Delete` and go with it, so the call does not wait for the
//! deletion (ARM finishes it; a later status poll sees the VM gone). 2 calls
//! in all (was 1 without the read).
//!
//! When the VM is gone, what an earlier attempt (or a Go provider's VM
//! without `deleteOption`) may have left is read and deleted: every NIC
//! generation, the OS disk and the spec's data disks, each only when it is
//! the machine's ([`crate::ownership::judge_leftover`]: tagged and judged
//! mine, or untagged and the request carries the machine's uid; the orphan
//! collector's delete carries none). As many reads as before there were
//! DELETEs, plus a DELETE per leftover found. A NIC Azure still keeps
//! reserved answers UNAVAILABLE with the reservation's delay, and MCM's retry
//! removes it.

use futures::future::join_all;
use machine_driver_api::{
    CallContext, CallFailure, ClusterMarkers, DeletedMachine, DriverError, Machine, MachineRef, Ownership,
};
use serde::Deserialize;

use crate::clients::Api;
use crate::create::{delete_nic, delete_vm, get_vm};
use crate::credentials::AzureCredentials;
use crate::driver::AzureDriver;
use crate::naming::{NIC_GENERATIONS, VmRef, data_disk_name};
use crate::ownership::{Marks, judge_leftover};
use crate::spec::AzureProviderSpec;

impl AzureDriver {
    /// DeleteMachine (see the module docs).
    pub(crate) async fn delete(&self, ctx: &CallContext, req: MachineRef) -> Result<DeletedMachine, DriverError> {
        let creds = AzureCredentials::from_secret(&req.secret, "secret")?;
        let (target, spec, markers) = self.locate(&req, &creds)?;
        let api = self.pool.api(&creds, spec.cloud(), ctx)?;
        // A fresh read of its own: the DELETE below goes by name, unconditionally.
        let found = get_vm(&api, &target, false).await?;
        if let Some(vm) = &found
            && let Ownership::Foreign(why) = markers.judge(&Marks::of_vm(vm), &req.machine)
        {
            tracing::info!(vm = %target.name, %why, "DeleteMachine: the VM of the name is not this machine's; left untouched");
            return Ok(DeletedMachine { last_known_state: String::new(), already_gone: true });
        }
        self.recent.forget(&target);
        self.forget_addresses(&target);
        self.tags_to_apply.forget(&target);
        // A VM the read shows is deleted (204: gone since); absent, only its leftovers are looked for.
        let existed = match found {
            Some(_) => delete_vm(&api, &target).await?,
            None => false,
        };
        self.deleted.record(target.clone(), ());
        if existed {
            return Ok(DeletedMachine { last_known_state: String::new(), already_gone: false });
        }
        delete_leftovers(&api, &target, &spec, &markers, &req.machine).await?;
        Ok(DeletedMachine { last_known_state: String::new(), already_gone: true })
    }
}

/// A kind of resource a VM leaves behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leftover {
    /// A NIC.
    Nic,
    /// A managed disk.
    Disk,
}

/// What of a NIC's or disk's answer the verdict needs.
#[derive(Deserialize)]
struct Tagged {
    #[serde(default)]
    tags: Marks,
}

/// The tags of the NIC or disk `name` in `target`'s group, `None` when it does not exist.
pub(crate) async fn read_tags(
    api: &Api<'_>,
    target: &VmRef,
    kind: Leftover,
    name: &str,
) -> Result<Option<Marks>, DriverError> {
    let (sub, rg) = (&target.subscription, &target.resource_group);
    let answer = match kind {
        Leftover::Nic => api
            .call("network", "networkInterfaces.get", || {
                api.network().network_interfaces_client().get(rg, name, sub).send()
            })
            .await
            .map(|a| a.into_raw_response()),
        Leftover::Disk => api
            .call("compute", "disks.get", || api.compute().disks_client().get(sub, rg, name).send())
            .await
            .map(|a| a.into_raw_response()),
    };
    let response = match answer {
        Ok(r) => r,
        Err(CallFailure::Cloud(_, f)) if f.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let what = match kind {
        Leftover::Nic => "network networkInterfaces.get",
        Leftover::Disk => "compute disks.get",
    };
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|_| DriverError::internal(format!("reading {what}'s answer failed")))?;
    let tagged: Tagged = serde_json::from_slice(&body)
        .map_err(|_| DriverError::internal(format!("{what} answered a body that is not a resource")))?;
    Ok(Some(tagged.tags))
}

/// Reads the NICs and disks of a VM that is gone and deletes those that are
/// the machine's, all at once; the first failure is answered.
async fn delete_leftovers(
    api: &Api<'_>,
    target: &VmRef,
    spec: &AzureProviderSpec,
    markers: &ClusterMarkers,
    machine: &Machine,
) -> Result<(), DriverError> {
    let mut leftovers: Vec<(Leftover, String)> =
        (0..NIC_GENERATIONS).map(|g| (Leftover::Nic, target.nic_name(g))).collect();
    leftovers.push((Leftover::Disk, target.os_disk_name()));
    leftovers.extend(
        spec.properties.storage_profile.data_disks.iter().map(|d| (Leftover::Disk, data_disk_name(&target.name, d))),
    );
    let results = join_all(leftovers.iter().map(|(kind, name)| async move {
        let Some(marks) = read_tags(api, target, *kind, name).await? else { return Ok(()) };
        if let Ownership::Foreign(why) = judge_leftover(markers, &marks, machine) {
            tracing::info!(vm = %target.name, resource = %name, %why, "DeleteMachine: a leftover of the name is not this machine's; left untouched");
            return Ok(());
        }
        match kind {
            Leftover::Nic => delete_nic(api, target, name).await,
            Leftover::Disk => delete_disk(api, target, name).await,
        }
    }))
    .await;
    results.into_iter().collect::<Result<Vec<()>, DriverError>>().map(|_| ())
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
        Err(CallFailure::Cloud(_, f)) if f.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}
