//! Tags the driver sets on what it launches, and the filters that find them.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, Instance, ResourceType, Tag, TagSpecification};
use machine_driver_api::ClusterMarkers;

use crate::spec::AwsProviderSpec;

/// Tag holding the machine name (EC2 console name; ListMachines reads it).
pub(crate) const NAME_TAG: &str = "Name";
/// Tag holding the Machine object's uid: the identity of "this machine's VM".
pub(crate) const MACHINE_UID_TAG: &str = "mcm.gardener.cloud/machine-uid";

/// Instance states that count as a live VM (shutting-down and terminated do not).
pub(crate) const LIVE_STATES: &[&str] = &["pending", "running", "stopping", "stopped"];

/// The tags of a machine's instance, volumes and interfaces: the class's tags,
/// then `Name` = machine name and the machine uid tag (these two win).
pub(crate) fn machine_tags(spec: &AwsProviderSpec, machine_name: &str, machine_uid: &str) -> BTreeMap<String, String> {
    let mut tags = spec.tags.clone();
    tags.insert(NAME_TAG.to_string(), machine_name.to_string());
    tags.insert(MACHINE_UID_TAG.to_string(), machine_uid.to_string());
    tags
}

/// `tags` as EC2 tags (what [`crate::ownership::Tagged`] views).
pub(crate) fn as_ec2_tags(tags: &BTreeMap<String, String>) -> Vec<Tag> {
    tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()
}

/// One TagSpecification per resource type created at launch.
pub(crate) fn tag_specifications(tags: &BTreeMap<String, String>) -> Vec<TagSpecification> {
    [ResourceType::Instance, ResourceType::Volume, ResourceType::NetworkInterface]
        .into_iter()
        .map(|rt| TagSpecification::builder().resource_type(rt).set_tags(Some(as_ec2_tags(tags))).build())
        .collect()
}

/// A filter value matching `value` literally: EC2 reads `*` and `?` in filter
/// values as wildcards and a backslash as their escape, so all three are
/// escaped with a backslash (`\*`, `\?`, `\\`).
pub(crate) fn literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '*' | '?' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A filter whose values match literally (see [`literal`]).
fn filter(name: &str, values: &[&str]) -> Filter {
    Filter::builder().name(name).set_values(Some(values.iter().map(|v| literal(v)).collect())).build()
}

/// Filters finding a machine's live instances: its `Name` tag and the class's
/// cluster and role tag keys, as the Go provider filters (this also finds the
/// instances the Go provider launched, which carry no uid tag). The kit
/// judges each instance found ([`crate::ownership`]).
pub(crate) fn machine_filters(markers: &ClusterMarkers, machine_name: &str) -> Vec<Filter> {
    vec![
        filter(&format!("tag:{NAME_TAG}"), &[machine_name]),
        filter("tag-key", &[markers.cluster()]),
        filter("tag-key", &[markers.role()]),
        filter("instance-state-name", LIVE_STATES),
    ]
}

/// Filters of ListMachines: the class's cluster and role tag keys, live states.
pub(crate) fn list_filters(markers: &ClusterMarkers) -> Vec<Filter> {
    vec![
        filter("tag-key", &[markers.cluster()]),
        filter("tag-key", &[markers.role()]),
        filter("instance-state-name", LIVE_STATES),
    ]
}

/// The value of tag `key` on an instance.
pub(crate) fn tag_value<'a>(instance: &'a Instance, key: &str) -> Option<&'a str> {
    instance.tags().iter().find(|t| t.key() == Some(key)).and_then(|t| t.value())
}

/// True when the instance is live (not shutting-down or terminated).
pub(crate) fn is_live(instance: &Instance) -> bool {
    instance.state().and_then(|s| s.name()).is_some_and(|n| LIVE_STATES.contains(&n.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_values_are_literal() {
        assert_eq!(literal("m-1"), "m-1");
        assert_eq!(literal("*"), "\\*");
        assert_eq!(literal("m-?"), "m-\\?");
        assert_eq!(literal("a\\b*"), "a\\\\b\\*");
        let m = ClusterMarkers::new("kubernetes.io/cluster/*", "kubernetes.io/role/node");
        let f = machine_filters(&m, "x?");
        let values = |name: &str| -> Vec<String> {
            f.iter().filter(|f| f.name() == Some(name)).flat_map(|f| f.values().to_vec()).collect()
        };
        assert_eq!(values("tag:Name"), ["x\\?"]);
        assert_eq!(values("tag-key"), ["kubernetes.io/cluster/\\*", "kubernetes.io/role/node"]);
        assert_eq!(values("instance-state-name"), LIVE_STATES);
    }
}
