//! Which ECS instances are this cluster's, and this machine's: the kit's rule
//! ([`machine_driver_api::ClusterMarkers`]) applied to ECS's own record of an
//! instance, its tags.
//!
//! - **Markers**: the class's tag keys `kubernetes.io/cluster/<cluster>` and
//!   `kubernetes.io/role/<role>` (exactly one of each, read once per request:
//!   [`AlicloudProviderSpec::parse`](crate::spec::AlicloudProviderSpec::parse),
//!   or [`markers_of`](crate::spec::AlicloudProviderSpec::markers_of) where the
//!   providerID says the rest). A class lacking either is INVALID_ARGUMENT on
//!   every machine RPC, delete included. An instance carries a marker when it
//!   has a tag of that key (any value, as the kit decides on keys); the
//!   machine uid is the tag [`MACHINE_UID_TAG`] (none, or empty, on instances
//!   the Go provider made: those stay adoptable and listable).
//! - **Where**: status by providerID and by name, delete by name and by
//!   providerID, ListMachines, and create's adopt paths (the instance tagged
//!   with the uid after `IdempotentParameterMismatch`, or after the machine's
//!   instance ended) all hand the instance to `ClusterMarkers::judge` (one
//!   machine) or `ClusterMarkers::lists` (ListMachines); no path decides on
//!   ECS's tag filters alone. Reads by name (`InstanceName`) are not
//!   narrowed by tags at all: the verdict is the kit's.
//! - **Foreign instances**: NOT_FOUND for status
//!   ([`machine_driver_api::foreign_not_found`]), answered "already gone" by
//!   delete with no `DeleteInstance` sent, left out of ListMachines, never
//!   adopted by create. ECS instance names are not unique, so create does not
//!   look instances up by name at all: a same-named foreign instance is simply
//!   not adopted, and create launches this machine's own (no ALREADY_EXISTS).
//!   The `ClientToken` answer of `RunInstances` is this machine's by
//!   construction (the token is derived from the machine uid, within the
//!   caller's account) and is not re-read.
//! - **Delete by providerID** (the Go provider deletes it unchecked): the
//!   instance's record is judged before `DeleteInstance` is sent. When this
//!   process read the record in the last [`RECORD_TTL`] (a status poll, which
//!   MCM's deletion flow sends first) it is at hand and costs nothing;
//!   otherwise it costs one `DescribeInstances` by id, shared with concurrent
//!   status polls. An instance id is never reused, so a record read minutes
//!   ago still names the same instance; the window (30 s) only bounds how
//!   long a tag removed by hand goes unseen. An instance the read does not show is
//!   already gone, unless this process created it in the last moments (ECS
//!   may not list it yet): then UNAVAILABLE, and the retry judges it once ECS
//!   shows it.

use machine_driver_api::{KeyedCache, MarkedVm};
use tokio::time::{Duration, Instant};

use crate::ecs::model::Instance;
use crate::naming::MACHINE_UID_TAG;

/// How long a record this process read stands for the instance in a delete by providerID.
/// MCM's deletion flow polls status right before it deletes, so 30 s keeps
/// that pair at one read while a tag removed by hand is seen within 30 s.
pub(crate) const RECORD_TTL: Duration = Duration::from_secs(30);
/// Most records remembered (least recently used dropped first): an evicted one costs a read.
const MAX_RECORDS: usize = 4096;

impl MarkedVm for Instance {
    fn has_marker(&self, key: &str) -> bool {
        self.tag(key).is_some()
    }

    fn machine_uid(&self) -> Option<&str> {
        self.tag(MACHINE_UID_TAG).filter(|uid| !uid.is_empty())
    }
}

/// One remembered record.
#[derive(Debug)]
struct Seen {
    at: Instant,
    instance: Instance,
}

/// Records of instances this process read lately, by access key, region and
/// instance id, for the ownership check of a delete by providerID. Bounded.
#[derive(Debug)]
pub(crate) struct RecentRecords {
    records: KeyedCache<([u8; 32], String, String), Seen>,
}

impl Default for RecentRecords {
    fn default() -> Self {
        Self { records: KeyedCache::new(MAX_RECORDS) }
    }
}

impl RecentRecords {
    /// Remembers `instance` as read now with the key of `fingerprint` in `region`.
    pub(crate) fn record(&self, fingerprint: [u8; 32], region: &str, instance: &Instance) {
        let key = (fingerprint, region.to_string(), instance.instance_id.clone());
        self.records.insert(key, std::sync::Arc::new(Seen { at: Instant::now(), instance: instance.clone() }));
    }

    /// The record of instance `id`, when read within [`RECORD_TTL`].
    pub(crate) fn get(&self, fingerprint: [u8; 32], region: &str, id: &str) -> Option<Instance> {
        let key = (fingerprint, region.to_string(), id.to_string());
        let seen = self.records.get(&key)?;
        if seen.at.elapsed() < RECORD_TTL {
            return Some(seen.instance.clone());
        }
        self.records.remove(&key);
        None
    }
}

#[cfg(test)]
mod tests {
    use machine_driver_api::{ClusterMarkers, Foreign, Machine, Ownership};

    use super::*;
    use crate::ecs::model::{Tag, Tags};

    fn instance(tags: &[(&str, &str)]) -> Instance {
        Instance {
            instance_id: "i-gw8abc".into(),
            instance_name: "m-1".into(),
            tags: Some(Tags {
                tag: tags.iter().map(|(k, v)| Tag { tag_key: (*k).into(), tag_value: (*v).into() }).collect(),
            }),
            ..Instance::default()
        }
    }

    fn machine(uid: &str) -> Machine {
        Machine { name: "m-1".into(), uid: uid.into(), ..Machine::default() }
    }

    const CLUSTER: &str = "kubernetes.io/cluster/shoot--a";
    const ROLE: &str = "kubernetes.io/role/node";

    #[test]
    fn tags_are_the_markers_and_an_empty_uid_tag_is_no_uid() {
        let m = ClusterMarkers::new(CLUSTER, ROLE);
        let ours = instance(&[(CLUSTER, "1"), (ROLE, "1"), (MACHINE_UID_TAG, "u-1")]);
        assert!(m.judge(&ours, &machine("u-1")).is_mine());
        assert_eq!(m.judge(&ours, &machine("u-2")), Ownership::Foreign(Foreign::OtherMachine));
        let go_made = instance(&[(CLUSTER, "1"), (ROLE, "1")]);
        assert!(m.judge(&go_made, &machine("u-1")).is_mine() && m.lists(&go_made));
        let empty_uid = instance(&[(CLUSTER, "1"), (ROLE, ""), (MACHINE_UID_TAG, "")]);
        assert!(m.judge(&empty_uid, &machine("u-1")).is_mine(), "a tag's value does not matter, an empty uid is none");
        let other = instance(&[("kubernetes.io/cluster/shoot--b", "1"), (ROLE, "1")]);
        assert_eq!(m.judge(&other, &machine("")), Ownership::Foreign(Foreign::OtherCluster));
        let no_role = instance(&[(CLUSTER, "1")]);
        assert!(!m.lists(&no_role));
        assert!(!m.judge(&Instance::default(), &machine("")).is_mine());
    }

    #[tokio::test(start_paused = true)]
    async fn records_stand_for_their_ttl() {
        let records = RecentRecords::default();
        let i = instance(&[(CLUSTER, "1")]);
        records.record([1; 32], "eu-central-1", &i);
        assert!(records.get([1; 32], "eu-central-1", "i-gw8abc").is_some());
        assert!(records.get([2; 32], "eu-central-1", "i-gw8abc").is_none(), "another key's read is not at hand");
        assert!(records.get([1; 32], "cn-hangzhou", "i-gw8abc").is_none());
        tokio::time::advance(RECORD_TTL).await;
        assert!(records.get([1; 32], "eu-central-1", "i-gw8abc").is_none());
    }
}
