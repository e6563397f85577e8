//! UpdateMachine, beside tags and volumes (`update`): the security groups
//! and the source/destination check of the interfaces launched with the
//! instance, and the instance's metadata options, compared with the class
//! and changed in place.
//!
//! Everything is read from the DescribeInstances record `update` already
//! has (its `networkInterfaceSet` carries each interface's `groupSet` and
//! `sourceDestCheck`, its `metadataOptions` the options): no extra read.
//! Only the class's interfaces are compared, each matched by network card
//! and device index as InitializeMachine matches them (`steps`); one a CNI
//! attached later is never touched. A class interface the instance lacks
//! needs a replacement (`providerSpec.networkInterfaces[i]`).
//!
//! EC2 calls (EC2 API reference: ModifyNetworkInterfaceAttribute
//! <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ModifyNetworkInterfaceAttribute.html>,
//! ModifyInstanceMetadataOptions
//! <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ModifyInstanceMetadataOptions.html>),
//! none with `validate_only` and none when nothing differs:
//! - one ModifyNetworkInterfaceAttribute `SecurityGroupId.N` per interface
//!   whose set of groups differs from `networkInterfaces[i].securityGroupIDs`
//!   (the new set replaces the old one);
//! - one ModifyNetworkInterfaceAttribute `SourceDestCheck` per non-EFA
//!   interface whose check differs from `srcAndDstChecksEnabled` (EC2 takes
//!   one attribute per call, so an interface needing both costs two calls;
//!   EFA interfaces keep their check, as at initialization). A class without
//!   the field compares nothing, unless the previous class set it: then the
//!   check goes back to EC2's default, on;
//! - one ModifyInstanceMetadataOptions with the options of
//!   `instanceMetadataOptions` that differ (the others omitted: EC2 keeps
//!   them), and always `HttpTokens` (omitted, EC2 takes its default rather
//!   than keeping the current state). An option the class does not set is
//!   not compared. EC2 shows the new values at once (state `pending`, then
//!   `applied`), so a retry after a lost answer sees them and writes nothing.

use aws_sdk_ec2::types::{
    AttributeBooleanValue, HttpTokensState, Instance, InstanceMetadataEndpointState, InstanceMetadataProtocolState,
    InstanceNetworkInterface,
};
use machine_driver_api::{CallContext, CallFailure, DriverError, ErrorKind, Result, UpdatePlan};

use crate::aws_call;
use crate::clients::AwsClients;
use crate::errors::{AwsFailure, RETRY_SOON};
use crate::spec::{AwsProviderSpec, InstanceMetadataOptions, NetworkInterface, is_efa_type};

/// The source/destination check field of the class (applied per interface).
pub(crate) const SOURCE_DEST_CHECK_FIELD: &str = "providerSpec.srcAndDstChecksEnabled";
/// The metadata options field of the class.
const METADATA_FIELD: &str = "providerSpec.instanceMetadataOptions";

/// One write to one interface (EC2 takes one attribute per call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InterfaceWrite {
    /// `SecurityGroupId.N`: the new set, in the class's order.
    Groups(Vec<String>),
    /// `SourceDestCheck.Value`.
    SourceDestCheck(bool),
}

/// A ModifyNetworkInterfaceAttribute to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InterfaceChange {
    /// The interface's index in `providerSpec.networkInterfaces`.
    pub(crate) index: usize,
    /// The ENI id.
    pub(crate) eni_id: String,
    /// What to change.
    pub(crate) write: InterfaceWrite,
}

/// The options a ModifyInstanceMetadataOptions sends (`None`: omitted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MetadataChange {
    http_tokens: Option<String>,
    http_put_response_hop_limit: Option<i32>,
    http_endpoint: Option<String>,
    http_protocol_ipv6: Option<String>,
}

fn nic_field(index: usize, name: &str) -> String {
    format!("providerSpec.networkInterfaces[{index}].{name}")
}

fn metadata_field(name: &str) -> String {
    format!("{METADATA_FIELD}.{name}")
}

/// The instance's interface launched for class interface `index` (same
/// network card and device index).
fn launched_interface<'a>(
    spec: &AwsProviderSpec,
    index: usize,
    i: &'a Instance,
) -> Option<&'a InstanceNetworkInterface> {
    let card = spec.network_interfaces[index].network_card_index.unwrap_or(0);
    let device = spec.device_index(index);
    i.network_interfaces().iter().find(|e| {
        e.attachment().is_some_and(|a| a.network_card_index().unwrap_or(0) == card && a.device_index() == Some(device))
    })
}

/// Whether class interface `index` is the instance's primary interface
/// (network card 0, device index 0): the one interface EC2 always creates with
/// the instance. Another attached interface at a class interface's device
/// index may be someone else's (the VPC CNI attaches its own at device index 1
/// and up), so its security groups and source/destination check are never
/// written: a change there is reported as needing a replacement.
fn is_primary(spec: &AwsProviderSpec, index: usize) -> bool {
    spec.network_interfaces[index].network_card_index.unwrap_or(0) == 0 && spec.device_index(index) == 0
}

fn on_off(check: bool) -> &'static str {
    if check { "on" } else { "off" }
}

/// The interface writes the class asks for, recorded in `plan` (APPLIED,
/// UNCHANGED, or NEEDS_REPLACEMENT for a class interface the instance lacks).
/// `previous` is the class the machine had, when the caller knows it.
pub(crate) fn interface_changes(
    spec: &AwsProviderSpec,
    previous: Option<&AwsProviderSpec>,
    i: &Instance,
    plan: &mut UpdatePlan,
) -> Vec<InterfaceChange> {
    let mut changes = Vec::new();
    let mut launched: Vec<(usize, &NetworkInterface, &InstanceNetworkInterface)> = Vec::new();
    for (index, n) in spec.network_interfaces.iter().enumerate() {
        match launched_interface(spec, index, i) {
            Some(eni) => launched.push((index, n, eni)),
            None => {
                let device = format!("device index {}", spec.device_index(index));
                plan.compare_replacement(format!("providerSpec.networkInterfaces[{index}]"), "", &device);
            }
        }
    }
    for (index, n, eni) in &launched {
        let eni_id = eni.network_interface_id().unwrap_or_default().to_string();
        let mut current: Vec<&str> = eni.groups().iter().filter_map(|g| g.group_id()).collect();
        current.sort_unstable();
        current.dedup();
        let mut wanted: Vec<String> = Vec::new();
        for g in &n.security_group_ids {
            if !wanted.contains(g) {
                wanted.push(g.clone());
            }
        }
        let mut wanted_sorted: Vec<&str> = wanted.iter().map(String::as_str).collect();
        wanted_sorted.sort_unstable();
        let field = nic_field(*index, "securityGroupIDs");
        if current == wanted_sorted {
            plan.unchanged(field);
        } else if !is_primary(spec, *index) {
            plan.compare_replacement(field, &current.join(", "), &wanted_sorted.join(", "));
        } else {
            plan.applied(
                field,
                format!("{} -> {} on network interface {eni_id}", current.join(", "), wanted_sorted.join(", ")),
            );
            changes.push(InterfaceChange { index: *index, eni_id, write: InterfaceWrite::Groups(wanted) });
        }
    }
    let wanted_check = spec.src_and_dst_checks_enabled.or_else(|| {
        // Set by the previous class, dropped by this one: EC2's default.
        previous.and_then(|p| p.src_and_dst_checks_enabled).map(|_| true)
    });
    if let Some(want) = wanted_check {
        let mut done = Vec::new();
        let concerned = launched.iter().filter(|(_, n, eni)| !(n.is_efa() || is_efa_type(eni.interface_type())));
        if let Some((_, _, eni)) = concerned
            .clone()
            .find(|(index, _, eni)| !is_primary(spec, *index) && eni.source_dest_check().unwrap_or(true) != want)
        {
            // Only the primary interface is written (is_primary).
            let have = on_off(eni.source_dest_check().unwrap_or(true));
            plan.compare_replacement(SOURCE_DEST_CHECK_FIELD, have, on_off(want));
            return changes;
        }
        for (index, _, eni) in concerned {
            let have = eni.source_dest_check().unwrap_or(true);
            if have != want {
                let eni_id = eni.network_interface_id().unwrap_or_default().to_string();
                done.push(format!("{} -> {} on network interface {eni_id}", on_off(have), on_off(want)));
                changes.push(InterfaceChange { index: *index, eni_id, write: InterfaceWrite::SourceDestCheck(want) });
            }
        }
        if done.is_empty() {
            plan.unchanged(SOURCE_DEST_CHECK_FIELD);
        } else {
            plan.applied(SOURCE_DEST_CHECK_FIELD, done.join("; "));
        }
    }
    changes
}

/// The ModifyInstanceMetadataOptions the class asks for (`None`: nothing
/// differs), each option it sets recorded in `plan`.
pub(crate) fn metadata_change(spec: &AwsProviderSpec, i: &Instance, plan: &mut UpdatePlan) -> Option<MetadataChange> {
    let want: &InstanceMetadataOptions = spec.instance_metadata_options.as_ref()?;
    let have = i.metadata_options();
    let current_tokens = have.and_then(|m| m.http_tokens()).map(|t| t.as_str().to_string());
    let mut change = MetadataChange::default();
    let mut differs = false;
    let mut compare = |name: &str, current: Option<String>, wanted: Option<String>| -> Option<String> {
        let wanted = wanted?;
        if current.as_deref() == Some(wanted.as_str()) {
            plan.unchanged(metadata_field(name));
            None
        } else {
            plan.applied(metadata_field(name), format!("{} -> {wanted}", current.as_deref().unwrap_or("(unset)")));
            differs = true;
            Some(wanted)
        }
    };
    change.http_tokens = compare("httpTokens", current_tokens.clone(), want.http_tokens.clone());
    change.http_put_response_hop_limit = compare(
        "httpPutResponseHopLimit",
        have.and_then(|m| m.http_put_response_hop_limit()).map(|h| h.to_string()),
        want.http_put_response_hop_limit.map(|h| h.to_string()),
    )
    .and_then(|h| h.parse().ok());
    change.http_endpoint = compare(
        "httpEndpoint",
        have.and_then(|m| m.http_endpoint()).map(|e| e.as_str().to_string()),
        want.http_endpoint.clone(),
    );
    change.http_protocol_ipv6 = compare(
        "httpProtocolIpv6",
        have.and_then(|m| m.http_protocol_ipv6()).map(|e| e.as_str().to_string()),
        want.http_protocol_ipv6.clone(),
    );
    if !differs {
        return None;
    }
    // Omitted, HttpTokens would become EC2's default: send what the instance has.
    if change.http_tokens.is_none() {
        change.http_tokens = want.http_tokens.clone().or(current_tokens);
    }
    Some(change)
}

/// Makes the interface writes, one ModifyNetworkInterfaceAttribute each.
/// EC2's refusal of the class's groups is INVALID_ARGUMENT naming
/// `providerSpec.networkInterfaces[i].securityGroupIDs`; an interface gone
/// since the read is UNAVAILABLE (the retry reads again).
pub(crate) async fn apply_interface_changes(
    ctx: &CallContext,
    c: &AwsClients,
    changes: &[InterfaceChange],
) -> Result<()> {
    for ch in changes {
        let req = c.ec2.modify_network_interface_attribute().network_interface_id(&ch.eni_id);
        let (req, field) = match &ch.write {
            InterfaceWrite::Groups(groups) => {
                (req.set_groups(Some(groups.clone())), nic_field(ch.index, "securityGroupIDs"))
            }
            InterfaceWrite::SourceDestCheck(v) => (
                req.source_dest_check(AttributeBooleanValue::builder().value(*v).build()),
                SOURCE_DEST_CHECK_FIELD.to_string(),
            ),
        };
        aws_call::ec2(ctx, c, "ModifyNetworkInterfaceAttribute", || req.clone().send())
            .await
            .map_err(|f| refused(f, &field, &format!("network interface {}", ch.eni_id)))?;
    }
    Ok(())
}

/// Sends the ModifyInstanceMetadataOptions of `change`; EC2's refusal is
/// INVALID_ARGUMENT naming `providerSpec.instanceMetadataOptions`.
pub(crate) async fn apply_metadata_change(
    ctx: &CallContext,
    c: &AwsClients,
    instance_id: &str,
    change: &MetadataChange,
) -> Result<()> {
    let req = c
        .ec2
        .modify_instance_metadata_options()
        .instance_id(instance_id)
        .set_http_tokens(change.http_tokens.as_deref().map(HttpTokensState::from))
        .set_http_put_response_hop_limit(change.http_put_response_hop_limit)
        .set_http_endpoint(change.http_endpoint.as_deref().map(InstanceMetadataEndpointState::from))
        .set_http_protocol_ipv6(change.http_protocol_ipv6.as_deref().map(InstanceMetadataProtocolState::from));
    aws_call::ec2(ctx, c, "ModifyInstanceMetadataOptions", || req.clone().send())
        .await
        .map_err(|f| refused(f, METADATA_FIELD, &format!("instance {instance_id}")))?;
    Ok(())
}

/// A failed write as the caller sees it: an INVALID_ARGUMENT names `field`.
fn refused(f: CallFailure<AwsFailure>, field: &str, what: &str) -> DriverError {
    if f.cloud().is_some_and(AwsFailure::is_interface_not_found) {
        return DriverError::unavailable(
            crate::errors::INTERFACE_NOT_VISIBLE,
            format!("{what} is no longer visible in EC2; the retry reads the instance again"),
            RETRY_SOON,
        );
    }
    let e: DriverError = f.into();
    if e.kind() == ErrorKind::InvalidArgument {
        return DriverError::invalid_argument(field, e.message().to_string());
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{GroupIdentifier, InstanceMetadataOptionsResponse, InstanceNetworkInterfaceAttachment};
    use machine_driver_api::ChangeOutcome;

    fn eni(id: &str, device: i32, groups: &[&str], check: bool, kind: &str) -> InstanceNetworkInterface {
        InstanceNetworkInterface::builder()
            .network_interface_id(id)
            .attachment(
                InstanceNetworkInterfaceAttachment::builder().device_index(device).network_card_index(0).build(),
            )
            .set_groups(Some(groups.iter().map(|g| GroupIdentifier::builder().group_id(*g).build()).collect()))
            .source_dest_check(check)
            .interface_type(kind)
            .build()
    }

    fn spec(interfaces: &[(&[&str], Option<&str>)], check: Option<bool>) -> AwsProviderSpec {
        AwsProviderSpec {
            network_interfaces: interfaces
                .iter()
                .map(|(g, kind)| NetworkInterface {
                    security_group_ids: g.iter().map(|s| s.to_string()).collect(),
                    interface_type: kind.map(str::to_string),
                    ..NetworkInterface::default()
                })
                .collect(),
            src_and_dst_checks_enabled: check,
            ..AwsProviderSpec::default()
        }
    }

    fn outcome(plan: UpdatePlan, field: &str) -> Option<ChangeOutcome> {
        let answer = plan.finish().ok()?;
        answer.changes.iter().find(|c| c.field == field).map(|c| c.outcome)
    }

    #[test]
    fn groups_compare_as_sets_and_only_launch_interfaces_count() {
        let i = Instance::builder()
            .network_interfaces(eni("eni-a", 0, &["sg-2", "sg-1"], true, "interface"))
            .network_interfaces(eni("eni-cni", 5, &["sg-9"], false, "interface"))
            .build();
        let mut plan = UpdatePlan::new("p", false);
        assert!(interface_changes(&spec(&[(&["sg-1", "sg-2", "sg-1"], None)], None), None, &i, &mut plan).is_empty());
        assert_eq!(outcome(plan, "providerSpec.networkInterfaces[0].securityGroupIDs"), Some(ChangeOutcome::Unchanged));

        let mut plan = UpdatePlan::new("p", false);
        let changes = interface_changes(&spec(&[(&["sg-3", "sg-1"], None)], None), None, &i, &mut plan);
        assert_eq!(
            changes,
            vec![InterfaceChange {
                index: 0,
                eni_id: "eni-a".into(),
                write: InterfaceWrite::Groups(vec!["sg-3".into(), "sg-1".into()])
            }]
        );
        assert!(outcome(plan, SOURCE_DEST_CHECK_FIELD).is_none(), "not set: not compared");
    }

    #[test]
    fn source_dest_check_skips_efa_and_goes_back_on_when_the_previous_class_set_it() {
        let i = Instance::builder()
            .network_interfaces(eni("eni-a", 0, &["sg-1"], false, "interface"))
            .network_interfaces(eni("eni-efa", 1, &["sg-1"], true, "efa"))
            .build();
        let two = |check| spec(&[(&["sg-1"], None), (&["sg-1"], Some("efa"))], check);
        let mut plan = UpdatePlan::new("p", false);
        assert!(interface_changes(&two(Some(false)), None, &i, &mut plan).is_empty(), "EFA keeps its check");
        assert_eq!(outcome(plan, SOURCE_DEST_CHECK_FIELD), Some(ChangeOutcome::Unchanged));

        let mut plan = UpdatePlan::new("p", false);
        let changes = interface_changes(&two(None), Some(&two(Some(false))), &i, &mut plan);
        assert_eq!(
            changes,
            vec![InterfaceChange { index: 0, eni_id: "eni-a".into(), write: InterfaceWrite::SourceDestCheck(true) }]
        );
        assert_eq!(outcome(plan, SOURCE_DEST_CHECK_FIELD), Some(ChangeOutcome::Applied));
        let mut plan = UpdatePlan::new("p", false);
        assert!(interface_changes(&two(None), None, &i, &mut plan).is_empty(), "never set: not compared");
    }

    #[test]
    fn only_the_primary_interface_is_written_a_secondary_change_needs_a_replacement() {
        // Device index 1 may be an interface someone else attached (the VPC CNI's).
        let i = Instance::builder()
            .network_interfaces(eni("eni-a", 0, &["sg-1"], true, "interface"))
            .network_interfaces(eni("eni-cni", 1, &["sg-9"], false, "interface"))
            .build();
        let mut plan = UpdatePlan::new("p", false);
        let changes = interface_changes(&spec(&[(&["sg-2"], None), (&["sg-1"], None)], None), None, &i, &mut plan);
        assert_eq!(
            changes,
            vec![InterfaceChange {
                index: 0,
                eni_id: "eni-a".into(),
                write: InterfaceWrite::Groups(vec!["sg-2".into()])
            }],
            "nothing written to eni-cni"
        );
        let answer = plan.finish().unwrap();
        let outcome_of = |f: &str| answer.changes.iter().find(|c| c.field == f).map(|c| c.outcome);
        assert_eq!(outcome_of("providerSpec.networkInterfaces[0].securityGroupIDs"), Some(ChangeOutcome::Applied));
        assert_eq!(
            outcome_of("providerSpec.networkInterfaces[1].securityGroupIDs"),
            Some(ChangeOutcome::NeedsReplacement)
        );

        // Groups as they are; the check asked on, which eni-cni has off.
        let same = spec(&[(&["sg-1"], None), (&["sg-9"], None)], Some(true));
        let mut plan = UpdatePlan::new("p", false);
        let changes = interface_changes(&same, None, &i, &mut plan);
        assert!(changes.is_empty(), "no check written while a secondary interface differs: {changes:?}");
        let err = plan.finish().unwrap_err();
        assert!(err.message().contains(SOURCE_DEST_CHECK_FIELD), "{}", err.message());
    }

    #[test]
    fn a_class_interface_the_instance_lacks_needs_a_replacement() {
        let i = Instance::builder().network_interfaces(eni("eni-a", 0, &["sg-1"], true, "interface")).build();
        let mut plan = UpdatePlan::new("p", false);
        interface_changes(&spec(&[(&["sg-1"], None), (&["sg-1"], None)], None), None, &i, &mut plan);
        let err = plan.finish().unwrap_err();
        assert!(err.message().contains("providerSpec.networkInterfaces[1]"), "{}", err.message());
    }

    #[test]
    fn metadata_sends_what_differs_and_always_the_tokens() {
        let i = Instance::builder()
            .metadata_options(
                InstanceMetadataOptionsResponse::builder()
                    .http_tokens(HttpTokensState::Required)
                    .http_put_response_hop_limit(2)
                    .http_endpoint(InstanceMetadataEndpointState::Enabled)
                    .build(),
            )
            .build();
        let with = |m: InstanceMetadataOptions| AwsProviderSpec {
            instance_metadata_options: Some(m),
            ..AwsProviderSpec::default()
        };
        let mut plan = UpdatePlan::new("p", false);
        let same = InstanceMetadataOptions {
            http_tokens: Some("required".into()),
            http_put_response_hop_limit: Some(2),
            ..InstanceMetadataOptions::default()
        };
        assert_eq!(metadata_change(&with(same), &i, &mut plan), None);
        assert_eq!(outcome(plan, "providerSpec.instanceMetadataOptions.httpTokens"), Some(ChangeOutcome::Unchanged));

        let mut plan = UpdatePlan::new("p", false);
        let hops =
            InstanceMetadataOptions { http_put_response_hop_limit: Some(3), ..InstanceMetadataOptions::default() };
        assert_eq!(
            metadata_change(&with(hops), &i, &mut plan),
            Some(MetadataChange {
                http_tokens: Some("required".into()),
                http_put_response_hop_limit: Some(3),
                ..MetadataChange::default()
            })
        );
        let mut plan = UpdatePlan::new("p", false);
        assert_eq!(metadata_change(&AwsProviderSpec::default(), &i, &mut plan), None);
        assert!(plan.finish().unwrap().changes.is_empty(), "no options in the class: nothing compared");
    }
}
