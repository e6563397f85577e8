//! The ownership rule of this provider: which EC2 instances are this cluster's
//! and this machine's (ARCHITECTURE.md, Invariants; the rule itself is the
//! kit's, `machine_driver_api::ClusterMarkers`).
//!
//! Markers are tag keys, as the Go provider checks them: the class's cluster
//! tag `kubernetes.io/cluster/<name>` and role tag `kubernetes.io/role/<role>`
//! (exactly one of each; a class lacking either is INVALID_ARGUMENT
//! `providerSpec.tags` on every RPC, delete included), and the machine uid tag
//! `mcm.gardener.cloud/machine-uid`, which instances the Go provider launched
//! do not carry (they stay adoptable and listable). Every path that acts on
//! an existing instance hands the kit a [`Tagged`] view of the instance's tags
//! and acts only on the verdict: status and initialize (by providerID and by
//! name: a foreign instance is NOT_FOUND), delete (by name: foreign instances
//! are filtered out; by providerID: see below), list (`lists`), and create's
//! adopt-existing path after `IdempotentParameterMismatch` (EC2 names are not
//! unique, so a foreign instance of the same name is simply not adopted).
//!
//! **Delete by providerID** reads the instance first (the coalesced
//! DescribeInstances by id, one call) and terminates it only when the kit
//! judges it this machine's; a foreign instance is answered "already gone"
//! and left running. That costs one read more than the Go provider, which
//! terminates any instance id of the account: DeleteMachine with a providerID
//! is 2 calls (`callBudget.delete` = 2), or 1 when the read shows the
//! instance already terminated.

use aws_sdk_ec2::types::Tag;
use machine_driver_api::{ClusterMarkers, DriverError, MarkedVm, Result};

use crate::spec::{AwsProviderSpec, CLUSTER_TAG_PREFIX, ROLE_TAG_PREFIX};
use crate::spec_validation::parse_and_validate;
use crate::tags::MACHINE_UID_TAG;

/// The markers an instance carries: its tags, as DescribeInstances answers
/// them (`Instance::tags`) or as this process launched it with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tagged<'a>(pub(crate) &'a [Tag]);

impl MarkedVm for Tagged<'_> {
    fn has_marker(&self, key: &str) -> bool {
        self.0.iter().any(|t| t.key() == Some(key))
    }

    /// The uid tag's value; an empty value is no uid.
    fn machine_uid(&self) -> Option<&str> {
        self.0.iter().find(|t| t.key() == Some(MACHINE_UID_TAG)).and_then(|t| t.value()).filter(|v| !v.is_empty())
    }
}

/// The class's markers: its cluster and role tag keys.
pub(crate) fn markers(spec: &AwsProviderSpec) -> Result<ClusterMarkers> {
    ClusterMarkers::from_keys(
        spec.tags.keys().map(String::as_str),
        CLUSTER_TAG_PREFIX,
        ROLE_TAG_PREFIX,
        "providerSpec.tags",
    )
}

/// The class of a request, validated (as the Go provider does on every call),
/// and its markers, read once per request.
pub(crate) fn class(raw_spec: &[u8]) -> Result<(AwsProviderSpec, ClusterMarkers)> {
    let spec = parse_and_validate(raw_spec)?;
    let markers = markers(&spec)?;
    Ok((spec, markers))
}

/// Refuses a machine name EC2 would read as a pattern in the `tag:Name`
/// filter (`*`, `?`, a backslash): INVALID_ARGUMENT `machine.name`. The
/// filters escape them too ([`crate::tags::literal`]); Kubernetes names never
/// hold them, and the server refuses names that are not DNS-1123 subdomains.
pub(crate) fn check_machine_name(name: &str) -> Result<()> {
    if name.contains(['*', '?', '\\']) {
        return Err(DriverError::invalid_argument(
            "machine.name",
            "must not contain '*', '?' or a backslash (a Kubernetes object name is a DNS-1123 subdomain)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use machine_driver_api::{Foreign, Machine, Ownership};

    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> Vec<Tag> {
        pairs.iter().map(|(k, v)| Tag::builder().key(*k).value(*v).build()).collect()
    }

    #[test]
    fn the_kit_judges_instances_by_their_tags() {
        let m = ClusterMarkers::new("kubernetes.io/cluster/a", "kubernetes.io/role/node");
        let machine = Machine { name: "m-1".into(), uid: "u-1".into(), ..Machine::default() };
        let mine =
            tags(&[("kubernetes.io/cluster/a", "1"), ("kubernetes.io/role/node", "1"), (MACHINE_UID_TAG, "u-1")]);
        assert_eq!(m.judge(&Tagged(&mine), &machine), Ownership::Mine);
        let go_made = tags(&[("kubernetes.io/cluster/a", "1"), ("kubernetes.io/role/node", "1"), ("Name", "m-1")]);
        assert_eq!(m.judge(&Tagged(&go_made), &machine), Ownership::Mine);
        let empty_uid =
            tags(&[("kubernetes.io/cluster/a", ""), ("kubernetes.io/role/node", ""), (MACHINE_UID_TAG, "")]);
        assert_eq!(Tagged(&empty_uid).machine_uid(), None);
        let other =
            tags(&[("kubernetes.io/cluster/b", "1"), ("kubernetes.io/role/node", "1"), (MACHINE_UID_TAG, "u-1")]);
        assert_eq!(m.judge(&Tagged(&other), &machine), Ownership::Foreign(Foreign::OtherCluster));
        let earlier =
            tags(&[("kubernetes.io/cluster/a", "1"), ("kubernetes.io/role/node", "1"), (MACHINE_UID_TAG, "u-0")]);
        assert_eq!(m.judge(&Tagged(&earlier), &machine), Ownership::Foreign(Foreign::OtherMachine));
        let no_role = tags(&[("kubernetes.io/cluster/a", "1")]);
        assert!(!m.lists(&Tagged(&no_role)));
    }

    #[test]
    fn wildcard_names_are_refused() {
        for bad in ["*", "m-?", "m\\1"] {
            assert_eq!(check_machine_name(bad).unwrap_err().field(), Some("machine.name"), "{bad}");
        }
        assert!(check_machine_name("m-1").is_ok() && check_machine_name("").is_ok());
    }
}
