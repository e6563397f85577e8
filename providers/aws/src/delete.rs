//! DeleteMachine: TerminateInstances of this machine's instances only, no waiting.
//!
//! The class is validated as on every call (the Go provider does the same): a
//! class without its cluster and role tags cannot tell this cluster's
//! instances from anyone else's, so nothing is deleted with it.
//!
//! A Spot instance's request is cancelled first. Terminating the instance of a
//! `persistent` Spot request returns the request to `open` and EC2 launches a
//! new instance for it (EC2 User Guide, "Terminate a Spot Instance": "To
//! ensure that no new Spot Instance is launched, you must first cancel the
//! Spot request"; CancelSpotInstanceRequests: "Canceling a Spot Instance
//! request does not terminate running Spot Instances"), a VM no Machine owns.
//! The request id is the `spotInstanceRequestId` DescribeInstances already
//! returned (no extra read); any Spot instance's request is cancelled, whatever
//! the class says now (it may have changed since the launch). Cancelling is
//! idempotent: an already cancelled or closed request answers its state, and
//! one EC2 no longer knows (`InvalidSpotInstanceRequestID.NotFound`) launches
//! nothing. If the cancel fails, nothing is terminated and the error is
//! answered (the controller retries), so no instance ends while its request
//! may still relaunch it; only credentials lacking the permission, for a class
//! of one-time requests (which close with their instance), let the
//! termination go ahead. The Go provider (gardener/machine-controller-manager-provider-aws
//! `terminateInstance`) terminates only; kubermatic/machine-controller cancels
//! a persistent request before terminating (PR #1030).
//!
//! EC2 call cost:
//! - with a providerID: one DescribeInstances by id (the coalesced read of
//!   [`lookup::by_id`]) to let the kit judge the instance, then, when it is
//!   this machine's and live, one CancelSpotInstanceRequests if it is a Spot
//!   instance and one TerminateInstances. A foreign
//!   instance is answered "already gone" and left running; one already
//!   shutting down or terminated costs the read alone (plus, for a Spot
//!   instance of this machine, the CancelSpotInstanceRequests that keeps a
//!   persistent request from launching another). The Go provider
//!   terminates any instance id of the account without reading; this one
//!   read is the price of never deleting another cluster's VM.
//! - without: one DescribeInstances by tags (`Name` + cluster and role tag
//!   keys, narrowed by the kit) plus, when something of this machine's is
//!   live, one CancelSpotInstanceRequests for the Spot ones among them and
//!   one TerminateInstances.

use aws_sdk_ec2::types::Instance;
use machine_driver_api::{CallContext, DeletedMachine, DriverError, ErrorKind, MachineRef, Ownership, Result};

use crate::clients::AwsClients;
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
        let persistent = spec
            .instance_market_options
            .as_ref()
            .and_then(|m| m.spot_options.as_ref())
            .and_then(|o| o.spot_instance_type.as_deref())
            == Some("persistent");
        let instances: Vec<Instance> = match instance_id {
            Some(id) => match lookup::by_id(ctx, &c, &id).await? {
                Some(i) if !tags::is_live(&i) => {
                    // Terminated by someone else: a persistent Spot request of
                    // this machine's instance re-opens and EC2 launches another.
                    if i.spot_instance_request_id().is_some()
                        && matches!(markers.judge(&Tagged(i.tags()), &req.machine), Ownership::Mine)
                    {
                        cancel_spot_requests(ctx, &c, &req.machine.name, std::slice::from_ref(&i), persistent).await?;
                    }
                    vec![]
                }
                Some(i) => match markers.judge(&Tagged(i.tags()), &req.machine) {
                    Ownership::Mine => vec![i],
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
                        machine_driver_api::reasons::NOT_VISIBLE_YET,
                        "the instance was launched a moment ago and is not visible in EC2 yet",
                        RETRY_SOON,
                    ));
                }
                None => vec![],
            },
            None => lookup::by_machine_tags(ctx, &c, &markers, &req.machine).await?,
        };
        let ids: Vec<String> = instances.iter().filter_map(|i| i.instance_id().map(str::to_string)).collect();
        if !req.machine.uid.is_empty() {
            self.recent.forget(&(c.credentials.clone(), req.machine.uid.clone()));
        }
        if ids.is_empty() {
            return Ok(gone());
        }
        cancel_spot_requests(ctx, &c, &req.machine.name, &instances, persistent).await?;
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

/// Cancels the Spot requests of `instances` (those that have one) in one
/// CancelSpotInstanceRequests; none, no call. A request EC2 no longer knows
/// is as good as cancelled. Credentials without the permission
/// (PERMISSION_DENIED) are tolerated when the class does not ask for
/// `persistent` requests (a one-time request closes with its instance: the
/// termination goes ahead, as before this call existed); any other failure is
/// answered, and nothing may be terminated then.
async fn cancel_spot_requests(
    ctx: &CallContext,
    c: &AwsClients,
    machine: &str,
    instances: &[Instance],
    persistent: bool,
) -> Result<()> {
    let requests: Vec<String> =
        instances.iter().filter_map(|i| i.spot_instance_request_id()).map(str::to_string).collect();
    if requests.is_empty() {
        return Ok(());
    }
    match aws_call::ec2(ctx, c, "CancelSpotInstanceRequests", || {
        c.ec2.cancel_spot_instance_requests().set_spot_instance_request_ids(Some(requests.clone())).send()
    })
    .await
    {
        Ok(out) => {
            let states: Vec<String> = out
                .cancelled_spot_instance_requests()
                .iter()
                .map(|r| {
                    format!(
                        "{}={}",
                        r.spot_instance_request_id().unwrap_or_default(),
                        r.state().map(|s| s.as_str()).unwrap_or_default()
                    )
                })
                .collect();
            tracing::info!(machine, requests = ?states, "Spot requests cancelled before termination");
            Ok(())
        }
        Err(f) if f.cloud().is_some_and(AwsFailure::is_spot_request_not_found) => {
            tracing::info!(machine, requests = ?requests, "Spot requests already gone");
            Ok(())
        }
        Err(f) => {
            let e = DriverError::from(f);
            if e.kind() == ErrorKind::PermissionDenied && !persistent {
                tracing::warn!(machine, requests = ?requests, error = %e,
                    "the credentials may not cancel Spot requests; the class asks for one-time requests, which close with their instance: terminating");
                return Ok(());
            }
            Err(e)
        }
    }
}
