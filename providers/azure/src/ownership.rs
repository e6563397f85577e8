//! Which VMs are this machine's, on Azure: the kit's rule
//! ([`machine_driver_api::ClusterMarkers`]) applied to ARM's tags.
//!
//! **Markers.** The class's tags hold exactly one key `kubernetes.io-cluster-<cluster>`
//! and one `kubernetes.io-role-<role>` (`providerSpec.tags`; a class without
//! both, or with two cluster keys, is INVALID_ARGUMENT on every RPC, delete
//! included). The driver puts the class's tags on the VM plus
//! `mcm.gardener.cloud-machine-uid: <uid>` ([`crate::naming::MACHINE_UID_TAG`]).
//! ARM compares tag names case-insensitively, and so does [`Marks`]. A VM is
//! this machine's when it carries both markers and no other machine's uid
//! (the Go provider's VMs carry the markers and no uid: adopted and listed).
//! [`Marks`] is the one view of a resource's tags the kit judges, read from
//! a full VM, from the records of ARM's generic resource list (the batched
//! status reads, [`crate::lookup`], and ListMachines, [`crate::list`]) and
//! from a NIC's or disk's answer; it keeps only the marker keys and the uid.
//!
//! **Where.** Every path that acts on an existing VM judges the VM record it
//! reads, whether a lone `virtualMachines.get` or a record of the generic
//! list (which carries `tags` when filtered by type):
//!
//! - GetMachineStatus: a foreign VM is NOT_FOUND ([`machine_driver_api::foreign_not_found`]),
//!   so MCM creates the machine's own VM instead of adopting it (and that
//!   create answers ALREADY_EXISTS: VM names are unique per resource group).
//! - CreateMachine's adopt path (the create-only PUT was refused: the name is
//!   taken): a foreign VM is ALREADY_EXISTS ([`machine_driver_api::foreign_name_taken`])
//!   and untouched: no PUT, no delete of a failed one. An existing data disk
//!   that is to be made from an image is PUT again and attached only when
//!   the kit judges its tags the machine's: the driver tags every image disk
//!   it makes, so an untagged one (made by hand, or by someone else) is
//!   ALREADY_EXISTS and untouched, like a foreign tagged one.
//! - DeleteMachine, by name and by providerID alike: one fresh lone
//!   `virtualMachines.get` before the DELETE (never the group list a status
//!   batch keeps for [`crate::lookup::LIST_REUSE`]: the DELETE goes by name,
//!   so the verdict is on the VM as it is now); the Go provider deletes
//!   unread. A foreign VM is answered `already_gone` and nothing is deleted,
//!   neither the VM nor the NICs and disks named after it. The read makes a
//!   delete 2 calls (was 1).
//! - ListMachines: VMs with both markers ([`machine_driver_api::ClusterMarkers::lists`]);
//!   a NIC or disk whose VM is gone, under the VM's name, when its own tags
//!   carry both markers; never one whose same-named VM exists and is foreign.
//! - InitializeMachine is not implemented (as the Go provider).
//!
//! **Leftovers** (the NICs `<vm>-nic[-1|-2]`, the OS disk and the data disks of
//! a VM that is gone), when DeleteMachine finds no VM: each is read, and a
//! leftover that carries tags is deleted only when the kit judges them the
//! machine's. One without any tag may be the driver's own: ARM makes the NICs
//! and the OS and `Empty` data disks from the VM PUT
//! (`networkInterfaceConfigurations`, `osDisk`), which has no way to tag
//! them; the first status poll tags them ([`crate::tagging`]), but one whose
//! tagging a restart interrupted or ARM refused stays untagged. Its name is
//! then all that ties it to the machine, so it is deleted
//! only by a DeleteMachine that carries the machine's uid: a Machine object
//! MCM still has (MCM deletes only its own Machines by name). The orphan
//! collector's delete (by providerID, no uid) of a name ListMachines returned
//! deletes only the tagged leftovers judged the machine's: in a resource
//! group shared with others, an untagged NIC or disk of that name need not be
//! ours. ListMachines never returns an untagged leftover, and ARM refuses to
//! delete a NIC or disk still attached to a VM.

use std::collections::BTreeMap;

use machine_driver_api::{ClusterMarkers, Machine, MarkedVm, Ownership};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::lookup::FoundVm;
use crate::naming::MACHINE_UID_TAG;
use crate::spec::{CLUSTER_TAG_PREFIX, ROLE_TAG_PREFIX};
use crate::vm::VirtualMachine;

/// What a resource's tags say about its owner: its marker keys (tags named
/// `kubernetes.io-cluster-…` or `kubernetes.io-role-…`), the machine uid it is
/// tagged with, and whether it carries any tag at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Marks {
    markers: Vec<Box<str>>,
    uid: Option<Box<str>>,
    tagged: bool,
}

fn has_prefix(key: &str, prefix: &str) -> bool {
    key.get(..prefix.len()).is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

impl Marks {
    /// The marks of `tags` (name → value, as ARM answers them).
    pub(crate) fn from_tags<'a>(tags: impl IntoIterator<Item = (&'a str, &'a Value)>) -> Self {
        let mut marks = Self::default();
        for (key, value) in tags {
            marks.tagged = true;
            if key.eq_ignore_ascii_case(MACHINE_UID_TAG) {
                marks.uid = value.as_str().filter(|uid| !uid.is_empty()).map(Box::from);
            } else if has_prefix(key, CLUSTER_TAG_PREFIX) || has_prefix(key, ROLE_TAG_PREFIX) {
                marks.markers.push(Box::from(key));
            }
        }
        marks
    }

    /// The marks of an ARM model's `tags` (a JSON object, or absent).
    pub(crate) fn of_json(tags: Option<&Value>) -> Self {
        Self::from_tags(tags.and_then(Value::as_object).into_iter().flatten().map(|(k, v)| (k.as_str(), v)))
    }

    /// The marks of a full VM.
    pub(crate) fn of_vm(vm: &VirtualMachine) -> Self {
        Self::of_json(vm.resource.tags.as_ref())
    }

    /// True when the resource carries any tag.
    pub(crate) fn is_tagged(&self) -> bool {
        self.tagged
    }
}

impl MarkedVm for Marks {
    fn has_marker(&self, key: &str) -> bool {
        self.markers.iter().any(|k| k.eq_ignore_ascii_case(key))
    }

    fn machine_uid(&self) -> Option<&str> {
        self.uid.as_deref()
    }
}

impl<'de> Deserialize<'de> for Marks {
    /// From a `tags` object (`null` or absent: no tags).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let tags = Option::<BTreeMap<String, Value>>::deserialize(deserializer)?;
        Ok(Self::from_tags(tags.iter().flatten().map(|(k, v)| (k.as_str(), v))))
    }
}

/// The marks of a VM a status read found.
pub(crate) fn marks_found(found: &FoundVm) -> Marks {
    match found {
        FoundVm::Full(vm) => Marks::of_vm(vm),
        FoundVm::Listed(listed) => listed.marks.clone(),
    }
}

/// The kit's verdict on a VM a status read found, for `machine`.
pub(crate) fn judge_found(markers: &ClusterMarkers, found: &FoundVm, machine: &Machine) -> Ownership {
    match found {
        FoundVm::Full(vm) => markers.judge(&Marks::of_vm(vm), machine),
        FoundVm::Listed(listed) => markers.judge(&listed.marks, machine),
    }
}

/// The verdict on a NIC or disk named after `machine`'s gone VM, to be
/// deleted for it: when it carries tags, the kit's verdict on them; when it
/// carries none, [`Ownership::Mine`] only for a request that carries the
/// machine's uid (see the module docs, "Leftovers"). Not for an image disk
/// create would PUT again: the driver tags those, so create asks the kit alone.
pub(crate) fn judge_leftover(markers: &ClusterMarkers, marks: &Marks, machine: &Machine) -> Ownership {
    if !marks.is_tagged() && !machine.uid.is_empty() { Ownership::Mine } else { markers.judge(marks, machine) }
}

#[cfg(test)]
mod tests {
    use machine_driver_api::Foreign;
    use serde_json::json;

    use super::*;

    fn markers() -> ClusterMarkers {
        ClusterMarkers::new("kubernetes.io-cluster-shoot--a", "kubernetes.io-role-node")
    }

    fn machine(uid: &str) -> Machine {
        Machine { name: "m-1".into(), uid: uid.into(), ..Machine::default() }
    }

    fn marks(tags: Value) -> Marks {
        serde_json::from_value(tags).unwrap()
    }

    #[test]
    fn tags_are_judged_case_insensitively_with_the_uid() {
        let m = markers();
        let mine = marks(
            json!({"Kubernetes.io-Cluster-shoot--a": "1", "kubernetes.io-role-node": "1", MACHINE_UID_TAG: "u-1", "x": "y"}),
        );
        assert_eq!(m.judge(&mine, &machine("u-1")), Ownership::Mine);
        assert_eq!(m.judge(&mine, &machine("u-2")), Ownership::Foreign(Foreign::OtherMachine));
        assert_eq!(m.judge(&mine, &machine("")), Ownership::Mine, "the orphan collector's delete has no uid");
        let go_made = marks(json!({"kubernetes.io-cluster-shoot--a": "1", "kubernetes.io-role-node": "1"}));
        assert_eq!(m.judge(&go_made, &machine("u-2")), Ownership::Mine);
        let empty_uid =
            marks(json!({"kubernetes.io-cluster-shoot--a": "1", "kubernetes.io-role-node": "1", MACHINE_UID_TAG: ""}));
        assert_eq!(empty_uid.machine_uid(), None);
        let other = marks(json!({"kubernetes.io-cluster-shoot--b": "1", "kubernetes.io-role-node": "1"}));
        assert_eq!(m.judge(&other, &machine("u-1")), Ownership::Foreign(Foreign::OtherCluster));
        assert!(!m.lists(&marks(json!({"kubernetes.io-cluster-shoot--a": "1"}))));
        assert!(!marks(json!(null)).is_tagged());
        assert_eq!(Marks::default(), marks(json!({})));
    }

    #[test]
    fn untagged_leftovers_are_the_machines_only_for_a_request_with_its_uid_tagged_ones_are_judged() {
        let m = markers();
        assert!(judge_leftover(&m, &Marks::default(), &machine("u-1")).is_mine());
        assert_eq!(
            judge_leftover(&m, &Marks::default(), &machine("")),
            Ownership::Foreign(Foreign::OtherCluster),
            "the orphan collector's delete carries no uid: a name alone is not enough"
        );
        assert!(!judge_leftover(&m, &marks(json!({"owner": "bob"})), &machine("u-1")).is_mine());
        let ours = marks(
            json!({"kubernetes.io-cluster-shoot--a": "1", "kubernetes.io-role-node": "1", MACHINE_UID_TAG: "u-1"}),
        );
        assert!(judge_leftover(&m, &ours, &machine("u-1")).is_mine());
        assert!(judge_leftover(&m, &ours, &machine("")).is_mine());
        assert!(!judge_leftover(&m, &ours, &machine("u-9")).is_mine());
    }
}
