//! Reading servers: one by id (`GET /servers/{id}`), a machine's by name
//! (`GET /servers/detail?name=^<name>$`, Nova's name filter being a regular
//! expression), and concurrent status polls of one credentials and region
//! coalesced: a batch of one is a `GET /servers/{id}`, a larger batch one
//! `GET /servers/detail` whose name filter matches every machine of the batch.
//!
//! The lookups of concurrent creates are coalesced too ([`CreateLookups`]):
//! one batch is one `GET /servers/detail?name=^(a|b|…)$` and, alongside, one
//! `GET /ports?name=a&name=b…` (Neutron takes a repeated filter as "any of").
//! A batch is read after every lookup in it was asked for, so each create
//! still sees every server and port made before it looked.

use std::collections::HashMap;
use std::sync::Arc;

use machine_driver_api::{BatchFn, CallContext, CallFailure, Coalescer, DriverError, ErrorKind, KeyedCache};

use crate::clients::{Api, Call, SharedApi};
use crate::naming::{MACHINE_UID_KEY, exact_names_filter};
use crate::os::keystone::Service;
use crate::os::model::{Port, Server, ServerOne, ServersPage};

/// Most servers per coalesced list (the name filter grows with each).
const MAX_BATCH: usize = 50;
/// Coalesced batches in flight at once per credentials and region.
const BATCHES_IN_FLIGHT: usize = 2;
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

/// The coalescers of one driver, per credentials and region.
#[derive(Debug)]
pub(crate) struct ServerLookups {
    by_scope: KeyedCache<([u8; 32], String), Coalescer<ServerKey, Server>>,
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
    ) -> Result<Option<Server>, DriverError> {
        let coalescer = self.by_scope.get_or_insert_with(&(fingerprint, api.region().to_string()), || {
            Coalescer::new("compute servers.list", batch_fetch(api.shared()), MAX_BATCH, BATCHES_IN_FLIGHT)
        });
        coalescer.get_within(api.context(), (id.to_string(), name.to_string())).await
    }
}

/// One batch: servers without a name by id, the others in one filtered list.
fn batch_fetch(shared: SharedApi) -> BatchFn<ServerKey, Server> {
    Arc::new(move |keys: Vec<ServerKey>, ctx: CallContext| {
        let shared = shared.clone();
        Box::pin(async move {
            let api = shared.bind(&ctx);
            let (named, unnamed): (Vec<_>, Vec<_>) = keys.into_iter().partition(|(_, name)| !name.is_empty());
            let mut out = HashMap::new();
            let by_id = if named.len() == 1 {
                named.iter().chain(&unnamed).collect::<Vec<_>>()
            } else {
                unnamed.iter().collect()
            };
            for key in by_id {
                if let Some(server) = get_server(&api, &key.0).await? {
                    out.insert(key.clone(), server);
                }
            }
            if named.len() > 1 {
                let filter = exact_names_filter(named.iter().map(|(_, n)| n.as_str()));
                let wanted: std::collections::HashSet<&ServerKey> = named.iter().collect();
                for server in list_servers(&api, &[("name", filter)]).await? {
                    let key = (server.id.clone(), server.name.clone());
                    if wanted.contains(&key) {
                        out.insert(key, server);
                    }
                }
            }
            Ok(out)
        })
    })
}

/// `GET /servers/{id}`; `None` on 404.
pub(crate) async fn get_server(api: &Api<'_>, id: &str) -> Result<Option<Server>, DriverError> {
    let path = format!("/servers/{id}");
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

/// The servers of machine `name` (uid `uid`, "" when unknown) in the
/// cluster `cluster_key`: named exactly `name`, carrying the cluster key, and
/// this uid or none at all (made by the Go provider, which looks machines up
/// by name). One with another uid belongs to another machine of the same name.
pub(crate) async fn find_machine(
    api: &Api<'_>,
    cluster_key: &str,
    name: &str,
    uid: &str,
) -> Result<Vec<Server>, DriverError> {
    let named = list_servers(api, &[("name", exact_names_filter([name]))]).await?;
    Ok(of_machine(named, cluster_key, name, uid))
}

/// The servers of machine `name` (uid `uid`) in the cluster among `servers` (see [`find_machine`]).
pub(crate) fn of_machine(servers: Vec<Server>, cluster_key: &str, name: &str, uid: &str) -> Vec<Server> {
    servers
        .into_iter()
        .filter(|s| s.name == name && s.metadata.contains_key(cluster_key))
        .filter(|s| uid.is_empty() || s.metadata.get(MACHINE_UID_KEY).is_none_or(|u| u == uid))
        .collect()
}

/// At most one server of a machine; OUT_OF_RANGE (duplicate) for more.
pub(crate) fn at_most_one(mut found: Vec<Server>, name: &str) -> Result<Option<Server>, DriverError> {
    match found.len() {
        0 | 1 => Ok(found.pop()),
        n => Err(DriverError::new(
            ErrorKind::Duplicate,
            "DUPLICATE_SERVERS",
            format!("{n} servers belong to machine {name}"),
        )),
    }
}
