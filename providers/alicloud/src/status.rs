//! GetMachineStatus on ECS: one `DescribeInstances`, shared with concurrent polls
//! ([`crate::lookup`]); by the machine's uid tag when there is no providerID.

use machine_driver_api::{CallContext, DriverError, MachineRef, MachineStatus};

use crate::create::{addresses, find_machine};
use crate::credentials::AccessKey;
use crate::driver::AlicloudDriver;
use crate::naming::{node_name, parse_provider_id, provider_id};
use crate::spec::AlicloudProviderSpec;

impl AlicloudDriver {
    /// GetMachineStatus: the instance's state and addresses; not visible yet
    /// for a create of a moment ago or a young machine; NOT_FOUND otherwise.
    pub(crate) async fn status(&self, ctx: &CallContext, req: MachineRef) -> Result<MachineStatus, DriverError> {
        let key = AccessKey::from_secret(&req.secret, "secret")?;
        let pid = req.machine.provider_id.as_deref();
        let (region, id, found) = match pid {
            // The providerID says everything: the class is not needed (nor checked).
            Some(pid) => {
                let (region, id) = parse_provider_id(pid)?;
                let api = self.pool.api(&key, &region, ctx)?;
                let found = self.lookups.get(&api, &key, &region, &id).await?;
                (region, Some(id), found)
            }
            None => {
                let spec = AlicloudProviderSpec::parse(&req.class.provider_spec)?;
                let api = self.pool.api(&key, &spec.region, ctx)?;
                if req.machine.name.is_empty() {
                    return Err(DriverError::invalid_argument(
                        "machine.providerID",
                        "is required without a machine name",
                    ));
                }
                let mut found = find_machine(&api, &spec, &req.machine.name, &req.machine.uid).await?;
                if found.len() > 1 {
                    return Err(DriverError::new(
                        machine_driver_api::ErrorKind::Duplicate,
                        "DUPLICATE_INSTANCES",
                        format!("{} instances belong to machine {}", found.len(), req.machine.name),
                    ));
                }
                let found = found.pop();
                (spec.region, None, found)
            }
        };
        if let Some(instance) = found {
            self.recent.forget(&instance.instance_id);
            return Ok(MachineStatus {
                provider_id: provider_id(&region, &instance.instance_id),
                node_name: node_name(&instance.instance_id),
                addresses: addresses(&instance),
                pending_steps: Vec::new(),
                vm_state: instance.status.to_ascii_lowercase(),
            });
        }
        let Some(id) = id else {
            return Err(DriverError::not_found(format!("instance of machine {}", req.machine.name)));
        };
        if self.recent.contains(&id) {
            return Ok(MachineStatus::not_visible_yet(provider_id(&region, &id), node_name(&id)));
        }
        Some(&req.machine)
            .filter(|_| !self.deleted.contains(&id))
            .and_then(|m| m.young_not_visible_yet(&node_name(&id)))
            .ok_or_else(|| DriverError::not_found(format!("instance {}", provider_id(&region, &id))))
    }
}
