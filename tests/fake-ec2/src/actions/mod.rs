//! The EC2 actions; each takes the locked world and the request and returns the response body.

mod images;
mod instances;
mod interfaces;
pub(crate) mod metadata;
pub(crate) mod run;
pub(crate) mod spot;
mod tags;
mod volumes;

use std::time::Instant;

use fake_cloud_support::{Consistency, Timing};

use crate::caller::Caller;
use crate::errors::Ec2Error;
use crate::query::Params;
use crate::store::World;
use crate::xml::Xml;

/// What an action needs besides the world and the parameters.
#[derive(Debug)]
pub(crate) struct Ctx<'a> {
    pub(crate) caller: &'a Caller,
    pub(crate) now: Instant,
    pub(crate) timing: Timing,
    pub(crate) consistency: Consistency,
}

/// Runs one EC2 action; the answer is the body inside `<{Action}Response>`.
pub(crate) fn dispatch(world: &mut World, ctx: &Ctx<'_>, action: &str, params: &Params) -> Result<Xml, Ec2Error> {
    if params.bool("DryRun")? == Some(true) {
        return Err(Ec2Error::new(
            axum::http::StatusCode::PRECONDITION_FAILED,
            "DryRunOperation",
            "Request would have succeeded, but DryRun flag is set.",
        ));
    }
    // What EC2 did on its own since the last call (relaunches of open persistent Spot requests).
    spot::settle(world, ctx.now);
    match action {
        "RunInstances" => run::run_instances(world, ctx, params),
        "DescribeInstances" => instances::describe_instances(world, ctx, params),
        "TerminateInstances" => instances::terminate_instances(world, ctx, params),
        "ModifyInstanceMetadataOptions" => metadata::modify_instance_metadata_options(world, ctx, params),
        "DescribeNetworkInterfaces" => interfaces::describe_network_interfaces(world, ctx, params),
        "ModifyNetworkInterfaceAttribute" => interfaces::modify_network_interface_attribute(world, ctx, params),
        "AssignIpv6Addresses" => interfaces::assign_ipv6_addresses(world, ctx, params),
        "DescribeImages" => images::describe_images(world, ctx, params),
        "DescribeImageAttribute" => images::describe_image_attribute(world, ctx, params),
        "ModifyImageAttribute" => images::modify_image_attribute(world, ctx, params),
        "DescribeSnapshotAttribute" => images::describe_snapshot_attribute(world, ctx, params),
        "ModifySnapshotAttribute" => images::modify_snapshot_attribute(world, ctx, params),
        "CreateTags" => tags::create_tags(world, ctx, params),
        "DeleteTags" => tags::delete_tags(world, ctx, params),
        "DescribeVolumes" => volumes::describe_volumes(world, ctx, params),
        "ModifyVolume" => volumes::modify_volume(world, ctx, params),
        "DescribeVolumesModifications" => volumes::describe_volumes_modifications(world, ctx, params),
        "DescribeSpotInstanceRequests" => spot::describe_spot_instance_requests(world, ctx, params),
        "CancelSpotInstanceRequests" => spot::cancel_spot_instance_requests(world, ctx, params),
        _ => Err(Ec2Error::invalid_action(action)),
    }
}

/// `<return>true</return>`, the answer of EC2's modify actions.
pub(crate) fn returns_true() -> Xml {
    let mut x = Xml::new();
    x.leaf("return", "true");
    x
}

/// Ids of one family from `Prefix.N`, with the family's `Malformed` error for bad ones.
pub(crate) fn ids(params: &Params, list: &str, prefix: &str, malformed_code: &str) -> Result<Vec<String>, Ec2Error> {
    let ids = params.list(list);
    if let Some(bad) = ids.iter().find(|id| !crate::ids::well_formed(prefix, id)) {
        return Err(Ec2Error::malformed(malformed_code, bad));
    }
    Ok(ids)
}
