//! GetMachineStatus on ECS: one `DescribeInstances`, shared with concurrent polls
//! ([`crate::lookup`]); by the machine's name when there is no providerID.
//! Either way the instance found answers only when the kit judges it the
//! machine's ([`crate::ownership`]): another cluster's instance, a hand-made
//! one or an earlier machine's (another uid) is NOT_FOUND, so MCM never adopts it.
//!
//! A spot instance ECS took back is still listed until ECS releases it, some
//! minutes later: `Stopped`, with `OperationLocks` `LockReason: Recycling`
//! ("interrupted and pending release", ECS's guide "Detect and handle spot
//! instance interruptions"). Read from the same `DescribeInstances` (no further
//! call), the machine's own such instance answers the kit's SPOT_RECLAIMED
//! (NOT_FOUND) naming it, so MCM replaces the machine at once. Once released,
//! the instance is not listed and the answer is the plain NOT_FOUND.

use machine_driver_api::{AbsentVm, CallContext, DriverError, MachineRef, MachineStatus, Ownership, foreign_not_found};

use crate::create::{addresses, find_machine};
use crate::credentials::AccessKey;
use crate::driver::AlicloudDriver;
use crate::ecs::model::Instance;
use crate::naming::{node_name, parse_provider_id, provider_id};
use crate::spec::AlicloudProviderSpec;

impl AlicloudDriver {
    /// GetMachineStatus: the instance's state and addresses; not visible yet
    /// for a create of a moment ago or a young machine; NOT_FOUND otherwise.
    pub(crate) async fn status(&self, ctx: &CallContext, req: MachineRef) -> Result<MachineStatus, DriverError> {
        let key = AccessKey::from_secret(&req.secret, "secret")?;
        let Some(pid) = req.machine.provider_id.as_deref() else {
            let (spec, markers) = AlicloudProviderSpec::parse(&req.class.provider_spec)?;
            if req.machine.name.is_empty() {
                return Err(DriverError::invalid_argument("machine.providerID", "is required without a machine name"));
            }
            let api = self.pool.api(&key, &spec.region, ctx)?;
            let mut found = find_machine(&api, &spec.region, &markers, &req.machine).await?;
            if found.len() > 1 {
                return Err(DriverError::duplicate_vms(&req.machine.name, found.iter().map(|i| &i.instance_id)));
            }
            let Some(instance) = found.pop() else {
                return Err(DriverError::not_found(format!("instance of machine {}", req.machine.name)));
            };
            self.records.record(key.fingerprint, &spec.region, &instance);
            return self.answer(&spec.region, &instance);
        };
        // The providerID names the instance; of the class only the markers are needed.
        let markers = AlicloudProviderSpec::markers_of(&req.class.provider_spec)?;
        let (region, id) = parse_provider_id(pid)?;
        let api = self.pool.api(&key, &region, ctx)?;
        if let Some(instance) = self.lookups.get(&api, &key, &region, &id).await? {
            self.records.record(key.fingerprint, &region, &instance);
            return match markers.judge(&instance, &req.machine) {
                Ownership::Mine => self.answer(&region, &instance),
                Ownership::Foreign(why) => {
                    Err(foreign_not_found(format!("instance {}", provider_id(&region, &id)), why))
                }
            };
        }
        let pid = provider_id(&region, &id);
        AbsentVm::new(&req.machine, format!("instance {pid}"))
            .created(self.recent.contains(&id).then_some(pid))
            .deleted(self.deleted.contains(&id))
            .status(&node_name(&id))
    }

    /// The status of the machine's own `instance`; SPOT_RECLAIMED when ECS reclaimed it.
    fn answer(&self, region: &str, instance: &Instance) -> Result<MachineStatus, DriverError> {
        self.recent.forget(&instance.instance_id);
        if instance.is_recycling() {
            return Err(DriverError::spot_reclaimed(
                provider_id(region, &instance.instance_id),
                reclaim_detail(instance),
            ));
        }
        Ok(MachineStatus {
            provider_id: provider_id(region, &instance.instance_id),
            node_name: node_name(&instance.instance_id),
            addresses: addresses(instance),
            pending_steps: Vec::new(),
            vm_state: instance.status.to_ascii_lowercase(),
        })
    }
}

/// How ECS shows a reclaimed spot instance, for the SPOT_RECLAIMED message.
pub(crate) fn reclaim_detail(instance: &Instance) -> String {
    let strategy = if instance.spot_strategy.is_empty() { "not shown" } else { &instance.spot_strategy };
    format!(
        "ECS Status {}, OperationLocks LockReason Recycling (SpotStrategy {strategy}): locked for release, it cannot be started again",
        instance.status
    )
}
