//! Tags the driver sets on what it launches, and the filters that find them.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, Instance, ResourceType, Tag, TagSpecification};

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

/// One TagSpecification per resource type created at launch.
pub(crate) fn tag_specifications(tags: &BTreeMap<String, String>) -> Vec<TagSpecification> {
    [ResourceType::Instance, ResourceType::Volume, ResourceType::NetworkInterface]
        .into_iter()
        .map(|rt| {
            let t = tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect();
            TagSpecification::builder().resource_type(rt).set_tags(Some(t)).build()
        })
        .collect()
}

fn filter(name: &str, values: &[&str]) -> Filter {
    Filter::builder().name(name).set_values(Some(values.iter().map(|v| v.to_string()).collect())).build()
}

/// Filters finding a machine's live instances: its `Name` tag within the
/// cluster (this also finds instances the Go provider launched, which carry no
/// uid tag). Results are narrowed by [`belongs_to_machine`].
pub(crate) fn machine_filters(spec: &AwsProviderSpec, machine_name: &str) -> Vec<Filter> {
    let mut f = vec![filter(&format!("tag:{NAME_TAG}"), &[machine_name]), filter("instance-state-name", LIVE_STATES)];
    if let Some(cluster) = spec.cluster_tag_key() {
        f.push(filter("tag-key", &[cluster]));
    }
    f
}

/// Filters of ListMachines: the class's cluster and role tags, live states.
pub(crate) fn list_filters(cluster_tag: &str, role_tag: &str) -> Vec<Filter> {
    vec![filter("tag-key", &[cluster_tag]), filter("tag-key", &[role_tag]), filter("instance-state-name", LIVE_STATES)]
}

/// The value of tag `key` on an instance.
pub(crate) fn tag_value<'a>(instance: &'a Instance, key: &str) -> Option<&'a str> {
    instance.tags().iter().find(|t| t.key() == Some(key)).and_then(|t| t.value())
}

/// True when an instance found by name is this machine's: it carries this
/// machine's uid, or no uid tag at all (launched by the Go provider). An
/// instance tagged with another uid belongs to an earlier machine of the same
/// name and is left to orphan collection.
pub(crate) fn belongs_to_machine(instance: &Instance, machine_uid: &str) -> bool {
    match tag_value(instance, MACHINE_UID_TAG) {
        Some(uid) => machine_uid.is_empty() || uid == machine_uid,
        None => true,
    }
}

/// True when the instance is live (not shutting-down or terminated).
pub(crate) fn is_live(instance: &Instance) -> bool {
    instance.state().and_then(|s| s.name()).is_some_and(|n| LIVE_STATES.contains(&n.as_str()))
}
