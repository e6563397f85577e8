//! Instance metadata options: RunInstances' `MetadataOptions` and
//! ModifyInstanceMetadataOptions (EC2 API reference,
//! <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ModifyInstanceMetadataOptions.html>).
//!
//! ModifyInstanceMetadataOptions changes the options of a running (or
//! stopped) instance: `HttpPutResponseHopLimit`, `HttpEndpoint`,
//! `HttpProtocolIpv6` and `InstanceMetadataTags` keep the existing state when
//! omitted; an omitted `HttpTokens` is its default, `optional` (the reference:
//! "If the parameter is not specified in the request, the default state is
//! optional"; the AMI's `ImdsSupport`, which would make it `required`, is not
//! modelled). The answer and DescribeInstances show the new values with state
//! `pending`, then `applied` (after the fake's `boot_ms`).

use crate::actions::Ctx;
use crate::errors::Ec2Error;
use crate::model::{InstanceState, MetadataOptions};
use crate::query::Params;
use crate::store::World;
use crate::xml::Xml;

const ENABLED_DISABLED: &[&str] = &["enabled", "disabled"];

/// One enumerated parameter, or `InvalidParameterValue`.
fn one_of(params: &Params, key: &str, allowed: &[&str]) -> Result<Option<String>, Ec2Error> {
    match params.get(key) {
        None => Ok(None),
        Some(v) if allowed.contains(&v) => Ok(Some(v.to_owned())),
        Some(v) => Err(Ec2Error::invalid_value(key, v)),
    }
}

fn hop_limit(params: &Params, key: &str) -> Result<Option<i64>, Ec2Error> {
    match params.int(key)? {
        Some(h) if !(1..=64).contains(&h) => Err(Ec2Error::client(
            "InvalidParameterValue",
            format!("The HttpPutResponseHopLimit value {h} is not valid. Specify a value between 1 and 64."),
        )),
        other => Ok(other),
    }
}

/// The options RunInstances' `MetadataOptions.*` ask for, EC2's defaults for the rest.
pub(crate) fn at_launch(params: &Params) -> Result<MetadataOptions, Ec2Error> {
    let p = params.nested("MetadataOptions");
    let d = MetadataOptions::default();
    Ok(MetadataOptions {
        http_tokens: one_of(&p, "HttpTokens", &["optional", "required"])?.unwrap_or(d.http_tokens),
        http_put_response_hop_limit: hop_limit(&p, "HttpPutResponseHopLimit")?.unwrap_or(d.http_put_response_hop_limit),
        http_endpoint: one_of(&p, "HttpEndpoint", ENABLED_DISABLED)?.unwrap_or(d.http_endpoint),
        http_protocol_ipv6: one_of(&p, "HttpProtocolIpv6", ENABLED_DISABLED)?.unwrap_or(d.http_protocol_ipv6),
        instance_metadata_tags: one_of(&p, "InstanceMetadataTags", ENABLED_DISABLED)?
            .unwrap_or(d.instance_metadata_tags),
        modified: None,
    })
}

/// The `InstanceMetadataOptionsResponse` fields (inside `metadataOptions` or
/// `instanceMetadataOptions`).
pub(crate) fn render(x: &mut Xml, m: &MetadataOptions, now: std::time::Instant) {
    x.leaf("state", m.state(now))
        .leaf("httpTokens", &m.http_tokens)
        .leaf("httpPutResponseHopLimit", m.http_put_response_hop_limit)
        .leaf("httpEndpoint", &m.http_endpoint)
        .leaf("httpProtocolIpv6", &m.http_protocol_ipv6)
        .leaf("instanceMetadataTags", &m.instance_metadata_tags);
}

/// ModifyInstanceMetadataOptions: see the module documentation. Unknown id →
/// `InvalidInstanceID.NotFound`, bad → `.Malformed`; an instance shutting
/// down or terminated → `IncorrectInstanceState`.
pub(crate) fn modify_instance_metadata_options(
    world: &mut World,
    ctx: &Ctx<'_>,
    params: &Params,
) -> Result<Xml, Ec2Error> {
    let id = params.required("InstanceId")?.to_owned();
    if !crate::ids::well_formed("i", &id) {
        return Err(Ec2Error::malformed("InvalidInstanceID.Malformed", &id));
    }
    let tokens = one_of(params, "HttpTokens", &["optional", "required"])?;
    let hops = hop_limit(params, "HttpPutResponseHopLimit")?;
    let endpoint = one_of(params, "HttpEndpoint", ENABLED_DISABLED)?;
    let ipv6 = one_of(params, "HttpProtocolIpv6", ENABLED_DISABLED)?;
    let tags = one_of(params, "InstanceMetadataTags", ENABLED_DISABLED)?;
    let instance = world
        .instances
        .iter_mut()
        .find(|i| i.id == id && i.visible_to(&ctx.caller.account, ctx.now))
        .ok_or_else(|| Ec2Error::not_found("InvalidInstanceID.NotFound", "instance", std::slice::from_ref(&id)))?;
    let state = instance.state(ctx.now);
    if matches!(state, InstanceState::ShuttingDown | InstanceState::Terminated) {
        return Err(Ec2Error::client(
            "IncorrectInstanceState",
            format!("The instance '{id}' is not in a state from which it can be modified ({}).", state.name()),
        ));
    }
    let m = &mut instance.metadata;
    m.http_tokens = tokens.unwrap_or_else(|| MetadataOptions::default().http_tokens);
    if let Some(h) = hops {
        m.http_put_response_hop_limit = h;
    }
    if let Some(e) = endpoint {
        m.http_endpoint = e;
    }
    if let Some(v) = ipv6 {
        m.http_protocol_ipv6 = v;
    }
    if let Some(t) = tags {
        m.instance_metadata_tags = t;
    }
    m.modified = Some((ctx.now, ctx.timing.boot()));
    let mut x = Xml::new();
    x.leaf("instanceId", &id);
    x.elem("instanceMetadataOptions", |x| render(x, m, ctx.now));
    Ok(x)
}
