//! Which instances are this cluster's and this machine's: the kit's one rule
//! ([`machine_driver_api::ClusterMarkers`]) applied to a Compute instance.
//!
//! **Markers.** The class's network tags `kubernetes-io-cluster-<cluster>`
//! and `kubernetes-io-role-<role>` (required, exactly one of each, by
//! [`GcpProviderSpec::markers`](crate::spec::GcpProviderSpec::markers); a
//! class without them is INVALID_ARGUMENT on every RPC, delete included). An
//! instance carries a marker when it has it as a **network tag** (what the Go
//! provider sets and checks) or as a **label** with the value `"1"` (what this
//! sidecar sets besides the tags: label keys cannot hold `/` or `.`, the
//! tag names can be label keys as they are). The machine uid is the label
//! `mcm-machine-uid` (this sidecar's; the Go provider sets none).
//!
//! **The rule** (the kit's): an instance is this cluster's when it carries
//! *both* markers; it is this machine's when, in addition, its uid label is
//! absent or the machine's (skipped for a request without a uid). A network
//! tag alone is also what firewall rules target, so an instance with only the
//! cluster tag (no role tag) is nobody's here: not listed, not adopted, not
//! deleted.
//!
//! **Where it is applied** (every path that acts on an existing instance):
//! GetMachineStatus, by name and by providerID (a foreign instance is
//! NOT_FOUND, so MCM does not adopt it); DeleteMachine, by name and by
//! providerID (the instance is read first, with the coalesced status read of
//! [`crate::lookup`], and a foreign one is answered "already gone" without an
//! `instances.delete`); ListMachines (only instances [`lists`] accepts);
//! CreateMachine's "already exists" (names are unique per zone: a foreign
//! instance of the name is ALREADY_EXISTS `NAME_TAKEN_BY_FOREIGN_VM`, left
//! untouched). InitializeMachine is not implemented.
//!
//! **Delete by providerID** costs the same one read as delete by name, and is
//! judged the same way (the orphan collector's request carries no uid: only
//! the markers are checked then). So every DeleteMachine of an instance that
//! exists is 1 read + 1 `instances.delete` (the Go provider's was 1 delete).
//! The one exception: an instance Compute does not show yet (reads are
//! eventually consistent) that this process inserted in the last 10 minutes
//! for a request with the *same* class markers and the *same* credentials
//! (fingerprint) as the delete is deleted without a judgement: the insert
//! record ([`crate::driver::Inserter`]) holds the markers the insert put on it.
//! The record is keyed by project, zone and name only, so a delete from
//! another class or with other credentials does not use it: it is answered
//! "already gone" like any instance Compute does not show, and no
//! `instances.delete` is sent. GetMachineStatus answers "not visible yet"
//! from the record under the same condition.

use std::borrow::Cow;

use google_cloud_compute_v1::model::Instance;
use machine_driver_api::{ClusterMarkers, Machine, MarkedVm, Ownership};

use crate::naming::{MACHINE_UID_LABEL, MEMBERSHIP_LABEL_VALUE, uid_label_value};

/// What an instance carries, as the kit reads it.
struct Marks<'a>(&'a Instance);

impl MarkedVm for Marks<'_> {
    fn has_marker(&self, key: &str) -> bool {
        let tagged = self.0.tags.as_ref().is_some_and(|t| t.items.iter().any(|item| item == key));
        tagged || self.0.labels.get(key).is_some_and(|v| v == MEMBERSHIP_LABEL_VALUE)
    }

    fn machine_uid(&self) -> Option<&str> {
        self.0.labels.get(MACHINE_UID_LABEL).map(String::as_str).filter(|uid| !uid.is_empty())
    }
}

/// The kit's verdict on `instance` for `machine`. The uid label holds the uid
/// as a label value ([`uid_label_value`]: lowercase, other characters `-`),
/// so the machine's uid is compared in that form.
pub(crate) fn judge(markers: &ClusterMarkers, instance: &Instance, machine: &Machine) -> Ownership {
    let labelled = uid_label_value(&machine.uid);
    let machine = if labelled == machine.uid {
        Cow::Borrowed(machine)
    } else {
        Cow::Owned(Machine { uid: labelled, ..machine.clone() })
    };
    markers.judge(&Marks(instance), &machine)
}

/// Whether ListMachines returns `instance` (and MCM's orphan collection may
/// then delete it): both of the class's markers.
pub(crate) fn lists(markers: &ClusterMarkers, instance: &Instance) -> bool {
    markers.lists(&Marks(instance))
}

#[cfg(test)]
mod tests {
    use google_cloud_compute_v1::model::Tags;
    use machine_driver_api::Foreign;

    use super::*;

    const CLUSTER: &str = "kubernetes-io-cluster-shoot--x--mine";
    const ROLE: &str = "kubernetes-io-role-node";

    fn markers() -> ClusterMarkers {
        ClusterMarkers::new(CLUSTER, ROLE)
    }

    fn instance(tags: &[&str], labels: &[(&str, &str)]) -> Instance {
        let mut i = Instance::new();
        let mut t = Tags::new();
        t.items = tags.iter().map(|s| s.to_string()).collect();
        i.tags = Some(t);
        i.labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        i
    }

    fn machine(uid: &str) -> Machine {
        Machine { name: "m-9".into(), uid: uid.into(), ..Machine::default() }
    }

    #[test]
    fn tags_or_labels_carry_the_markers_and_both_are_needed() {
        let m = markers();
        let go_made = instance(&[CLUSTER, ROLE], &[("name", "worker")]);
        assert!(judge(&m, &go_made, &machine("u-1")).is_mine(), "no uid label: adoptable");
        assert!(lists(&m, &go_made));
        let labelled = instance(&[], &[(CLUSTER, "1"), (ROLE, "1"), (MACHINE_UID_LABEL, "u-1")]);
        assert!(judge(&m, &labelled, &machine("u-1")).is_mine());
        assert!(lists(&m, &labelled));
        let mixed = instance(&[CLUSTER], &[(ROLE, "1")]);
        assert!(lists(&m, &mixed), "one as tag, one as label");
        let firewall = instance(&[CLUSTER], &[(CLUSTER, "1")]);
        assert_eq!(judge(&m, &firewall, &machine("")), Ownership::Foreign(Foreign::NoRole));
        assert!(!lists(&m, &firewall));
        let other = instance(&["kubernetes-io-cluster-shoot--x--other", ROLE], &[]);
        assert_eq!(judge(&m, &other, &machine("")), Ownership::Foreign(Foreign::OtherCluster));
        let label_not_ours = instance(&[], &[(CLUSTER, "yes"), (ROLE, "1")]);
        assert!(!lists(&m, &label_not_ours), "a label marks only with this sidecar's value");
    }

    #[test]
    fn the_uid_label_is_compared_in_label_form() {
        let m = markers();
        let vm = instance(&[CLUSTER, ROLE], &[(MACHINE_UID_LABEL, "ab-c-1")]);
        assert!(judge(&m, &vm, &machine("AB.c/1")).is_mine());
        assert_eq!(judge(&m, &vm, &machine("other")), Ownership::Foreign(Foreign::OtherMachine));
        assert!(judge(&m, &vm, &machine("")).is_mine(), "the orphan collector sends no uid");
    }
}
