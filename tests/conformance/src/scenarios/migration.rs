//! Migration from the Go provider, and rollback to it (issue 27). An operator
//! who switches a worker pool from gardener's Go provider to this driver has
//! machines the Go provider made: the driver must find, initialize, list and
//! delete them with no VM replaced and nothing leaked. And a rollback must
//! work: a VM this driver makes carries what the Go provider looks it up and
//! lists it by.
//!
//! The fake plants the Go provider's VM through `POST /_admin/instances`
//! exactly as that provider makes it (the conformance file's
//! `migration.goMade`: its tags, labels, network tags, metadata and the
//! resources it attaches, with their names; no uid marker), in the class's
//! scope (`ownership.scope`; its providerID from `ownership.providerId`).
//! Each conformance file cites the Go code every marker follows
//! (gardener/machine-controller-manager-provider-{aws,gcp,azure,alicloud,openstack}).
//!
//! In every scenario but the delete, the machine is deleted through the
//! driver at the end (as MCM does), so that what the Go provider attached goes
//! the way the driver deletes it; whatever is still live then is terminated.

use std::time::Instant;

use futures::future::BoxFuture;
use machine_driver_proto::v1::{Capability, Machine};
use serde_json::Value;
use tonic::Code;

use super::ownership::{Garden, POLL, Plant, settled, status};
use crate::context::Ctx;
use crate::fake_admin::{AttachedKind, FakeAdmin, Instance, Inventory};
use crate::outcome::{StepResult, Stop};
use crate::settings::MigrationInputs;
use crate::status_details::describe;
use crate::{ensure, fail};

/// What the planted VM is, for messages.
const WHAT: &str = "this cluster's VM as the Go provider made it";
/// The skip reason without inputs.
const NO_INPUTS: &str = "the provider's conformance file has no \"migration\" key";

/// A scenario's planted Go-made VM and its inputs.
struct Migration {
    garden: Garden,
    inputs: MigrationInputs,
}

impl Migration {
    /// The scenario's garden, or a skip without `migration` (or `ownership`) inputs or fake admin.
    fn new(ctx: &Ctx) -> StepResult<Self> {
        let Some(inputs) = ctx.settings.provider.migration.clone() else {
            return Err(Stop::Skip(NO_INPUTS.into()));
        };
        Ok(Self { garden: Garden::new(ctx)?, inputs })
    }

    /// Plants the Go provider's VM of machine `m` (and what it attaches).
    async fn plant(&mut self, m: &Machine) -> StepResult<Plant> {
        let request = self.inputs.go_made.plant_request(&m.name, &self.garden.inputs.scope);
        let plant = self.garden.plant_request(&request, WHAT, "migration.goMade").await?;
        ensure!(
            plant.attached.len() == request.attached.len(),
            "the fake planted {} resources with {}, the conformance file describes {}",
            plant.attached.len(),
            plant.label(),
            request.attached.len()
        );
        Ok(plant)
    }

    /// The result once the machine was deleted through the driver (when `m` is
    /// given) and every planted VM still live is terminated.
    async fn finish(self, ctx: &Ctx, m: Option<&Machine>, result: StepResult) -> StepResult {
        let cleanup = match m {
            Some(m) => ctx.must_delete(m).await.map(drop),
            None => Ok(()),
        };
        let result = match (result, cleanup) {
            (Err(Stop::Fail(why)), Err(Stop::Fail(e))) => Err(Stop::Fail(format!("{why}; cleanup delete: {e}"))),
            (Ok(()), Err(Stop::Fail(e))) => Err(Stop::Fail(format!("cleanup delete: {e}"))),
            (result, _) => result,
        };
        self.garden.finish(result).await
    }
}

/// The machine MCM has after the migration: the VM's name, a uid the Go
/// provider never stored, and (when `with_provider_id`) the VM's providerID.
fn migrated(m: &Machine, plant: &Plant, with_provider_id: bool) -> Machine {
    let provider_id = if with_provider_id { plant.provider_id.clone() } else { String::new() };
    Machine { provider_id, ..m.clone() }
}

/// Fails when the fake holds a VM of the machine's name besides the planted
/// one (live or ended): the driver made a new VM instead of adopting it.
pub(crate) fn no_new_vm(inventory: &Inventory, plant: &Plant, after: &str) -> StepResult {
    let others: Vec<String> = inventory
        .instances
        .iter()
        .filter(|i| i.name == plant.name && i.id != plant.id)
        .map(|i| format!("{} ({})", i.id, i.state))
        .collect();
    ensure!(
        others.is_empty(),
        "after {after}: the fake holds another VM of the machine's name ({}) besides {}: the driver made a new \
         VM instead of adopting it",
        others.join(", "),
        plant.label()
    );
    Ok(())
}

/// The dependent `id` of the inventory, matched as the fake spells it (ARM ids ignore case).
fn dependent<'a>(inventory: &'a Inventory, id: &str) -> Option<&'a Instance> {
    inventory.dependents.iter().find(|d| d.id.eq_ignore_ascii_case(id))
}

/// Fails unless the planted VM is still live and every resource planted with
/// it that the inventory lists as a dependent is still live; then checks that
/// no new VM was made.
async fn expect_kept(fake: &FakeAdmin, plant: &Plant, after: &str) -> StepResult {
    let inventory = fake.inventory().await.map_err(Stop::Fail)?;
    ensure!(
        inventory.instances.iter().any(|i| i.id == plant.id && i.live),
        "after {after}: {} is no longer live: the driver ended a VM it had to adopt",
        plant.label()
    );
    for a in &plant.attached {
        if let Some(d) = dependent(&inventory, &a.id) {
            ensure!(d.live, "after {after}: the {} {} of {} is gone", a.kind.word(), a.name, plant.label());
        } else if !inventory.dependents.is_empty() && kind_listed(&inventory, a.kind) {
            fail!("after {after}: the {} {} ({}) of {} is gone", a.kind.word(), a.name, a.id, plant.label());
        }
    }
    no_new_vm(&inventory, plant, after)
}

/// Whether the fake lists resources of `kind` as dependents at all (EC2, GCE
/// and ECS keep disks inside their instance).
fn kind_listed(inventory: &Inventory, kind: AttachedKind) -> bool {
    inventory.dependents.iter().any(|d| kind_of(d) == Some(kind))
}

/// The neutral kind of an inventory dependent (`kind`: Azure's
/// `networkInterface` and `disk`, OpenStack's `port` and `volume`).
fn kind_of(d: &Instance) -> Option<AttachedKind> {
    match d.extra.get("kind").and_then(Value::as_str)? {
        "networkInterface" | "nic" => Some(AttachedKind::Nic),
        "disk" => Some(AttachedKind::Disk),
        "port" => Some(AttachedKind::Port),
        "volume" => Some(AttachedKind::Volume),
        _ => None,
    }
}

/// Whether `value` (a VM's inventory details) names `id` anywhere.
pub(crate) fn refers_to(value: &Value, id: &str) -> bool {
    match value {
        Value::String(s) => s.eq_ignore_ascii_case(id),
        Value::Array(items) => items.iter().any(|v| refers_to(v, id)),
        Value::Object(map) => map.values().any(|v| refers_to(v, id)),
        _ => false,
    }
}

/// `migration/status-by-provider-id`: GetMachineStatus of the migrated
/// machine (its providerID, a new uid) answers OK with that providerID; the
/// VM is kept and no other is made.
pub(crate) fn status_by_provider_id(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut migration = Migration::new(&ctx)?;
        let m = ctx.new_machine();
        let plant = migration.plant(&m).await?;
        let m = migrated(&m, &plant, true);
        let result = expect_status_ok(&ctx, &migration.garden.fake, &m, &plant).await;
        migration.finish(&ctx, Some(&m), result).await
    })
}

/// `migration/status-by-name`: GetMachineStatus of the migrated machine
/// without providerID (MCM's first status of a machine) answers OK with the
/// VM's providerID and a node name; the VM is kept and no other is made.
pub(crate) fn status_by_name(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut migration = Migration::new(&ctx)?;
        let m = ctx.new_machine();
        let plant = migration.plant(&m).await?;
        let by_name = migrated(&m, &plant, false);
        let result = expect_status_ok(&ctx, &migration.garden.fake, &by_name, &plant).await;
        migration.finish(&ctx, Some(&migrated(&m, &plant, true)), result).await
    })
}

async fn expect_status_ok(ctx: &Ctx, fake: &FakeAdmin, m: &Machine, plant: &Plant) -> StepResult {
    let how = if m.provider_id.is_empty() { "by name" } else { "by providerID" };
    let answer = match status(ctx, m).await {
        Ok(answer) => answer,
        Err(s) => fail!(
            "GetMachineStatus {how} of {} answered {} for {}: MCM would make a second VM for the machine (or \
             never adopt it)",
            m.name,
            describe(&s),
            plant.label()
        ),
    };
    ensure!(
        answer.provider_id == plant.provider_id,
        "GetMachineStatus {how} of {} answered providerID {:?}, expected {:?} ({})",
        m.name,
        answer.provider_id,
        plant.provider_id,
        plant.label()
    );
    ensure!(!answer.node_name.is_empty(), "GetMachineStatus {how} of {} answered no node name", m.name);
    expect_kept(fake, plant, &format!("GetMachineStatus {how}")).await
}

/// `migration/initialize`: InitializeMachine of the migrated machine, with the
/// providerID and node name its status answered (as MCM calls it), answers OK
/// or UNIMPLEMENTED and, when the driver initializes, the machine converges to
/// initialized on the same VM: nothing replaced, no new VM.
pub(crate) fn initialize(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut migration = Migration::new(&ctx)?;
        let m = ctx.new_machine();
        let plant = migration.plant(&m).await?;
        let mut m = migrated(&m, &plant, false);
        let result = initialize_adopted(&ctx, &migration.garden.fake, &mut m, &plant).await;
        let m = migrated(&m, &plant, true);
        migration.finish(&ctx, Some(&m), result).await
    })
}

async fn initialize_adopted(ctx: &Ctx, fake: &FakeAdmin, m: &mut Machine, plant: &Plant) -> StepResult {
    let answer = match status(ctx, m).await {
        Ok(answer) => answer,
        Err(s) => fail!("GetMachineStatus of {} answered {} for {}", m.name, describe(&s), plant.label()),
    };
    m.provider_id = answer.provider_id;
    m.node_name = answer.node_name;
    match settled(ctx, || ctx.initialize(m)).await {
        Ok(_) => {}
        Err(s) if s.code() == Code::Unimplemented => {}
        Err(s) => fail!(
            "InitializeMachine of {} ({}) answered {}: MCM would put the machine in CrashLoopBackOff",
            m.name,
            plant.label(),
            describe(&s)
        ),
    }
    expect_kept(fake, plant, "InitializeMachine").await?;
    if ctx.has(Capability::InitializeMachine) {
        let done = ctx.wait_initialized(m).await?;
        ensure!(
            done.provider_id == plant.provider_id,
            "after InitializeMachine GetMachineStatus of {} answers providerID {:?}, expected {:?}",
            m.name,
            done.provider_id,
            plant.provider_id
        );
        expect_kept(fake, plant, "the machine's initialization").await?;
    }
    Ok(())
}

/// `migration/listed`: ListMachines lists the Go-made VM under the machine's
/// name (MCM's orphan collection keeps it, and collects it once the machine
/// is gone).
pub(crate) fn listed(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut migration = Migration::new(&ctx)?;
        let m = ctx.new_machine();
        let plant = migration.plant(&m).await?;
        let result = expect_listed(&ctx, &migration.garden.fake, &plant).await;
        migration.finish(&ctx, Some(&migrated(&m, &plant, true)), result).await
    })
}

async fn expect_listed(ctx: &Ctx, fake: &FakeAdmin, plant: &Plant) -> StepResult {
    let started = Instant::now();
    loop {
        let listed = match settled(ctx, || ctx.list()).await {
            Ok(listed) => listed,
            Err(s) => fail!("ListMachines: {}", describe(&s)),
        };
        match listed.get(&plant.provider_id) {
            Some(name) if name == &plant.name => break,
            Some(other) => fail!("ListMachines maps {} to {other:?}, expected {:?}", plant.provider_id, plant.name),
            None if started.elapsed() < ctx.settings.wait => tokio::time::sleep(POLL).await,
            None => fail!(
                "ListMachines does not list {} as {} within {:?}: its orphans would never be collected",
                plant.label(),
                plant.provider_id,
                ctx.settings.wait
            ),
        }
    }
    expect_kept(fake, plant, "ListMachines").await
}

/// `migration/delete-leaves-nothing`: DeleteMachine of the migrated machine
/// (providerID and name) ends the VM and every resource planted with it
/// (NICs, disks, ports, volumes, whatever their delete option); status then
/// answers NOT_FOUND and nothing of the machine's name is left.
pub(crate) fn delete_leaves_nothing(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let mut migration = Migration::new(&ctx)?;
        let m = ctx.new_machine();
        let plant = migration.plant(&m).await?;
        let m = migrated(&m, &plant, true);
        let result = delete_all(&ctx, &migration.garden.fake, &m, &plant).await;
        migration.finish(&ctx, None, result).await
    })
}

async fn delete_all(ctx: &Ctx, fake: &FakeAdmin, m: &Machine, plant: &Plant) -> StepResult {
    ctx.must_delete(m).await?;
    let started = Instant::now();
    loop {
        let inventory = fake.inventory().await.map_err(Stop::Fail)?;
        let mut left: Vec<String> = Vec::new();
        if inventory.instances.iter().any(|i| i.id == plant.id && i.live) {
            left.push(plant.label());
        }
        for a in &plant.attached {
            if dependent(&inventory, &a.id).is_some_and(|d| d.live) {
                left.push(format!("its {} {} ({})", a.kind.word(), a.name, a.id));
            }
        }
        if left.is_empty() {
            no_new_vm(&inventory, plant, "DeleteMachine")?;
            break;
        }
        if started.elapsed() >= ctx.settings.wait {
            fail!(
                "DeleteMachine of {} left live after {:?}: {} (the Go provider deletes them with the machine)",
                m.name,
                ctx.settings.wait,
                left.join(", ")
            );
        }
        tokio::time::sleep(POLL).await;
    }
    ctx.wait_gone(m).await?;
    super::expect_no_leftovers(fake, &m.name, ctx.settings.wait).await
}

/// `migration/rollback-markers`: a VM this driver makes carries every marker
/// the Go provider's own lookups and orphan listing filter on
/// (`migration.rollback`), and so does each attached resource of a kind the
/// Go provider lists or deletes, as the fake's inventory shows them.
pub(crate) fn rollback_markers(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let Some(inputs) = ctx.settings.provider.migration.clone() else {
            return Err(Stop::Skip(NO_INPUTS.into()));
        };
        let fake = ctx.fake()?.clone();
        let mut m = ctx.new_machine();
        ctx.create_until_ok(&mut m).await?;
        ctx.wait_initialized(&mut m).await?;
        let inventory = fake.inventory().await.map_err(Stop::Fail)?;
        let problems = rollback_problems(&inventory, &m.name, &inputs);
        ctx.must_delete(&m).await?;
        ensure!(
            problems.is_empty(),
            "after a rollback the Go provider would miss what this driver made for {}: {}",
            m.name,
            problems.join("; ")
        );
        ctx.wait_gone(&m).await
    })
}

/// Every marker the driver's VM named `name` (and its attached resources)
/// lacks in `inventory`, one phrase each.
fn rollback_problems(inventory: &Inventory, name: &str, inputs: &MigrationInputs) -> Vec<String> {
    let vms: Vec<&Instance> = inventory.instances.iter().filter(|i| i.live && i.name == name).collect();
    let [vm] = vms.as_slice() else {
        return vec![format!("the fake holds {} live VMs named {name}, expected 1", vms.len())];
    };
    let mut problems: Vec<String> =
        inputs.rollback.vm.missing(vm, name).into_iter().map(|m| format!("the VM lacks {m}")).collect();
    let details = Value::Object(vm.extra.clone());
    for wanted in &inputs.rollback.attached {
        let Some(kind) = wanted.kind else {
            problems.push("migration.rollback.attached entry without \"kind\"".into());
            continue;
        };
        let of_vm: Vec<&Instance> = inventory
            .dependents
            .iter()
            .filter(|d| d.live && kind_of(d) == Some(kind) && refers_to(&details, &d.id))
            .collect();
        if of_vm.is_empty() {
            problems.push(format!("the VM has no {} in the fake's inventory", kind.word()));
        }
        problems.extend(of_vm.iter().flat_map(|d| {
            wanted.missing(d, name).into_iter().map(move |m| format!("its {} {} lacks {m}", kind.word(), d.name))
        }));
    }
    problems
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    fn instance(id: &str, name: &str, tags: &[(&str, &str)], extra: Value) -> Instance {
        Instance {
            id: id.into(),
            name: name.into(),
            state: "running".into(),
            live: true,
            tags: tags.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect::<BTreeMap<_, _>>(),
            extra: extra.as_object().cloned().unwrap_or_default(),
        }
    }

    fn azure_inputs() -> MigrationInputs {
        serde_json::from_value(json!({
            "goMade": {},
            "rollback": {
                "vm": {"name": "{name}", "tagKeys": ["kubernetes.io-cluster-c", "kubernetes.io-role-node"]},
                "attached": [
                    {"kind": "nic", "tagKeys": ["kubernetes.io-cluster-c", "kubernetes.io-role-node"]},
                    {"kind": "disk", "tagKeys": ["kubernetes.io-cluster-c"]}
                ]
            }
        }))
        .unwrap()
    }

    /// The checks fail when a marker is missing (on the VM or on an attached
    /// resource the VM refers to) and pass when every one is there; a
    /// dependent of another VM is not judged.
    #[test]
    fn rollback_problems_name_every_missing_marker() {
        let marked = [("kubernetes.io-cluster-c", "1"), ("kubernetes.io-role-node", "1")];
        let vm =
            instance("/vm/m-1", "m-1", &marked, json!({"network_interfaces": ["/NIC/m-1"], "disks": ["/disk/m-1"]}));
        let nic = instance("/nic/m-1", "m-1-nic", &[], json!({"kind": "networkInterface"}));
        let disk = instance("/disk/m-1", "m-1-os", &marked, json!({"kind": "disk"}));
        let stranger = instance("/nic/x", "x-nic", &[], json!({"kind": "networkInterface"}));
        let mut inventory =
            Inventory { instances: vec![vm.clone()], images: vec![], dependents: vec![nic, disk, stranger] };
        let problems = rollback_problems(&inventory, "m-1", &azure_inputs());
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems.iter().all(|p| p.contains("nic m-1-nic")), "{problems:?}");
        inventory.dependents[0].tags = marked.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        assert!(rollback_problems(&inventory, "m-1", &azure_inputs()).is_empty());
        inventory.instances[0].tags.remove("kubernetes.io-role-node");
        let problems = rollback_problems(&inventory, "m-1", &azure_inputs());
        assert_eq!(problems, ["the VM lacks tag key kubernetes.io-role-node"]);
        inventory.instances[0].extra.remove("disks");
        let problems = rollback_problems(&inventory, "m-1", &azure_inputs());
        assert!(problems.iter().any(|p| p.contains("no disk")), "{problems:?}");
        inventory.instances.push(vm);
        assert!(rollback_problems(&inventory, "m-1", &azure_inputs())[0].contains("2 live VMs"));
    }

    /// A VM of the machine's name besides the planted one (a replacement) fails.
    #[test]
    fn a_new_vm_of_the_name_is_a_replacement() {
        let planted = instance("i-1", "m-1", &[], json!({}));
        let plant = Plant {
            what: WHAT,
            id: "i-1".into(),
            name: "m-1".into(),
            provider_id: "p".into(),
            seen: planted.clone(),
            attached: vec![],
        };
        let mut inventory = Inventory { instances: vec![planted], images: vec![], dependents: vec![] };
        assert!(no_new_vm(&inventory, &plant, "x").is_ok());
        let mut replacement = instance("i-2", "m-1", &[], json!({}));
        replacement.live = false;
        inventory.instances.push(replacement);
        assert!(matches!(no_new_vm(&inventory, &plant, "x"), Err(Stop::Fail(why)) if why.contains("i-2")));
    }
}
