//! Ownership: the driver acts only on VMs of this cluster (ARCHITECTURE.md,
//! Invariants). MCM adopts whatever GetMachineStatus answers OK for and
//! deletes whatever ListMachines returns unclaimed, so a driver that answers
//! for, lists or deletes a VM it does not own destroys someone else's machine.
//!
//! The fake plants VMs next to the driver's through `POST /_admin/instances`,
//! in the class's cluster scope, with the markers the provider's conformance
//! file describes (`ownership`): another cluster's VM of the same name, one
//! without markers, one with only a firewall-style marker, and one this
//! cluster's Go provider made (which the driver must adopt and list). Every
//! planted VM is terminated at the end of its scenario, whatever the outcome.

use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use machine_driver_proto::v1::{CreateMachineResponse, GetMachineStatusResponse, Machine};
use tonic::{Code, Status};

use crate::context::{Ctx, is_retryable};
use crate::fake_admin::{FakeAdmin, Instance, PlantRequest, PlantedAttached};
use crate::outcome::{StepResult, Stop};
use crate::settings::{OwnershipInputs, PlantedVm};
use crate::status_details::describe;
use crate::{ensure, fail};

/// How long a foreign VM is watched after a delete: longer than any fake's
/// default stop time (300 ms), so that a delete the driver sent has ended it.
const SETTLE: Duration = Duration::from_millis(1000);
/// How often a poll asks again.
pub(crate) const POLL: Duration = Duration::from_millis(200);
/// The skip reason without inputs.
const NO_INPUTS: &str = "the provider's conformance file has no \"ownership\" key";

/// The kinds of planted VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    OtherCluster,
    NoMarkers,
    FirewallTagOnly,
    GoMade,
}

/// The VMs that are not this cluster's.
const FOREIGN: [Kind; 3] = [Kind::OtherCluster, Kind::NoMarkers, Kind::FirewallTagOnly];

impl Kind {
    /// Its key in the conformance file.
    fn key(self) -> &'static str {
        match self {
            Kind::OtherCluster => "otherCluster",
            Kind::NoMarkers => "noMarkers",
            Kind::FirewallTagOnly => "firewallTagOnly",
            Kind::GoMade => "goMade",
        }
    }

    /// What the VM is, for messages.
    fn what(self) -> &'static str {
        match self {
            Kind::OtherCluster => "another cluster's VM",
            Kind::NoMarkers => "a VM without markers (made by hand)",
            Kind::FirewallTagOnly => "a VM whose only marker is a firewall-style one",
            Kind::GoMade => "this cluster's VM made the Go provider's way",
        }
    }

    fn spec(self, inputs: &OwnershipInputs) -> &PlantedVm {
        match self {
            Kind::OtherCluster => &inputs.other_cluster,
            Kind::NoMarkers => &inputs.no_markers,
            Kind::FirewallTagOnly => &inputs.firewall_tag_only,
            Kind::GoMade => &inputs.go_made,
        }
    }
}

/// One planted VM: its inventory id, name, the providerID a driver would give
/// it, how the fake showed it right after planting and what it planted with it.
#[derive(Debug, Clone)]
pub(crate) struct Plant {
    /// What the VM is, for messages.
    pub(crate) what: &'static str,
    /// Its inventory id.
    pub(crate) id: String,
    /// Its name.
    pub(crate) name: String,
    /// The providerID the driver gives it.
    pub(crate) provider_id: String,
    /// Its inventory entry right after planting.
    pub(crate) seen: Instance,
    /// The resources planted with it.
    pub(crate) attached: Vec<PlantedAttached>,
}

impl Plant {
    /// `<what> <name> (<id>)`, for messages.
    pub(crate) fn label(&self) -> String {
        format!("{} {} ({})", self.what, self.name, self.id)
    }
}

/// What a scenario planted; [`Garden::finish`] terminates it.
pub(crate) struct Garden {
    pub(crate) fake: FakeAdmin,
    pub(crate) inputs: OwnershipInputs,
    ids: Vec<String>,
    /// The suite's wait bound (a VM the driver is deleting cannot be terminated; it goes on its own).
    wait: Duration,
}

/// The inventory entry of `id` when it is live.
pub(crate) async fn live(fake: &FakeAdmin, id: &str) -> StepResult<Option<Instance>> {
    let instances = fake.instances().await.map_err(Stop::Fail)?;
    Ok(instances.into_iter().find(|i| i.id == id && i.live))
}

impl Garden {
    /// A garden for the scenario, or a skip without inputs or fake admin.
    pub(crate) fn new(ctx: &Ctx) -> StepResult<Self> {
        let Some(inputs) = ctx.settings.provider.ownership.clone() else {
            return Err(Stop::Skip(NO_INPUTS.into()));
        };
        Ok(Self { fake: ctx.fake()?.clone(), inputs, ids: Vec::new(), wait: ctx.settings.wait })
    }

    /// Plants a VM of `kind` named `name` in the class's scope.
    async fn plant(&mut self, kind: Kind, name: &str) -> StepResult<Plant> {
        let spec = kind.spec(&self.inputs);
        let request = PlantRequest {
            name: name.to_owned(),
            tags: spec.tags.clone(),
            network_tags: spec.network_tags.clone(),
            scope: self.inputs.scope.clone(),
            ..PlantRequest::default()
        };
        self.plant_request(&request, kind.what(), kind.key()).await
    }

    /// Plants the VM `request` describes (`what` and the conformance file's
    /// `key` name it in messages); a skip when the fake cannot plant.
    pub(crate) async fn plant_request(
        &mut self,
        request: &PlantRequest,
        what: &'static str,
        key: &str,
    ) -> StepResult<Plant> {
        let name = &request.name;
        let planted = self.fake.plant(request).await.map_err(|e| {
            if e.contains("HTTP 501") {
                Stop::Skip(e)
            } else {
                Stop::Fail(format!("planting {what} ({key}) named {name}: {e}"))
            }
        })?;
        self.ids.push(planted.id.clone());
        let provider_id = self.inputs.provider_id_of(&planted.id, &planted.name, &planted.scope).map_err(Stop::Fail)?;
        let Some(seen) = live(&self.fake, &planted.id).await? else {
            fail!("the fake planted {} ({}) but its inventory shows it not live", planted.name, planted.id)
        };
        Ok(Plant { what, id: planted.id, name: planted.name, provider_id, seen, attached: planted.attached })
    }

    /// Fails unless the planted VM is still live with the state and tags it
    /// had when planted; with `settle`, checks again after [`SETTLE`] (a
    /// delete the driver sent has ended the VM by then).
    pub(crate) async fn expect_untouched(&self, plant: &Plant, after: &str, settle: bool) -> StepResult {
        let rounds = if settle { 2 } else { 1 };
        for round in 0..rounds {
            if round > 0 {
                tokio::time::sleep(SETTLE).await;
            }
            let Some(now) = live(&self.fake, &plant.id).await? else {
                fail!("{after}: {} is gone: the driver ended a VM it does not own", plant.label())
            };
            ensure!(
                now.state == plant.seen.state,
                "{after}: {} went from {:?} to {:?}: the driver acted on a VM it does not own",
                plant.label(),
                plant.seen.state,
                now.state
            );
            ensure!(
                now.tags == plant.seen.tags,
                "{after}: the tags of {} changed from {:?} to {:?}: the driver marked a VM it does not own",
                plant.label(),
                plant.seen.tags,
                now.tags
            );
        }
        Ok(())
    }

    /// Terminates every planted VM that is still live. A VM that cannot be
    /// terminated because it is being deleted already (by a driver that should
    /// not have) must be gone within the wait bound.
    async fn clear(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        for id in &self.ids {
            let still_live = |r: &StepResult<Option<Instance>>| !matches!(r, Ok(None));
            if !still_live(&live(&self.fake, id).await) {
                continue;
            }
            let Err(e) = self.fake.terminate(id).await else { continue };
            let started = Instant::now();
            loop {
                let now = live(&self.fake, id).await;
                if !still_live(&now) {
                    break;
                }
                if started.elapsed() >= self.wait {
                    problems.push(format!("{id}: {e}"));
                    break;
                }
                tokio::time::sleep(POLL).await;
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
    }

    /// The scenario's result once every planted VM is terminated.
    pub(crate) async fn finish(self, result: StepResult) -> StepResult {
        match (result, self.clear().await) {
            (result, Ok(())) => result,
            (Ok(()) | Err(Stop::Skip(_)), Err(e)) => Err(Stop::Fail(format!("terminating planted VMs: {e}"))),
            (Err(Stop::Fail(why)), Err(e)) => Err(Stop::Fail(format!("{why}; terminating planted VMs: {e}"))),
        }
    }
}

/// Calls `call` until it answers something other than a retryable code, or
/// the wait bound is reached.
pub(crate) async fn settled<T, F, Fut>(ctx: &Ctx, mut call: F) -> Result<T, Status>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Status>>,
{
    let started = Instant::now();
    loop {
        match call().await {
            Err(s) if is_retryable(s.code()) && started.elapsed() < ctx.settings.wait => tokio::time::sleep(POLL).await,
            other => return other,
        }
    }
}

pub(crate) async fn status(ctx: &Ctx, m: &Machine) -> Result<GetMachineStatusResponse, Status> {
    settled(ctx, || ctx.status(m)).await
}

async fn create(ctx: &Ctx, m: &Machine) -> Result<CreateMachineResponse, Status> {
    settled(ctx, || ctx.create(m)).await
}

/// DeleteMachine of a machine whose VM the driver must not touch: OK (already
/// gone) or NOT_FOUND, never anything else.
async fn delete_leaving_alone(ctx: &Ctx, m: &Machine, what: &str) -> StepResult {
    match settled(ctx, || ctx.delete(m)).await {
        Ok(_) => Ok(()),
        Err(s) if s.code() == Code::NotFound => Ok(()),
        Err(s) => fail!("{what}: expected OK (nothing of this machine's to delete), got {}", describe(&s)),
    }
}

/// `ownership/status-by-name-foreign`: GetMachineStatus of a fresh machine
/// whose name a foreign VM carries answers NOT_FOUND, and the VM stays.
pub(crate) fn status_by_name_foreign(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut garden = Garden::new(&ctx)?;
        let result = status_by_name(&ctx, &mut garden).await;
        garden.finish(result).await
    })
}

async fn status_by_name(ctx: &Ctx, garden: &mut Garden) -> StepResult {
    for kind in FOREIGN {
        let m = ctx.new_machine();
        let plant = garden.plant(kind, &m.name).await?;
        match status(ctx, &m).await {
            Err(s) if s.code() == Code::NotFound => {}
            Err(s) => fail!(
                "GetMachineStatus of {} beside {}: expected NOT_FOUND, got {}",
                m.name,
                plant.label(),
                describe(&s)
            ),
            Ok(r) => fail!(
                "GetMachineStatus of {} answered OK (providerID {:?}) for {}: MCM would adopt it, and later delete it",
                m.name,
                r.provider_id,
                plant.label()
            ),
        }
        garden.expect_untouched(&plant, "after GetMachineStatus", false).await?;
    }
    Ok(())
}

/// `ownership/delete-by-name-foreign`: DeleteMachine by name (no providerID)
/// of a fresh machine whose name a foreign VM carries leaves the VM running.
pub(crate) fn delete_by_name_foreign(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut garden = Garden::new(&ctx)?;
        let result = delete_by_name(&ctx, &mut garden).await;
        garden.finish(result).await
    })
}

async fn delete_by_name(ctx: &Ctx, garden: &mut Garden) -> StepResult {
    for kind in FOREIGN {
        let m = ctx.new_machine();
        let plant = garden.plant(kind, &m.name).await?;
        delete_leaving_alone(ctx, &m, &format!("DeleteMachine of {} beside {}", m.name, plant.label())).await?;
        garden.expect_untouched(&plant, "after DeleteMachine by name", true).await?;
    }
    Ok(())
}

/// `ownership/delete-by-provider-id-foreign`: DeleteMachine with a foreign
/// VM's providerID leaves it running, both as the orphan collector sends it
/// (providerID alone) and as a machine of the name with that providerID.
pub(crate) fn delete_by_provider_id_foreign(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut garden = Garden::new(&ctx)?;
        let result = delete_by_provider_id(&ctx, &mut garden).await;
        garden.finish(result).await
    })
}

async fn delete_by_provider_id(ctx: &Ctx, garden: &mut Garden) -> StepResult {
    for kind in FOREIGN {
        let m = ctx.new_machine();
        let plant = garden.plant(kind, &m.name).await?;
        let orphan =
            Machine { provider_id: plant.provider_id.clone(), namespace: m.namespace.clone(), ..Default::default() };
        let what = format!("DeleteMachine by providerID {} alone ({})", plant.provider_id, plant.label());
        delete_leaving_alone(ctx, &orphan, &what).await?;
        garden.expect_untouched(&plant, "after DeleteMachine by providerID alone", true).await?;
        let named = Machine { provider_id: plant.provider_id.clone(), ..m };
        let what = format!("DeleteMachine of {} with providerID {} ({})", named.name, plant.provider_id, plant.label());
        delete_leaving_alone(ctx, &named, &what).await?;
        garden.expect_untouched(&plant, "after DeleteMachine by name and providerID", true).await?;
    }
    Ok(())
}

/// `ownership/list-omits-foreign`: ListMachines lists the Go-made VM of this
/// cluster and none of the foreign ones (MCM's orphan collection deletes what
/// it lists unclaimed).
pub(crate) fn list_omits_foreign(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut garden = Garden::new(&ctx)?;
        let result = list_omits(&ctx, &mut garden).await;
        garden.finish(result).await
    })
}

async fn list_omits(ctx: &Ctx, garden: &mut Garden) -> StepResult {
    let mut foreign = Vec::new();
    for kind in FOREIGN {
        let m = ctx.new_machine();
        foreign.push(garden.plant(kind, &m.name).await?);
    }
    let m = ctx.new_machine();
    let go = garden.plant(Kind::GoMade, &m.name).await?;
    let started = Instant::now();
    loop {
        let listed = match settled(ctx, || ctx.list()).await {
            Ok(listed) => listed,
            Err(s) => fail!("ListMachines: {}", describe(&s)),
        };
        for plant in &foreign {
            ensure!(
                !listed.contains_key(&plant.provider_id) && !listed.values().any(|name| name == &plant.name),
                "ListMachines lists {}: MCM's orphan collection would delete it",
                plant.label()
            );
        }
        match listed.get(&go.provider_id) {
            Some(name) if name == &go.name => break,
            Some(other) => fail!("ListMachines maps {} to {other:?}, expected {:?}", go.provider_id, go.name),
            None if started.elapsed() < ctx.settings.wait => tokio::time::sleep(POLL).await,
            None => fail!(
                "ListMachines does not list {} as {} within {:?}: its orphans would never be collected",
                go.label(),
                go.provider_id,
                ctx.settings.wait
            ),
        }
    }
    for plant in foreign.iter().chain(std::iter::once(&go)) {
        garden.expect_untouched(plant, "after ListMachines", false).await?;
    }
    Ok(())
}

/// `ownership/create-beside-foreign`: CreateMachine of a machine whose name a
/// foreign VM carries either refuses clearly or makes a new VM; it never
/// answers with (adopts) the foreign VM, which stays running, also when the
/// new machine is deleted again.
pub(crate) fn create_beside_foreign(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut garden = Garden::new(&ctx)?;
        let result = create_beside(&ctx, &mut garden).await;
        garden.finish(result).await
    })
}

async fn create_beside(ctx: &Ctx, garden: &mut Garden) -> StepResult {
    for kind in FOREIGN {
        let mut m = ctx.new_machine();
        let plant = garden.plant(kind, &m.name).await?;
        match create(ctx, &m).await {
            Err(s) if matches!(s.code(), Code::Internal | Code::Unknown) => fail!(
                "CreateMachine of {} beside {}: expected a clear refusal (ALREADY_EXISTS) or a new VM, got {}",
                m.name,
                plant.label(),
                describe(&s)
            ),
            Err(_) => {}
            Ok(resp) => {
                ensure!(!resp.provider_id.is_empty(), "CreateMachine of {} answered OK without a providerID", m.name);
                ensure!(
                    resp.provider_id != plant.provider_id && !resp.provider_id.contains(&plant.id),
                    "CreateMachine of {} answered with the providerID of {} ({}): it adopted a VM it does not own",
                    m.name,
                    plant.label(),
                    resp.provider_id
                );
                let fake = &garden.fake;
                let others: Vec<String> = fake
                    .live_named(&m.name)
                    .await
                    .map_err(Stop::Fail)?
                    .into_iter()
                    .filter(|i| i.id != plant.id)
                    .map(|i| i.id)
                    .collect();
                ensure!(
                    !others.is_empty(),
                    "CreateMachine of {} answered OK ({}) but the fake holds no VM of that name besides {}",
                    m.name,
                    resp.provider_id,
                    plant.label()
                );
                m.provider_id = resp.provider_id.clone();
                let seen = ctx.wait_visible(&m).await?;
                ensure!(
                    seen.provider_id == resp.provider_id,
                    "GetMachineStatus of {} answers providerID {:?}, CreateMachine answered {:?}",
                    m.name,
                    seen.provider_id,
                    resp.provider_id
                );
                ctx.must_delete(&m).await?;
            }
        }
        garden.expect_untouched(&plant, "after CreateMachine (and its delete) of the same name", true).await?;
    }
    Ok(())
}

/// `ownership/go-made-adopted`: a VM of this cluster made the Go provider's
/// way (its markers, no uid) is this machine's: GetMachineStatus by name
/// answers OK with its providerID, and DeleteMachine ends it.
pub(crate) fn go_made_adopted(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut garden = Garden::new(&ctx)?;
        let result = go_made(&ctx, &mut garden).await;
        garden.finish(result).await
    })
}

async fn go_made(ctx: &Ctx, garden: &mut Garden) -> StepResult {
    let mut m = ctx.new_machine();
    let plant = garden.plant(Kind::GoMade, &m.name).await?;
    let answer = match status(ctx, &m).await {
        Ok(answer) => answer,
        Err(s) => fail!(
            "GetMachineStatus of {} answered {} for {}: after a migration MCM would make a second VM for the machine",
            m.name,
            describe(&s),
            plant.label()
        ),
    };
    ensure!(
        answer.provider_id == plant.provider_id,
        "GetMachineStatus of {} answered providerID {:?}, expected {:?} ({})",
        m.name,
        answer.provider_id,
        plant.provider_id,
        plant.label()
    );
    m.provider_id = answer.provider_id;
    ctx.must_delete(&m).await?;
    let started = Instant::now();
    while live(&garden.fake, &plant.id).await?.is_some() {
        if started.elapsed() >= ctx.settings.wait {
            fail!("DeleteMachine of {} left {} live after {:?}", m.name, plant.label(), ctx.settings.wait);
        }
        tokio::time::sleep(POLL).await;
    }
    ctx.wait_gone(&m).await
}
