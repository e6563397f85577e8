//! CreateMachine on Compute Engine: instances.insert with a requestId derived
//! from the machine uid, then the insert operation waited for within the
//! call's deadline, so that a capacity or quota failure reported by the
//! operation reaches the machine-controller with its code.
//!
//! A create that carries a providerID follows GetMachineStatus answering
//! NOT_FOUND: when the insert's requestId replays a DONE operation whose
//! instance is gone (a spot VM deleted at launch), the next requestId
//! generation (derived from the uid and that operation, so still idempotent)
//! launches another.
//!
//! When the deadline comes first, the operation is remembered: the next
//! GetMachineStatus of an instance Compute does not show reads it once and
//! answers its failure ([`GcpDriver::insert_outcome`]).
//!
//! A machine whose Spot VM Compute reclaimed with `instanceTerminationAction:
//! STOP` still has its instance, `TERMINATED` (GetMachineStatus answers
//! SPOT_RECLAIMED). Its CreateMachine finds that instance by name (the insert's
//! requestId replays the first insert, or the insert is 409) and starts it
//! again: one `instances.start`, its operation waited for as an insert's
//! ([`GcpDriver::restart`]). It never answers OK for the stopped VM and never
//! makes a second one: OK once the start is done, RESOURCE_EXHAUSTED when
//! Compute has no Spot capacity for it (the start operation's
//! `ZONE_RESOURCE_POOL_EXHAUSTED`), UNAVAILABLE `SPOT_VM_STARTING` when the
//! deadline comes first (the next GetMachineStatus sees it boot).

use std::time::Duration;

use google_cloud_compute_v1::model::{Instance, Operation};
use machine_driver_api::{
    CallContext, ClusterMarkers, CreateMachine, CreatedMachine, DriverError, Machine, Ownership, foreign_name_taken,
};

use crate::clients::Api;
use crate::credentials::GcpCredentials;
use crate::driver::{GcpDriver, Inserter};
use crate::errors::{GceFailure, RETRY_SOON};
use crate::instance::{InstanceTarget, addresses, build_instance, spot_reclaim};
use crate::naming::{InstanceRef, insert_request_id, is_gce_name};
use crate::operations::is_done;
use crate::ownership;
use crate::spec::GcpProviderSpec;
use crate::timestamps;

/// The instance, `None` when Compute does not show it (1 `instances.get`).
pub(crate) async fn get_instance(api: &Api<'_>, target: &InstanceRef) -> Result<Option<Instance>, DriverError> {
    let got = api
        .call("instances.get", || {
            api.clients
                .instances
                .get()
                .set_project(&target.project)
                .set_zone(&target.zone)
                .set_instance(&target.name)
                .send()
        })
        .await;
    match got {
        Ok(instance) => Ok(Some(instance)),
        Err(f) if f.cloud().is_some_and(GceFailure::is_not_found) => Ok(None),
        Err(f) => Err(f.into_driver_error()),
    }
}

/// Whose instance a create may adopt: the class's markers and the machine.
#[derive(Debug, Clone, Copy)]
struct Owner<'a> {
    markers: &'a ClusterMarkers,
    machine: &'a Machine,
}

/// Time kept free before the RPC deadline when waiting for an operation.
const DEADLINE_MARGIN: Duration = Duration::from_secs(1);

/// A failed insert operation at least this old is a replay of an earlier
/// attempt (GCE answers a repeated `requestId` with the original operation):
/// the next attempt then uses the next `requestId` generation.
const REPLAY_AGE: Duration = Duration::from_secs(60);

/// Most `requestId` generations one CreateMachine walks through.
const MAX_INSERT_GENERATIONS: usize = 6;

impl GcpDriver {
    /// CreateMachine: instances.insert with a requestId derived from the machine uid.
    pub(crate) async fn create(&self, ctx: &CallContext, req: CreateMachine) -> Result<CreatedMachine, DriverError> {
        let spec = GcpProviderSpec::parse(&req.class.provider_spec)?;
        let key = GcpCredentials::from_secret(&req.secret, "secret")?;
        let name = req.machine.name.as_str();
        if !is_gce_name(name) {
            return Err(DriverError::invalid_argument(
                "machine.name",
                format!("{name:?} is not a valid GCE instance name (lowercase letters, digits and '-', at most 63)"),
            ));
        }
        let markers = spec.markers()?;
        let owner = Owner { markers: &markers, machine: &req.machine };
        let uid = req.machine.uid.as_str();
        let target = InstanceRef { project: key.project_id.clone(), zone: spec.zone.clone(), name: name.to_string() };
        let body = build_instance(&spec, InstanceTarget { project: &target.project, name, uid }, &req.user_data.0)?;
        let api = self.pool.api(&key, ctx).await?;

        let mut after: Option<String> = None;
        for generation in 0..MAX_INSERT_GENERATIONS {
            let request_id = insert_request_id(uid, after.as_deref());
            let inserted = api
                .call("instances.insert", || {
                    api.clients
                        .instances
                        .insert()
                        .set_project(&target.project)
                        .set_zone(&target.zone)
                        .set_request_id(request_id.clone())
                        .set_body(body.clone())
                        .send()
                })
                .await;
            let op = match inserted {
                Ok(op) => op,
                Err(f) if f.cloud().is_some_and(GceFailure::is_already_exists) => {
                    return self.adopt(&api, &key, &target, owner).await;
                }
                Err(f) => return Err(f.into_driver_error()),
            };
            self.recent.record(target.clone(), Inserter::new(&markers, &key));
            self.deleted.forget(&target);
            self.failed_inserts.forget(&target);
            if !is_done(&op) {
                return self.wait_for_insert(&api, &key, &target, &op, owner).await;
            }
            let Some(failure) = GceFailure::from_operation(&op) else {
                // A DONE answer replays an earlier insert (a new insert is not
                // done at once): the instance it made is read (1 `instances.get`).
                // It may have been reclaimed (a Spot VM stopped: started again),
                // or be gone after GetMachineStatus answered NOT_FOUND (the
                // request carries the providerID: a Spot VM deleted at launch or
                // reclaimed with DELETE): then the next requestId generation
                // launches another. Without a providerID an instance Compute does
                // not show may just not be visible yet.
                match get_instance(&api, &target).await? {
                    Some(instance) => return self.existing(&api, &key, &target, &instance, owner).await,
                    None if req.machine.provider_id.is_some() => {
                        tracing::info!(provider_id = %target.provider_id(), "the instance of the replayed insert is gone: launching another");
                        after = Some(op.name.clone().unwrap_or_else(|| format!("generation-{generation}")));
                        continue;
                    }
                    None => return Ok(created(&target, &Instance::new())),
                }
            };
            if failure.is_already_exists() {
                return self.adopt(&api, &key, &target, owner).await;
            }
            self.recent.forget(&target);
            let replayed = op.insert_time.as_deref().and_then(timestamps::age).is_some_and(|age| age >= REPLAY_AGE);
            if !replayed || generation + 1 == MAX_INSERT_GENERATIONS {
                return Err(failure.driver_error("instances.insert"));
            }
            tracing::info!(
                provider_id = %target.provider_id(),
                generation = generation + 1,
                "the requestId answered with an earlier failed insert; retrying with the next requestId"
            );
            after = Some(op.name.clone().unwrap_or_else(|| format!("generation-{generation}")));
        }
        Err(DriverError::unavailable(
            crate::errors::REQUEST_ID_GENERATIONS_EXHAUSTED,
            "instances.insert: every requestId generation of this machine replays an earlier insert; retry later",
            RETRY_SOON,
        ))
    }

    /// Handles "already exists" (instance names are unique per zone): adopts
    /// the instance when the kit judges it this machine's (this cluster's
    /// markers, and this machine's uid label or none, as the Go provider's
    /// instances have none); otherwise ALREADY_EXISTS `NAME_TAKEN_BY_FOREIGN_VM`,
    /// the instance left untouched.
    async fn adopt(
        &self,
        api: &Api<'_>,
        key: &GcpCredentials,
        target: &InstanceRef,
        owner: Owner<'_>,
    ) -> Result<CreatedMachine, DriverError> {
        let Some(instance) = get_instance(api, target).await? else {
            return Err(DriverError::unavailable(
                machine_driver_api::reasons::NOT_VISIBLE_YET,
                format!("instance {} was reported as existing but is not visible yet", target.provider_id()),
                RETRY_SOON,
            ));
        };
        self.existing(api, key, target, &instance, owner).await
    }

    /// The answer for an instance of the machine's name that exists: another
    /// one's is ALREADY_EXISTS `NAME_TAKEN_BY_FOREIGN_VM` (left untouched);
    /// this machine's Spot VM that Compute stopped is started again
    /// ([`GcpDriver::restart`]); any other of this machine's is adopted.
    async fn existing(
        &self,
        api: &Api<'_>,
        key: &GcpCredentials,
        target: &InstanceRef,
        instance: &Instance,
        owner: Owner<'_>,
    ) -> Result<CreatedMachine, DriverError> {
        if let Ownership::Foreign(why) = ownership::judge(owner.markers, instance, owner.machine) {
            tracing::warn!(provider_id = %target.provider_id(), %why, "create: the name is taken by another instance");
            return Err(foreign_name_taken(format!("instance {}", target.provider_id()), why));
        }
        if let Some(shown) = spot_reclaim(instance) {
            return self.restart(api, key, target, instance, &shown).await;
        }
        tracing::info!(provider_id = %target.provider_id(), "instance already exists for this machine: adopted");
        Ok(created(target, instance))
    }

    /// Starts this machine's reclaimed (stopped) Spot VM again: 1
    /// `instances.start` (without a requestId: starting a VM that runs or
    /// boots changes nothing, and a retry after a start that failed for
    /// capacity must try again, not replay the failure), then its operation
    /// waited for within the deadline like an insert's ([`GcpDriver::wait_for`]).
    /// OK once the start is done (the VM boots: `STAGING`, then `RUNNING`); the
    /// start's failure classified (`ZONE_RESOURCE_POOL_EXHAUSTED`, no Spot
    /// capacity in the zone now: RESOURCE_EXHAUSTED; the instance stays
    /// `TERMINATED`, so the next GetMachineStatus answers SPOT_RECLAIMED
    /// again); UNAVAILABLE `SPOT_VM_STARTING` when the deadline comes first or
    /// the wait fails (never OK for a VM that does not run).
    async fn restart(
        &self,
        api: &Api<'_>,
        key: &GcpCredentials,
        target: &InstanceRef,
        instance: &Instance,
        shown: &str,
    ) -> Result<CreatedMachine, DriverError> {
        tracing::info!(provider_id = %target.provider_id(), %shown, "create: Compute reclaimed the machine's Spot VM; starting it again");
        let op = api
            .call("instances.start", || {
                api.clients
                    .instances
                    .start()
                    .set_project(&target.project)
                    .set_zone(&target.zone)
                    .set_instance(&target.name)
                    .send()
            })
            .await
            .map_err(|f| f.into_driver_error())?;
        let starting = || {
            DriverError::unavailable(
                crate::errors::SPOT_VM_STARTING,
                format!("the reclaimed Spot VM {} is being started again; retry", target.provider_id()),
                RETRY_SOON,
            )
        };
        let done = if is_done(&op) {
            op
        } else {
            let Some(op_name) = op.name.clone() else { return Err(starting()) };
            match self.wait_for(api, key, target, &op_name).await {
                Ok(Some(done)) => done,
                Ok(None) => return Err(starting()),
                Err(e) => {
                    tracing::debug!(provider_id = %target.provider_id(), error = %e, "waiting for the start operation failed");
                    return Err(starting());
                }
            }
        };
        match GceFailure::from_operation(&done) {
            None => {
                tracing::info!(provider_id = %target.provider_id(), "the reclaimed Spot VM was started again");
                Ok(created(target, instance))
            }
            Some(f) => Err(f.driver_error("instances.start")),
        }
    }

    /// Waits for a running insert operation within the call's deadline. A
    /// create alone in its zone waits with `zoneOperations.wait` (answers
    /// when the operation is done or after a while; each answer is a counted
    /// call); concurrent creates share `zoneOperations.list` calls
    /// ([`crate::operations`]). A failed operation answers with its classified
    /// error; when the deadline comes first, or the wait fails, the operation
    /// is remembered for the next status poll and the create answers OK.
    async fn wait_for_insert(
        &self,
        api: &Api<'_>,
        key: &GcpCredentials,
        target: &InstanceRef,
        op: &Operation,
        owner: Owner<'_>,
    ) -> Result<CreatedMachine, DriverError> {
        let Some(op_name) = op.name.clone() else {
            return Ok(created(target, &Instance::new()));
        };
        match self.wait_for(api, key, target, &op_name).await {
            Ok(Some(done)) => self.insert_done(api, key, target, &done, owner).await,
            Ok(None) => Ok(self.still_running(target, op_name)),
            Err(e) => {
                // The insert was accepted; GetMachineStatus will tell how it ends.
                tracing::debug!(provider_id = %target.provider_id(), error = %e, "waiting for the insert operation failed");
                Ok(self.still_running(target, op_name))
            }
        }
    }

    /// Waits at most until the call's deadline (minus [`DEADLINE_MARGIN`]) for
    /// zone operation `op_name` of `target`'s zone: alone with
    /// `zoneOperations.wait`, or sharing the zone's `zoneOperations.list`
    /// polls with concurrent waits ([`crate::operations`]). `None` when it was
    /// not done by then (or Compute does not know it).
    pub(crate) async fn wait_for(
        &self,
        api: &Api<'_>,
        key: &GcpCredentials,
        target: &InstanceRef,
        op_name: &str,
    ) -> Result<Option<Operation>, DriverError> {
        let bound = api.remaining().saturating_sub(DEADLINE_MARGIN);
        if bound.is_zero() {
            return Ok(None);
        }
        let waiter = self.op_waiters.for_zone(api, key, target);
        let wait_alone = || async {
            api.call("zoneOperations.wait", || {
                api.clients
                    .operations
                    .wait()
                    .set_project(&target.project)
                    .set_zone(&target.zone)
                    .set_operation(op_name)
                    .send()
            })
            .await
            .map_err(|f| f.into_driver_error())
        };
        waiter.wait(op_name, bound, wait_alone).await
    }

    /// The answer for a DONE insert operation.
    async fn insert_done(
        &self,
        api: &Api<'_>,
        key: &GcpCredentials,
        target: &InstanceRef,
        done: &Operation,
        owner: Owner<'_>,
    ) -> Result<CreatedMachine, DriverError> {
        match GceFailure::from_operation(done) {
            None => Ok(created(target, &Instance::new())),
            Some(f) if f.is_already_exists() => self.adopt(api, key, target, owner).await,
            Some(f) => {
                self.recent.forget(target);
                Err(f.driver_error("instances.insert"))
            }
        }
    }

    /// Remembers a still running insert for the status polls that follow; OK.
    fn still_running(&self, target: &InstanceRef, op_name: String) -> CreatedMachine {
        tracing::debug!(provider_id = %target.provider_id(), "insert operation still running at the deadline; answering now");
        self.pending_inserts.record(target.clone(), op_name);
        created(target, &Instance::new())
    }

    /// For a status poll of an instance Compute does not show: the failure of
    /// its remembered insert operation, read once (`zoneOperations.get`) and
    /// kept, so that every later poll answers it without a call. `None` while
    /// the operation runs, succeeded, or is not known.
    pub(crate) async fn insert_outcome(&self, api: &Api<'_>, target: &InstanceRef) -> Option<DriverError> {
        if let Some(failure) = self.failed_inserts.get(target) {
            return Some(failure.driver_error("instances.insert"));
        }
        let op_name = self.pending_inserts.get(target)?;
        let got = api
            .call("zoneOperations.get", || {
                api.clients
                    .operations
                    .get()
                    .set_project(&target.project)
                    .set_zone(&target.zone)
                    .set_operation(&op_name)
                    .send()
            })
            .await;
        let op = match got {
            Ok(op) if is_done(&op) => op,
            Ok(_) => return None,
            // Compute no longer knows the operation (expired): nothing left to report.
            Err(f) if f.cloud().is_some_and(GceFailure::is_not_found) => {
                self.pending_inserts.forget(target);
                return None;
            }
            Err(f) => return Some(f.into_driver_error()),
        };
        self.pending_inserts.forget(target);
        let failure = GceFailure::from_operation(&op).filter(|f| !f.is_already_exists())?;
        self.recent.forget(target);
        self.failed_inserts.record(target.clone(), failure.clone());
        Some(failure.driver_error("instances.insert"))
    }
}

fn created(target: &InstanceRef, instance: &Instance) -> CreatedMachine {
    CreatedMachine {
        provider_id: target.provider_id(),
        node_name: target.name.clone(),
        last_known_state: String::new(),
        addresses: addresses(instance),
    }
}
