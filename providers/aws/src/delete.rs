//! DeleteMachine: TerminateInstances, no waiting.
//!
//! EC2 call cost: with a providerID, one TerminateInstances; without, one
//! DescribeInstances by tags plus one TerminateInstances when something is live.

use machine_driver_api::{CallContext, DeletedMachine, MachineRef, Result, parse_provider_spec};

use crate::driver::AwsDriver;
use crate::errors::AwsFailure;
use crate::spec::AwsProviderSpec;
use crate::{aws_call, lookup};

impl AwsDriver {
    pub(crate) async fn delete(&self, ctx: &CallContext, req: MachineRef) -> Result<DeletedMachine> {
        // Only the region and the cluster tag are needed: a class that fails
        // the full validation must not keep its VMs from being deleted.
        let spec: AwsProviderSpec = parse_provider_spec(&req.class.provider_spec)?;
        let (region, instance_id) = Self::locate(&spec, &req.machine)?;
        if region.is_empty() {
            return Err(machine_driver_api::DriverError::invalid_argument("providerSpec.region", "is required"));
        }
        let c = self.clients(ctx, &req.secret, &region).await?;
        let ids: Vec<String> = match instance_id {
            Some(id) => vec![id],
            None => lookup::by_machine_tags(ctx, &c, &spec, &req.machine)
                .await?
                .iter()
                .filter_map(|i| i.instance_id().map(str::to_string))
                .collect(),
        };
        if !req.machine.uid.is_empty() {
            self.recent.forget(&req.machine.uid);
        }
        if ids.is_empty() {
            return Ok(DeletedMachine { last_known_state: String::new(), already_gone: true });
        }
        let out = match aws_call::ec2(ctx, &c, "TerminateInstances", || {
            c.ec2.terminate_instances().set_instance_ids(Some(ids.clone())).send()
        })
        .await
        {
            Ok(o) => o,
            Err(f) if f.cloud().is_some_and(AwsFailure::is_instance_not_found) => {
                return Ok(DeletedMachine { last_known_state: String::new(), already_gone: true });
            }
            Err(f) => return Err(f.into()),
        };
        let already_gone = out.terminating_instances().iter().all(|t| {
            t.previous_state()
                .and_then(|s| s.name())
                .is_some_and(|n| matches!(n.as_str(), "terminated" | "shutting-down"))
        });
        tracing::info!(machine = %req.machine.name, instances = ?ids, already_gone, "termination requested");
        Ok(DeletedMachine { last_known_state: String::new(), already_gone })
    }
}
