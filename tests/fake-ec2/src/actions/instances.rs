//! DescribeInstances and TerminateInstances.

use crate::actions::{Ctx, ids};
use crate::errors::Ec2Error;
use crate::filters::{Filter, matches_all, parse_filters, tag_values};
use crate::model::{Instance, InstanceState};
use crate::pagination::paginate;
use crate::query::Params;
use crate::render;
use crate::store::World;
use crate::xml::Xml;

fn instance_attribute(instance: &Instance, name: &str, ctx: &Ctx<'_>) -> Option<Vec<String>> {
    if let Some(values) = tag_values(name, &instance.tags) {
        return Some(values);
    }
    let state = instance.state(ctx.now);
    let primary = instance.primary_interface().filter(|_| state != InstanceState::Terminated);
    let one = |v: &str| Some(vec![v.to_owned()]);
    match name {
        "instance-id" => one(&instance.id),
        "instance-state-name" => one(state.name()),
        "instance-state-code" => one(&state.code().to_string()),
        "instance-type" => one(&instance.instance_type),
        "image-id" => one(&instance.image_id),
        "client-token" => Some(instance.client_token.iter().cloned().collect()),
        "reservation-id" => one(&instance.reservation_id),
        "owner-id" => one(&instance.owner),
        "key-name" => Some(instance.key_name.iter().cloned().collect()),
        "availability-zone" => one(&instance.availability_zone),
        "subnet-id" => Some(primary.map(|e| e.subnet_id.clone()).into_iter().collect()),
        "vpc-id" => Some(primary.map(|e| e.vpc_id.clone()).into_iter().collect()),
        "private-ip-address" => Some(primary.map(|e| e.private_ip.clone()).into_iter().collect()),
        "private-dns-name" => Some(primary.map(|e| e.private_dns.clone()).into_iter().collect()),
        "instance-lifecycle" => Some(instance.market.iter().map(|m| m.lifecycle.clone()).collect()),
        "spot-instance-request-id" => Some(instance.market.iter().filter_map(|m| m.spot_request_id.clone()).collect()),
        "network-interface.network-interface-id" => Some(instance.interfaces.iter().map(|e| e.id.clone()).collect()),
        _ => None,
    }
}

/// Instances of the caller matching `filters` (all visible instances when `ids` is empty),
/// or `InvalidInstanceID.NotFound` naming every requested id that is not visible.
pub(crate) fn select<'w>(
    world: &'w World,
    ctx: &Ctx<'_>,
    ids: &[String],
    filters: &[Filter],
) -> Result<Vec<&'w Instance>, Ec2Error> {
    let visible: Vec<&Instance> =
        world.instances.iter().filter(|i| i.visible_to(&ctx.caller.account, ctx.now)).collect();
    let missing: Vec<String> = ids.iter().filter(|id| !visible.iter().any(|i| &i.id == *id)).cloned().collect();
    if !missing.is_empty() {
        return Err(Ec2Error::not_found("InvalidInstanceID.NotFound", "instance", &missing));
    }
    // An `instance-id` filter without wildcards narrows by a set first: the
    // driver's batched status read asks for 200 ids among thousands of instances.
    let wanted: Option<std::collections::HashSet<&str>> = filters
        .iter()
        .find(|f| f.name == "instance-id" && f.values.iter().all(|v| !v.contains(['*', '?'])))
        .map(|f| f.values.iter().map(String::as_str).collect());
    let mut selected = Vec::new();
    for instance in visible {
        if wanted.as_ref().is_some_and(|w| !w.contains(instance.id.as_str())) {
            continue;
        }
        if (ids.is_empty() || ids.contains(&instance.id))
            && matches_all(filters, |name| instance_attribute(instance, name, ctx))?
        {
            selected.push(instance);
        }
    }
    Ok(selected)
}

/// DescribeInstances: by `InstanceId.N` and/or `Filter.N`, paginated by `MaxResults`/`NextToken`.
pub(crate) fn describe_instances(world: &mut World, ctx: &Ctx<'_>, params: &Params) -> Result<Xml, Ec2Error> {
    let ids = ids(params, "InstanceId", "i", "InvalidInstanceID.Malformed")?;
    if !ids.is_empty() && params.get("MaxResults").is_some() {
        return Err(Ec2Error::combination("The parameter instancesSet cannot be used with the parameter maxResults"));
    }
    let filters = parse_filters(params)?;
    let selected = select(world, ctx, &ids, &filters)?;
    let page = paginate(selected, params, "DescribeInstances", 5)?;
    let mut reservations: Vec<Vec<&Instance>> = Vec::new();
    for instance in page.items {
        match reservations.last_mut() {
            Some(group) if group[0].reservation_id == instance.reservation_id => group.push(instance),
            _ => reservations.push(vec![instance]),
        }
    }
    let mut x = Xml::new();
    x.items("reservationSet", &reservations, |x, group| render::reservation(x, group.iter().copied(), ctx.now));
    x.opt_leaf("nextToken", page.next_token);
    Ok(x)
}

/// TerminateInstances: idempotent; terminated instances answer terminated → terminated.
pub(crate) fn terminate_instances(world: &mut World, ctx: &Ctx<'_>, params: &Params) -> Result<Xml, Ec2Error> {
    let ids = ids(params, "InstanceId", "i", "InvalidInstanceID.Malformed")?;
    if ids.is_empty() {
        return Err(Ec2Error::missing_parameter("InstanceId"));
    }
    select(world, ctx, &ids, &[])?;
    let mut changes = Vec::new();
    for id in &ids {
        let Some(instance) = world.instances.iter_mut().find(|i| &i.id == id) else { continue };
        let previous = instance.state(ctx.now);
        let first = instance.terminate_requested.is_none();
        instance.terminate_by_user(ctx.now, ctx.timing.stop());
        let ended = instance.terminate_requested.map_or(ctx.now, |(at, stop)| at + stop);
        changes.push((id.clone(), previous, instance.state(ctx.now)));
        if first {
            crate::actions::spot::user_terminated(world, id, ended, ctx.timing.boot());
        }
    }
    let mut x = Xml::new();
    x.items("instancesSet", changes, |x, (id, previous, current)| render::state_change(x, &id, previous, current));
    Ok(x)
}
