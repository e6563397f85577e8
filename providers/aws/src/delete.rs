//! DeleteMachine: TerminateInstances of this machine's instances only, no waiting.
//!
//! The class is validated as on every call (the Go provider does the same): a
//! class without its cluster and role tags cannot tell this cluster's
//! instances from anyone else's, so nothing is deleted with it.
//!
//! EC2 call cost:
//! - with a providerID: one DescribeInstances by id (the coalesced read of
//!   [`lookup::by_id`]) to let the kit judge the instance, then one
//!   TerminateInstances when it is this machine's and live. A foreign
//!   instance is answered "already gone" and left running; one already
//!   shutting down or terminated costs the read alone. The Go provider
//!   terminates any instance id of the account without reading; this one
//!   read is the price of never deleting another cluster's VM.
//! - without: one DescribeInstances by tags (`Name` + cluster and role tag
//!   keys, narrowed by the kit) plus one TerminateInstances when something
//!   of this machine's is live.

use machine_driver_api::{CallContext, DeletedMachine, DriverError, MachineRef, Ownership, Result};

use crate::driver::AwsDriver;
use crate::errors::{AwsFailure, RETRY_SOON};
use crate::ownership::Tagged;
use crate::{aws_call, lookup, tags};

impl AwsDriver {
    pub(crate) async fn delete(&self, ctx: &CallContext, req: MachineRef) -> Result<DeletedMachine> {
        let (spec, markers) = crate::ownership::class(&req.class.provider_spec)?;
        crate::ownership::check_machine_name(&req.machine.name)?;
        let (region, instance_id) = Self::locate(&spec, &req.machine)?;
        let c = self.clients(ctx, &req.secret, &region).await?;
        let gone = || DeletedMachine { last_known_state: String::new(), already_gone: true };
        let ids: Vec<String> = match instance_id {
            Some(id) => match lookup::by_id(ctx, &c, &id).await? {
                Some(i) if !tags::is_live(&i) => vec![],
                Some(i) => match markers.judge(&Tagged(i.tags()), &req.machine) {
                    Ownership::Mine => vec![id],
                    Ownership::Foreign(why) => {
                        tracing::warn!(machine = %req.machine.name, instance_id = %id, %why,
                            "DeleteMachine named an instance that is not this machine's; it is left running");
                        vec![]
                    }
                },
                // Launched a moment ago and not visible yet: answering "gone"
                // would leave it running with no Machine to claim it.
                None if self.recent_launch(&req, &c).is_some_and(|l| l.instance_id == id) => {
                    return Err(DriverError::unavailable(
                        "NOT_VISIBLE_YET",
                        "the instance was launched a moment ago and is not visible in EC2 yet",
                        RETRY_SOON,
                    ));
                }
                None => vec![],
            },
            None => lookup::by_machine_tags(ctx, &c, &markers, &req.machine)
                .await?
                .iter()
                .filter_map(|i| i.instance_id().map(str::to_string))
                .collect(),
        };
        if !req.machine.uid.is_empty() {
            self.recent.forget(&(c.credentials.clone(), req.machine.uid.clone()));
        }
        if ids.is_empty() {
            return Ok(gone());
        }
        let out = match aws_call::ec2(ctx, &c, "TerminateInstances", || {
            c.ec2.terminate_instances().set_instance_ids(Some(ids.clone())).send()
        })
        .await
        {
            Ok(o) => o,
            Err(f) if f.cloud().is_some_and(AwsFailure::is_instance_not_found) => return Ok(gone()),
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
