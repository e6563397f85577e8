//! Spot Instance requests: the request RunInstances makes for each Spot
//! instance, DescribeSpotInstanceRequests and CancelSpotInstanceRequests, and
//! what EC2 does to a request when its instance ends.
//!
//! As the EC2 User Guide describes them ("Spot Instance requests",
//! <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-requests.html>;
//! "State changes for a Spot request",
//! <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instances-request-status-lifecycle.html>;
//! "Terminate a Spot Instance": "If you terminate a running or stopped Spot
//! Instance that was launched by a persistent Spot request, the Spot request
//! returns to the open state so that a new Spot Instance can be launched. To
//! ensure that no new Spot Instance is launched, you must first cancel the Spot
//! request") and the API reference (CancelSpotInstanceRequests: "Canceling a
//! Spot Instance request does not terminate running Spot Instances associated
//! with the request"):
//! - a launch makes the request `active` (`fulfilled`);
//! - the user terminating its instance: a `one-time` request is `closed`, a
//!   `persistent` one `open` (`instance-terminated-by-user`), and once the
//!   instance is terminated plus the fake's `boot_ms` EC2 launches a new
//!   instance for it (same launch specification and tags, new id, addresses
//!   and volumes; the request `active` again);
//! - a Spot interruption (admin reclaim): a one-time request whose instance
//!   EC2 terminated is `closed` (`instance-terminated-no-capacity`); a
//!   persistent one whose instance EC2 stopped is `disabled`
//!   (`instance-stopped-no-capacity`);
//! - cancelling an `open`, `active` or `disabled` request makes it `cancelled`
//!   (`request-canceled-and-instance-running` while its instance lives, else
//!   `canceled`) and stops any relaunch; the instance is left as it is.
//!   Cancelling a `closed` or `cancelled` request changes nothing and answers
//!   its state (idempotent).

use std::time::{Instant, SystemTime};

use crate::actions::{Ctx, ids};
use crate::clock::iso8601;
use crate::errors::Ec2Error;
use crate::filters::{matches_all, parse_filters, tag_values};
use crate::ids::new_id;
use crate::model::{Instance, InstanceState, Interruption, SpotRequest, SpotRequestState, Volume};
use crate::query::Params;
use crate::render::tag_set;
use crate::store::World;
use crate::xml::Xml;

/// The request of a Spot instance just launched: `active`, `fulfilled`.
pub(crate) fn request_for(instance: &Instance, request_type: &str, max_price: Option<String>) -> Option<SpotRequest> {
    let market = instance.market.as_ref().filter(|m| m.is_spot())?;
    Some(SpotRequest {
        id: market.spot_request_id.clone()?,
        owner: instance.owner.clone(),
        request_type: request_type.to_owned(),
        interruption: market.interruption,
        max_price,
        created_wall: SystemTime::now(),
        state: SpotRequestState::Active,
        status_code: "fulfilled",
        status_updated: SystemTime::now(),
        instance_id: instance.id.clone(),
        relaunch: None,
        template: Box::new(instance.clone()),
    })
}

/// The user terminated `instance_id`, which ends at `ended`: its request is
/// closed (one-time) or opened again for a relaunch `boot` after that
/// (persistent).
pub(crate) fn user_terminated(world: &mut World, instance_id: &str, ended: Instant, boot: std::time::Duration) {
    let Some(request) = world.spot_requests.iter_mut().find(|r| r.instance_id == instance_id) else { return };
    match request.state {
        SpotRequestState::Active | SpotRequestState::Disabled if request.is_persistent() => {
            request.set(SpotRequestState::Open, "instance-terminated-by-user");
            request.relaunch = Some((ended + boot, boot));
        }
        SpotRequestState::Active | SpotRequestState::Disabled => {
            request.set(SpotRequestState::Closed, "instance-terminated-by-user");
        }
        SpotRequestState::Cancelled => request.status_code = "instance-terminated-by-user",
        SpotRequestState::Open | SpotRequestState::Closed => {}
    }
}

/// EC2 interrupted `instance_id` (behaviour `interruption`).
pub(crate) fn interrupted(world: &mut World, instance_id: &str, interruption: Interruption) {
    let Some(request) = world.spot_requests.iter_mut().find(|r| r.instance_id == instance_id) else { return };
    if request.state != SpotRequestState::Active {
        return;
    }
    match interruption {
        Interruption::Terminate => request.set(SpotRequestState::Closed, "instance-terminated-no-capacity"),
        Interruption::Stop | Interruption::Hibernate => {
            request.set(SpotRequestState::Disabled, "instance-stopped-no-capacity");
        }
    }
}

/// Launches the instances EC2 owes by `now`: one for each open persistent
/// request whose relaunch time has come.
pub(crate) fn settle(world: &mut World, now: Instant) {
    let due: Vec<usize> = world
        .spot_requests
        .iter()
        .enumerate()
        .filter(|(_, r)| r.state == SpotRequestState::Open && r.relaunch.is_some_and(|(at, _)| now >= at))
        .map(|(n, _)| n)
        .collect();
    for n in due {
        let Some((at, boot)) = world.spot_requests[n].relaunch.take() else { continue };
        let mut instance = (*world.spot_requests[n].template).clone();
        instance.id = new_id("i");
        instance.reservation_id = new_id("r");
        instance.client_token = None;
        instance.launch_time = SystemTime::now();
        instance.created = at;
        instance.boot = boot;
        instance.visible_at = at;
        instance.terminate_requested = None;
        instance.stopped_at = None;
        instance.end_reason = None;
        instance.metadata.modified = None;
        let mut interfaces = std::mem::take(&mut instance.interfaces);
        for eni in &mut interfaces {
            eni.id = new_id("eni");
            eni.attachment_id = new_id("eni-attach");
            // The template's address may be taken again by now; out of
            // addresses, the request stays open without a relaunch.
            let Ok(ip) = crate::actions::run::allocate_ip(world, &eni.subnet_id, None) else { return };
            eni.private_dns = crate::actions::run::private_dns(&instance.region, &ip);
            eni.private_ip = ip;
            eni.mac = crate::actions::run::mac();
        }
        instance.interfaces = interfaces;
        instance.volumes =
            instance.volumes.iter().map(|v| Volume { id: new_id("vol"), modification: None, ..v.clone() }).collect();
        let request = &mut world.spot_requests[n];
        request.instance_id = instance.id.clone();
        request.set(SpotRequestState::Active, "fulfilled");
        world.instances.push(instance);
    }
}

/// The caller's requests named by `SpotInstanceRequestId.N` (all when none
/// is named); `InvalidSpotInstanceRequestID.NotFound` naming every unknown id.
fn selected<'w>(world: &'w World, ctx: &Ctx<'_>, wanted: &[String]) -> Result<Vec<&'w SpotRequest>, Ec2Error> {
    let own: Vec<&SpotRequest> = world.spot_requests.iter().filter(|r| r.owner == ctx.caller.account).collect();
    let missing: Vec<String> = wanted.iter().filter(|id| !own.iter().any(|r| &r.id == *id)).cloned().collect();
    if !missing.is_empty() {
        return Err(Ec2Error::not_found("InvalidSpotInstanceRequestID.NotFound", "Spot instance request", &missing));
    }
    Ok(own.into_iter().filter(|r| wanted.is_empty() || wanted.contains(&r.id)).collect())
}

/// A request's value for a DescribeSpotInstanceRequests filter (`None`: unknown filter).
fn attribute(request: &SpotRequest, name: &str) -> Option<Vec<String>> {
    // The fake keeps no tags on requests (none of `spot-instances-request`'s).
    if let Some(values) = tag_values(name, &Default::default()) {
        return Some(values);
    }
    let one = |v: &str| Some(vec![v.to_owned()]);
    match name {
        "spot-instance-request-id" => one(&request.id),
        "instance-id" => one(&request.instance_id),
        "state" => one(request.state.name()),
        "status-code" => one(request.status_code),
        "type" => one(&request.request_type),
        "launch.image-id" => one(&request.template.image_id),
        "launch.instance-type" => one(&request.template.instance_type),
        _ => None,
    }
}

/// DescribeSpotInstanceRequests by `SpotInstanceRequestId.N` and filters
/// (`spot-instance-request-id`, `instance-id`, `state`, `status-code`,
/// `type`, `launch.image-id`, `launch.instance-type`, tags); no pagination.
pub(crate) fn describe_spot_instance_requests(
    world: &mut World,
    ctx: &Ctx<'_>,
    params: &Params,
) -> Result<Xml, Ec2Error> {
    let wanted = ids(params, "SpotInstanceRequestId", "sir", "InvalidSpotInstanceRequestID.Malformed")?;
    let filters = parse_filters(params)?;
    let mut found = Vec::new();
    for request in selected(world, ctx, &wanted)? {
        if matches_all(&filters, |name| attribute(request, name))? {
            found.push(request);
        }
    }
    let mut x = Xml::new();
    x.items("spotInstanceRequestSet", found, |x, r| {
        let instance = world.instances.iter().find(|i| i.id == r.instance_id);
        x.leaf("spotInstanceRequestId", &r.id)
            .leaf("spotPrice", r.max_price.as_deref().unwrap_or("0.096000"))
            .leaf("type", &r.request_type)
            .leaf("state", r.state.name())
            .elem("status", |x| {
                x.leaf("code", r.status_code).leaf("updateTime", iso8601(r.status_updated)).leaf(
                    "message",
                    match r.status_code {
                        "fulfilled" => "Your spot request is fulfilled.",
                        "canceled" => "Your spot request is canceled before it was fulfilled.",
                        "request-canceled-and-instance-running" => {
                            "Your spot request is canceled, but your instance is still running."
                        }
                        "instance-terminated-by-user" => "Spot Instance terminated due to user-initiated termination.",
                        _ => "Your spot instance was interrupted.",
                    },
                );
            })
            .elem("launchSpecification", |x| {
                x.leaf("imageId", &r.template.image_id).leaf("instanceType", &r.template.instance_type);
            })
            .leaf("instanceId", &r.instance_id)
            .leaf("createTime", iso8601(r.created_wall))
            .leaf("productDescription", "Linux/UNIX")
            .opt_leaf("launchedAvailabilityZone", instance.map(|i| i.availability_zone.as_str()))
            .leaf("instanceInterruptionBehavior", r.interruption.name());
        tag_set(x, &Default::default());
    });
    Ok(x)
}

/// CancelSpotInstanceRequests of `SpotInstanceRequestId.N` (at least one):
/// every named request must be the caller's (`InvalidSpotInstanceRequestID.NotFound`,
/// nothing cancelled, otherwise); the answer lists each with its state.
pub(crate) fn cancel_spot_instance_requests(
    world: &mut World,
    ctx: &Ctx<'_>,
    params: &Params,
) -> Result<Xml, Ec2Error> {
    let wanted = ids(params, "SpotInstanceRequestId", "sir", "InvalidSpotInstanceRequestID.Malformed")?;
    if wanted.is_empty() {
        return Err(Ec2Error::missing_parameter("SpotInstanceRequestId"));
    }
    selected(world, ctx, &wanted)?;
    let live: Vec<String> = world
        .instances
        .iter()
        .filter(|i| i.terminate_requested.is_none() && i.state(ctx.now) != InstanceState::Terminated)
        .map(|i| i.id.clone())
        .collect();
    let mut answers = Vec::new();
    for request in world.spot_requests.iter_mut().filter(|r| r.owner == ctx.caller.account && wanted.contains(&r.id)) {
        if matches!(request.state, SpotRequestState::Open | SpotRequestState::Active | SpotRequestState::Disabled) {
            let code =
                if live.contains(&request.instance_id) { "request-canceled-and-instance-running" } else { "canceled" };
            request.set(SpotRequestState::Cancelled, code);
            request.relaunch = None;
        }
        answers.push((request.id.clone(), request.state.name()));
    }
    let mut x = Xml::new();
    x.items("spotInstanceRequestSet", answers, |x, (id, state)| {
        x.leaf("spotInstanceRequestId", id).leaf("state", state);
    });
    Ok(x)
}
