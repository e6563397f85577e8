//! Neutron ports of a machine. The driver makes one port per network of the
//! class, named after the machine (as the Go provider names its port on a
//! user-managed network), tagged with the cluster and role keys, carrying the
//! pod CIDRs as allowed address pairs on a pod network from the start. The
//! server is created on these ports, so Neutron's `device_id` of a port tells
//! whether a server was made for it, even before Nova lists the server.
//!
//! Concurrent port creates of one credentials and region share one call
//! ([`PortCreates`]): a create waits a few milliseconds for others (the
//! creates of one coalesced lookup go on together) and those arriving while
//! a call is in flight wait for it; a lone one is sent as `POST /ports
//! {"port": …}`, several as Neutron's bulk create `POST /ports {"ports":
//! […]}`, which makes every port or none. A bulk create refused as a whole (a 4xx other
//! than 408 and 429: no port was made) is resent item by item (all at once), so each create
//! gets its own answer and one class's bad network fails no other machine; a
//! bulk create without an answer (5xx, timeout, throttled twice) fails each
//! create with that retryable error: its retry finds its port by name, free,
//! and reuses it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use machine_driver_api::{BATCH_DEADLINE, CallContext, CallFailure, DriverError, KeyedCache};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tracing::Instrument as _;

use crate::clients::{Api, Call, SharedApi, Verb};
use crate::errors::OsFailure;
use crate::naming::answered_id;
use crate::os::keystone::Service;
use crate::os::model::{AddressPair, Port, PortOne, PortsPage};

/// Most ports per bulk create.
const MAX_BULK: usize = 25;
/// Most queues.
const MAX_COALESCERS: usize = 256;

/// The post-creation step of OpenStack: the pod CIDRs as allowed address pairs.
pub(crate) const ADDRESS_PAIRS_STEP: &str = "allowed-address-pairs";

/// The ports named `name` (`GET /ports?name=`, every page).
pub(crate) async fn named(api: &Api<'_>, name: &str) -> Result<Vec<Port>, DriverError> {
    list(api, &[("name", name.to_string())]).await
}

/// The ports attached to server `id` (`GET /ports?device_id=`).
pub(crate) async fn of_server(api: &Api<'_>, id: &str) -> Result<Vec<Port>, DriverError> {
    list(api, &[("device_id", id.to_string())]).await
}

/// Every port matching `query` (every page).
pub(crate) async fn list(api: &Api<'_>, query: &[(&str, String)]) -> Result<Vec<Port>, DriverError> {
    api.all_pages(Call::get(Service::Network, "ports.list", "/ports"), query, |p: PortsPage| (p.ports, p.ports_links))
        .await
}

/// What a new port is made of.
#[derive(Debug, Clone)]
pub(crate) struct NewPort<'a> {
    /// The machine name.
    pub(crate) name: &'a str,
    /// The network id.
    pub(crate) network_id: &'a str,
    /// Subnets for fixed IPs (empty: Neutron's choice).
    pub(crate) subnets: &'a [String],
    /// Security group ids.
    pub(crate) security_groups: &'a [String],
    /// Pod CIDRs (empty on a network that is not a pod network).
    pub(crate) pod_cidrs: &'a [String],
    /// Tags (the cluster and role keys).
    pub(crate) tags: &'a [String],
}

/// Why a port was not made: the call's failure, or the driver's (the
/// create's deadline came before the shared call answered).
#[derive(Debug)]
pub(crate) enum PortFailure {
    /// Neutron refused, or did not answer.
    Call(CallFailure<OsFailure>),
    /// Not a call's failure.
    Driver(DriverError),
}

impl From<PortFailure> for DriverError {
    fn from(f: PortFailure) -> Self {
        match f {
            PortFailure::Call(f) => f.into(),
            PortFailure::Driver(e) => e,
        }
    }
}

/// One port to make: its body, told apart from every other by a number
/// (two creates are never merged, even with equal bodies).
#[derive(Debug, Clone)]
pub(crate) struct PortOrder {
    seq: u64,
    body: Arc<Value>,
}

impl PartialEq for PortOrder {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
    }
}

impl Eq for PortOrder {}

impl std::hash::Hash for PortOrder {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.seq.hash(state);
    }
}

/// The answer for one [`PortOrder`].
#[derive(Debug)]
pub(crate) struct Made(Result<Port, CallFailure<OsFailure>>);

impl Clone for Made {
    fn clone(&self) -> Self {
        Self(match &self.0 {
            Ok(port) => Ok(port.clone()),
            Err(f) => Err(copy_failure(f)),
        })
    }
}

fn copy_failure(f: &CallFailure<OsFailure>) -> CallFailure<OsFailure> {
    match f {
        CallFailure::Cloud(call, failure) => CallFailure::Cloud(*call, failure.clone()),
        CallFailure::Deadline(call) => CallFailure::Deadline(*call),
    }
}

/// How long the first port create of a batch waits for others to join it
/// (they come in a clump: the creates of one coalesced lookup go on together).
const WINDOW: std::time::Duration = std::time::Duration::from_millis(5);

/// A queued port create: the order, where its answer goes, the caller's span.
type Queued = (PortOrder, oneshot::Sender<Made>, tracing::Span);

/// The queue of one credentials and region.
#[derive(Debug)]
struct Bulk {
    shared: SharedApi,
    queue: std::sync::Mutex<(Vec<Queued>, bool)>,
}

/// The bulk port creates of one driver, per credentials and region.
#[derive(Debug)]
pub(crate) struct PortCreates {
    by_scope: KeyedCache<([u8; 32], String), Bulk>,
    seq: AtomicU64,
}

impl Default for PortCreates {
    fn default() -> Self {
        Self { by_scope: KeyedCache::new(MAX_COALESCERS), seq: AtomicU64::new(0) }
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl PortCreates {
    /// Makes the port `new`, in one call with the concurrent creates of
    /// these credentials and region; answers by the caller's deadline (the
    /// call goes on for the others).
    pub(crate) async fn create(
        &self,
        api: &Api<'_>,
        fingerprint: [u8; 32],
        new: &NewPort<'_>,
    ) -> Result<Port, PortFailure> {
        let bulk = self.by_scope.get_or_insert_with(&(fingerprint, api.region().to_string()), || Bulk {
            shared: api.shared(),
            queue: std::sync::Mutex::new((Vec::new(), false)),
        });
        let order = PortOrder { seq: self.seq.fetch_add(1, Ordering::Relaxed), body: Arc::new(port_body(new)) };
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut queue = lock(&bulk.queue);
            queue.0.push((order, tx, tracing::Span::current()));
            !std::mem::replace(&mut queue.1, true)
        };
        if start {
            tokio::spawn(flush(bulk));
        }
        match tokio::time::timeout_at(api.context().deadline(), rx).await {
            Ok(Ok(Made(answer))) => answer.map_err(PortFailure::Call),
            Ok(Err(_)) => Err(PortFailure::Driver(DriverError::internal("network ports.create was dropped"))),
            Err(_) => Err(PortFailure::Driver(DriverError::deadline_exceeded(
                "network ports.create did not answer before the call's deadline",
            ))),
        }
    }
}

/// Sends the queued creates, up to [`MAX_BULK`] per call, one call at a time,
/// each after a [`WINDOW`] for more to join; stops when the queue is empty.
async fn flush(bulk: Arc<Bulk>) {
    loop {
        tokio::time::sleep(WINDOW).await;
        let batch: Vec<Queued> = {
            let mut queue = lock(&bulk.queue);
            if queue.0.is_empty() {
                queue.1 = false;
                return;
            }
            // A create that gave up (its deadline, a cancelled call) needs no port.
            queue.0.retain(|(_, answer, _)| !answer.is_closed());
            if queue.0.is_empty() {
                queue.1 = false;
                return;
            }
            let n = queue.0.len().min(MAX_BULK);
            queue.0.drain(..n).collect()
        };
        let span = tracing::info_span!(parent: &batch[0].2, "bulk_port_create", ports = batch.len());
        for (_, _, follower) in &batch[1..] {
            span.follows_from(follower);
        }
        let orders: Vec<PortOrder> = batch.iter().map(|(o, _, _)| o.clone()).collect();
        let ctx = CallContext::with_timeout("bulk port create", BATCH_DEADLINE);
        let answers = make_ports(&bulk.shared.bind(&ctx), orders).instrument(span).await;
        for ((_, tx, _), made) in batch.into_iter().zip(answers) {
            let _ = tx.send(made);
        }
    }
}

/// The ports of `orders`, answers in their order: one alone by itself,
/// several in one bulk create (see the module docs).
async fn make_ports(api: &Api<'_>, orders: Vec<PortOrder>) -> Vec<Made> {
    if orders.len() > 1 {
        let body = json!({"ports": orders.iter().map(|o| o.body.as_ref().clone()).collect::<Vec<_>>()});
        let call = Call::new(Service::Network, "ports.create", Verb::Post, "/ports");
        match api.json::<PortsPage>(call, &[], Some(&body)).await {
            Ok(made) => {
                let matches = made.ports.len() == orders.len()
                    && made.ports.iter().zip(&orders).all(|(port, order)| {
                        order.body["name"].as_str() == Some(port.name.as_str())
                            && order.body["network_id"].as_str() == Some(port.network_id.as_str())
                    });
                if matches {
                    return made.ports.into_iter().map(|p| Made(Ok(p))).collect();
                }
                // Made, but which is which is unclear: each create's retry finds its port by name.
                let cloud_call = machine_driver_api::CloudCall {
                    provider: "openstack",
                    service: Service::Network.label(),
                    operation: "ports.create",
                };
                let failure = OsFailure::transport("answered other ports than it was asked for");
                return orders.iter().map(|_| Made(Err(CallFailure::Cloud(cloud_call, failure.clone())))).collect();
            }
            Err(f) if !refused_as_a_whole(&f) => return orders.iter().map(|_| Made(Err(copy_failure(&f)))).collect(),
            Err(_) => {} // no port was made: each alone, for its own answer
        }
    }
    // Resent concurrently (at most MAX_BULK, paced by the client's rate limit;
    // answers kept in order): a refused batch costs the time of one create,
    // not of 25 in a row.
    let resent = (0..orders.len()).map(|i| create_one(api, &orders[i].body));
    futures::future::join_all(resent).await.into_iter().map(Made).collect()
}

/// True when Neutron answered a refusal of the whole request (no port was
/// made, and an item may be at fault): a 4xx other than 408 and 429.
fn refused_as_a_whole(f: &CallFailure<OsFailure>) -> bool {
    f.cloud().and_then(|c| c.http_status).is_some_and(|s| (400..500).contains(&s) && s != 408 && s != 429)
}

/// The body of one port (the `{"port": …}` content).
fn port_body(new: &NewPort<'_>) -> Value {
    let mut port = json!({
        "name": new.name,
        "network_id": new.network_id,
        "tags": new.tags,
        "description": "made by machine-driver-openstack for its machine",
    });
    // No key at all (not an empty list) leaves Neutron's `default` group on the port.
    if !new.security_groups.is_empty() {
        port["security_groups"] = json!(new.security_groups);
    }
    if !new.subnets.is_empty() {
        port["fixed_ips"] = Value::Array(new.subnets.iter().map(|s| json!({"subnet_id": s})).collect());
    }
    if !new.pod_cidrs.is_empty() {
        port["allowed_address_pairs"] = Value::Array(new.pod_cidrs.iter().map(|c| json!({"ip_address": c})).collect());
    }
    port
}

/// `POST /ports` with the tags in the body; a Neutron that does not take
/// tags on create (before Ussuri: 400 naming `tags`) gets the port without
/// them and then `PUT /ports/{id}/tags`, as the Go provider tags its port.
async fn create_one(api: &Api<'_>, body: &Value) -> Result<Port, CallFailure<OsFailure>> {
    let call = Call::new(Service::Network, "ports.create", Verb::Post, "/ports");
    match api.json::<PortOne>(call, &[], Some(&json!({"port": body}))).await {
        Ok(created) => Ok(created.port),
        Err(CallFailure::Cloud(_, f)) if f.is_port_tags_refused() => {
            let mut port = body.clone();
            let tags = port.as_object_mut().and_then(|p| p.remove("tags")).unwrap_or_else(|| json!([]));
            let created: PortOne = api.json(call, &[], Some(&json!({"port": port}))).await?;
            let Ok(id) = answered_id("the id of a new port", &created.port.id) else {
                let cloud_call = machine_driver_api::CloudCall {
                    provider: "openstack",
                    service: Service::Network.label(),
                    operation: "ports.create",
                };
                return Err(CallFailure::Cloud(
                    cloud_call,
                    OsFailure::transport("answered a port id that is not an id"),
                ));
            };
            let path = format!("/ports/{id}/tags");
            api.json::<serde_json::Value>(
                Call::new(Service::Network, "ports.tags", Verb::Put, &path),
                &[],
                Some(&json!({"tags": tags})),
            )
            .await?;
            Ok(created.port)
        }
        Err(e) => Err(e),
    }
}

/// The pod CIDRs `port` lacks among its allowed address pairs.
pub(crate) fn missing_pairs<'c>(port: &Port, cidrs: &'c [String]) -> Vec<&'c String> {
    cidrs.iter().filter(|c| !port.allowed_address_pairs.iter().any(|p| same_prefix(&p.ip_address, c))).collect()
}

/// Adds the missing pod CIDRs to the port's pairs, keeping every pair it has
/// (`PUT /ports/{id}` replaces the list, so the merged list is sent: the Go
/// provider sent one CIDR at a time, and only the last survived), on the
/// condition that nobody changed the port since it was read (`If-Match` on
/// its revision: a concurrent change answers 412, UNAVAILABLE, and the retry
/// reads again). No call when nothing is missing; true when it wrote.
pub(crate) async fn add_pairs(api: &Api<'_>, port: &Port, cidrs: &[String]) -> Result<bool, DriverError> {
    let missing = missing_pairs(port, cidrs);
    if missing.is_empty() {
        return Ok(false);
    }
    let mut pairs: Vec<AddressPair> = port.allowed_address_pairs.clone();
    pairs.extend(missing.into_iter().map(|c| AddressPair { ip_address: c.clone(), mac_address: None }));
    let path = format!("/ports/{}", answered_id("the id of a port", &port.id)?);
    let body = serde_json::to_vec(&json!({"port": {"allowed_address_pairs": pairs}})).unwrap_or_default();
    let revision = port.revision_number.map(|r| format!("revision_number={r}"));
    let headers: Vec<(&str, &str)> = revision.as_deref().map(|r| ("If-Match", r)).into_iter().collect();
    let call = Call::new(Service::Network, "ports.update", Verb::Put, &path);
    api.raw_with(call, &[], Some((&body, "application/json")), &headers).await?;
    Ok(true)
}

/// `DELETE /ports/{id}`; OK when it is gone already.
pub(crate) async fn delete(api: &Api<'_>, id: &str) -> Result<(), DriverError> {
    let path = format!("/ports/{}", answered_id("the id of a port", id)?);
    match api.raw(Call::new(Service::Network, "ports.delete", Verb::Delete, &path), &[], None).await {
        Ok(_) => Ok(()),
        Err(CallFailure::Cloud(_, f)) if f.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// True when two IPs or CIDRs name the same prefix (`10.0.0.0/8` and a host
/// `10.0.0.1` differ; `fd00::/48` and `fd00:0::/48` are the same).
fn same_prefix(a: &str, b: &str) -> bool {
    let split = |s: &str| -> Option<(std::net::IpAddr, u8)> {
        let (ip, bits) = s.split_once('/').unwrap_or((s, ""));
        let ip: std::net::IpAddr = ip.trim().parse().ok()?;
        let bits = if bits.is_empty() { if ip.is_ipv4() { 32 } else { 128 } } else { bits.parse().ok()? };
        Some((ip, bits))
    };
    match (split(a), split(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_pairs_compare_prefixes() {
        let port = Port {
            allowed_address_pairs: vec![
                AddressPair { ip_address: "100.96.0.0/11".into(), mac_address: None },
                AddressPair { ip_address: "fd00:0:100::/48".into(), mac_address: Some("fa:16".into()) },
            ],
            ..Default::default()
        };
        let cidrs = vec!["100.96.0.0/11".to_string(), "fd00:0:100:0::/48".to_string(), "10.0.0.0/8".to_string()];
        assert_eq!(missing_pairs(&port, &cidrs), vec![&cidrs[2]]);
        assert!(same_prefix("10.0.0.1", "10.0.0.1/32"));
        assert!(!same_prefix("10.0.0.0/8", "10.0.0.0/16"));
    }
}
