//! DescribeNetworkInterfaces, ModifyNetworkInterfaceAttribute, AssignIpv6Addresses.

use crate::actions::run::{new_ipv6_addresses, new_ipv6_prefixes};
use crate::actions::{Ctx, ids, returns_true};
use crate::errors::Ec2Error;
use crate::filters::{matches_all, parse_filters, tag_values};
use crate::model::{Instance, InstanceState, NetworkInterface};
use crate::pagination::paginate;
use crate::query::Params;
use crate::render;
use crate::store::World;
use crate::xml::Xml;

/// Whether the interface exists at `now`, and whether it is attached.
fn presence(instance: &Instance, eni: &NetworkInterface, ctx: &Ctx<'_>) -> Option<bool> {
    let attached = instance.state(ctx.now) != InstanceState::Terminated;
    (attached || !eni.delete_on_termination).then_some(attached)
}

/// Interfaces visible to the caller, in creation order, with their attachment flag.
fn visible<'w>(world: &'w World, ctx: &Ctx<'_>) -> Vec<(&'w Instance, &'w NetworkInterface, bool)> {
    world
        .instances
        .iter()
        .filter(|i| i.visible_to(&ctx.caller.account, ctx.now))
        .flat_map(|i| i.interfaces.iter().filter_map(move |eni| presence(i, eni, ctx).map(|a| (i, eni, a))))
        .collect()
}

fn attribute(instance: &Instance, eni: &NetworkInterface, attached: bool, name: &str) -> Option<Vec<String>> {
    if let Some(values) = tag_values(name, &eni.tags) {
        return Some(values);
    }
    let one = |v: &str| Some(vec![v.to_owned()]);
    match name {
        "network-interface-id" => one(&eni.id),
        "attachment.instance-id" => Some(attached.then(|| instance.id.clone()).into_iter().collect()),
        "attachment.device-index" => Some(attached.then(|| eni.device_index.to_string()).into_iter().collect()),
        "attachment.attachment-id" => Some(attached.then(|| eni.attachment_id.clone()).into_iter().collect()),
        "subnet-id" => one(&eni.subnet_id),
        "vpc-id" => one(&eni.vpc_id),
        "availability-zone" => one(&eni.availability_zone),
        "status" => one(if attached { "in-use" } else { "available" }),
        "interface-type" => one(&eni.interface_type),
        "private-ip-address" | "addresses.private-ip-address" => one(&eni.private_ip),
        "private-dns-name" => one(&eni.private_dns),
        "source-dest-check" => one(&eni.source_dest_check.to_string()),
        "owner-id" => one(&instance.owner),
        "ipv6-addresses.ipv6-address" => Some(eni.ipv6_addresses.clone()),
        _ => None,
    }
}

/// DescribeNetworkInterfaces: by `NetworkInterfaceId.N` and/or `Filter.N`, paginated.
pub(crate) fn describe_network_interfaces(world: &mut World, ctx: &Ctx<'_>, params: &Params) -> Result<Xml, Ec2Error> {
    let ids = ids(params, "NetworkInterfaceId", "eni", "InvalidNetworkInterfaceID.Malformed")?;
    if !ids.is_empty() && params.get("MaxResults").is_some() {
        return Err(Ec2Error::combination(
            "The parameter NetworkInterfaceIds cannot be used with the parameter MaxResults",
        ));
    }
    let filters = parse_filters(params)?;
    let candidates = visible(world, ctx);
    let missing: Vec<String> =
        ids.iter().filter(|id| !candidates.iter().any(|(_, e, _)| &e.id == *id)).cloned().collect();
    if !missing.is_empty() {
        return Err(Ec2Error::not_found("InvalidNetworkInterfaceID.NotFound", "networkInterface", &missing));
    }
    let mut selected = Vec::new();
    for (instance, eni, attached) in candidates {
        if (ids.is_empty() || ids.contains(&eni.id))
            && matches_all(&filters, |n| attribute(instance, eni, attached, n))?
        {
            selected.push((instance, eni, attached));
        }
    }
    let page = paginate(selected, params, "DescribeNetworkInterfaces", 5)?;
    let mut x = Xml::new();
    x.items("networkInterfaceSet", page.items, |x, (instance, eni, attached)| {
        render::network_interface(x, eni, instance, attached);
    });
    x.opt_leaf("nextToken", page.next_token);
    Ok(x)
}

/// The caller's interface `id` (mutable), or the real NotFound/Malformed error.
fn interface_mut<'w>(world: &'w mut World, ctx: &Ctx<'_>, id: &str) -> Result<&'w mut NetworkInterface, Ec2Error> {
    if !crate::ids::well_formed("eni", id) {
        return Err(Ec2Error::malformed("InvalidNetworkInterfaceID.Malformed", id));
    }
    let not_found = || Ec2Error::not_found("InvalidNetworkInterfaceID.NotFound", "networkInterface", &[id.to_owned()]);
    let instance = world
        .instances
        .iter_mut()
        .filter(|i| i.visible_to(&ctx.caller.account, ctx.now))
        .find(|i| i.interfaces.iter().any(|e| e.id == id))
        .ok_or_else(not_found)?;
    let terminated = instance.state(ctx.now) == InstanceState::Terminated;
    let eni = instance.interfaces.iter_mut().find(|e| e.id == id).ok_or_else(not_found)?;
    if terminated && eni.delete_on_termination {
        return Err(not_found());
    }
    Ok(eni)
}

/// Most security groups one interface takes (EC2's default quota, "Security
/// groups per network interface": 5).
const GROUPS_PER_INTERFACE: usize = 5;

/// ModifyNetworkInterfaceAttribute (EC2 API reference,
/// <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ModifyNetworkInterfaceAttribute.html>):
/// one attribute per call ("You can specify only one attribute at a time"),
/// `SourceDestCheck.Value`, `Description.Value` or `SecurityGroupId.N` (the
/// new set replaces the current one; a group on the primary interface is the
/// instance's `groupSet` too). Two or more → `InvalidParameterCombination`
/// ("Fields for multiple attribute types specified: …", as EC2 words it for
/// its modify-attribute actions); none → `MissingParameter`; a group id that
/// is not well formed → `InvalidGroup.NotFound` (the fake has no group store:
/// well-formed ids exist); more than 5 → `SecurityGroupsPerInterfaceLimitExceeded`.
pub(crate) fn modify_network_interface_attribute(
    world: &mut World,
    ctx: &Ctx<'_>,
    params: &Params,
) -> Result<Xml, Ec2Error> {
    let id = params.required("NetworkInterfaceId")?.to_owned();
    let source_dest_check = params.bool("SourceDestCheck.Value")?;
    let description = params.get("Description.Value").map(str::to_owned);
    let groups = params.list("SecurityGroupId");
    let attachment = !params.nested("Attachment").is_empty();
    let named: Vec<&str> = [
        ("sourceDestCheck", source_dest_check.is_some()),
        ("description", description.is_some()),
        ("groupSet", !groups.is_empty()),
        ("attachment", attachment),
    ]
    .into_iter()
    .filter(|(_, present)| *present)
    .map(|(name, _)| name)
    .collect();
    match named.len() {
        0 => return Err(Ec2Error::missing_parameter("SourceDestCheck")),
        1 => {}
        _ => {
            return Err(Ec2Error::combination(format!(
                "Fields for multiple attribute types specified: {}",
                named.join(", ")
            )));
        }
    }
    if attachment {
        return Err(Ec2Error::client(
            "InvalidParameterValue",
            "Changing an interface's attachment is not supported by this fake",
        ));
    }
    if let Some(bad) = groups.iter().find(|g| !crate::ids::well_formed("sg", g)) {
        return Err(Ec2Error::client("InvalidGroup.NotFound", format!("The security group '{bad}' does not exist")));
    }
    let mut distinct = groups.clone();
    distinct.sort();
    distinct.dedup();
    if distinct.len() > GROUPS_PER_INTERFACE {
        return Err(Ec2Error::client(
            "SecurityGroupsPerInterfaceLimitExceeded",
            "You have exceeded the maximum number of security groups allowed per network interface.",
        ));
    }
    let eni = interface_mut(world, ctx, &id)?;
    if let Some(check) = source_dest_check {
        eni.source_dest_check = check;
    }
    if let Some(description) = description {
        eni.description = description;
    }
    if !groups.is_empty() {
        let mut set = Vec::new();
        for g in groups {
            if !set.contains(&g) {
                set.push(g);
            }
        }
        eni.security_groups = set.clone();
        let primary = eni.device_index == 0 && eni.network_card_index == 0;
        if primary && let Some(instance) = world.instances.iter_mut().find(|i| i.interfaces.iter().any(|e| e.id == id))
        {
            instance.security_groups = set;
        }
    }
    Ok(returns_true())
}

/// AssignIpv6Addresses: `Ipv6AddressCount` / `Ipv6Addresses.N` and `Ipv6PrefixCount` / `Ipv6Prefix.N`.
pub(crate) fn assign_ipv6_addresses(world: &mut World, ctx: &Ctx<'_>, params: &Params) -> Result<Xml, Ec2Error> {
    let id = params.required("NetworkInterfaceId")?.to_owned();
    let address_count = params.int("Ipv6AddressCount")?.unwrap_or(0);
    let addresses = params.list("Ipv6Addresses");
    let prefix_count = params.int("Ipv6PrefixCount")?.unwrap_or(0);
    let prefixes = params.list("Ipv6Prefix");
    if address_count > 0 && !addresses.is_empty() {
        return Err(Ec2Error::combination("Ipv6AddressCount and Ipv6Addresses cannot be used together"));
    }
    if prefix_count > 0 && !prefixes.is_empty() {
        return Err(Ec2Error::combination("Ipv6PrefixCount and Ipv6Prefixes cannot be used together"));
    }
    if address_count < 0 || prefix_count < 0 {
        return Err(Ec2Error::invalid_value("Ipv6AddressCount", "negative"));
    }
    if address_count == 0 && addresses.is_empty() && prefix_count == 0 && prefixes.is_empty() {
        return Err(Ec2Error::missing_parameter("Ipv6AddressCount"));
    }
    let mut counter = world.ipv6_prefixes_handed_out;
    let eni = interface_mut(world, ctx, &id)?;
    if let Some(taken) = addresses.iter().find(|a| eni.ipv6_addresses.contains(a)) {
        return Err(Ec2Error::client("InvalidParameterValue", format!("Address {taken} is already assigned")));
    }
    if let Some(outside) = addresses.iter().chain(&prefixes).find(|a| !a.starts_with(&eni.ipv6_base)) {
        return Err(Ec2Error::client(
            "InvalidParameterValue",
            format!("{outside} is not within the subnet's IPv6 range"),
        ));
    }
    let mut assigned = addresses;
    assigned.extend(new_ipv6_addresses(eni, address_count));
    let mut assigned_prefixes = prefixes;
    let base = eni.ipv6_base.clone();
    assigned_prefixes.extend(new_ipv6_prefixes(&mut counter, &base, prefix_count));
    eni.ipv6_addresses.extend(assigned.iter().cloned());
    eni.ipv6_prefixes.extend(assigned_prefixes.iter().cloned());
    world.ipv6_prefixes_handed_out = counter;
    let mut x = Xml::new();
    x.leaf("networkInterfaceId", &id);
    x.elem("assignedIpv6Addresses", |x| {
        for address in &assigned {
            x.leaf("item", address);
        }
    });
    x.elem("assignedIpv6PrefixSet", |x| {
        for prefix in &assigned_prefixes {
            x.leaf("item", prefix);
        }
    });
    Ok(x)
}
