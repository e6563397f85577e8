//! The one rule for "this VM is this machine's" (ARCHITECTURE.md, Invariants).
//!
//! MCM adopts whatever GetMachineStatus answers OK for and deletes whatever
//! ListMachines returns unclaimed, so a driver that answers for, lists or
//! deletes another cluster's VM destroys someone else's machine. Providers do
//! not decide ownership themselves: they read the class's expected markers
//! once ([`ClusterMarkers::from_keys`]), give the kit a view of what a VM
//! carries ([`MarkedVm`]), and act only on the kit's verdict
//! ([`ClusterMarkers::judge`] for one machine, [`ClusterMarkers::lists`] for
//! ListMachines).
//!
//! The rule: a VM is this cluster's when it carries both of the class's
//! markers, the cluster marker (`kubernetes.io/cluster/<name>`, spelled as the
//! cloud allows) and the role marker (`kubernetes.io/role/<role>`), as the Go
//! providers check. It is this *machine's* when, in addition, it carries no
//! other machine's uid (VMs the Go providers made carry none; a request
//! without a uid, the orphan collector's delete by providerID, skips that
//! part). A foreign VM is NOT_FOUND for status, answered "already gone" by
//! delete and left untouched, absent from ListMachines, and an error for a
//! create that would have to adopt it.

use std::fmt;

use crate::{DriverError, Machine};

/// The markers a VM carries, as a provider reads them from the cloud's own
/// record of the VM (tags, labels, network tags or metadata).
pub trait MarkedVm {
    /// True when the VM carries the marker `key` (a tag or metadata key, a
    /// label key or a network tag, whichever the cloud keeps it in).
    fn has_marker(&self, key: &str) -> bool;
    /// The machine uid the VM is marked with, if any.
    fn machine_uid(&self) -> Option<&str>;
    /// The machine name the VM carries, for clouds where a VM is always named
    /// for its machine (a server name, an instance name); `None` (the
    /// default) where the name is not part of the rule.
    fn machine_name(&self) -> Option<&str> {
        None
    }
}

/// The cluster and role markers a class expects on its VMs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClusterMarkers {
    cluster: String,
    role: String,
}

/// Why a VM is not a machine's (for logs and the answer's message; never
/// carries request data beyond the VM's own id the caller names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Foreign {
    /// The VM lacks the class's cluster marker: another cluster's, or made by hand.
    OtherCluster,
    /// The VM carries the cluster marker but not the role marker (e.g. a
    /// network tag put on for a firewall rule).
    NoRole,
    /// The VM carries another machine's uid: an earlier machine of the same name.
    OtherMachine,
    /// The VM's name is not the machine's (a providerID naming another
    /// machine's VM, for clouds whose VMs carry the machine's name).
    OtherName,
}

impl fmt::Display for Foreign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Foreign::OtherCluster => "it does not carry this cluster's marker",
            Foreign::NoRole => "it does not carry this class's role marker",
            Foreign::OtherMachine => "it carries another machine's uid",
            Foreign::OtherName => "it is named for another machine",
        })
    }
}

/// How a class's marker keys are found among its tag keys.
#[derive(Debug, Clone, Copy)]
enum Match {
    /// The key starts with the part.
    Prefix,
    /// The key contains the part.
    Contains,
}

impl Match {
    /// True when `key` is a marker key for `part`: it holds the part, and a name after it.
    fn finds(self, key: &str, part: &str) -> bool {
        match self {
            Match::Prefix => key.strip_prefix(part),
            Match::Contains => key.split_once(part).map(|(_, rest)| rest),
        }
        .is_some_and(|rest| !rest.is_empty())
    }

    fn word(self) -> &'static str {
        match self {
            Match::Prefix => "starting with",
            Match::Contains => "containing",
        }
    }
}

/// The kit's verdict on one VM for one machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// The VM is this machine's: act on it.
    Mine,
    /// The VM is not: leave it alone.
    Foreign(Foreign),
}

impl Ownership {
    /// True for [`Ownership::Mine`].
    pub fn is_mine(self) -> bool {
        self == Ownership::Mine
    }
}

impl ClusterMarkers {
    /// The class's markers from its tag (or label, metadata) keys: exactly one
    /// key starting with `cluster_prefix` and one starting with `role_prefix`
    /// (each with something after the prefix). `field` names the spec field
    /// in the INVALID_ARGUMENT error when either is missing or ambiguous: a
    /// class without them cannot tell its VMs from anyone else's, so no path
    /// that acts on an existing VM may run with it.
    pub fn from_keys<'a>(
        keys: impl IntoIterator<Item = &'a str>,
        cluster_prefix: &str,
        role_prefix: &str,
        field: &str,
    ) -> Result<Self, DriverError> {
        Self::find(keys, Match::Prefix, cluster_prefix, role_prefix, field)
    }

    /// [`ClusterMarkers::from_keys`] for providers whose Go original finds the
    /// keys that *contain* `cluster_part` and `role_part` anywhere
    /// (`strings.Contains`, OpenStack), each with something after the part.
    pub fn from_keys_containing<'a>(
        keys: impl IntoIterator<Item = &'a str>,
        cluster_part: &str,
        role_part: &str,
        field: &str,
    ) -> Result<Self, DriverError> {
        Self::find(keys, Match::Contains, cluster_part, role_part, field)
    }

    fn find<'a>(
        keys: impl IntoIterator<Item = &'a str>,
        how: Match,
        cluster_part: &str,
        role_part: &str,
        field: &str,
    ) -> Result<Self, DriverError> {
        let mut cluster = None;
        let mut role = None;
        for key in keys {
            for (part, slot, what) in [(cluster_part, &mut cluster, "cluster"), (role_part, &mut role, "role")] {
                if how.finds(key, part) {
                    if slot.as_ref().is_some_and(|k: &String| k != key) {
                        return Err(DriverError::invalid_argument(
                            field,
                            format!("has more than one {what} key ({} {part:?}); exactly one is required", how.word()),
                        ));
                    }
                    *slot = Some(key.to_string());
                }
            }
        }
        let missing = |part: &str, what: &str| {
            DriverError::invalid_argument(
                field,
                format!(
                    "needs a {what} key {} {part:?}, with a name after it: it tells this cluster's VMs from others'",
                    how.word()
                ),
            )
        };
        Ok(Self {
            cluster: cluster.ok_or_else(|| missing(cluster_part, "cluster"))?,
            role: role.ok_or_else(|| missing(role_part, "role"))?,
        })
    }

    /// Markers given directly (tests, and clouds whose markers are not keys of one map).
    pub fn new(cluster: impl Into<String>, role: impl Into<String>) -> Self {
        Self { cluster: cluster.into(), role: role.into() }
    }

    /// The cluster marker's key.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// The role marker's key.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// Whether `vm` is `machine`'s: this cluster's markers, no other
    /// machine's uid (skipped when the request carries no uid), and, where the
    /// VM reports a machine name, the machine's name (skipped when the
    /// request carries no name: the orphan collector may send none).
    pub fn judge(&self, vm: &impl MarkedVm, machine: &Machine) -> Ownership {
        if let Some(foreign) = self.cluster_verdict(vm) {
            return Ownership::Foreign(foreign);
        }
        if vm.machine_name().is_some_and(|name| !machine.name.is_empty() && name != machine.name) {
            return Ownership::Foreign(Foreign::OtherName);
        }
        match vm.machine_uid() {
            Some(uid) if !machine.uid.is_empty() && uid != machine.uid => Ownership::Foreign(Foreign::OtherMachine),
            _ => Ownership::Mine,
        }
    }

    /// Whether ListMachines may return `vm` (for MCM's orphan collection to
    /// delete it when no Machine claims it): both of this cluster's markers.
    pub fn lists(&self, vm: &impl MarkedVm) -> bool {
        self.cluster_verdict(vm).is_none()
    }

    fn cluster_verdict(&self, vm: &impl MarkedVm) -> Option<Foreign> {
        if !vm.has_marker(&self.cluster) {
            Some(Foreign::OtherCluster)
        } else if !vm.has_marker(&self.role) {
            Some(Foreign::NoRole)
        } else {
            None
        }
    }
}

/// The answer of GetMachineStatus (and InitializeMachine) for a VM that is not
/// the machine's: NOT_FOUND, so that MCM creates the machine's own VM instead
/// of adopting this one. `what` names the VM (its id or providerID).
pub fn foreign_not_found(what: impl fmt::Display, why: Foreign) -> DriverError {
    DriverError::not_found(format!("{what}: not this machine's VM ({why})"))
}

/// The answer of CreateMachine when the cloud keeps names unique and a VM of
/// the machine's name exists that is not the machine's: ALREADY_EXISTS, the
/// foreign VM untouched.
pub fn foreign_name_taken(what: impl fmt::Display, why: Foreign) -> DriverError {
    DriverError::new(
        crate::ErrorKind::AlreadyExists,
        crate::reasons::NAME_TAKEN_BY_FOREIGN_VM,
        format!("{what} exists but is not this machine's VM ({why}); it is left untouched"),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::ErrorKind;

    struct Vm {
        markers: Vec<&'static str>,
        uid: Option<&'static str>,
    }

    struct Named(Vm, &'static str);

    impl MarkedVm for Named {
        fn has_marker(&self, key: &str) -> bool {
            self.0.has_marker(key)
        }
        fn machine_uid(&self) -> Option<&str> {
            self.0.machine_uid()
        }
        fn machine_name(&self) -> Option<&str> {
            Some(self.1)
        }
    }

    impl MarkedVm for Vm {
        fn has_marker(&self, key: &str) -> bool {
            self.markers.contains(&key)
        }
        fn machine_uid(&self) -> Option<&str> {
            self.uid
        }
    }

    fn markers() -> ClusterMarkers {
        let tags: BTreeMap<&str, &str> =
            [("kubernetes.io/cluster/shoot--a", "1"), ("kubernetes.io/role/node", "1"), ("pool", "x")].into();
        ClusterMarkers::from_keys(tags.keys().copied(), "kubernetes.io/cluster/", "kubernetes.io/role/", "tags")
            .expect("markers")
    }

    fn machine(uid: &str) -> Machine {
        Machine { name: "m-1".into(), uid: uid.into(), ..Machine::default() }
    }

    #[test]
    fn a_vm_is_the_machines_only_with_both_markers_and_no_other_uid() {
        let m = markers();
        let both = ["kubernetes.io/cluster/shoot--a", "kubernetes.io/role/node"];
        let mine = Vm { markers: both.to_vec(), uid: Some("u-1") };
        assert_eq!(m.judge(&mine, &machine("u-1")), Ownership::Mine);
        assert_eq!(m.judge(&mine, &machine("")), Ownership::Mine, "the orphan collector sends no uid");
        assert_eq!(m.judge(&mine, &machine("u-2")), Ownership::Foreign(Foreign::OtherMachine));
        let go_made = Vm { markers: both.to_vec(), uid: None };
        assert_eq!(m.judge(&go_made, &machine("u-1")), Ownership::Mine);
        let other_cluster =
            Vm { markers: vec!["kubernetes.io/cluster/shoot--b", "kubernetes.io/role/node"], uid: None };
        assert_eq!(m.judge(&other_cluster, &machine("u-1")), Ownership::Foreign(Foreign::OtherCluster));
        assert!(!m.lists(&other_cluster));
        let firewall_tag_only = Vm { markers: vec!["kubernetes.io/cluster/shoot--a"], uid: None };
        assert_eq!(m.judge(&firewall_tag_only, &machine("")), Ownership::Foreign(Foreign::NoRole));
        assert!(!m.lists(&firewall_tag_only));
        let unmarked = Vm { markers: vec![], uid: None };
        assert!(!m.judge(&unmarked, &machine("")).is_mine());
        assert!(m.lists(&mine) && m.lists(&go_made));
    }

    #[test]
    fn a_vm_named_for_another_machine_is_foreign_unless_the_request_names_none() {
        let m = markers();
        let vm = |name| {
            Named(Vm { markers: vec!["kubernetes.io/cluster/shoot--a", "kubernetes.io/role/node"], uid: None }, name)
        };
        assert_eq!(m.judge(&vm("m-1"), &machine("u-1")), Ownership::Mine);
        assert_eq!(m.judge(&vm("m-2"), &machine("u-1")), Ownership::Foreign(Foreign::OtherName));
        let orphan_delete = Machine { uid: String::new(), ..Machine::default() };
        assert_eq!(m.judge(&vm("m-2"), &orphan_delete), Ownership::Mine);
    }

    #[test]
    fn containing_markers_are_found_anywhere_in_the_key() {
        let found = ClusterMarkers::from_keys_containing(
            ["x/kubernetes.io-cluster-shoot--a", "kubernetes.io-role-node", "pool"],
            "kubernetes.io-cluster-",
            "kubernetes.io-role-",
            "tags",
        )
        .expect("found");
        assert_eq!(found.cluster(), "x/kubernetes.io-cluster-shoot--a");
        let err = ClusterMarkers::from_keys_containing(
            ["a-kubernetes.io-cluster-"],
            "kubernetes.io-cluster-",
            "kubernetes.io-role-",
            "tags",
        )
        .expect_err("no name after the part");
        assert_eq!(err.field(), Some("tags"));
    }

    #[test]
    fn a_class_without_both_markers_or_with_two_cluster_keys_is_refused_naming_the_field() {
        let keys = |k: &[&'static str]| {
            ClusterMarkers::from_keys(
                k.iter().copied(),
                "kubernetes.io/cluster/",
                "kubernetes.io/role/",
                "providerSpec.tags",
            )
        };
        for bad in [
            &["kubernetes.io/role/node"][..],
            &["kubernetes.io/cluster/a"],
            &["kubernetes.io/cluster/", "kubernetes.io/role/node"],
            &["kubernetes.io/cluster/a", "kubernetes.io/cluster/b", "kubernetes.io/role/node"],
        ] {
            let err = keys(bad).expect_err("refused");
            assert_eq!(err.kind(), ErrorKind::InvalidArgument);
            assert_eq!(err.field(), Some("providerSpec.tags"));
        }
        let ok = keys(&["kubernetes.io/cluster/a", "kubernetes.io/role/node"]).expect("ok");
        assert_eq!((ok.cluster(), ok.role()), ("kubernetes.io/cluster/a", "kubernetes.io/role/node"));
    }

    #[test]
    fn foreign_answers_are_not_found_and_already_exists() {
        assert_eq!(foreign_not_found("instance i-1", Foreign::OtherCluster).kind(), ErrorKind::NotFound);
        assert_eq!(foreign_name_taken("instance m-1", Foreign::OtherMachine).kind(), ErrorKind::AlreadyExists);
    }
}
