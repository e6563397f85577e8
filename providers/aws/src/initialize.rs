//! InitializeMachine: apply only the missing post-creation steps.
//!
//! EC2 call cost: none while the instance was seen `pending` within the last
//! second (see [`crate::pending`]); else the status lookup (1-2 DescribeInstances), then one
//! ModifyNetworkInterfaceAttribute per interface whose source/dest check must
//! go off and one AssignIpv6Addresses per interface lacking prefixes; no
//! writes when nothing is missing.

use machine_driver_api::{CallContext, DriverError, InitializedMachine, MachineRef, Result, parse_provider_spec};

use aws_sdk_ec2::types::AttributeBooleanValue;

use crate::driver::AwsDriver;
use crate::errors::RETRY_AFTER;
use crate::lookup::{self, Lookup};
use crate::spec::AwsProviderSpec;
use crate::status::state_name;
use crate::{aws_call, provider_id, steps};

impl AwsDriver {
    pub(crate) async fn initialize(&self, ctx: &CallContext, req: MachineRef) -> Result<InitializedMachine> {
        let spec: AwsProviderSpec = parse_provider_spec(&req.class.provider_spec)?;
        crate::spec_validation::validate(&spec)?;
        let (region, instance_id) = Self::locate(&spec, &req.machine)?;
        let c = self.clients(&req.secret, &region)?;
        let known_id = instance_id.clone().or_else(|| self.recent_launch(&req).map(|l| l.instance_id));
        if let Some(age) = known_id.as_deref().and_then(|id| self.pending.fresh(id)) {
            return Err(not_running("pending", Some(age)));
        }
        let instance = match lookup::machine_instance(ctx, &c, &spec, &req.machine, instance_id.as_deref()).await? {
            Lookup::Live(i) => i,
            Lookup::Dead => return Err(DriverError::not_found(format!("instance of machine {}", req.machine.name))),
            Lookup::Missing => {
                return Err(DriverError::unavailable(
                    "NOT_VISIBLE_YET",
                    "the instance is not visible in EC2 yet",
                    RETRY_AFTER,
                ));
            }
        };
        let state = state_name(&instance);
        self.pending.observe(instance.instance_id().unwrap_or_default(), state);
        if state != "running" {
            return Err(not_running(state, None));
        }
        let work = steps::interface_work(&spec, &instance);
        for w in &work {
            if w.disable_source_dest_check {
                let req = c
                    .ec2
                    .modify_network_interface_attribute()
                    .network_interface_id(&w.network_interface_id)
                    .source_dest_check(AttributeBooleanValue::builder().value(false).build());
                aws_call::ec2(ctx, &c, "ModifyNetworkInterfaceAttribute", || req.clone().send()).await?;
            }
            if w.missing_ipv6_prefixes > 0 {
                let req = c
                    .ec2
                    .assign_ipv6_addresses()
                    .network_interface_id(&w.network_interface_id)
                    .ipv6_prefix_count(w.missing_ipv6_prefixes);
                aws_call::ec2(ctx, &c, "AssignIpv6Addresses", || req.clone().send()).await?;
            }
        }
        let applied = steps::pending_steps(&work);
        if !applied.is_empty() {
            tracing::info!(machine = %req.machine.name, steps = ?applied, "initialization steps applied");
        }
        Ok(InitializedMachine {
            provider_id: provider_id::encode(&region, instance.instance_id().unwrap_or_default()),
            node_name: instance.private_dns_name().unwrap_or_default().to_string(),
            applied_steps: applied,
        })
    }
}

/// UNAVAILABLE `INSTANCE_NOT_RUNNING`; `seen_ago` when the state is a recent sighting, not a read.
fn not_running(state: &str, seen_ago: Option<std::time::Duration>) -> DriverError {
    let message = match seen_ago {
        Some(age) => format!("the instance was {state} {} ms ago, not running yet", age.as_millis()),
        None => format!("the instance is {state}, not running yet"),
    };
    DriverError::unavailable("INSTANCE_NOT_RUNNING", message, RETRY_AFTER)
}
