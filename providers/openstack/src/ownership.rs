//! Which servers (and ports) are a machine's: the one place the OpenStack
//! driver decides it, through the kit's rule ([`machine_driver_api::ClusterMarkers`]).
//!
//! The markers are the class's two metadata keys, as the Go provider reads
//! them from the spec's `tags`: the key containing `kubernetes.io-cluster-`
//! and the key containing `kubernetes.io-role-` (exactly one of each, or the
//! class is INVALID_ARGUMENT `providerSpec.spec.tags` on every RPC, delete
//! included: without them nothing can be proven ours). A server carries them
//! as metadata keys ([`MarkedVm`] for [`Server`]), its machine uid as
//! `mcm.gardener.cloud-machine-uid` (servers the Go provider made carry none
//! and stay adoptable); a port made by either driver carries the two keys as
//! Neutron tags (the impl for [`Port`], whose uid is none).
//!
//! The server's name is part of the rule ([`MarkedVm::machine_name`]): when
//! the request names its machine, a server of another name is not the
//! machine's ([`Foreign::OtherName`]). A providerID copied
//! to the wrong Machine of the same cluster would otherwise make a server the
//! Go provider made (no uid) answer for two machines; the name lookups
//! (by name, the coalesced lists) only ever see servers of the name, so every
//! path, by id or by name, judges the same way. A request without a name (the
//! orphan collector may send none) skips it, as the kit skips the uid.
//!
//! Where it is applied: GetMachineStatus (by providerID, from a read or a
//! recent list; by name), InitializeMachine (before any port is read or
//! written), DeleteMachine (by providerID and by name), ListMachines
//! ([`ClusterMarkers::lists`]), CreateMachine's adoption of a server found by
//! name or through a port of the machine. A foreign server is NOT_FOUND for
//! status and initialize, left alone by delete (answered as already gone, no
//! delete call, none of its ports touched), absent from the list, and not
//! adopted by create (Nova does not keep names unique: a new server is made).
//!
//! Delete by providerID judges the server's record: the one this process
//! created (its `POST /servers`, with the creating class's markers) or
//! adopted from Nova's record in the last 10 minutes, under the same
//! credentials and region ([`owned_record`], no call), else one
//! `GET /servers/{id}` (read alongside the machine's ports when the request
//! names the machine). A server adopted on its port's markers while Nova did
//! not show it has no such record (the port's `device_id` and tags are
//! anyone's to set in the project): delete and initialization read Nova
//! first. Ports are deleted only alongside a server judged the machine's
//! (attached to it) or when they carry both markers themselves.

use machine_driver_api::{ClusterMarkers, DriverError, Foreign, Machine, MarkedVm, Ownership};

use crate::naming::MACHINE_UID_KEY;
use crate::os::model::{Port, Server};
use crate::spec::{CLUSTER_TAG, ROLE_TAG};

/// The spec field the markers come from.
const TAGS_FIELD: &str = "providerSpec.spec.tags";

/// The class's markers from its `tags` keys: exactly one key containing
/// `kubernetes.io-cluster-` and one containing `kubernetes.io-role-`, each
/// with a name after that part (the Go provider's `strings.Contains` rule;
/// it picked one at random among several, which this refuses).
pub(crate) fn class_markers<'a>(keys: impl IntoIterator<Item = &'a str>) -> Result<ClusterMarkers, DriverError> {
    ClusterMarkers::from_keys_containing(keys, CLUSTER_TAG, ROLE_TAG, TAGS_FIELD)
}

/// A server's markers: its metadata keys; its uid: the driver's uid key.
impl MarkedVm for Server {
    fn has_marker(&self, key: &str) -> bool {
        self.metadata.contains_key(key)
    }

    fn machine_uid(&self) -> Option<&str> {
        self.metadata.get(MACHINE_UID_KEY).map(String::as_str).filter(|u| !u.is_empty())
    }

    /// Both drivers name a server for its machine: a server of another name
    /// is not the machine's (see the module docs).
    fn machine_name(&self) -> Option<&str> {
        Some(&self.name)
    }
}

/// A port's markers: its Neutron tags (both drivers tag a machine's ports
/// with the cluster and role keys); a port carries no uid.
impl MarkedVm for Port {
    fn has_marker(&self, key: &str) -> bool {
        self.tags.iter().any(|t| t == key)
    }

    fn machine_uid(&self) -> Option<&str> {
        None
    }
}

/// Servers of a machine's name, judged.
#[derive(Debug, Default)]
pub(crate) struct Judged {
    /// The machine's own (more than one: duplicates).
    pub(crate) mine: Vec<Server>,
    /// Why the first foreign one is not the machine's, when there was one (for the NOT_FOUND's message).
    pub(crate) foreign: Option<Foreign>,
}

/// `servers` judged for `machine` by the kit's rule.
pub(crate) fn judge_all(markers: &ClusterMarkers, servers: Vec<Server>, machine: &Machine) -> Judged {
    let mut out = Judged::default();
    for server in servers {
        match markers.judge(&server, machine) {
            Ownership::Mine => out.mine.push(server),
            Ownership::Foreign(why) => {
                log_foreign("lookup by name", &server, why);
                out.foreign.get_or_insert(why);
            }
        }
    }
    out
}

/// Whether a port of the machine's name that is attached to no server judged
/// the machine's may be used or deleted for it: it carries both markers.
pub(crate) fn port_is_mine(markers: &ClusterMarkers, port: &Port, machine: &Machine) -> bool {
    markers.judge(port, machine).is_mine()
}

/// What `GET /servers/{id}` would show of a server this process created a
/// moment ago (its name, the creating class's markers and uid), kept so that
/// a delete or initialization right after needs no read to judge it. Judged
/// with the same impl as a server read from Nova, against the markers of the
/// request at hand. Also what a create adopts on a port's markers while Nova
/// does not show the server; that one is never kept as the server's record.
pub(crate) fn owned_record(id: &str, name: &str, markers: &ClusterMarkers, uid: &str) -> Server {
    let mut metadata = std::collections::BTreeMap::new();
    metadata.insert(markers.cluster().to_string(), String::new());
    metadata.insert(markers.role().to_string(), String::new());
    if !uid.is_empty() {
        metadata.insert(MACHINE_UID_KEY.to_string(), uid.to_string());
    }
    Server { id: id.to_string(), name: name.to_string(), metadata, ..Server::default() }
}

/// Why a server was judged foreign, for the logs (no request data but the server's id).
pub(crate) fn log_foreign(rpc: &str, server: &Server, why: Foreign) {
    tracing::warn!(rpc, server = %server.id, reason = %why, "a server that is not this machine's was left untouched");
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use machine_driver_api::ErrorKind;

    use super::*;

    fn server(name: &str, keys: &[(&str, &str)]) -> Server {
        let metadata: BTreeMap<String, String> = keys.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Server { id: "s-1".into(), name: name.into(), metadata, ..Server::default() }
    }

    fn machine(name: &str, uid: &str) -> Machine {
        Machine { name: name.into(), uid: uid.into(), ..Machine::default() }
    }

    fn markers() -> ClusterMarkers {
        class_markers(["kubernetes.io-cluster-shoot--a", "kubernetes.io-role-node", "pool"]).unwrap()
    }

    #[test]
    fn the_class_needs_exactly_one_cluster_and_one_role_key() {
        let m = markers();
        assert_eq!((m.cluster(), m.role()), ("kubernetes.io-cluster-shoot--a", "kubernetes.io-role-node"));
        // The Go provider's rule is "contains", not "starts with".
        let prefixed = class_markers(["x-kubernetes.io-cluster-a", "kubernetes.io-role-node"]).unwrap();
        assert_eq!(prefixed.cluster(), "x-kubernetes.io-cluster-a");
        for bad in [
            &["kubernetes.io-role-node"][..],
            &["kubernetes.io-cluster-a"],
            &["kubernetes.io-cluster-", "kubernetes.io-role-node"],
            &["kubernetes.io-cluster-a", "kubernetes.io-cluster-b", "kubernetes.io-role-node"],
            &["kubernetes.io-cluster-a", "kubernetes.io-role-node", "kubernetes.io-role-worker"],
        ] {
            let e = class_markers(bad.iter().copied()).unwrap_err();
            assert_eq!((e.kind(), e.field()), (ErrorKind::InvalidArgument, Some(TAGS_FIELD)), "{bad:?}");
        }
    }

    #[test]
    fn servers_are_judged_by_markers_uid_and_name() {
        let m = markers();
        let both = [("kubernetes.io-cluster-shoot--a", "1"), ("kubernetes.io-role-node", "1")];
        let mine = server("m-1", &[both[0], both[1], (MACHINE_UID_KEY, "u-1")]);
        assert!(m.judge(&mine, &machine("m-1", "u-1")).is_mine());
        assert!(m.judge(&mine, &machine("", "")).is_mine(), "the orphan collector's delete");
        assert_eq!(m.judge(&mine, &machine("m-1", "u-2")), Ownership::Foreign(Foreign::OtherMachine));
        assert_eq!(m.judge(&mine, &machine("m-2", "u-1")), Ownership::Foreign(Foreign::OtherName));
        let go_made = server("m-1", &both);
        assert!(m.judge(&go_made, &machine("m-1", "u-1")).is_mine());
        let other = server("m-1", &[("kubernetes.io-cluster-shoot--b", "1"), both[1]]);
        assert_eq!(m.judge(&other, &machine("m-1", "u-1")), Ownership::Foreign(Foreign::OtherCluster));
        let no_role = server("m-1", &[both[0]]);
        assert_eq!(m.judge(&no_role, &machine("m-1", "")), Ownership::Foreign(Foreign::NoRole));
        assert!(!m.lists(&no_role) && !m.lists(&other) && m.lists(&go_made));
        let owned = owned_record("s-1", "m-1", &m, "u-1");
        assert!(m.judge(&owned, &machine("m-1", "u-1")).is_mine());
        assert!(!markers_of("shoot--b").judge(&owned, &machine("m-1", "u-1")).is_mine());
    }

    fn markers_of(cluster: &str) -> ClusterMarkers {
        class_markers([format!("kubernetes.io-cluster-{cluster}").as_str(), "kubernetes.io-role-node"]).unwrap()
    }

    #[test]
    fn ports_are_the_machines_with_both_tags() {
        let m = markers();
        let port = |tags: &[&str]| Port { tags: tags.iter().map(|t| t.to_string()).collect(), ..Port::default() };
        let both = port(&["kubernetes.io-cluster-shoot--a", "kubernetes.io-role-node"]);
        assert!(port_is_mine(&m, &both, &machine("m-1", "u-1")));
        assert!(!port_is_mine(&m, &port(&["kubernetes.io-cluster-shoot--a"]), &machine("m-1", "u-1")));
        assert!(!port_is_mine(&m, &port(&["kubernetes.io-cluster-b", "kubernetes.io-role-node"]), &machine("m", "")));
    }
}
