//! CreateMachine: one RunInstances with a ClientToken derived from the machine uid.
//!
//! EC2 call cost: RunInstances (1), plus DescribeImages once per (region, AMI)
//! per process when a block device names the root device (`/root`), plus one
//! DescribeInstances only after IdempotentParameterMismatch, plus one
//! RunInstances per relaunch when the token's instance was terminated.
//!
//! After a Spot reclaim: a terminated Spot instance is relaunched like any
//! terminated one (its token answers it, a derived token launches the next);
//! a Spot instance EC2 stopped (interruption behaviour stop/hibernate) is
//! NOT_FOUND `SPOT_RECLAIMED` naming it, neither answered OK nor launched beside.

use aws_sdk_ec2::types::Instance;
use machine_driver_api::{
    CallContext, ClusterMarkers, CreateMachine, CreatedMachine, DriverError, ErrorKind, Result, idempotency_token,
};

use crate::clients::AwsClients;
use crate::driver::AwsDriver;
use crate::errors::AwsFailure;
use crate::initialize::Launched;
use crate::launch::{self, LaunchParams};
use crate::lookup;
use crate::recent::Launch;
use crate::spec::AwsProviderSpec;
use crate::{aws_call, provider_id, steps, tags};

/// Length of the RunInstances ClientToken (EC2 allows up to 64 ASCII characters).
const CLIENT_TOKEN_LEN: usize = 64;

/// Most launches one CreateMachine makes when each one's instance was terminated.
const MAX_LAUNCH_GENERATIONS: usize = 4;

impl AwsDriver {
    pub(crate) async fn create(&self, ctx: &CallContext, req: CreateMachine) -> Result<CreatedMachine> {
        let (spec, markers) = crate::ownership::class(&req.class.provider_spec)?;
        crate::ownership::check_machine_name(&req.machine.name)?;
        let placement = crate::spec::placement_annotation(&req.machine)?;
        let c = self.clients(ctx, &req.secret, &spec.region).await?;
        let root =
            if spec.needs_root_device_name() { Some(self.root_device_name(ctx, &c, &spec).await?) } else { None };
        let mut token = idempotency_token("create", &req.machine.uid, CLIENT_TOKEN_LEN);
        let mut generation = 0;
        let (instance, launched_now) = loop {
            let params = LaunchParams {
                machine_name: &req.machine.name,
                machine_uid: &req.machine.uid,
                client_token: &token,
                user_data: &req.user_data.0,
                root_device_name: root.as_deref(),
                placement: placement.as_ref().or(spec.placement.as_ref()),
            };
            let run = launch::run_instances(c.ec2.run_instances(), &spec, &params);
            // `launched_now`: launched with this spec's parameters (RunInstances
            // answered), not found by tags after the class changed.
            let (instance, launched_now) = match aws_call::ec2(ctx, &c, "RunInstances", || run.clone().send()).await {
                Ok(out) => (
                    out.instances()
                        .first()
                        .cloned()
                        .ok_or_else(|| DriverError::internal("ec2 RunInstances returned no instance"))?,
                    true,
                ),
                Err(f) if f.cloud().is_some_and(AwsFailure::is_idempotency_mismatch) => {
                    (self.launched_earlier(ctx, &c, &markers, &req).await?, false)
                }
                Err(f) => return Err(f.into()),
            };
            // A Spot instance EC2 stopped on interruption (behaviour stop or
            // hibernate) is live but does not run, and only EC2 may start it
            // again: never answered OK, never launched beside (a second live
            // instance once EC2 restarts it).
            if let Some(reclaimed) = crate::spot::reclaimed(&instance).filter(|_| crate::tags::is_live(&instance)) {
                let id = instance.instance_id().unwrap_or_default();
                return Err(DriverError::spot_reclaimed(
                    id,
                    format!(
                        "{reclaimed}; only EC2 starts it again, when capacity returns: delete the machine to replace it"
                    ),
                ));
            }
            if crate::tags::is_live(&instance) || instance.state().is_none() {
                break (instance, launched_now);
            }
            // The instance of this token was terminated (a bad KMS key, a spot
            // reclaim at launch): launch again, as the Go provider does, with a
            // token derived from the uid and the terminated instance, so that
            // every retry of this create walks the same tokens and at most one
            // live instance results.
            let terminated = instance.instance_id().unwrap_or_default().to_string();
            let why = instance.state_reason().and_then(|r| r.message()).unwrap_or("no reason given");
            generation += 1;
            if generation >= MAX_LAUNCH_GENERATIONS {
                return Err(DriverError::new(
                    ErrorKind::FailedPrecondition,
                    crate::errors::INSTANCE_TERMINATED,
                    format!(
                        "{MAX_LAUNCH_GENERATIONS} instances launched for this machine were terminated, \
                         the last ({terminated}): {why}"
                    ),
                ));
            }
            tracing::warn!(machine = %req.machine.name, instance_id = %terminated, reason = why, generation,
                "the instance launched for this machine was terminated; launching another");
            token = idempotency_token("create", &format!("{}/after/{terminated}", req.machine.uid), CLIENT_TOKEN_LEN);
        };
        let id = instance.instance_id().unwrap_or_default().to_string();
        let node_name = instance.private_dns_name().unwrap_or_default().to_string();
        self.launched.record(
            crate::initialize::launched_key(&c, &id),
            if launched_now {
                Launched {
                    node_name: node_name.clone(),
                    work: steps::launch_work(&spec, &instance),
                    tags: tags::as_ec2_tags(&tags::machine_tags(&spec, &req.machine.name, &req.machine.uid)),
                }
            } else {
                Launched {
                    node_name: node_name.clone(),
                    work: steps::interface_work(&spec, &instance),
                    tags: instance.tags().to_vec(),
                }
            },
        );
        let launch = Launch { instance_id: id.clone(), region: c.region.clone(), node_name: node_name.clone() };
        self.recent.record((c.credentials.clone(), req.machine.uid.clone()), launch);
        tracing::info!(machine = %req.machine.name, instance_id = %id, "instance launched");
        Ok(CreatedMachine {
            provider_id: provider_id::encode(&c.region, &id),
            node_name,
            last_known_state: String::new(),
            addresses: steps::addresses(&instance),
        })
    }

    /// After IdempotentParameterMismatch (the class changed between retries):
    /// the instance of the first attempt exists; find it by the machine's tags
    /// (only instances the kit judges this machine's: EC2 names are not
    /// unique, so a foreign instance of the same name is not adopted).
    async fn launched_earlier(
        &self,
        ctx: &CallContext,
        c: &AwsClients,
        markers: &ClusterMarkers,
        req: &CreateMachine,
    ) -> Result<Instance> {
        let mut found = lookup::by_machine_tags(ctx, c, markers, &req.machine).await?;
        match found.len() {
            1 => Ok(found.remove(0)),
            0 => Err(DriverError::unavailable(
                machine_driver_api::reasons::NOT_VISIBLE_YET,
                "an instance was launched for this machine with other parameters but is not visible yet",
                crate::errors::RETRY_SOON,
            )),
            _ => Err(DriverError::duplicate_vms(&req.machine.name, found.iter().filter_map(|i| i.instance_id()))),
        }
    }

    /// The AMI's root device name (DescribeImages, cached per region and AMI,
    /// at most [`crate::driver::MAX_ROOT_DEVICES`] entries; one lookup at a
    /// time per AMI, shared by the creates waiting on it).
    async fn root_device_name(&self, ctx: &CallContext, c: &AwsClients, spec: &AwsProviderSpec) -> Result<String> {
        let key = (c.region.clone(), spec.ami.clone());
        let name = self
            .root_devices
            .get_or_fetch(&key, || async {
                let out =
                    aws_call::ec2(ctx, c, "DescribeImages", || c.ec2.describe_images().image_ids(&spec.ami).send())
                        .await?;
                out.images()
                    .iter()
                    .find(|i| i.image_id() == Some(spec.ami.as_str()))
                    .and_then(|i| i.root_device_name())
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .ok_or_else(|| {
                        DriverError::invalid_argument(
                            "providerSpec.ami",
                            "image not found or not launchable with these credentials",
                        )
                    })
            })
            .await?;
        Ok(name.as_ref().clone())
    }
}
