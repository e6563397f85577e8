//! GetMachineStatus: one DescribeInstances when the providerID's instance is
//! live (a Spot instance EC2 stopped included); one more (by tags) when it is
//! not (a reclaimed, terminated Spot instance included), or when there is no
//! providerID.
//! An instance the kit does not judge this machine's is NOT_FOUND
//! ([`crate::ownership`]): MCM must never adopt it.

use aws_sdk_ec2::types::Instance;
use machine_driver_api::{AbsentVm, CallContext, MachineRef, MachineStatus, Result};

use crate::clients::AwsClients;
use crate::driver::AwsDriver;
use crate::lookup::{self, Lookup};
use crate::recent::Launch;
use crate::spec::AwsProviderSpec;
use crate::{provider_id, spot, steps};

impl AwsDriver {
    /// GetMachineStatus: the machine's live instance when the kit judges it
    /// this machine's (NOT_FOUND for a foreign one); NOT_FOUND for a dead one.
    /// A Spot instance EC2 interrupted (terminated, or stopped by its
    /// interruption behaviour) and the kit judges this machine's is NOT_FOUND
    /// `SPOT_RECLAIMED` naming it and EC2's state reason ([`crate::spot`]),
    /// told from the same reads: no extra call.
    /// When EC2 shows nothing, the kit's absent-VM answer ([`AbsentVm`]):
    /// "not visible yet" for a launch of this process within the visibility
    /// grace ([`AwsDriver::recent_launch`]) or a young machine, NOT_FOUND
    /// otherwise.
    pub(crate) async fn status(&self, ctx: &CallContext, req: MachineRef) -> Result<MachineStatus> {
        let (spec, markers) = crate::ownership::class(&req.class.provider_spec)?;
        crate::ownership::check_machine_name(&req.machine.name)?;
        let (region, instance_id) = Self::locate(&spec, &req.machine)?;
        let c = self.clients(ctx, &req.secret, &region).await?;
        match lookup::machine_instance(ctx, &c, &markers, &req.machine, instance_id.as_deref()).await? {
            Lookup::Live(i) => match spot::reclaimed_error(&i) {
                Some(reclaimed) => Err(reclaimed),
                None => Ok(machine_status(&spec, &region, &i)),
            },
            Lookup::Dead(i) => Err(spot::dead_answer(&i, &markers, &req.machine)),
            Lookup::Missing => {
                let launch = self.recent_launch(&req, &c);
                let node_name = match &launch {
                    Some(l) => l.node_name.clone(),
                    None => req.machine.node_name.clone().unwrap_or_default(),
                };
                AbsentVm::new(&req.machine, format!("instance of machine {}", req.machine.name))
                    .created(launch.map(|l| provider_id::encode(&l.region, &l.instance_id)))
                    .status(&node_name)
            }
        }
    }

    /// A launch of this machine within the visibility grace period: this
    /// process's record of a launch with `c`'s credentials for the machine's
    /// uid. Only a launch in `c`'s region, and of the providerID's instance
    /// when there is one.
    pub(crate) fn recent_launch(&self, req: &MachineRef, c: &AwsClients) -> Option<Launch> {
        if req.machine.uid.is_empty() {
            return None;
        }
        let launch =
            self.recent.get(&(c.credentials.clone(), req.machine.uid.clone())).filter(|l| l.region == c.region)?;
        // A providerID naming another instance is not this launch.
        match req.machine.provider_id.as_deref().map(provider_id::decode) {
            Some(Ok((_, id))) if id != launch.instance_id => None,
            _ => Some(launch),
        }
    }
}

/// The status of a live instance.
pub(crate) fn machine_status(spec: &AwsProviderSpec, region: &str, i: &Instance) -> MachineStatus {
    let work = steps::interface_work(spec, i);
    MachineStatus {
        provider_id: provider_id::encode(region, i.instance_id().unwrap_or_default()),
        node_name: i.private_dns_name().unwrap_or_default().to_string(),
        addresses: steps::addresses(i),
        pending_steps: steps::pending_steps(&work),
        vm_state: state_name(i).to_string(),
    }
}

/// The instance's state name (`pending`, `running`, …; empty when EC2 gave none).
pub(crate) fn state_name(i: &Instance) -> &str {
    i.state().and_then(|s| s.name()).map_or("", |n| n.as_str())
}
