//! CreateMachine on ECS: one `RunInstances` with a `ClientToken` derived from
//! the machine uid, so a retry (after a lost answer, a restart, or from another
//! replica) gets the instance the first attempt made instead of a second one
//! (the Go provider sends a fresh random token on every call).
//!
//! ECS answers a reused token with changed parameters (a class edited between
//! attempts) with `IdempotentParameterMismatch`: the instance tagged with the
//! machine's uid is then looked up and adopted. When there is none (the first
//! attempt's instance is gone), one more `RunInstances` goes out with a
//! second-generation token derived from the uid and the new parameters (as
//! Alibaba advises: a new token for new parameters); a mismatch on that one
//! too is UNAVAILABLE (the tag index may lag), never a permanent refusal.
//!
//! A create that carries a providerID comes after GetMachineStatus answered
//! NOT_FOUND for it: ECS ended the instance (a reclaimed spot instance, a
//! launch it aborted). The uid's token would answer that released instance
//! again, so the instance tagged with the uid is looked up (a live one is the
//! answer) and, when there is none, `RunInstances` goes out under a token
//! derived from the uid and the ended instance: a repeat of that relaunch
//! (its answer lost) gets the same new instance, never a second.
//!
//! A spot instance ECS reclaimed stays listed, `Stopped` and locked for release
//! (`OperationLocks` `LockReason: Recycling`), until ECS releases it some
//! minutes later; it cannot be started again. While the machine's instance is
//! in that state, create answers UNAVAILABLE (`SPOT_INSTANCE_PENDING_RELEASE`,
//! retry in 30 s) naming it, never OK for it and never a second instance
//! beside it: with the providerID, from the uid read above; without one (the
//! first create's answer was lost), the `ClientToken` replay may answer the
//! reclaimed instance, so a spot class's create reads the answered instance by
//! id (1 `DescribeInstances` more, shared with status polls). Once ECS has
//! released it, the create with its providerID launches the new instance.
//!
//! Ownership ([`crate::ownership`]): create never looks instances up by name
//! (ECS does not keep names unique), so a same-named instance of another
//! cluster, or one made by hand, is not adopted and not touched: this
//! machine's own instance is launched beside it. What create does adopt, the
//! instance tagged with the machine's uid, is judged by the kit first.

use base64::Engine as _;
use machine_driver_api::{
    Address, AddressType, CallContext, CallFailure, ClusterMarkers, CreateMachine, CreatedMachine, DriverError,
    Machine, Ownership, idempotency_token,
};

use crate::clients::Api;
use crate::credentials::AccessKey;
use crate::driver::AlicloudDriver;
use crate::ecs::client::Params;
use crate::ecs::model::{Instance, RunInstancesAnswer};
use crate::lookup::describe_all;
use crate::naming::{MACHINE_UID_TAG, node_name, parse_provider_id, provider_id};
use crate::spec::AlicloudProviderSpec;

/// ECS's longest `ClientToken`.
const CLIENT_TOKEN_LEN: usize = 64;
/// When to retry a create whose reclaimed spot instance ECS has not released yet
/// (ECS releases it some minutes after the reclaim).
const PENDING_RELEASE_RETRY: std::time::Duration = std::time::Duration::from_secs(30);

impl AlicloudDriver {
    /// CreateMachine (see the module docs).
    pub(crate) async fn create(&self, ctx: &CallContext, req: CreateMachine) -> Result<CreatedMachine, DriverError> {
        let key = AccessKey::from_secret(&req.secret, "secret")?;
        let (spec, markers) = AlicloudProviderSpec::parse(&req.class.provider_spec)?;
        let api = self.pool.api(&key, &spec.region, ctx)?;
        let mut params = run_instances_params(&spec, &req);
        let ended = ended_instance(&req.machine.provider_id, &spec.region);
        if let Some(ended) = &ended {
            // The tag index may still list the ended instance: never hand it back.
            let live = all_by_uid(&api, &spec.region, &markers, &req.machine).await?;
            let (reclaimed, live): (Vec<_>, Vec<_>) = live.into_iter().partition(Instance::is_recycling);
            let mut others: Vec<_> = live.into_iter().filter(|i| &i.instance_id != ended).collect();
            match others.len() {
                0 => {}
                1 => return Ok(self.created(&spec.region, others.remove(0).instance_id)),
                _ => {
                    return Err(DriverError::duplicate_vms(&req.machine.name, others.iter().map(|i| &i.instance_id)));
                }
            }
            if let Some(instance) = reclaimed.first() {
                return Err(pending_release(&spec.region, instance));
            }
            tracing::info!(machine = %req.machine.name, ended = %ended, "the machine's instance is gone: launching another");
            params.set(
                "ClientToken",
                idempotency_token(&format!("create/after/{ended}"), &req.machine.uid, CLIENT_TOKEN_LEN),
            );
        }
        let answer = api.ecs::<RunInstancesAnswer>("RunInstances", &params).await;
        let instance_id = match answer {
            Ok(a) => {
                let id = a.first_instance_id()?;
                if spec.is_spot() && ended.is_none() {
                    // The uid's token may replay an instance ECS has since reclaimed.
                    if let Some(instance) = self.lookups.get(&api, &key, &spec.region, &id).await? {
                        self.records.record(key.fingerprint, &spec.region, &instance);
                        if instance.is_recycling() {
                            return Err(pending_release(&spec.region, &instance));
                        }
                        // ECS lists it already: gone later is gone, not "not visible yet".
                        return Ok(self.seen(&spec.region, id));
                    }
                }
                id
            }
            Err(CallFailure::Cloud(_, f)) if f.is_idempotent_mismatch() => {
                match find_by_uid(&api, &spec.region, &markers, &req.machine).await? {
                    Some(found) if found.is_recycling() => return Err(pending_release(&spec.region, &found)),
                    Some(found) => found.instance_id,
                    None => self.run_second_generation(&api, params, &req.machine.uid).await?,
                }
            }
            Err(e) => return Err(e.into()),
        };
        Ok(self.created(&spec.region, instance_id))
    }

    /// The answer for instance `instance_id`, remembered for the polls that follow.
    fn created(&self, region: &str, instance_id: String) -> CreatedMachine {
        self.recent.record(instance_id.clone(), ());
        self.seen(region, instance_id)
    }

    /// The answer for instance `instance_id`, which ECS already lists.
    fn seen(&self, region: &str, instance_id: String) -> CreatedMachine {
        self.deleted.forget(&instance_id);
        CreatedMachine {
            provider_id: provider_id(region, &instance_id),
            node_name: node_name(&instance_id),
            last_known_state: String::new(),
            addresses: Vec::<Address>::new(),
        }
    }
}

/// UNAVAILABLE for a create whose machine's spot instance ECS reclaimed and has not released yet.
fn pending_release(region: &str, instance: &Instance) -> DriverError {
    DriverError::unavailable(
        crate::errors::SPOT_INSTANCE_PENDING_RELEASE,
        format!(
            "the machine's spot instance {} was reclaimed ({}); ECS releases it within minutes, \
             and a create after that launches a new instance",
            provider_id(region, &instance.instance_id),
            crate::status::reclaim_detail(instance)
        ),
        PENDING_RELEASE_RETRY,
    )
}

/// The instance a create's providerID names, when it is in the class's region
/// (a providerID of another region or in another form names nothing to relaunch).
fn ended_instance(provider_id: &Option<String>, region: &str) -> Option<String> {
    let pid = provider_id.as_deref()?;
    parse_provider_id(pid).ok().filter(|(r, _)| r == region).map(|(_, id)| id)
}

impl AlicloudDriver {
    /// `RunInstances` again with a token derived from the uid and `params`
    /// (without the first token); the instance id.
    async fn run_second_generation(&self, api: &Api<'_>, mut params: Params, uid: &str) -> Result<String, DriverError> {
        params.0.remove("ClientToken");
        let digest = idempotency_token("params", &crate::ecs::signer::canonical_query(&params.0), 64);
        params.set("ClientToken", idempotency_token(&format!("create/{digest}"), uid, CLIENT_TOKEN_LEN));
        match api.ecs::<RunInstancesAnswer>("RunInstances", &params).await {
            Ok(a) => a.first_instance_id(),
            Err(CallFailure::Cloud(call, f)) if f.is_idempotent_mismatch() => Err(DriverError::unavailable(
                crate::errors::IDEMPOTENT_PARAMETER_MISMATCH,
                format!("{call} failed twice with IdempotentParameterMismatch and no instance carries the uid yet"),
                crate::errors::RETRY_SOON,
            )),
            Err(e) => Err(e.into()),
        }
    }
}

/// The `RunInstances` parameters, as the Go provider builds them, plus the
/// uid tag and the idempotent `ClientToken`.
pub(crate) fn run_instances_params(spec: &AlicloudProviderSpec, req: &CreateMachine) -> Params {
    let mut p = Params::default();
    p.set("RegionId", &spec.region)
        .set("ImageId", &spec.image_id)
        .set("InstanceType", &spec.instance_type)
        .set("ZoneId", &spec.zone_id)
        .set("SecurityGroupId", &spec.security_group_id)
        .set("VSwitchId", &spec.v_switch_id)
        .set("InstanceName", &req.machine.name)
        .opt("PrivateIpAddress", spec.private_ip_address.as_deref())
        .opt("InstanceChargeType", spec.instance_charge_type.as_deref())
        .opt("InternetChargeType", spec.internet_charge_type.as_deref())
        .opt("InternetMaxBandwidthIn", spec.internet_max_bandwidth_in)
        .opt("InternetMaxBandwidthOut", spec.internet_max_bandwidth_out)
        .opt("SpotStrategy", spec.spot_strategy.as_deref())
        .opt("SpotPriceLimit", spec.spot_price_limit)
        .opt("SpotDuration", spec.spot_duration)
        .opt("IoOptimized", spec.io_optimized.as_deref())
        .opt("KeyPairName", spec.key_pair_name.as_deref())
        .set("ClientToken", idempotency_token("create", &req.machine.uid, CLIENT_TOKEN_LEN))
        .set("Amount", 1);
    if let Some(disk) = &spec.system_disk {
        p.opt("SystemDisk.Category", disk.category.as_deref()).opt("SystemDisk.Size", disk.size);
    }
    for (i, d) in spec.data_disks.iter().enumerate() {
        let n = i + 1;
        let ephemeral = d.category.as_deref() == Some("ephemeral_ssd");
        p.opt(format!("DataDisk.{n}.Category"), d.category.as_deref())
            .set(format!("DataDisk.{n}.Size"), d.size)
            .set(format!("DataDisk.{n}.Encrypted"), d.encrypted)
            .set(format!("DataDisk.{n}.DiskName"), data_disk_name(&req.machine.name, &d.name))
            .opt(format!("DataDisk.{n}.Description"), d.description.as_deref());
        if !ephemeral {
            p.set(format!("DataDisk.{n}.DeleteWithInstance"), d.delete_with_instance.unwrap_or(true));
        }
    }
    for (i, (k, v)) in instance_tags(spec, &req.machine.uid).iter().enumerate() {
        let n = i + 1;
        p.set(format!("Tag.{n}.Key"), k).set(format!("Tag.{n}.Value"), v);
    }
    if !req.user_data.0.is_empty() {
        p.set("UserData", base64::engine::general_purpose::STANDARD.encode(&req.user_data.0));
    }
    p
}

/// The `DiskName` of class data disk `disk` of machine `machine` (the Go
/// provider's `<machine>-<disk name>-data-disk`); UpdateMachine finds the disks
/// it owns by it.
pub(crate) fn data_disk_name(machine: &str, disk: &str) -> String {
    format!("{machine}-{disk}-data-disk")
}

/// The tags create puts on the instance: the class's, then the machine uid tag
/// [`MACHINE_UID_TAG`] (last, after the class's in key order). UpdateMachine
/// compares the instance with this same set.
pub(crate) fn instance_tags(spec: &AlicloudProviderSpec, uid: &str) -> Vec<(String, String)> {
    let mut tags: Vec<(String, String)> = spec.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    tags.push((MACHINE_UID_TAG.to_string(), uid.to_string()));
    tags
}

/// Every live instance tagged with the machine's uid that the kit judges the
/// machine's (1 `DescribeInstances`; a copy of the uid tag on a foreign
/// instance adopts nothing).
pub(crate) async fn all_by_uid(
    api: &Api<'_>,
    region: &str,
    markers: &ClusterMarkers,
    machine: &Machine,
) -> Result<Vec<Instance>, DriverError> {
    if machine.uid.is_empty() {
        // A uid filter without a value would match every uid-tagged instance.
        return Ok(Vec::new());
    }
    let mut filter = Params::default();
    filter.set("RegionId", region).set("Tag.1.Key", MACHINE_UID_TAG).set("Tag.1.Value", &machine.uid);
    Ok(mine(describe_all(api, &filter).await?, markers, machine))
}

/// The live instance tagged with the machine's uid; DUPLICATE when several carry it.
pub(crate) async fn find_by_uid(
    api: &Api<'_>,
    region: &str,
    markers: &ClusterMarkers,
    machine: &Machine,
) -> Result<Option<Instance>, DriverError> {
    let mut found = all_by_uid(api, region, markers, machine).await?;
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => Err(DriverError::duplicate_vms(&machine.name, found.iter().map(|i| &i.instance_id))),
    }
}

/// The instances of `machine` when its providerID is not known, in 1
/// `DescribeInstances` by `InstanceName` (not narrowed by tags: the kit
/// decides): those named like the machine that the kit judges the machine's,
/// i.e. carrying the class's cluster and role markers and this uid or none
/// (made by the Go provider, which looks machines up by name). Another
/// cluster's, a hand-made one, or an earlier machine's of the same name
/// (another uid) are left out. The name is compared exactly here too: ECS
/// reads `*` in `InstanceName` as a wildcard.
pub(crate) async fn find_machine(
    api: &Api<'_>,
    region: &str,
    markers: &ClusterMarkers,
    machine: &Machine,
) -> Result<Vec<Instance>, DriverError> {
    let mut filter = Params::default();
    filter.set("RegionId", region).set("InstanceName", &machine.name);
    let named = describe_all(api, &filter).await?.into_iter().filter(|i| i.instance_name == machine.name).collect();
    Ok(mine(named, markers, machine))
}

/// The instances of `found` the kit judges `machine`'s; the others are logged and left alone.
fn mine(found: Vec<Instance>, markers: &ClusterMarkers, machine: &Machine) -> Vec<Instance> {
    found
        .into_iter()
        .filter(|i| match markers.judge(i, machine) {
            Ownership::Mine => true,
            Ownership::Foreign(why) => {
                tracing::info!(machine = %machine.name, instance = %i.instance_id, %why, "not this machine's instance: left alone");
                false
            }
        })
        .collect()
}

/// The addresses of an instance.
pub(crate) fn addresses(instance: &Instance) -> Vec<Address> {
    let mut out = Vec::new();
    if let Some(ip) = instance.private_ip() {
        out.push(Address::new(AddressType::InternalIp, ip));
    }
    out.push(Address::new(AddressType::Hostname, node_name(&instance.instance_id)));
    out
}

#[cfg(test)]
mod tests {
    use machine_driver_api::{Machine, MachineClass, SecretBytes};

    use super::*;

    #[test]
    fn run_instances_params_as_the_go_provider_builds_them() {
        let (spec, _) =
            AlicloudProviderSpec::parse(&serde_json::to_vec(&crate::spec::tests_support::example()).unwrap()).unwrap();
        let req = CreateMachine {
            machine: Machine { name: "m-1".into(), uid: "uid-1".into(), ..Default::default() },
            class: MachineClass::default(),
            secret: Default::default(),
            user_data: SecretBytes(b"#!/bin/sh".to_vec()),
        };
        let p = run_instances_params(&spec, &req).0;
        assert_eq!(p["InstanceName"], "m-1");
        assert_eq!(p["IoOptimized"], "optimized");
        assert_eq!(p["DataDisk.1.DiskName"], "m-1-containerd-data-disk");
        assert_eq!(p["DataDisk.1.DeleteWithInstance"], "true");
        assert_eq!(p["UserData"], "IyEvYmluL3No");
        assert_eq!(p["ClientToken"], idempotency_token("create", "uid-1", 64));
        assert_eq!(p["Tag.3.Key"], MACHINE_UID_TAG);
        assert_eq!(p["Tag.3.Value"], "uid-1");
        assert!(!p.contains_key("PrivateIpAddress"));
        assert!(!p.contains_key("SpotPriceLimit") && !p.contains_key("SpotDuration"));

        let mut v = crate::spec::tests_support::example();
        v["spotStrategy"] = "SpotWithPriceLimit".into();
        v["spotPriceLimit"] = 0.98.into();
        v["spotDuration"] = 0.into();
        let (spec, _) = AlicloudProviderSpec::parse(&serde_json::to_vec(&v).unwrap()).unwrap();
        let p = run_instances_params(&spec, &req).0;
        assert_eq!(
            (p["SpotStrategy"].as_str(), p["SpotPriceLimit"].as_str(), p["SpotDuration"].as_str()),
            ("SpotWithPriceLimit", "0.98", "0")
        );
    }
}
