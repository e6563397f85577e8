//! InitializeMachine: apply only the missing post-creation steps.
//!
//! The machine-controller calls InitializeMachine straight after CreateMachine,
//! while the instance is still `pending`. EC2 accepts interface changes then
//! (the interfaces exist from launch), so initialization does not wait for
//! `running`. EC2 call cost:
//! - right after this process launched the instance with the same credentials
//!   in the same region: no read at all; the work is computed from the
//!   interfaces RunInstances returned ([`Launched`], kept by [`launched_key`]:
//!   credentials, region and instance id, so other credentials naming the id
//!   read instead), which is used once (a Spot reclaim in the moment between
//!   the launch and this call is seen by the next call, which reads);
//! - otherwise the status lookup (1-2 DescribeInstances); a Spot instance EC2
//!   interrupted is NOT_FOUND `SPOT_RECLAIMED`, as GetMachineStatus answers;
//!   an instance EC2 does not show is the kit's absent-VM answer
//!   ([`AbsentVm::unavailable`]): UNAVAILABLE `NOT_VISIBLE_YET` for a launch
//!   of this process within the visibility grace or a young machine, NOT_FOUND
//!   otherwise (as GetMachineStatus answers);
//! - either way the kit judges the instance (the launch record carries the
//!   tags it was launched with) and a foreign one is NOT_FOUND, untouched;
//! - then one ModifyNetworkInterfaceAttribute per interface whose source/dest
//!   check must go off and one AssignIpv6Addresses per interface lacking
//!   prefixes; no writes when nothing is missing (a repeat reads and converges).
//!   Prefixes RunInstances requested (an interface without `ipv6AddressCount`,
//!   [`crate::spec::NetworkInterface::ipv6_prefixes_at_launch`]) are not
//!   assigned again right after the launch; a read sees what EC2 really has.

use aws_sdk_ec2::types::AttributeBooleanValue;
use aws_sdk_ec2::types::Tag;
use machine_driver_api::{
    AbsentVm, CallContext, CallFailure, DriverError, InitializedMachine, MachineRef, Ownership, Result,
    foreign_not_found,
};

use crate::clients::AwsClients;
use crate::driver::AwsDriver;
use crate::errors::{AwsFailure, RETRY_SOON};
use crate::lookup::{self, Lookup};
use crate::ownership::Tagged;
use crate::steps::InterfaceWork;
use crate::{aws_call, provider_id, steps};

/// What RunInstances told about a launch, for the InitializeMachine that follows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Launched {
    /// The node name (private DNS name).
    pub(crate) node_name: String,
    /// The initialization work the launched interfaces need.
    pub(crate) work: Vec<InterfaceWork>,
    /// The instance's tags (what it was launched with, or what EC2 showed):
    /// the kit judges the record as it would judge the instance.
    pub(crate) tags: Vec<Tag>,
}

/// The key of a launch record ([`AwsDriver::launched`]): the credentials and
/// region of `c`, and the instance id. An instance id alone names no account:
/// other credentials naming it must read (and be judged), not use the record.
pub(crate) fn launched_key(c: &AwsClients, instance_id: &str) -> LaunchedKey {
    (c.credentials.clone(), c.region.clone(), instance_id.to_string())
}

/// (credentials, region, instance id): see [`launched_key`].
pub(crate) type LaunchedKey = (crate::clients::CredentialsKey, String, String);

impl AwsDriver {
    pub(crate) async fn initialize(&self, ctx: &CallContext, req: MachineRef) -> Result<InitializedMachine> {
        let (spec, markers) = crate::ownership::class(&req.class.provider_spec)?;
        crate::ownership::check_machine_name(&req.machine.name)?;
        let (region, instance_id) = Self::locate(&spec, &req.machine)?;
        let c = self.clients(ctx, &req.secret, &region).await?;
        let known_id = instance_id.clone().or_else(|| self.recent_launch(&req, &c).map(|l| l.instance_id));
        // Taken, not read: a retry after a failed or lost write computes its work from a fresh read.
        // Only a record of a launch with these credentials in this region.
        let record = |id: String| self.launched.take(&launched_key(&c, &id)).map(|l| (id, l));
        if let Some((id, launched)) = known_id.and_then(record) {
            if let Ownership::Foreign(why) = markers.judge(&Tagged(&launched.tags), &req.machine) {
                return Err(foreign_not_found(format!("instance {id}"), why));
            }
            let applied = apply(ctx, &c, &launched.work).await?;
            log_applied(&req, &applied);
            return Ok(InitializedMachine {
                provider_id: provider_id::encode(&region, &id),
                node_name: launched.node_name,
                applied_steps: applied,
            });
        }
        let instance = match lookup::machine_instance(ctx, &c, &markers, &req.machine, instance_id.as_deref()).await? {
            Lookup::Live(i) => match crate::spot::reclaimed_error(&i) {
                Some(reclaimed) => return Err(reclaimed),
                None => i,
            },
            Lookup::Dead(i) => return Err(crate::spot::dead_answer(&i, &markers, &req.machine)),
            Lookup::Missing => {
                let launch = self.recent_launch(&req, &c);
                return Err(AbsentVm::new(&req.machine, format!("instance of machine {}", req.machine.name))
                    .created(launch.map(|l| provider_id::encode(&l.region, &l.instance_id)))
                    .unavailable(
                        machine_driver_api::reasons::NOT_VISIBLE_YET,
                        "the instance is not visible in EC2 yet",
                    ));
            }
        };
        let applied = apply(ctx, &c, &steps::interface_work(&spec, &instance)).await?;
        log_applied(&req, &applied);
        Ok(InitializedMachine {
            provider_id: provider_id::encode(&region, instance.instance_id().unwrap_or_default()),
            node_name: instance.private_dns_name().unwrap_or_default().to_string(),
            applied_steps: applied,
        })
    }
}

/// Makes the writes `work` asks for; the steps it applied. An interface EC2
/// does not know yet (it was launched a moment ago; EC2 is eventually
/// consistent) is UNAVAILABLE `NOT_VISIBLE_YET`: the retry reads and converges.
async fn apply(ctx: &CallContext, c: &AwsClients, work: &[InterfaceWork]) -> Result<Vec<String>> {
    let not_visible = |f: CallFailure<AwsFailure>| {
        if f.cloud().is_some_and(AwsFailure::is_interface_not_found) {
            DriverError::unavailable(
                machine_driver_api::reasons::NOT_VISIBLE_YET,
                "the instance's interfaces are not visible in EC2 yet",
                RETRY_SOON,
            )
        } else {
            f.into()
        }
    };
    for w in work {
        if w.disable_source_dest_check {
            let req = c
                .ec2
                .modify_network_interface_attribute()
                .network_interface_id(&w.network_interface_id)
                .source_dest_check(AttributeBooleanValue::builder().value(false).build());
            aws_call::ec2(ctx, c, "ModifyNetworkInterfaceAttribute", || req.clone().send())
                .await
                .map_err(not_visible)?;
        }
        if w.missing_ipv6_prefixes > 0 {
            let req = c
                .ec2
                .assign_ipv6_addresses()
                .network_interface_id(&w.network_interface_id)
                .ipv6_prefix_count(w.missing_ipv6_prefixes);
            aws_call::ec2(ctx, c, "AssignIpv6Addresses", || req.clone().send()).await.map_err(not_visible)?;
        }
    }
    Ok(steps::pending_steps(work))
}

fn log_applied(req: &MachineRef, applied: &[String]) {
    if !applied.is_empty() {
        tracing::info!(machine = %req.machine.name, steps = ?applied, "initialization steps applied");
    }
}
