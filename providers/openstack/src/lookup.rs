//! Reading servers: one by id (`GET /servers/{id}`), a machine's by name
//! (`GET /servers/detail?name=^<name>$`, Nova's name filter being a regular
//! expression), and concurrent status polls of one credentials and region
//! coalesced ([`ServerLookups`]).
//!
//! Status polls: a lone poll is one `GET /servers/{id}`; polls arriving while
//! a read is in flight go out together as one batch (the kit's [`Coalescer`],
//! any number of polls, one batch in flight). A batch of up to
//! [`MAX_NAMES_FILTER`] (50) machines is one `GET /servers/detail` whose
//! filter matches exactly their names (`^(a|b|…)$`, growing with each name).
//! A larger batch is one listing of the servers whose names start with the
//! batch's longest common name prefix (`GET /servers/detail?name=^<prefix>&limit=1000`,
//! every page): Gardener names its machines `shoot--<project>--<shoot>-<pool>-…`,
//! so one list covers a worker pool or the whole cluster, 1000 servers a page
//! (11 calls for 10,000 machines: ten full pages, and the empty one Nova
//! links after a full last page). The list keeps of each server only what a
//! status answer reads ([`ListedServer`]). A prefix shorter than [`MIN_PREFIX_CHARS`]
//! is not selective enough: such a batch is read in lists of 50 exact names.
//!
//! Polls reach the driver in waves (the server serves a bounded number of
//! calls at once), each wave a batch of its own, so the last prefix list is
//! kept ([`RecentList`], by server id) and answers the batches and lone polls
//! that go out within [`LIST_REUSE`] (2 s) of its start, for every server it
//! shows under the id and name asked: such an answer is at most 2 s older
//! than its poll. A server it does not show (created since, or outside its
//! prefix) is read afresh: alone by id when it is the only one, else listed
//! again. An answer from a list says so ([`Found::listed`]), so that the
//! status of a server this process deleted since is read alone.
//!
//! The lookups of concurrent creates are coalesced too ([`CreateLookups`]):
//! one batch is one `GET /servers/detail?name=^(a|b|…)$` and, alongside, one
//! `GET /ports?name=a&name=b…` (Neutron takes a repeated filter as "any of").
//! A batch is read after every lookup in it was asked for, so each create
//! still sees every server and port made before it looked.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use machine_driver_api::{
    BatchFn, CallContext, CallFailure, ClusterMarkers, Coalescer, DriverError, KeyedCache, Machine, RecentList,
    common_prefix,
};
use serde::{Deserialize, Deserializer};

use crate::clients::{Api, Call, SharedApi};
use crate::naming::{MACHINE_UID_KEY, exact_names_filter, prefix_filter, request_id};
use crate::os::keystone::Service;
use crate::os::model::{Link, Port, Server, ServerAddress, ServerOne, ServersPage};
use crate::ownership::{Judged, judge_all};

/// Most status polls one coalesced batch takes: a prefix list answers any
/// number of them, so a whole wave of polls (the server serves up to 1024 at
/// once) is one batch rather than several lists of the same servers.
const MAX_BATCH: usize = 10_000;
/// Most names in one exact-names filter (`^(a|b|…)$` grows with each name):
/// a batch of at most this many machines is one such list; a larger one
/// without a selective common prefix is read in lists of this many.
const MAX_NAMES_FILTER: usize = 50;
/// Shortest common name prefix a batch is listed by. A shorter one (`shoot-`,
/// `m-`, nothing) may match far more servers of the project than the batch
/// asks for (other clusters, other tools' servers), each costing its share of
/// a page; Gardener's own prefixes (`shoot--<project>--<shoot>-`) are far
/// longer, so this only keeps odd names on the exact-names lists.
const MIN_PREFIX_CHARS: usize = 8;
/// Page size asked of a prefix list: Nova's default most (`max_limit`).
const PREFIX_PAGE_LIMIT: &str = "1000";
/// Exact-names lists in flight at once for one batch without a selective prefix.
const NAME_LISTS_IN_FLIGHT: usize = 4;
/// Coalesced batches in flight at once per credentials and region: one. A
/// batch takes every poll waiting (up to [`MAX_BATCH`]), so the kit's
/// coalescer would start a second only for a full batch waiting, and that
/// second batch would list the same prefix again while the first is still
/// listing; queued behind it, it is answered by the first one's list
/// ([`LIST_REUSE`]).
const BATCHES_IN_FLIGHT: usize = 1;
/// How long after its start a prefix list answers further batches and lone
/// polls (for the servers it shows): the most a status answer may be older
/// than its poll.
pub(crate) const LIST_REUSE: Duration = Duration::from_secs(2);
/// Most coalescers.
const MAX_COALESCERS: usize = 256;
/// Most machine names per coalesced create lookup (both filters grow with each).
const MAX_CREATE_BATCH: usize = 40;

/// What a create needs to know of its machine name: the servers of that
/// name (any metadata: the caller keeps its own) and the ports of that name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Named {
    /// Servers named exactly so (not deleted).
    pub(crate) servers: Vec<Server>,
    /// Ports named exactly so.
    pub(crate) ports: Vec<Port>,
}

/// The coalescers of the creates' lookups, per credentials and region.
#[derive(Debug)]
pub(crate) struct CreateLookups {
    by_scope: KeyedCache<([u8; 32], String), Coalescer<String, Named>>,
}

impl Default for CreateLookups {
    fn default() -> Self {
        Self { by_scope: KeyedCache::new(MAX_COALESCERS) }
    }
}

impl CreateLookups {
    /// The servers and ports named `name`, read together with the lookups of concurrent creates.
    pub(crate) async fn get(&self, api: &Api<'_>, fingerprint: [u8; 32], name: &str) -> Result<Named, DriverError> {
        let coalescer = self.by_scope.get_or_insert_with(&(fingerprint, api.region().to_string()), || {
            Coalescer::new(
                "compute servers.list and network ports.list",
                named_fetch(api.shared()),
                MAX_CREATE_BATCH,
                1,
            )
        });
        Ok(coalescer.get_within(api.context(), name.to_string()).await?.unwrap_or_default())
    }
}

/// One batch of create lookups: both lists at once, grouped by exact name.
fn named_fetch(shared: SharedApi) -> BatchFn<String, Named> {
    Arc::new(move |names: Vec<String>, ctx: CallContext| {
        let shared = shared.clone();
        Box::pin(async move {
            let api = shared.bind(&ctx);
            let filter = exact_names_filter(names.iter().map(String::as_str));
            let port_query: Vec<(&str, String)> = names.iter().map(|n| ("name", n.clone())).collect();
            let server_query = [("name", filter)];
            let (servers, ports) =
                tokio::join!(list_servers(&api, &server_query), crate::ports::list(&api, &port_query));
            let mut out: HashMap<String, Named> = HashMap::new();
            for server in servers? {
                if names.contains(&server.name) {
                    out.entry(server.name.clone()).or_default().servers.push(server);
                }
            }
            for port in ports? {
                if names.contains(&port.name) {
                    out.entry(port.name.clone()).or_default().ports.push(port);
                }
            }
            Ok(out)
        })
    })
}

/// A server to look up: its id and, when known, its machine name.
pub(crate) type ServerKey = (String, String);

/// A server as a status read found it.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    /// The server.
    pub(crate) server: Server,
    /// Read from a list (possibly one that started up to [`LIST_REUSE`]
    /// before the poll), not by `GET /servers/{id}` for this poll alone.
    pub(crate) listed: bool,
}

/// A server of a prefix list, kept for [`LIST_REUSE`] (thousands of them at
/// once): only what a status answer reads, without the maps of [`Server`]
/// (a `BTreeMap` allocates a node of eleven entries for even one, which made
/// a 10,000-server list cost about 2 KiB a server).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ListedServer {
    /// Server id.
    #[serde(default)]
    id: String,
    /// Server name (the machine name).
    #[serde(default)]
    name: String,
    /// Nova's status.
    #[serde(default)]
    status: String,
    /// Nova's task state.
    #[serde(default, rename = "OS-EXT-STS:task_state")]
    task_state: Option<String>,
    /// Every address of every network, in the order [`Server::addresses`] gives them.
    #[serde(default, deserialize_with = "flat_addresses")]
    addresses: Vec<String>,
    /// The machine uid and the marker keys of the metadata (the rest is not kept).
    #[serde(default, rename = "metadata", deserialize_with = "listed_metadata")]
    metadata: ListedMetadata,
    /// Why the server is in ERROR.
    #[serde(default)]
    fault: Option<crate::os::model::Fault>,
}

impl ListedServer {
    /// The server as a status answer reads it (addresses under one network
    /// named "", metadata the uid alone).
    fn to_server(&self) -> Server {
        let addresses: Vec<ServerAddress> = self.addresses.iter().map(|a| ServerAddress { addr: a.clone() }).collect();
        Server {
            id: self.id.clone(),
            name: self.name.clone(),
            status: self.status.clone(),
            task_state: self.task_state.clone(),
            addresses: if addresses.is_empty() {
                BTreeMap::new()
            } else {
                BTreeMap::from([(String::new(), addresses)])
            },
            metadata: self
                .metadata
                .markers
                .iter()
                .map(|key| (key.to_string(), String::new()))
                .chain(self.metadata.uid.iter().map(|uid| (MACHINE_UID_KEY.to_string(), uid.clone())))
                .collect(),
            fault: self.fault.clone(),
            ..Server::default()
        }
    }
}

/// Nova's `addresses` (network name → addresses), flattened.
fn flat_addresses<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let by_network = BTreeMap::<String, Vec<ServerAddress>>::deserialize(d)?;
    Ok(by_network.into_values().flatten().map(|a| a.addr).collect())
}

/// What a listed server keeps of its metadata: what the ownership rule reads.
#[derive(Debug, Clone, Default)]
struct ListedMetadata {
    /// The machine uid, when the server has one.
    uid: Option<String>,
    /// The keys that may be a class's markers (containing the cluster or
    /// role part); their values are not read.
    markers: Vec<Box<str>>,
}

/// The uid and the marker keys of Nova's `metadata`.
fn listed_metadata<'de, D: Deserializer<'de>>(d: D) -> Result<ListedMetadata, D::Error> {
    let mut metadata = BTreeMap::<String, String>::deserialize(d)?;
    let uid = metadata.remove(MACHINE_UID_KEY);
    let markers = metadata
        .into_keys()
        .filter(|k| k.contains(crate::spec::CLUSTER_TAG) || k.contains(crate::spec::ROLE_TAG))
        .map(String::into_boxed_str)
        .collect();
    Ok(ListedMetadata { uid, markers })
}

/// A page of a prefix list.
#[derive(Debug, Deserialize)]
struct ListedPage {
    /// The servers.
    #[serde(default)]
    servers: Vec<ListedServer>,
    /// `next` when the page is full.
    #[serde(default)]
    servers_links: Vec<Link>,
}

/// The coalescers of one driver, per credentials and region.
#[derive(Debug)]
pub(crate) struct ServerLookups {
    by_scope: KeyedCache<([u8; 32], String), Coalescer<ServerKey, Found>>,
}

impl Default for ServerLookups {
    fn default() -> Self {
        Self { by_scope: KeyedCache::new(MAX_COALESCERS) }
    }
}

impl ServerLookups {
    /// The server `id` (of machine `name`, "" when unknown); `None` when Nova does not show it.
    pub(crate) async fn get(
        &self,
        api: &Api<'_>,
        fingerprint: [u8; 32],
        id: &str,
        name: &str,
    ) -> Result<Option<Found>, DriverError> {
        let coalescer = self.by_scope.get_or_insert_with(&(fingerprint, api.region().to_string()), || {
            Coalescer::new("compute servers.list", batch_fetch(api.shared()), MAX_BATCH, BATCHES_IN_FLIGHT)
        });
        coalescer.get_within(api.context(), (id.to_string(), name.to_string())).await
    }
}

/// One batch: the named servers the last prefix list answers from it; the
/// others by id when only one is left (and those without a name, always),
/// else listed ([`read_named`]).
fn batch_fetch(shared: SharedApi) -> BatchFn<ServerKey, Found> {
    // Keyed by server id; an answer also needs the name asked for.
    let last_list: Arc<RecentList<ListedServer>> = Arc::new(RecentList::new(LIST_REUSE, str::to_owned));
    Arc::new(move |keys: Vec<ServerKey>, ctx: CallContext| {
        let shared = shared.clone();
        let last_list = Arc::clone(&last_list);
        Box::pin(async move {
            let api = shared.bind(&ctx);
            let (named, unnamed): (Vec<_>, Vec<_>) = keys.into_iter().partition(|(_, name)| !name.is_empty());
            let mut out = HashMap::new();
            let mut missing = Vec::new();
            for key in named {
                match from_recent_list(&last_list, &key) {
                    Some(server) => {
                        out.insert(key, Found { server, listed: true });
                    }
                    None => missing.push(key),
                }
            }
            let by_id = if missing.len() == 1 {
                missing.iter().chain(&unnamed).collect::<Vec<_>>()
            } else {
                unnamed.iter().collect()
            };
            for key in by_id {
                if let Some(server) = get_server(&api, &key.0).await? {
                    out.insert(key.clone(), Found { server, listed: false });
                }
            }
            if missing.len() > 1 {
                for (key, server) in read_named(&api, &last_list, &missing).await? {
                    out.insert(key, Found { server, listed: true });
                }
            }
            Ok(out)
        })
    })
}

/// The server `key` names from the last prefix list, when that started less
/// than [`LIST_REUSE`] ago and shows the server under that id and name.
fn from_recent_list(last_list: &RecentList<ListedServer>, key: &ServerKey) -> Option<Server> {
    let (_, found) = last_list.answering(std::slice::from_ref(&key.0))?;
    found.get(&key.0).filter(|server| server.name == key.1).map(ListedServer::to_server)
}

/// The servers of `keys` (several, all named) by listing: one prefix list
/// (kept in `last_list`) when there are more than [`MAX_NAMES_FILTER`] with a
/// common prefix of at least [`MIN_PREFIX_CHARS`], else exact-names lists of
/// up to [`MAX_NAMES_FILTER`] each. Only servers matching a key's id and name.
async fn read_named(
    api: &Api<'_>,
    last_list: &RecentList<ListedServer>,
    keys: &[ServerKey],
) -> Result<HashMap<ServerKey, Server>, DriverError> {
    let prefix = common_prefix(keys.iter().map(|(_, name)| name.as_str()));
    if keys.len() > MAX_NAMES_FILTER && prefix.chars().count() >= MIN_PREFIX_CHARS {
        let started = Instant::now();
        let query = [("name", prefix_filter(prefix)), ("limit", PREFIX_PAGE_LIMIT.to_string())];
        let call = Call::get(Service::Compute, "servers.list", "/servers/detail");
        let servers = api.all_pages(call, &query, |p: ListedPage| (p.servers, p.servers_links)).await?;
        let live = servers.into_iter().filter(|s| !s.status.eq_ignore_ascii_case("DELETED"));
        let ids: Vec<String> = keys.iter().map(|(id, _)| id.clone()).collect();
        let (_, found) = last_list.keep(started, live.map(|s| (s.id.clone(), s)), &ids);
        return Ok(keys
            .iter()
            .filter_map(|key| {
                let server = found.get(&key.0).filter(|s| s.name == key.1)?;
                Some((key.clone(), server.to_server()))
            })
            .collect());
    }
    let wanted: HashSet<&ServerKey> = keys.iter().collect();
    let filters: Vec<String> =
        keys.chunks(MAX_NAMES_FILTER).map(|chunk| exact_names_filter(chunk.iter().map(|(_, n)| n.as_str()))).collect();
    let lists: Vec<Vec<Server>> = futures::stream::iter(filters)
        .map(|filter| async move { list_servers(api, &[("name", filter)]).await })
        .buffer_unordered(NAME_LISTS_IN_FLIGHT)
        .try_collect()
        .await?;
    Ok(lists
        .into_iter()
        .flatten()
        .map(|server| ((server.id.clone(), server.name.clone()), server))
        .filter(|(key, _)| wanted.contains(key))
        .collect())
}

/// `GET /servers/{id}` (`id` checked and encoded as one path segment); `None` on 404.
pub(crate) async fn get_server(api: &Api<'_>, id: &str) -> Result<Option<Server>, DriverError> {
    let path = format!("/servers/{}", request_id("machine.providerID", id)?);
    match api.json::<ServerOne>(Call::get(Service::Compute, "servers.get", &path), &[], None).await {
        Ok(one) => Ok(Some(one.server).filter(|s| !s.status.eq_ignore_ascii_case("DELETED"))),
        Err(CallFailure::Cloud(_, f)) if f.is_not_found() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Every server of the project matching `query` (`GET /servers/detail`, every page).
pub(crate) async fn list_servers(api: &Api<'_>, query: &[(&str, String)]) -> Result<Vec<Server>, DriverError> {
    Ok(api
        .all_pages(Call::get(Service::Compute, "servers.list", "/servers/detail"), query, |p: ServersPage| {
            (p.servers, p.servers_links)
        })
        .await?
        .into_iter()
        .filter(|s| !s.status.eq_ignore_ascii_case("DELETED"))
        .collect())
}

/// The servers named exactly as `machine` (`GET /servers/detail?name=^<name>$`),
/// judged ([`crate::ownership::judge_all`]): its own (duplicates included,
/// also one the Go provider made) and the foreign ones of its name.
pub(crate) async fn find_machine(
    api: &Api<'_>,
    markers: &ClusterMarkers,
    machine: &Machine,
) -> Result<Judged, DriverError> {
    let named = list_servers(api, &[("name", exact_names_filter([machine.name.as_str()]))]).await?;
    Ok(judge_all(markers, named, machine))
}

/// At most one server of a machine; OUT_OF_RANGE (duplicate) for more.
pub(crate) fn at_most_one(mut found: Vec<Server>, name: &str) -> Result<Option<Server>, DriverError> {
    match found.len() {
        0 | 1 => Ok(found.pop()),
        _ => Err(DriverError::duplicate_vms(name, found.iter().map(|s| &s.id))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_servers_answer_as_the_servers_they_were() {
        let json = serde_json::json!({
            "id": "s-1", "name": "m-1", "status": "ACTIVE", "OS-EXT-STS:task_state": null,
            "addresses": {"net-b": [{"addr": "fd00::a", "version": 6}], "net-a": [{"addr": "10.250.0.10", "version": 4}]},
            "metadata": {"kubernetes.io-cluster-x": "1", "mcm.gardener.cloud-machine-uid": "uid-1"},
            "fault": {"message": "boom"}
        });
        let full: Server = serde_json::from_value(json.clone()).unwrap();
        let listed: ListedServer = serde_json::from_value(json).unwrap();
        let again = listed.to_server();
        assert_eq!((again.id.as_str(), again.name.as_str(), again.status.as_str()), ("s-1", "m-1", "ACTIVE"));
        assert_eq!(again.metadata.get(MACHINE_UID_KEY).map(String::as_str), Some("uid-1"));
        assert!(again.metadata.contains_key("kubernetes.io-cluster-x"), "the markers are kept: {:?}", again.metadata);
        assert_eq!(again.fault.map(|f| f.message), Some("boom".to_string()));
        let addrs = |s: &Server| crate::create::addresses(s).into_iter().map(|a| a.address).collect::<Vec<_>>();
        assert_eq!(addrs(&listed.to_server()), addrs(&full));
        let bare: ListedServer = serde_json::from_value(serde_json::json!({"id": "s-2", "name": "m-2"})).unwrap();
        assert!(bare.to_server().metadata.is_empty() && bare.to_server().addresses.is_empty());
    }
}
