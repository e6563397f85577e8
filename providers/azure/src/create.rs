//! CreateMachine on Azure: one create-only VM PUT that makes the NIC too,
//! answered as soon as ARM accepts it.
//!
//! 1. PUT the VM with `If-None-Match: *` (create only; Compute API
//!    2023-07-01+) and its NIC as `networkProfile.networkInterfaceConfigurations`
//!    (`networkApiVersion` 2020-11-01): ARM makes the NIC `<vm>-nic` with the
//!    VM, and `deleteOption: Delete` on NIC and disks deletes them with it. A
//!    refused PUT makes nothing, so nothing is left to clean up.
//!    `NicReservedForAnotherVm` (a NIC of that name is kept reserved for 180 s
//!    after a failed or deleted VM) moves on to the next NIC name,
//!    `<vm>-nic-1`, then `-2`.
//! 2. Accepted (201): OK at once. ARM provisions the VM (`Creating`);
//!    GetMachineStatus reports the rest, a `Failed` VM with its failure
//!    (RESOURCE_EXHAUSTED for allocation and quota). Nothing is polled here:
//!    that is what makes a create one call.
//! 3. The VM exists (412; or 409 should ARM ignore the condition and take the
//!    PUT as an update, e.g. `PropertyChangeNotAllowed` for `customData`): GET
//!    it (`$expand=instanceView`). A VM of this machine that is running or on
//!    its way is adopted (never re-PUT: its `customData` cannot change); a
//!    `Failed` one is deleted, with its NIC and disks, and its failure answered
//!    (the next retry starts clean); so is a Spot VM Azure evicted and kept
//!    (deallocated: it does not run, and Azure does not restart it), answered
//!    UNAVAILABLE naming it; one being deleted is UNAVAILABLE. A VM of
//!    the name that is not this machine's ([`crate::ownership`]: another
//!    cluster's, made by hand, or tagged with another machine's uid) is
//!    ALREADY_EXISTS and left untouched (VM names are unique per resource
//!    group). A VM the GET does not show yet is UNAVAILABLE (retry).
//!
//! The NIC and disks the PUT makes carry no tags (ARM makes them untagged);
//! the first GetMachineStatus that finds the VM tags them with the VM's tags
//! ([`crate::tagging`]), so that CreateMachine stays one call.
//!
//! A `urn` image with a purchase plan (Garden Linux's) gets its plan on the
//! PUT and its terms accepted first ([`crate::marketplace`]; after the first
//! create of an image and subscription, no call).
//!
//! Data disks made from an image are PUT before the VM (the VM attaches
//! them), after a GET of the VM: they cannot be re-PUT under a VM that exists.
//! A disk of the name that exists already (an earlier attempt's) is read
//! first and judged by its tags ([`crate::ownership`]): the driver tags every
//! image disk it makes, so one without tags (made by hand, or by someone
//! else) or with another cluster's or machine's is ALREADY_EXISTS, never
//! re-PUT (which would give it this machine's tags) nor attached.

use std::time::Duration;

use machine_driver_api::{
    Address, CallContext, CallFailure, ClusterMarkers, CreateMachine, CreatedMachine, DriverError, Machine, Ownership,
    foreign_name_taken,
};

use crate::clients::Api;
use crate::credentials::AzureCredentials;
use crate::driver::AzureDriver;
use crate::errors::ArmFailure;
use crate::lro::{self, Outcome, Tracker};
use crate::marketplace::{Plan, Urn};
use crate::naming::{NIC_GENERATIONS, VmRef, check_vm_name, data_disk_name};
use crate::ownership::Marks;
use crate::spec::AzureProviderSpec;
use crate::tagging::PendingTags;
use crate::vm::{self, Provisioning, VirtualMachine};

/// Time kept back from the deadline for answering after the last poll (image disks).
const ANSWER_MARGIN: Duration = Duration::from_secs(2);

/// Retry delay while an earlier VM of the machine is being deleted.
const RETRY_WHILE_DELETING: Duration = Duration::from_secs(10);

/// Retry delay when ARM refused the create-only PUT (the VM exists) but a GET does not show the VM yet.
const RETRY_WHILE_INVISIBLE: Duration = Duration::from_secs(5);

/// `api-version` of the VM PUT: the Compute package the driver reads VMs with.
const COMPUTE_API_VERSION: &str = "2024-07-01";

impl AzureDriver {
    /// CreateMachine (see the module docs).
    pub(crate) async fn create(&self, ctx: &CallContext, req: CreateMachine) -> Result<CreatedMachine, DriverError> {
        let creds = AzureCredentials::from_secret(&req.secret, "secret")?;
        let (spec, markers) = AzureProviderSpec::parse_with_markers(&req.class.provider_spec)?;
        check_vm_name("machine.name", &req.machine.name)?;
        let target = VmRef {
            subscription: creds.subscription_id.clone(),
            resource_group: spec.resource_group.clone(),
            location: spec.location.clone(),
            name: req.machine.name.clone(),
        };
        let api = self.pool.api(&creds, spec.cloud(), ctx)?;

        let image_disks: Vec<_> =
            spec.properties.storage_profile.data_disks.iter().filter(|d| d.made_before_vm()).collect();
        if !image_disks.is_empty()
            && let Some(existing) = get_vm(&api, &target, true).await?
        {
            return self.adopt(&api, &creds, &target, &existing, &markers, &req.machine).await;
        }
        // Disks of the names that exist are judged first, and the image's terms accepted
        // before any disk is made: a class that cannot make its VM makes nothing.
        for disk in &image_disks {
            self.judge_image_disk(&api, &target, disk, &markers, &req.machine).await?;
        }
        let plan = self.purchase_plan(&api, &spec, &target).await?;
        for disk in image_disks {
            self.put_image_disk(&api, &spec, &target, disk, &req.machine).await?;
        }

        let url = api.arm_url(
            &[
                "subscriptions",
                &target.subscription,
                "resourceGroups",
                &target.resource_group,
                "providers",
                "Microsoft.Compute",
                "virtualMachines",
                &target.name,
            ],
            COMPUTE_API_VERSION,
        );
        let mut generation = 0;
        let mut terms_accepted_again = false;
        let nic_name = loop {
            let nic_name = target.nic_name(generation);
            let body = vm::vm_body(&spec, &target, &nic_name, &req.machine.uid, &req.user_data, plan.as_ref());
            let body =
                serde_json::to_vec(&body).map_err(|_| DriverError::internal("building the VM request failed"))?;
            let put =
                api.put_raw("compute", "virtualMachines.createOrUpdate", &url, &body, &[("if-none-match", "*")]).await;
            match put {
                Ok(_) => break nic_name,
                Err(CallFailure::Cloud(_, f)) if f.is_nic_reserved() && generation + 1 < NIC_GENERATIONS => {
                    tracing::info!(vm = %target.name, nic = %nic_name, "NIC reserved after a failed VM; using the next NIC name");
                    generation += 1;
                }
                // The terms this process accepted were cancelled since: accepted again, once.
                Err(CallFailure::Cloud(call, f)) if f.is_terms_not_accepted() => match plan.as_ref() {
                    Some(plan) if !terms_accepted_again => {
                        tracing::info!(vm = %target.name, "ARM says the image's marketplace terms are not accepted; accepting them again");
                        self.marketplace.forget_accepted(&api, &target.subscription, plan);
                        self.marketplace.ensure_accepted(&api, &target.subscription, plan).await?;
                        terms_accepted_again = true;
                    }
                    _ => return Err(CallFailure::Cloud(call, f).into()),
                },
                // The class names an image the VM's location does not have (a gallery version not
                // replicated there, an unknown platform image): the class's error.
                Err(CallFailure::Cloud(call, f)) if f.is_image_not_found() => {
                    let err: DriverError = CallFailure::Cloud(call, f).into();
                    return Err(DriverError::invalid_argument(
                        "providerSpec.properties.storageProfile.imageReference",
                        err.message(),
                    ));
                }
                Err(CallFailure::Cloud(call, f)) if f.is_conflict_with_existing() => {
                    if let Some(existing) = get_vm(&api, &target, true).await? {
                        return self.adopt(&api, &creds, &target, &existing, &markers, &req.machine).await;
                    }
                    if f.is_precondition_failed() {
                        return Err(DriverError::unavailable(
                            machine_driver_api::reasons::NOT_VISIBLE_YET,
                            format!("VM {} exists but is not readable yet", target.name),
                            RETRY_WHILE_INVISIBLE,
                        ));
                    }
                    return Err(CallFailure::Cloud(call, f).into());
                }
                Err(failure) => return Err(failure.into()),
            }
        };
        self.recent.record(target.clone(), ());
        // The NIC and disks the PUT made carry no tags: the first status poll tags them.
        let tags = vm::machine_tags(&spec, &req.machine.uid);
        self.tags_to_apply.record(&target, PendingTags::of_create(&spec, &target, &nic_name, &req.machine.uid, tags));
        // The NIC's address is read once by GetMachineStatus: the VM PUT's answer carries none.
        self.forget_addresses(&target);
        Ok(created(&target, Vec::new()))
    }

    /// The purchase plan the VM PUT carries: for a `urn` image without
    /// `skipMarketplaceAgreement`, the image's plan when it has one, its
    /// terms accepted first ([`crate::marketplace`]; remembered, so after the
    /// first create of an image and subscription no call is made).
    async fn purchase_plan(
        &self,
        api: &Api<'_>,
        spec: &AzureProviderSpec,
        target: &VmRef,
    ) -> Result<Option<Plan>, DriverError> {
        let image = &spec.properties.storage_profile.image_reference;
        if image.skip_marketplace_agreement {
            return Ok(None);
        }
        let Some(urn) = image.urn.as_deref().and_then(Urn::parse) else { return Ok(None) };
        let field = "providerSpec.properties.storageProfile.imageReference.urn";
        let Some(plan) = self.marketplace.plan_of(api, target, &urn, field).await? else { return Ok(None) };
        self.marketplace.ensure_accepted(api, &target.subscription, &plan).await?;
        Ok(Some(plan))
    }

    /// A VM of the machine's name that exists: adopted when it is this
    /// machine's and running or on its way (see the module docs); one that
    /// is not is ALREADY_EXISTS, untouched.
    async fn adopt(
        &self,
        api: &Api<'_>,
        creds: &AzureCredentials,
        target: &VmRef,
        existing: &VirtualMachine,
        markers: &ClusterMarkers,
        machine: &Machine,
    ) -> Result<CreatedMachine, DriverError> {
        if let Ownership::Foreign(why) = markers.judge(&Marks::of_vm(existing), machine) {
            tracing::info!(vm = %target.name, %why, "CreateMachine: the VM name is taken by a VM that is not this machine's");
            return Err(foreign_name_taken(format!("VM {}", target.name), why));
        }
        if let Some(shown) = vm::reclaimed(existing) {
            return Err(self.remove_reclaimed(api, target, &shown).await);
        }
        match vm::provisioning(existing) {
            Provisioning::Failed => Err(self.remove_failed(api, target, existing).await),
            Provisioning::Deleting => Err(DriverError::unavailable(
                crate::errors::VM_DELETING,
                format!("an earlier VM {} of this machine is being deleted", target.name),
                RETRY_WHILE_DELETING,
            )),
            Provisioning::InProgress | Provisioning::Succeeded => {
                self.recent.record(target.clone(), ());
                Ok(created(target, self.nic_addresses(api, creds, target, existing).await))
            }
        }
    }

    /// A `Failed` VM of this machine: deleted with its NIC and disks (the
    /// next retry starts clean), its failure answered.
    async fn remove_failed(&self, api: &Api<'_>, target: &VmRef, existing: &VirtualMachine) -> DriverError {
        self.recent.forget(target);
        self.tags_to_apply.forget(target);
        self.forget_addresses(target);
        let failure = failed_vm_error(existing);
        if let Err(e) = delete_vm(api, target).await {
            return e;
        }
        failure
    }

    /// A Spot VM of this machine that Azure evicted and kept (deallocated,
    /// [`vm::reclaimed`]): deleted with its NIC and disks (their
    /// `deleteOption: Delete`), as a `Failed` one is, and answered UNAVAILABLE
    /// naming it; the retry (once the VM is gone) makes a new VM of the name.
    /// Never adopted: it does not run, and Azure does not restart it.
    async fn remove_reclaimed(&self, api: &Api<'_>, target: &VmRef, shown: &str) -> DriverError {
        self.recent.forget(target);
        self.tags_to_apply.forget(target);
        self.forget_addresses(target);
        tracing::info!(vm = %target.name, %shown, "CreateMachine: the machine's Spot VM was evicted; deleting it");
        if let Err(e) = delete_vm(api, target).await {
            return e;
        }
        self.deleted.record(target.clone(), ());
        DriverError::unavailable(
            crate::errors::SPOT_VM_RECLAIMED,
            format!(
                "Azure reclaimed Spot VM {} ({shown}); it is being deleted with its NIC and disks, and a retry creates a new VM",
                target.provider_id()
            ),
            RETRY_WHILE_DELETING,
        )
    }

    /// A data disk to be made from an image whose name is taken: it is PUT
    /// again (an earlier attempt's) only when it is this machine's: read
    /// first, and its tags judged by the kit; an untagged one is not (the
    /// driver tags its image disks): ALREADY_EXISTS.
    async fn judge_image_disk(
        &self,
        api: &Api<'_>,
        target: &VmRef,
        disk: &crate::spec::DataDisk,
        markers: &ClusterMarkers,
        machine: &Machine,
    ) -> Result<(), DriverError> {
        let name = data_disk_name(&target.name, disk);
        if let Some(marks) = crate::delete::read_tags(api, target, crate::delete::Leftover::Disk, &name).await?
            && let Ownership::Foreign(why) = markers.judge(&marks, machine)
        {
            return Err(foreign_name_taken(format!("disk {name}"), why));
        }
        Ok(())
    }

    /// PUTs a data disk made from an image (judged by [`Self::judge_image_disk`]
    /// first), and waits for it within the deadline.
    async fn put_image_disk(
        &self,
        api: &Api<'_>,
        spec: &AzureProviderSpec,
        target: &VmRef,
        disk: &crate::spec::DataDisk,
        machine: &Machine,
    ) -> Result<(), DriverError> {
        let name = data_disk_name(&target.name, disk);
        if !disk.made_before_vm() {
            return Ok(());
        }
        let body: azure_mgmt_compute::package_2024_07_01::models::Disk =
            vm::through_model(&vm::image_disk_body(spec, target, disk, &machine.uid), "disk")?;
        let answer = api
            .call("compute", "disks.createOrUpdate", || {
                api.compute()
                    .disks_client()
                    .create_or_update(&target.subscription, &target.resource_group, &name, body.clone())
                    .send()
            })
            .await?;
        if let Some(tracker) = Tracker::from_headers(answer.as_raw_response().headers()) {
            match lro::wait(api, "compute", &tracker, ANSWER_MARGIN).await? {
                Outcome::Succeeded => {}
                Outcome::Failed(f) => return Err(f.driver_error("compute disks.createOrUpdate")),
                Outcome::Running => {
                    return Err(DriverError::unavailable(
                        crate::errors::DISK_PROVISIONING,
                        format!("data disk {name} is still being made from its image"),
                        Duration::from_secs(5),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The answer of a create.
fn created(target: &VmRef, addresses: Vec<Address>) -> CreatedMachine {
    CreatedMachine {
        provider_id: target.provider_id(),
        node_name: target.name.clone(),
        last_known_state: String::new(),
        addresses,
    }
}

/// GETs the VM; `None` when ARM does not show it.
pub(crate) async fn get_vm(
    api: &Api<'_>,
    target: &VmRef,
    instance_view: bool,
) -> Result<Option<VirtualMachine>, DriverError> {
    let answer = api
        .call("compute", "virtualMachines.get", || {
            let get =
                api.compute().virtual_machines_client().get(&target.resource_group, &target.name, &target.subscription);
            let get = if instance_view { get.expand("instanceView") } else { get };
            get.send()
        })
        .await;
    match answer {
        Ok(a) => a
            .into_body()
            .await
            .map(Some)
            .map_err(|_| DriverError::internal("compute virtualMachines.get answered a body that is not a VM")),
        Err(CallFailure::Cloud(_, f)) if f.is_not_found() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The error a `Failed` VM's instance view records.
pub(crate) fn failed_vm_error(vm: &VirtualMachine) -> DriverError {
    let (code, message) = vm::failure_of(vm).unwrap_or_else(|| ("VMProvisioningFailed".into(), String::new()));
    ArmFailure::operation(Some(code), message).driver_error("compute virtualMachines.createOrUpdate")
}

/// DELETEs the VM (its NIC and disks cascade); true when it existed.
pub(crate) async fn delete_vm(api: &Api<'_>, target: &VmRef) -> Result<bool, DriverError> {
    let answer = api
        .call("compute", "virtualMachines.delete", || {
            api.compute()
                .virtual_machines_client()
                .delete(&target.resource_group, &target.name, &target.subscription)
                .send()
        })
        .await;
    match answer {
        Ok(a) => Ok(u16::from(a.as_raw_response().status()) != 204),
        Err(CallFailure::Cloud(_, f)) if f.is_not_found() => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// DELETEs a NIC; OK when it is gone or was never there.
pub(crate) async fn delete_nic(api: &Api<'_>, target: &VmRef, nic_name: &str) -> Result<(), DriverError> {
    let answer = api
        .call("network", "networkInterfaces.delete", || {
            api.network()
                .network_interfaces_client()
                .delete(&target.resource_group, nic_name, &target.subscription)
                .send()
        })
        .await;
    match answer {
        Ok(_) => Ok(()),
        Err(CallFailure::Cloud(_, f)) if f.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}
