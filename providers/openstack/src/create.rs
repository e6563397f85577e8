//! CreateMachine on OpenStack, idempotent without a client token (Nova has
//! none), and answering as soon as Nova's scheduler placed the server (the Go
//! provider waits up to 20 minutes for ACTIVE inside the call, blocking a
//! controller worker; here GetMachineStatus reports the build).
//!
//! One create per machine uid at a time in this process. Then, concurrently,
//! the machine's servers by name (`GET /servers/detail?name=^<name>$`) and its
//! ports by name (`GET /ports?name=<name>`), both shared with the concurrent
//! creates of the credentials and region ([`crate::lookup::CreateLookups`]:
//! `name=^(a|b|…)$` and `name=a&name=b…`, read after each create asked):
//! - one server of this machine (judged by the class's markers and the uid,
//!   [`crate::ownership`]; not one being deleted): adopted (more:
//!   OUT_OF_RANGE), unless it is in ERROR (below). A server of the name
//!   that is not the machine's (another cluster's, one made by hand, an
//!   earlier machine's) is left alone and not adopted: Nova does not keep
//!   names unique, so the machine gets its own server beside it;
//! - a port of the machine (both markers as tags) attached to a server the
//!   name lookup did not show: that server was created by an earlier attempt
//!   whose answer was lost. It is read (`GET /servers/{id}`) and adopted when
//!   judged the machine's, or adopted on the port's markers while Nova does
//!   not show it yet (Nova lists a server from its POST on, so the name
//!   lookup is the main guard; the port, bound once a compute host takes the
//!   server, is a second one for a cloud whose reads lag; Nova has no client
//!   token, so these lookups are what keeps a lost answer or a restart from
//!   making a second server). Such an adoption rests on what anyone in the
//!   project can set (a port's `device_id` and tags), so its record is not
//!   kept as the server's: delete and initialization by providerID read Nova
//!   first and judge Nova's record;
//! - created by this process a moment ago under the same credentials and
//!   region, and judged the machine's under this request's class (the record
//!   keeps the creating class's markers): the same answer, no call (unless
//!   the request's providerID names that server: a create with a providerID
//!   follows GetMachineStatus answering NOT_FOUND, so it is gone and the
//!   lookups decide);
//! - otherwise one port per network of the class (free ones of the machine,
//!   carrying both markers, reused, their pod CIDRs completed), made with the security groups, the
//!   cluster and role tags and the pod CIDRs as allowed address pairs (in one
//!   Neutron bulk create with the concurrent creates' ports:
//!   [`crate::ports::PortCreates`]), then
//!   `POST /servers` on those ports with the metadata (class tags plus the
//!   machine uid), user data, zone, key, config drive, server group hint and a
//!   boot volume (`rootDiskSize`, deleted with the server).
//!
//! The flavor and the image are resolved before any port is made: a flavor
//! the region does not offer is RESOURCE_EXHAUSTED
//! ([`crate::resolve::flavor_not_offered`]) and makes nothing. A server
//! refused for good (quota, bad class) leaves no port behind: the machine's
//! free ports are deleted before the error is answered. After a retryable
//! failure they stay for the retry to reuse.
//!
//! Nova answers `POST /servers` (202) before its scheduler runs, and a
//! server it cannot place ("cannot place it here": no host offers the flavor
//! or a feature in the zone, no capacity, an unsatisfiable server group) goes
//! to ERROR a moment later with the fault "No valid host was found". The
//! cluster autoscaler backs off a pool only when CreateMachine answers
//! RESOURCE_EXHAUSTED, so the create waits for the scheduler's verdict
//! ([`OpenStackDriver::scheduling_failure`]: status reads, shared with
//! concurrent polls, until the server is past `scheduling`; at most 10 s).
//! A failed server is removed with the machine's ports, as the Go provider's
//! `deleteOnFail` does (gardener/machine-controller-manager-provider-openstack
//! v0.27.1 `pkg/driver/executor/executor.go` `CreateMachine`, which maps the
//! fault through `NoValidHost` in `errors.go` to ResourceExhausted), and its
//! fault answered ([`crate::status::server_error`]); so is a server of the
//! machine an earlier attempt left in ERROR. Nothing is left: Nova binds no
//! port and makes no boot volume for a server it did not place, and a volume
//! of one that failed on its host goes with it (`delete_on_termination`).
//!
//! Cost of a new machine: 5 calls alone (2 lookups, port, server, the
//! verdict read); with k creates under way together, about 1 + 4/k (the
//! server, and a k-th of the two lookups, of the bulk port create and of the
//! verdict read). Plus, once per process, the flavor list and security group
//! lookups (one at a time: concurrent first creates wait for one answer). The
//! server POST is the floor: Nova makes distinct servers one per call and has
//! no idempotency token, so the lookups stay.

use base64::Engine as _;
use machine_driver_api::{
    Address, AddressType, CallContext, ClusterMarkers, CreateMachine, CreatedMachine, DriverError, ErrorKind, Ownership,
};
use serde_json::{Value, json};

use crate::clients::{Api, Call, Scoped, Verb};
use crate::credentials::OsCredentials;
use crate::driver::{Created, OpenStackDriver};
use crate::lookup::{at_most_one, get_server};
use crate::naming::{MACHINE_UID_KEY, answered_id, parse_provider_id, provider_id};
use crate::os::keystone::Service;
use crate::os::model::{Port, Server};
use crate::ownership::{judge_all, log_foreign, owned_record, port_is_mine};
use crate::ports::{self, NewPort};
use crate::spec::{OpenStackSpec, PortPlan};
use crate::status::server_error;

impl OpenStackDriver {
    /// CreateMachine (see the module docs).
    pub(crate) async fn create(&self, ctx: &CallContext, req: CreateMachine) -> Result<CreatedMachine, DriverError> {
        let creds = OsCredentials::from_secret(&req.secret, "secret")?;
        let spec = OpenStackSpec::parse(&req.class.provider_spec)?;
        let markers = spec.markers()?;
        let api = self.pool.api(&creds, &spec.region, ctx)?;
        let name = req.machine.name.as_str();
        let lock = self.create_locks.get_or_insert_with(&req.machine.uid, || tokio::sync::Mutex::new(()));
        let _one_create_per_machine = lock.lock().await;
        // This process created it a moment ago: the same answer, no call (Nova
        // may not list it yet). Unless the request names that server: a create
        // with a providerID follows GetMachineStatus answering NOT_FOUND, so
        // the server is gone (an operator, a failed host) and a new one is due.
        // Only under the same credentials and region, and only when the record
        // (the creating class's markers, name and uid) is the machine's under
        // this request's class: a create of the uid under another class gets
        // no server made for another, and leaves that server's record alone.
        let uid_key = api.scoped(&req.machine.uid);
        if let Some(record) = self.created_by_uid.get(&uid_key).filter(|r| !self.deleted.contains(&r.id)) {
            if names_server(req.machine.provider_id.as_deref(), &record.id) {
                self.created_by_uid.forget(&uid_key);
            } else {
                match markers.judge(&record, &req.machine) {
                    Ownership::Mine => return Ok(self.answer(&api, &spec, record, Source::Posted)),
                    Ownership::Foreign(why) => log_foreign("create", &record, why),
                }
            }
        }

        let named = self.create_lookups.get(&api, creds.fingerprint, name).await?;
        let named_ids: Vec<String> = named.servers.iter().map(|s| s.id.clone()).collect();
        // Nova does not keep names unique: a foreign server of this name is left alone, not adopted.
        // Nor is one being deleted (by this process a moment ago, or anyone): it cannot become the machine.
        let judged = judge_all(&markers, named.servers, &req.machine);
        let live: Vec<Server> =
            judged.mine.into_iter().filter(|s| !s.is_deleting() && !self.deleted.contains(&s.id)).collect();
        // Neutron unbinds a deleted server's ports a moment later: a port still
        // naming the server the request says is gone does not bring it back.
        let gone = |device: &str| names_server(req.machine.provider_id.as_deref(), device);
        // Only the machine's own ports (both markers as tags) are adopted through or reused.
        let (bound, existing_ports): (Vec<Port>, Vec<Port>) = named
            .ports
            .into_iter()
            .filter(|p| port_is_mine(&markers, p, &req.machine))
            .partition(|p| !p.device_id.is_empty() && !gone(&p.device_id));
        if let Some(server) = at_most_one(live, name)? {
            // An earlier attempt's server the scheduler failed (or still places): as for a new one.
            let failed = match failed_or_unplaced(&server) {
                Some(true) => Some(server.clone()),
                Some(false) => self.scheduling_failure(&api, creds.fingerprint, &server.id, name).await,
                None => None,
            };
            if let Some(failed) = failed {
                let ports: Vec<Port> =
                    bound.iter().filter(|p| p.device_id == failed.id).chain(&existing_ports).cloned().collect();
                return Err(self.discard_failed(&api, &failed, &ports, &uid_key).await);
            }
            return Ok(self.answer(&api, &spec, server, Source::Read));
        }
        if let Some((adopted, source)) = self.adopt_through_port(&api, &markers, &req, &bound, &named_ids).await? {
            return Ok(self.answer(&api, &spec, adopted, source));
        }

        let mut ports = Vec::new();
        let made = async {
            // The flavor and the image first: a class whose flavor the region does not
            // offer (RESOURCE_EXHAUSTED) or whose image is missing makes no port.
            let refs = self.server_refs(&api, &creds, &spec).await?;
            self.machine_ports(&api, &creds, &spec, name, existing_ports, &mut ports).await?;
            self.post_server(&api, &spec, &req, &ports, &refs).await
        }
        .await;
        match made {
            Ok(id) => {
                let record = owned_record(&id, name, &markers, &req.machine.uid);
                self.created_by_uid.record(uid_key.clone(), record.clone());
                if let Some(failed) = self.scheduling_failure(&api, creds.fingerprint, &id, name).await {
                    return Err(self.discard_failed(&api, &failed, &ports, &uid_key).await);
                }
                Ok(self.answer(&api, &spec, record, Source::Posted))
            }
            Err(e) if is_for_good(&e) => {
                if e.kind() == ErrorKind::InvalidArgument {
                    // A flavor, network or security group the cache names may be gone: look them up anew.
                    self.resolver.forget(creds.fingerprint, &spec.region);
                }
                // No server was made: take the machine's ports back, so a refused create leaves none behind.
                for port in &ports {
                    if let Err(cleanup) = ports::delete(&api, &port.id).await {
                        tracing::warn!(machine = name, port = %port.id, error = %cleanup, "could not delete the port of a refused create");
                    }
                }
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Waits for Nova's scheduler to decide on server `id` (of machine
    /// `name`), which `POST /servers` accepted before the scheduler ran: the
    /// server, when the scheduler failed it (ERROR, Nova's `NoValidHost` being
    /// the usual fault). `None` once a compute host took it (BUILD past
    /// `scheduling`, or ACTIVE), when a read does not show the server (reads
    /// that lag behind the POST give no verdict), and when there is none
    /// within [`SCHEDULING_WAIT`] (or half the call's remaining time): the
    /// create answers then, and GetMachineStatus reports a later failure. The reads
    /// are status reads, shared with concurrent polls and creates
    /// ([`crate::lookup::ServerLookups`]); one that fails is not the create's
    /// failure (the server was accepted), the next one is tried.
    async fn scheduling_failure(&self, api: &Api<'_>, fingerprint: [u8; 32], id: &str, name: &str) -> Option<Server> {
        let started = tokio::time::Instant::now();
        let budget = SCHEDULING_WAIT.min(api.context().remaining() / 2);
        let mut after = std::time::Duration::ZERO;
        for delay in VERDICT_POLLS {
            after += delay;
            let at = on_verdict_tick(started + after);
            if at > started + budget {
                break;
            }
            tokio::time::sleep_until(at).await;
            match self.lookups.get(api, fingerprint, id, name).await {
                Ok(Some(found)) => match failed_or_unplaced(&found.server) {
                    Some(true) => return Some(found.server),
                    Some(false) => {}
                    None => return None,
                },
                // Not shown (Nova lists a server from its POST on, as a build
                // request: a cloud whose reads lag): no verdict to wait for.
                Ok(None) => return None,
                Err(e) => {
                    tracing::debug!(machine = name, server = id, error = %e, "reading the server for the scheduler's verdict")
                }
            }
        }
        tracing::debug!(machine = name, server = id, "no scheduling verdict in time: answered as accepted");
        None
    }

    /// Removes what a create left of server `failed`, which Nova's scheduler
    /// (or a compute host) failed: the server (its boot volume goes with it,
    /// `delete_on_termination`) and the machine's `ports` (Nova binds none of
    /// them for a server it could not place), as the Go provider's
    /// `deleteOnFail` does; forgets the create of a moment ago, so that a retry
    /// starts afresh. The answer is the server's fault
    /// ([`crate::status::server_error`]: RESOURCE_EXHAUSTED for "No valid host
    /// was found"), also when a clean-up call fails (logged: the next create
    /// or the delete of the machine finds and removes what is left).
    async fn discard_failed(&self, api: &Api<'_>, failed: &Server, ports: &[Port], uid_key: &Scoped) -> DriverError {
        let error = server_error(failed);
        tracing::info!(machine = %failed.name, server = %failed.id, error = %error, "deleting the server the cloud failed, and its ports");
        self.created_by_uid.forget(uid_key);
        if let Err(cleanup) = self.delete_server(api, &failed.id).await {
            tracing::warn!(machine = %failed.name, server = %failed.id, error = %cleanup, "could not delete the server the cloud failed");
        }
        for port in ports {
            if let Err(cleanup) = ports::delete(api, &port.id).await {
                tracing::warn!(machine = %failed.name, port = %port.id, error = %cleanup, "could not delete the port of a failed server");
            }
        }
        error
    }

    /// The server a port of the machine is attached to while Nova does not
    /// list it under the machine's name: an earlier attempt whose answer was
    /// lost made it. `bound` are the machine's ports (both markers) attached
    /// to a server; one not among the servers the name lookup showed
    /// (`listed`, each judged there) is read (`GET /servers/{id}`) and adopted
    /// when judged the machine's ([`Source::Read`]); one Nova does not show
    /// yet (a lagging cloud) is adopted on its port's markers alone
    /// ([`Source::Unverified`]: a port's `device_id` and tags can be set by
    /// anyone in the project, so nothing later trusts that adoption without
    /// reading Nova), and one of another name, cluster or machine is not.
    async fn adopt_through_port(
        &self,
        api: &Api<'_>,
        markers: &ClusterMarkers,
        req: &CreateMachine,
        bound: &[Port],
        listed: &[String],
    ) -> Result<Option<(Server, Source)>, DriverError> {
        let name = req.machine.name.as_str();
        for port in bound.iter().filter(|p| !listed.contains(&p.device_id)) {
            answered_id("the device_id of a port", &port.device_id)?;
            let (record, source) = match get_server(api, &port.device_id).await? {
                Some(server) => (server, Source::Read),
                // The port's markers stand for the server's: judged as the port (both markers).
                None => (owned_record(&port.device_id, name, markers, &req.machine.uid), Source::Unverified),
            };
            match markers.judge(&record, &req.machine) {
                Ownership::Mine => {
                    tracing::info!(machine = name, server = %record.id, verified = matches!(source, Source::Read), "adopting the server a port of the machine is attached to");
                    return Ok(Some((record, source)));
                }
                Ownership::Foreign(why) => log_foreign("create", &record, why),
            }
        }
        Ok(None)
    }

    /// The create's answer for the server `record` (judged the machine's, or
    /// made by this create), remembered for the polls, the initialization and
    /// a delete that follow (a record of [`Source::Unverified`] is not: those
    /// read Nova); its addresses when Nova answered the record.
    fn answer(&self, api: &Api<'_>, spec: &OpenStackSpec, record: Server, source: Source) -> CreatedMachine {
        let id = record.id.clone();
        let name = record.name.clone();
        let key = api.scoped(&id);
        self.recent.record(key.clone(), Created { name: name.clone() });
        if matches!(source, Source::Posted) {
            self.pairs_complete.insert(id.clone(), std::sync::Arc::new(()));
        }
        self.deleted.forget(&id);
        let addresses = if matches!(source, Source::Read) { addresses(&record) } else { Vec::new() };
        match source {
            Source::Posted | Source::Read => self.made.record(key, record),
            // Never kept as the server's record, nor left standing from an earlier answer.
            Source::Unverified => self.made.forget(&key),
        }
        CreatedMachine {
            provider_id: provider_id(&spec.region, &id),
            node_name: name,
            last_known_state: String::new(),
            addresses,
        }
    }

    /// One port per network of the class into `out`: a free port of the
    /// machine on that network is reused (its pod CIDRs completed), else one
    /// is made. On failure `out` holds the ports made or reused so far.
    async fn machine_ports(
        &self,
        api: &Api<'_>,
        creds: &OsCredentials,
        spec: &OpenStackSpec,
        name: &str,
        mut existing: Vec<Port>,
        out: &mut Vec<Port>,
    ) -> Result<(), DriverError> {
        let cidrs = spec.pod_cidrs();
        let tags = port_tags(&spec.markers()?);
        let mut security_groups: Option<Vec<String>> = None;
        for (i, (plan, pod)) in spec.port_plans().into_iter().enumerate() {
            let field = if spec.networks.is_empty() {
                "providerSpec.spec.networkID".to_string()
            } else {
                format!("providerSpec.spec.networks[{i}]")
            };
            let network_id = self.resolver.network(creds.fingerprint, api, &plan.network, &field).await?;
            let pod_cidrs: &[String] = if pod { &cidrs } else { &[] };
            if let Some(at) = existing.iter().position(|p| p.network_id == network_id) {
                let port = existing.swap_remove(at);
                out.push(port.clone());
                ports::add_pairs(api, &port, pod_cidrs).await?;
                continue;
            }
            let sgs = match &security_groups {
                Some(s) => s.clone(),
                None => {
                    let s = self.resolver.security_groups(creds.fingerprint, api, &spec.security_groups).await?;
                    security_groups = Some(s.clone());
                    s
                }
            };
            let new = NewPort {
                name,
                network_id: &network_id,
                subnets: &plan.subnets,
                security_groups: &sgs,
                pod_cidrs,
                tags: &tags,
            };
            let port = self
                .port_creates
                .create(api, creds.fingerprint, &new)
                .await
                .map_err(|f| port_error(f, &plan, &field))?;
            out.push(port);
        }
        Ok(())
    }

    /// The flavor id (RESOURCE_EXHAUSTED when the region does not offer the
    /// flavor, [`crate::resolve::Resolver::flavor`]) and image id of the class.
    async fn server_refs(
        &self,
        api: &Api<'_>,
        creds: &OsCredentials,
        spec: &OpenStackSpec,
    ) -> Result<ServerRefs, DriverError> {
        let flavor = self.resolver.flavor(creds.fingerprint, api, spec.flavor_name.trim()).await?;
        let image = crate::resolve::image_id(api, spec.image()).await?;
        Ok(ServerRefs { flavor, image })
    }

    /// `POST /servers` on `ports`; the new server's id.
    async fn post_server(
        &self,
        api: &Api<'_>,
        spec: &OpenStackSpec,
        req: &CreateMachine,
        ports: &[Port],
        refs: &ServerRefs,
    ) -> Result<String, DriverError> {
        let body = server_body(spec, req, ports, &refs.flavor, &refs.image);
        let created: Value =
            api.json(Call::new(Service::Compute, "servers.create", Verb::Post, "/servers"), &[], Some(&body)).await?;
        created
            .pointer("/server/id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map(str::to_string)
            .ok_or_else(|| DriverError::internal("compute servers.create answered without a server id"))
    }
}

/// The ids `POST /servers` names besides the ports.
struct ServerRefs {
    /// Flavor id.
    flavor: String,
    /// Image id.
    image: String,
}

/// Most time a create waits for Nova's scheduler to place the server it
/// accepted ([`OpenStackDriver::scheduling_failure`]); typically a second or two.
const SCHEDULING_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// The waits between the reads of a new server for the scheduler's verdict
/// (at 0.5, 1.5, 3.5, 5.5, 7.5 and 9.5 s, each on the next [`VERDICT_TICK`]):
/// one read for a scheduler that decides within half a second, two or three
/// for one that takes a second or two.
const VERDICT_POLLS: [std::time::Duration; 6] = [
    std::time::Duration::from_millis(500),
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(2),
    std::time::Duration::from_secs(2),
    std::time::Duration::from_secs(2),
    std::time::Duration::from_secs(2),
];

/// The ticks the verdict reads of all creates go out on ([`on_verdict_tick`]).
const VERDICT_TICK: std::time::Duration = std::time::Duration::from_secs(1);

/// The first [`VERDICT_TICK`] at or after `at`, on one clock for the
/// process: the verdict reads of concurrent creates go out together and are
/// coalesced into one list ([`crate::lookup::ServerLookups`]) rather than one
/// `GET /servers/{id}` each at its own moment.
fn on_verdict_tick(at: tokio::time::Instant) -> tokio::time::Instant {
    static EPOCH: std::sync::OnceLock<tokio::time::Instant> = std::sync::OnceLock::new();
    let epoch = *EPOCH.get_or_init(tokio::time::Instant::now);
    let since = at.saturating_duration_since(epoch).as_nanos();
    let tick = VERDICT_TICK.as_nanos();
    let ticks = since.div_ceil(tick);
    let offset = u64::try_from(ticks.saturating_mul(tick)).unwrap_or(u64::MAX);
    epoch + std::time::Duration::from_nanos(offset)
}

/// Where a server is with Nova's scheduler: `Some(true)` failed (ERROR, not
/// being deleted), `Some(false)` not placed yet (BUILD in task `scheduling`),
/// `None` placed (a compute host took it: past `scheduling`, ACTIVE, or any
/// other state).
fn failed_or_unplaced(server: &Server) -> Option<bool> {
    if server.status.eq_ignore_ascii_case("ERROR") && !server.is_deleting() {
        return Some(true);
    }
    let scheduling = server.task_state.as_deref().is_some_and(|t| t.eq_ignore_ascii_case("scheduling"));
    (server.status.eq_ignore_ascii_case("BUILD") && scheduling).then_some(false)
}

/// Where the record a create answers with comes from, which decides whether
/// it may stand in for Nova's record later ([`OpenStackDriver::made`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// This process's `POST /servers` (name, markers and uid as sent; its
    /// ports were made with every pod CIDR).
    Posted,
    /// Nova's record, read by this create and judged the machine's.
    Read,
    /// Made up from the request (its name, markers and uid) for a server a
    /// port of the machine is attached to while Nova does not show it: the
    /// create answers it, but delete and initialization read Nova first and
    /// judge Nova's record.
    Unverified,
}

/// True when `provider_id` names server `id`.
fn names_server(provider_id: Option<&str>, id: &str) -> bool {
    provider_id.and_then(|p| parse_provider_id(p).ok()).is_some_and(|(_, named)| named == id)
}

/// True for a refusal that a retry with the same class cannot turn into a
/// server (retryable kinds leave the ports for the retry).
fn is_for_good(e: &DriverError) -> bool {
    !matches!(
        e.kind(),
        ErrorKind::Unavailable | ErrorKind::DeadlineExceeded | ErrorKind::Internal | ErrorKind::Unauthenticated
    )
}

/// A refused `POST /ports`: a network, subnet or security group the class
/// names that Neutron does not know is the class's fault.
fn port_error(f: ports::PortFailure, plan: &PortPlan, field: &str) -> DriverError {
    let f = match f {
        ports::PortFailure::Call(f) => f,
        ports::PortFailure::Driver(e) => return e,
    };
    let missing = f
        .cloud()
        .filter(|c| {
            matches!(c.name.as_str(), "NetworkNotFound" | "SubnetNotFound" | "SecurityGroupNotFound" | "InvalidInput")
        })
        .cloned();
    match missing {
        Some(c) => {
            let field = match c.name.as_str() {
                "SecurityGroupNotFound" => "providerSpec.spec.securityGroups".to_string(),
                "SubnetNotFound" if !plan.subnets.is_empty() => "providerSpec.spec.subnetIDs".to_string(),
                _ => field.to_string(),
            };
            DriverError::invalid_argument(
                field,
                format!("network ports.create refused it: {} {}", c.name, c.message.trim()),
            )
        }
        None => f.into(),
    }
}

/// The metadata `POST /servers` gives a machine's server: the class's tags
/// and the machine uid ([`MACHINE_UID_KEY`]). UpdateMachine keeps a server
/// at exactly this set ([`crate::update`]).
pub(crate) fn server_metadata(spec: &OpenStackSpec, uid: &str) -> std::collections::BTreeMap<String, String> {
    let mut metadata = spec.tags.clone();
    metadata.insert(MACHINE_UID_KEY.to_string(), uid.to_string());
    metadata
}

/// The Neutron tags a machine's port is made with: the class's cluster and
/// role keys (as the Go provider's `TagPort` does with `findMandatoryTags`).
pub(crate) fn port_tags(markers: &ClusterMarkers) -> Vec<String> {
    vec![markers.cluster().to_string(), markers.role().to_string()]
}

/// The body of `POST /servers`.
pub(crate) fn server_body(
    spec: &OpenStackSpec,
    req: &CreateMachine,
    ports: &[Port],
    flavor: &str,
    image: &str,
) -> Value {
    let metadata: serde_json::Map<String, Value> =
        server_metadata(spec, &req.machine.uid).into_iter().map(|(k, v)| (k, Value::String(v))).collect();
    let mut server = json!({
        "name": req.machine.name,
        "flavorRef": flavor,
        "networks": ports.iter().map(|p| json!({"port": p.id})).collect::<Vec<_>>(),
        "metadata": metadata,
        "availability_zone": spec.availability_zone.trim(),
    });
    if spec.root_disk_size > 0 {
        let mut bdm = json!({
            "boot_index": 0,
            "uuid": image,
            "source_type": "image",
            "destination_type": "volume",
            "volume_size": spec.root_disk_size,
            "delete_on_termination": true,
        });
        if let Some(t) = spec.root_disk_type.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            bdm["volume_type"] = json!(t);
        }
        server["block_device_mapping_v2"] = json!([bdm]);
        server["imageRef"] = json!("");
    } else {
        server["imageRef"] = json!(image);
    }
    if let Some(key) = spec.key_name.as_deref().map(str::trim).filter(|k| !k.is_empty()) {
        server["key_name"] = json!(key);
    }
    if spec.use_config_drive == Some(true) {
        server["config_drive"] = json!(true);
    }
    if !req.user_data.0.is_empty() {
        server["user_data"] = json!(base64::engine::general_purpose::STANDARD.encode(&req.user_data.0));
    }
    let mut body = json!({"server": server});
    if let Some(group) = spec.server_group_id.as_deref().map(str::trim).filter(|g| !g.is_empty()) {
        body["os:scheduler_hints"] = json!({"group": group});
    }
    body
}

/// The addresses of a server: every fixed IP, then its host name.
pub(crate) fn addresses(server: &Server) -> Vec<Address> {
    let mut out: Vec<Address> = server
        .addresses
        .values()
        .flatten()
        .filter(|a| !a.addr.is_empty())
        .map(|a| Address::new(AddressType::InternalIp, a.addr.clone()))
        .collect();
    out.push(Address::new(AddressType::Hostname, server.name.clone()));
    out
}

#[cfg(test)]
mod tests {
    use machine_driver_api::{Machine, MachineClass, SecretBytes};

    use super::*;

    #[test]
    fn server_body_carries_everything_the_class_asks_for() {
        let mut class = crate::spec::tests_support::example();
        class["spec"]["rootDiskSize"] = json!(50);
        class["spec"]["rootDiskType"] = json!("ssd");
        class["spec"]["useConfigDrive"] = json!(true);
        class["spec"]["serverGroupID"] = json!("sg-1");
        let spec = OpenStackSpec::parse(&serde_json::to_vec(&class).unwrap()).unwrap();
        let req = CreateMachine {
            machine: Machine { name: "m-1".into(), uid: "uid-1".into(), ..Default::default() },
            class: MachineClass::default(),
            secret: Default::default(),
            user_data: SecretBytes(b"#!/bin/sh".to_vec()),
        };
        let ports = vec![Port { id: "p-1".into(), ..Default::default() }];
        let body = server_body(&spec, &req, &ports, "4", "img");
        let s = &body["server"];
        assert_eq!(s["name"], "m-1");
        assert_eq!(s["flavorRef"], "4");
        assert_eq!(s["networks"], json!([{"port": "p-1"}]));
        assert_eq!(s["metadata"][MACHINE_UID_KEY], "uid-1");
        assert_eq!(s["metadata"]["kubernetes.io-role-node"], "1");
        assert_eq!(s["user_data"], "IyEvYmluL3No");
        assert_eq!(s["config_drive"], true);
        assert_eq!(s["key_name"], "shoot--dev--conf-ssh-publickey");
        assert_eq!(s["imageRef"], "");
        assert_eq!(s["block_device_mapping_v2"][0]["volume_type"], "ssd");
        assert_eq!(s["block_device_mapping_v2"][0]["volume_size"], 50);
        assert_eq!(s["block_device_mapping_v2"][0]["delete_on_termination"], true);
        assert_eq!(body["os:scheduler_hints"]["group"], "sg-1");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any class the parser accepts reaches `POST /servers` field by field.
        #[test]
        fn every_accepted_class_reaches_the_server_body(
            zone in "[ -~]{0,12}",
            key in proptest::option::of("[ -~]{0,12}"),
            root_disk_size in -2i64..400,
            root_disk_type in proptest::option::of("[a-z ]{0,6}"),
            config_drive in proptest::option::of(proptest::bool::ANY),
            group in proptest::option::of("[ -~]{0,10}"),
            tags in proptest::collection::btree_map("[a-z.-]{1,10}", "[ -~]{0,10}", 0..4),
            user_data in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
        ) {
            let mut class = crate::spec::tests_support::example();
            let spec_json = &mut class["spec"];
            spec_json["availabilityZone"] = json!(zone);
            spec_json["keyName"] = json!(key);
            spec_json["rootDiskSize"] = json!(root_disk_size);
            spec_json["rootDiskType"] = json!(root_disk_type);
            spec_json["useConfigDrive"] = json!(config_drive);
            spec_json["serverGroupID"] = json!(group);
            for (k, v) in &tags {
                spec_json["tags"][k] = json!(v);
            }
            let Ok(spec) = OpenStackSpec::parse(&serde_json::to_vec(&class).unwrap()) else {
                return Ok(()); // refused classes are the validation tests' business
            };
            let req = CreateMachine {
                machine: Machine { name: "m-1".into(), uid: "uid-1".into(), ..Default::default() },
                class: MachineClass::default(),
                secret: Default::default(),
                user_data: SecretBytes(user_data.clone()),
            };
            let body = server_body(&spec, &req, &[Port { id: "p-1".into(), ..Default::default() }], "4", "img");
            let s = &body["server"];
            proptest::prop_assert_eq!(&s["availability_zone"], &json!(zone.trim()));
            match key.as_deref().map(str::trim).filter(|k| !k.is_empty()) {
                Some(k) => proptest::prop_assert_eq!(&s["key_name"], &json!(k)),
                None => proptest::prop_assert!(s.get("key_name").is_none()),
            }
            if root_disk_size > 0 {
                let bdm = &s["block_device_mapping_v2"][0];
                proptest::prop_assert_eq!(&bdm["volume_size"], &json!(root_disk_size));
                proptest::prop_assert_eq!(&bdm["uuid"], "img");
                let disk_type = root_disk_type.as_deref().map(str::trim).filter(|t| !t.is_empty());
                proptest::prop_assert_eq!(bdm.get("volume_type").and_then(Value::as_str), disk_type);
                proptest::prop_assert_eq!(&s["imageRef"], "");
            } else {
                proptest::prop_assert_eq!(&s["imageRef"], "img");
                proptest::prop_assert!(s.get("block_device_mapping_v2").is_none());
            }
            proptest::prop_assert_eq!(s.get("config_drive").is_some(), config_drive == Some(true));
            let hinted = body.get("os:scheduler_hints").and_then(|h| h["group"].as_str());
            proptest::prop_assert_eq!(hinted, group.as_deref().map(str::trim).filter(|g| !g.is_empty()));
            for (k, v) in &spec.tags {
                proptest::prop_assert_eq!(&s["metadata"][k], &json!(v), "tag {}", k);
            }
            let encoded = (!user_data.is_empty()).then(|| base64::engine::general_purpose::STANDARD.encode(&user_data));
            proptest::prop_assert_eq!(s.get("user_data").and_then(Value::as_str), encoded.as_deref());
        }
    }

    #[test]
    fn verdict_reads_of_concurrent_creates_share_a_tick() {
        let now = tokio::time::Instant::now();
        let a = on_verdict_tick(now + std::time::Duration::from_millis(500));
        let b = on_verdict_tick(now + std::time::Duration::from_millis(510));
        assert!(a >= now + std::time::Duration::from_millis(500), "never before the wait asked for");
        assert!(a < now + std::time::Duration::from_millis(500) + VERDICT_TICK);
        let c = on_verdict_tick(a + VERDICT_TICK / 2);
        assert_eq!(c, a + VERDICT_TICK, "the next tick");
        assert!(b == a || b == a + VERDICT_TICK, "{a:?} {b:?}");
        assert_eq!(on_verdict_tick(a), a, "a tick is its own tick");
    }

    #[test]
    fn the_schedulers_verdict_is_read_from_status_and_task_state() {
        let server = |status: &str, task: Option<&str>| Server {
            status: status.into(),
            task_state: task.map(str::to_string),
            ..Default::default()
        };
        assert_eq!(failed_or_unplaced(&server("BUILD", Some("scheduling"))), Some(false));
        assert_eq!(failed_or_unplaced(&server("ERROR", None)), Some(true));
        assert_eq!(failed_or_unplaced(&server("ERROR", Some("deleting"))), None, "being deleted: no verdict");
        assert_eq!(failed_or_unplaced(&server("BUILD", Some("spawning"))), None, "on a host");
        assert_eq!(failed_or_unplaced(&server("BUILD", None)), None, "on a host, before networking");
        assert_eq!(failed_or_unplaced(&server("ACTIVE", None)), None);
    }

    #[test]
    fn retryable_failures_keep_the_ports() {
        assert!(!is_for_good(&DriverError::unavailable("x", "y", std::time::Duration::from_secs(1))));
        assert!(is_for_good(&DriverError::new(ErrorKind::ResourceExhausted, "x", "y")));
        assert!(is_for_good(&DriverError::invalid_argument("f", "y")));
    }
}
