//! Hot update (`update/*`, issue 32): UpdateMachine changes a running
//! machine's tags (labels, metadata) in place, on the VM and on the
//! dependents the fake's inventory shows; it answers per field what it
//! applied, what was already so and what only a replacement can change;
//! `validate_only` and a repeat write nothing; a replacement-only edit is
//! refused naming the field; a retry after a lost answer converges; a VM that
//! is not this cluster's is NOT_FOUND and untouched; a disk's size or
//! performance, where the cloud changes it in place (`update.disk`), is
//! APPLIED and then read back UNCHANGED. Gated by CAPABILITY_UPDATE_MACHINE
//! and the conformance file's `update`.
//!
//! Every scenario creates its machine with the example class (plus the
//! `update.removable` tag, when the file names one) and sends that class as
//! `previous_machine_class`, so that the tags `tagsPatch` removes are removed.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use machine_driver_proto::v1::{
    FieldChange, FieldChangeOutcome, Machine, MachineClass, UpdateMachineRequest, UpdateMachineResponse,
};
use serde_json::Value;
use tonic::{Code, Status};

use crate::context::{Ctx, is_retryable};
use crate::fake_admin::{FakeAdmin, Fault, Inventory, OpClass, PlantRequest};
use crate::merge_patch::merge_patch;
use crate::outcome::{StepResult, Stop};
use crate::scenarios::bad_input::{spec_json, to_text};
use crate::scenarios::migration::refers_to;
use crate::scenarios::ownership::{Garden, settled};
use crate::settings::{DiskInput, InventoryValue, TagEdit, UpdateInputs};
use crate::status_details::{describe, error_reason};
use crate::{ensure, fail, skip};

/// The ErrorInfo reason of the refusal of a replacement-only edit (the kit's
/// `machine_driver_api::NEEDS_REPLACEMENT`).
const NEEDS_REPLACEMENT: &str = "NEEDS_REPLACEMENT";

/// What a scenario works with: the inputs, the class the machine is created
/// with (`base`) and the class after the tag edit (`retagged`), each as a
/// context whose class it is (its creates, status polls and deletes use it).
struct Update {
    inputs: UpdateInputs,
    edits: Vec<TagEdit>,
    fake: FakeAdmin,
    base: Ctx,
    retagged: Ctx,
}

/// The example spec with `patch` merged (RFC 7386); an error when the patch
/// changes nothing (`what` names it).
fn patched(base: &Value, patch: &Value, what: &str) -> Result<Value, String> {
    if !patch.is_object() {
        return Err(format!("{what} must be a JSON object (a merge patch on the class), got {patch}"));
    }
    let mut spec = base.clone();
    merge_patch(&mut spec, patch);
    if spec == *base {
        return Err(format!("{what} {patch} changes nothing in the class"));
    }
    Ok(spec)
}

/// `ctx` with another class (its provider spec).
fn with_spec(ctx: &Ctx, spec: &Value) -> StepResult<Ctx> {
    let mut settings = (*ctx.settings).clone();
    settings.provider_spec = to_text(spec)?;
    Ok(Ctx { settings: Arc::new(settings), ..ctx.clone() })
}

impl Update {
    /// The scenario's inputs, or a skip without them or without fake admin.
    fn new(ctx: &Ctx) -> StepResult<Self> {
        let Some(inputs) = ctx.settings.provider.update.clone() else {
            skip!("the provider's conformance file has no \"update\" inputs");
        };
        let fake = ctx.fake()?.clone();
        let edits = inputs.tag_edits().map_err(Stop::Fail)?;
        let mut base = spec_json(ctx)?;
        if let Some(patch) = inputs.removable_patch().map_err(Stop::Fail)? {
            merge_patch(&mut base, &patch);
        }
        let retagged = patched(&base, &inputs.tags_patch, "update.tagsPatch").map_err(Stop::Fail)?;
        Ok(Self { fake, edits, base: with_spec(ctx, &base)?, retagged: with_spec(ctx, &retagged)?, inputs })
    }

    /// The base class with `patch` merged (`what` names it).
    fn base_with(&self, patch: &Value, what: &str) -> StepResult<MachineClass> {
        let base = spec_json(&self.base)?;
        let spec = patched(&base, patch, what).map_err(Stop::Fail)?;
        Ok(self.base.class_with_spec(to_text(&spec)?))
    }

    /// A running machine of the base class: created, initialized.
    async fn machine(&self) -> StepResult<Machine> {
        let mut m = self.base.new_machine();
        self.base.create_until_ok(&mut m).await?;
        self.base.wait_initialized(&mut m).await?;
        Ok(m)
    }

    /// UpdateMachine of `m` to `class` from the base class.
    async fn call(
        &self,
        m: &Machine,
        class: &MachineClass,
        validate_only: bool,
    ) -> Result<UpdateMachineResponse, Status> {
        let req = UpdateMachineRequest {
            machine: Some(m.clone()),
            machine_class: Some(class.clone()),
            secret: Some(self.base.secret()),
            validate_only,
            previous_machine_class: Some(self.base.class()),
        };
        Ok(self.base.conn.driver.clone().update_machine(self.base.req(req)).await?.into_inner())
    }

    /// [`Self::call`] with retryable answers asked again within the wait bound.
    async fn settled(
        &self,
        m: &Machine,
        class: &MachineClass,
        validate_only: bool,
    ) -> Result<UpdateMachineResponse, Status> {
        settled(&self.base, || self.call(m, class, validate_only)).await
    }

    /// [`Self::settled`] that must answer OK for `m`'s VM; `what` names the call.
    async fn must(
        &self,
        m: &Machine,
        class: &MachineClass,
        validate_only: bool,
        what: &str,
    ) -> StepResult<Vec<FieldChange>> {
        match self.settled(m, class, validate_only).await {
            Ok(answer) => {
                ensure!(
                    answer.provider_id == m.provider_id,
                    "{what}: UpdateMachine answered providerID {:?}, the machine's is {:?}",
                    answer.provider_id,
                    m.provider_id
                );
                Ok(answer.changes)
            }
            Err(s) => fail!("{what}: UpdateMachine: {}", describe(&s)),
        }
    }

    /// Resets the fake's call counters.
    async fn reset_calls(&self) -> StepResult {
        self.fake.reset_calls().await.map_err(Stop::Fail)
    }

    /// The write calls since the last reset (the fake classifies them), with
    /// the operations, for messages.
    async fn writes(&self) -> StepResult<(u64, String)> {
        let counts = self.fake.calls().await.map_err(Stop::Fail)?;
        let writes = counts.classes.get(&OpClass::Write).copied().unwrap_or(0);
        Ok((writes, format!("{:?}", counts.calls)))
    }

    /// Fails when a write was made since the last reset.
    async fn expect_no_write(&self, after: &str) -> StepResult {
        let (writes, calls) = self.writes().await?;
        ensure!(writes == 0, "{after}: the driver made {writes} cloud write call(s); calls {calls}");
        Ok(())
    }

    /// The one live VM of `m` in the fake's inventory, with the inventory.
    async fn vm(&self, m: &Machine) -> StepResult<(Inventory, crate::fake_admin::Instance)> {
        let inventory = self.fake.inventory().await.map_err(Stop::Fail)?;
        let live: Vec<_> = inventory.instances.iter().filter(|i| i.live && i.name == m.name).cloned().collect();
        match <[_; 1]>::try_from(live) {
            Ok([vm]) => Ok((inventory, vm)),
            Err(live) => fail!(
                "the fake holds {} live VMs named {} (ids {:?}), expected 1",
                live.len(),
                m.name,
                live.iter().map(|i| i.id.as_str()).collect::<Vec<_>>()
            ),
        }
    }

    /// The tags of `m`'s VM and of the dependents it refers to, by resource
    /// (`the VM`, `nic m-nic`), as the fake shows them now, with the VM's id.
    async fn tags(&self, m: &Machine) -> StepResult<(String, BTreeMap<String, BTreeMap<String, String>>)> {
        let (inventory, vm) = self.vm(m).await?;
        Ok((vm.id.clone(), resource_tags(&inventory, &vm)))
    }

    /// Deletes `m` with the class it has after the update and waits until
    /// nothing of it is live (the runner's cleanup uses the example class).
    async fn delete(&self, m: &Machine) -> StepResult {
        self.retagged.must_delete(m).await?;
        super::expect_no_leftovers(&self.fake, &m.name, self.base.settings.wait).await
    }
}

/// The tags of `vm` and of each live dependent it refers to by id, keyed by
/// resource (`the VM`, `<kind> <name>`).
fn resource_tags(
    inventory: &Inventory,
    vm: &crate::fake_admin::Instance,
) -> BTreeMap<String, BTreeMap<String, String>> {
    let details = Value::Object(vm.extra.clone());
    let mut out: BTreeMap<String, BTreeMap<String, String>> = [("the VM".to_owned(), vm.tags.clone())].into();
    for d in inventory.dependents.iter().filter(|d| d.live && refers_to(&details, &d.id)) {
        let kind = d.extra.get("kind").and_then(Value::as_str).unwrap_or("dependent");
        out.insert(format!("{kind} {} ({})", d.name, d.id), d.tags.clone());
    }
    out
}

/// The resources the tag edits concern: the VM always; a dependent when it
/// carried, before the update, a tag the edits change or remove with the
/// base class's value (it mirrors the class's tags, so the update must reach
/// it). `base` holds the base class's tag maps, as the edits' paths find them.
fn concerned<'a>(
    before: &'a BTreeMap<String, BTreeMap<String, String>>,
    edits: &[TagEdit],
    base: &Value,
) -> Vec<&'a str> {
    before
        .iter()
        .filter(|(what, tags)| {
            what.as_str() == "the VM"
                || edits.iter().any(|e| {
                    let Some(Value::Object(class_tags)) = e.path.iter().try_fold(base, |v, k| v.get(k)) else {
                        return false;
                    };
                    let mut touched = e.set.keys().chain(&e.removed);
                    touched.any(|k| {
                        let class_value = class_tags.get(k).and_then(Value::as_str);
                        class_value.is_some() && tags.get(k).map(String::as_str) == class_value
                    })
                })
        })
        .map(|(what, _)| what.as_str())
        .collect()
}

/// Every way the concerned resources' tags differ from what the edits ask for.
fn tag_problems(
    now: &BTreeMap<String, BTreeMap<String, String>>,
    concerned: &[&str],
    edits: &[TagEdit],
) -> Vec<String> {
    let mut out = Vec::new();
    for what in concerned {
        let Some(tags) = now.get(*what) else {
            out.push(format!("{what} is gone"));
            continue;
        };
        let missing: Vec<String> = edits.iter().flat_map(|e| e.missing(tags)).collect();
        if !missing.is_empty() {
            out.push(format!("{what} lacks {}", missing.join(", ")));
        }
    }
    out
}

/// `field outcome` of each change, for messages and comparisons.
fn outcomes(changes: &[FieldChange]) -> Vec<(String, FieldChangeOutcome)> {
    changes.iter().map(|c| (c.field.clone(), c.outcome())).collect()
}

/// The answer in words: `field OUTCOME (detail)`, comma separated.
fn shown(changes: &[FieldChange]) -> String {
    let words: Vec<String> = changes
        .iter()
        .map(|c| {
            let outcome = c.outcome().as_str_name().trim_start_matches("FIELD_CHANGE_OUTCOME_");
            if c.detail.is_empty() {
                format!("{} {outcome}", c.field)
            } else {
                format!("{} {outcome} ({})", c.field, c.detail)
            }
        })
        .collect();
    if words.is_empty() { "no field".into() } else { words.join(", ") }
}

/// The answer to the tag edit, judged: each edited tag field APPLIED, no
/// other field APPLIED (nothing else changed), none NEEDS_REPLACEMENT, sorted
/// by field.
fn judge_retag(changes: &[FieldChange], edits: &[TagEdit]) -> Result<(), String> {
    let answer = shown(changes);
    let fields: Vec<&str> = changes.iter().map(|c| c.field.as_str()).collect();
    let mut sorted = fields.clone();
    sorted.sort_unstable();
    if fields != sorted {
        return Err(format!("the answer is not sorted by field: {answer}"));
    }
    for edit in edits {
        let field = edit.field();
        match changes.iter().find(|c| c.field == field) {
            Some(c) if c.outcome() == FieldChangeOutcome::Applied => {}
            Some(_) => return Err(format!("{field} is not APPLIED: {answer}")),
            None => return Err(format!("{field} is not in the answer: {answer}")),
        }
    }
    let edited: Vec<String> = edits.iter().map(TagEdit::field).collect();
    for c in changes {
        if c.outcome() == FieldChangeOutcome::NeedsReplacement {
            return Err(format!("{} needs a replacement although only tags changed: {answer}", c.field));
        }
        if c.outcome() == FieldChangeOutcome::Applied && !edited.contains(&c.field) {
            return Err(format!("{} is APPLIED although the edit does not touch it: {answer}", c.field));
        }
        if c.outcome() == FieldChangeOutcome::Unspecified {
            return Err(format!("{} answers FIELD_CHANGE_OUTCOME_UNSPECIFIED (never sent): {answer}", c.field));
        }
    }
    Ok(())
}

/// A repeat's answer: at least one field, every one UNCHANGED.
fn judge_unchanged(changes: &[FieldChange]) -> Result<(), String> {
    if changes.is_empty() || changes.iter().any(|c| c.outcome() != FieldChangeOutcome::Unchanged) {
        return Err(format!("expected every field UNCHANGED, got {}", shown(changes)));
    }
    Ok(())
}

/// The refusal of a replacement-only edit: FAILED_PRECONDITION, ErrorInfo
/// reason NEEDS_REPLACEMENT, the message naming `field`.
fn judge_refused(status: &Status, field: &str) -> Result<(), String> {
    let reason = error_reason(status);
    if status.code() != Code::FailedPrecondition || reason.as_deref() != Some(NEEDS_REPLACEMENT) {
        return Err(format!(
            "expected FAILED_PRECONDITION with ErrorInfo reason {NEEDS_REPLACEMENT}, got {} (reason {reason:?})",
            describe(status)
        ));
    }
    if !status.message().contains(field) {
        return Err(format!("the refusal {:?} does not name {field}", status.message()));
    }
    Ok(())
}

/// The tags and the answer right after the first tag edit: the edit APPLIED
/// (see [`judge_retag`]), at least one write, and every concerned resource
/// carries the edited tags. Returns the answer.
async fn retag(update: &Update, m: &Machine, what: &str) -> StepResult<Vec<FieldChange>> {
    let (_, before) = update.tags(m).await?;
    let base = spec_json(&update.base)?;
    let concerned = concerned(&before, &update.edits, &base);
    let already = tag_problems(&before, &concerned, &update.edits);
    ensure!(
        !already.is_empty(),
        "update.tagsPatch asks for nothing the VM does not have already ({before:?}): it tests nothing"
    );
    update.reset_calls().await?;
    let changes = update.must(m, &update.retagged.class(), false, what).await?;
    judge_retag(&changes, &update.edits).map_err(|why| Stop::Fail(format!("{what}: {why}")))?;
    let (writes, calls) = update.writes().await?;
    ensure!(writes > 0, "{what}: answered {} without a cloud write call; calls {calls}", shown(&changes));
    expect_retagged(update, m, &before, &concerned, what).await?;
    Ok(changes)
}

/// Every concerned resource carries the edited tags, and the VM is the same.
async fn expect_retagged(
    update: &Update,
    m: &Machine,
    before: &BTreeMap<String, BTreeMap<String, String>>,
    concerned: &[&str],
    what: &str,
) -> StepResult {
    let (_, now) = update.tags(m).await?;
    let problems = tag_problems(&now, concerned, &update.edits);
    ensure!(
        problems.is_empty(),
        "{what}: the fake's inventory shows {} (before the update: {before:?})",
        problems.join("; ")
    );
    Ok(())
}

/// A repeat of the edit: every field UNCHANGED, no write.
async fn repeat(update: &Update, m: &Machine, what: &str) -> StepResult {
    update.reset_calls().await?;
    let changes = update.must(m, &update.retagged.class(), false, what).await?;
    judge_unchanged(&changes).map_err(|why| Stop::Fail(format!("{what}: {why}")))?;
    update.expect_no_write(what).await
}

/// `update/tags-applied`: the tag edit is APPLIED on the VM and the
/// dependents that carry the class's tags; a repeat answers every field
/// UNCHANGED with no write.
pub(crate) fn tags_applied(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let update = Update::new(&ctx)?;
        let m = update.machine().await?;
        let (id, _) = update.tags(&m).await?;
        retag(&update, &m, "UpdateMachine with update.tagsPatch").await?;
        let (after, _) = update.tags(&m).await?;
        ensure!(after == id, "the update replaced the VM: {id} before, {after} after");
        repeat(&update, &m, "a second identical UpdateMachine").await?;
        update.delete(&m).await
    })
}

/// The answer to the disk edit, judged: `field` APPLIED, no other field
/// APPLIED (only the disk changed), none NEEDS_REPLACEMENT or UNSPECIFIED,
/// sorted by field.
fn judge_disk(changes: &[FieldChange], field: &str) -> Result<(), String> {
    let answer = shown(changes);
    let fields: Vec<&str> = changes.iter().map(|c| c.field.as_str()).collect();
    if !fields.is_sorted() {
        return Err(format!("the answer is not sorted by field: {answer}"));
    }
    match changes.iter().find(|c| c.field == field) {
        Some(c) if c.outcome() == FieldChangeOutcome::Applied => {}
        Some(_) => return Err(format!("{field} is not APPLIED: {answer}")),
        None => return Err(format!("{field} is not in the answer: {answer}")),
    }
    for c in changes {
        match c.outcome() {
            FieldChangeOutcome::NeedsReplacement => {
                return Err(format!("{} needs a replacement although only {field} changed: {answer}", c.field));
            }
            FieldChangeOutcome::Applied if c.field != field => {
                return Err(format!("{} is APPLIED although the edit does not touch it: {answer}", c.field));
            }
            FieldChangeOutcome::Unspecified => {
                return Err(format!("{} answers FIELD_CHANGE_OUTCOME_UNSPECIFIED (never sent): {answer}", c.field));
            }
            _ => {}
        }
    }
    Ok(())
}

/// A repeat of the disk edit: every field UNCHANGED, `field` among them.
fn judge_disk_repeat(changes: &[FieldChange], field: &str) -> Result<(), String> {
    judge_unchanged(changes)?;
    if !changes.iter().any(|c| c.field == field) {
        return Err(format!("{field} is not in the answer: {}", shown(changes)));
    }
    Ok(())
}

/// What the VM's inventory record shows at `shown.pointer` (null when absent).
fn inventory_value(vm: &crate::fake_admin::Instance, shown: &InventoryValue) -> Value {
    Value::Object(vm.extra.clone()).pointer(&shown.pointer).cloned().unwrap_or(Value::Null)
}

/// The disk edit's inputs, or the skip naming why there are none.
fn disk_input(inputs: &UpdateInputs) -> Result<DiskInput, Stop> {
    let Some(disk) = inputs.disk.clone() else {
        let why = inputs.no_disk.as_deref().unwrap_or("no reason given (update.noDisk)");
        return Err(Stop::Skip(format!("the provider's conformance file has no \"update.disk\": {why}")));
    };
    disk.check().map_err(Stop::Fail)?;
    Ok(disk)
}

/// Polls the fake's inventory until `m`'s VM shows `shown.value` at
/// `shown.pointer` (a cloud may show a disk's new attributes a little after
/// the change, EBS once the modification is `optimizing`); fails at the wait bound.
async fn wait_shown(update: &Update, m: &Machine, shown: &InventoryValue, what: &str) -> StepResult {
    let started = std::time::Instant::now();
    loop {
        let (_, vm) = update.vm(m).await?;
        let now = inventory_value(&vm, shown);
        if now == shown.value {
            return Ok(());
        }
        if started.elapsed() >= update.base.settings.wait {
            fail!(
                "{what}: the fake's inventory shows {now} at {} of VM {}, expected {} (after {:?})",
                shown.pointer,
                vm.id,
                shown.value,
                update.base.settings.wait
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// `update/disk-changed`: a disk edit the cloud makes in place
/// (`update.disk.patch`) answers `update.disk.field` APPLIED with no write
/// under `validate_only`, then APPLIED for real with a write and the same VM,
/// then a repeat answers it UNCHANGED with no write (the driver read the
/// disk's new state from the cloud); the fake's inventory shows the new
/// value where `update.disk.inventory` says. Skipped without `update.disk`
/// (the cloud changes no disk of a running VM in place: `update.noDisk`).
pub(crate) fn disk_changed(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let update = Update::new(&ctx)?;
        let disk = disk_input(&update.inputs)?;
        let spec = patched(&spec_json(&update.base)?, &disk.patch, "update.disk.patch").map_err(Stop::Fail)?;
        let changed = with_spec(&update.base, &spec)?;
        let class = changed.class();
        let m = update.machine().await?;
        let (_, vm) = update.vm(&m).await?;
        let id = vm.id.clone();
        if let Some(shown) = &disk.inventory {
            let before = inventory_value(&vm, shown);
            ensure!(
                before != shown.value,
                "the fake's inventory shows {before} at {} of VM {id} before the update: update.disk.patch tests nothing",
                shown.pointer
            );
        }
        let field = disk.field.as_str();
        let what = "UpdateMachine with update.disk.patch and validate_only";
        update.reset_calls().await?;
        let dry = update.must(&m, &class, true, what).await?;
        judge_disk(&dry, field).map_err(|why| Stop::Fail(format!("{what}: {why}")))?;
        update.expect_no_write(what).await?;
        if let Some(shown) = &disk.inventory {
            let (_, vm) = update.vm(&m).await?;
            let now = inventory_value(&vm, shown);
            ensure!(
                now != shown.value,
                "{what} changed the disk: the fake's inventory shows {now} at {}",
                shown.pointer
            );
        }

        let what = "UpdateMachine with update.disk.patch";
        update.reset_calls().await?;
        let real = update.must(&m, &class, false, what).await?;
        judge_disk(&real, field).map_err(|why| Stop::Fail(format!("{what}: {why}")))?;
        let (writes, calls) = update.writes().await?;
        ensure!(writes > 0, "{what}: answered {} without a cloud write call; calls {calls}", shown(&real));
        ensure!(
            outcomes(&real) == outcomes(&dry),
            "validate_only answered {}, the real call {}",
            shown(&dry),
            shown(&real)
        );
        let (_, after) = update.vm(&m).await?;
        ensure!(after.id == id, "the update replaced the VM: {id} before, {} after", after.id);

        let what = "a second identical UpdateMachine with update.disk.patch";
        update.reset_calls().await?;
        let again = update.must(&m, &class, false, what).await?;
        judge_disk_repeat(&again, field).map_err(|why| Stop::Fail(format!("{what}: {why}")))?;
        update.expect_no_write(what).await?;
        if let Some(shown) = &disk.inventory {
            wait_shown(&update, &m, shown, "after the update").await?;
        }
        changed.must_delete(&m).await?;
        super::expect_no_leftovers(&update.fake, &m.name, ctx.settings.wait).await
    })
}

/// `update/validate-only-changes-nothing`: `validate_only` answers what the
/// edit would do (the same per field as the real call then answers) with no
/// write and the VM's tags unchanged.
pub(crate) fn validate_only(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let update = Update::new(&ctx)?;
        let m = update.machine().await?;
        let what = "UpdateMachine with update.tagsPatch and validate_only";
        let (_, before) = update.tags(&m).await?;
        update.reset_calls().await?;
        let dry = update.must(&m, &update.retagged.class(), true, what).await?;
        judge_retag(&dry, &update.edits).map_err(|why| Stop::Fail(format!("{what}: {why}")))?;
        update.expect_no_write(what).await?;
        let (_, after) = update.tags(&m).await?;
        ensure!(after == before, "{what} changed tags: before {before:?}, after {after:?}");
        let again = update.must(&m, &update.retagged.class(), true, "a second validate_only call").await?;
        ensure!(
            outcomes(&again) == outcomes(&dry),
            "a second validate_only call answered {}, the first {}",
            shown(&again),
            shown(&dry)
        );
        update.expect_no_write("a second validate_only call").await?;
        let real = retag(&update, &m, "the same UpdateMachine without validate_only").await?;
        ensure!(
            outcomes(&real) == outcomes(&dry),
            "validate_only answered {}, the real call {}",
            shown(&dry),
            shown(&real)
        );
        update.delete(&m).await
    })
}

/// `update/replacement-refused`: an edit only a new VM can have
/// (`update.replacement.patch`) is refused FAILED_PRECONDITION naming
/// `update.replacement.field`, with or without `validate_only`, with no write
/// and the VM kept; with the tag edit beside it (validate_only) the answer is
/// OK, the field NEEDS_REPLACEMENT and the tags APPLIED.
pub(crate) fn replacement_refused(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let update = Update::new(&ctx)?;
        let replacement = update.inputs.replacement.clone();
        let class = update.base_with(&replacement.patch, "update.replacement.patch")?;
        let m = update.machine().await?;
        let (id, before) = update.tags(&m).await?;
        for validate_only in [false, true] {
            let what = format!("UpdateMachine with update.replacement.patch only (validate_only {validate_only})");
            update.reset_calls().await?;
            match update.settled(&m, &class, validate_only).await {
                Err(s) => judge_refused(&s, &replacement.field).map_err(|why| Stop::Fail(format!("{what}: {why}")))?,
                Ok(answer) => fail!(
                    "{what}: expected FAILED_PRECONDITION naming {}, got OK: {}",
                    replacement.field,
                    shown(&answer.changes)
                ),
            }
            update.expect_no_write(&what).await?;
            let (now_id, now) = update.tags(&m).await?;
            ensure!(now_id == id, "{what}: the VM {id} was replaced by {now_id}");
            ensure!(now == before, "{what}: tags changed from {before:?} to {now:?}");
        }
        let mut both = spec_json(&update.retagged)?;
        merge_patch(&mut both, &replacement.patch);
        let both = update.base.class_with_spec(to_text(&both)?);
        let what = "UpdateMachine with update.replacement.patch and update.tagsPatch (validate_only)";
        update.reset_calls().await?;
        let changes = update.must(&m, &both, true, what).await?;
        let answer = shown(&changes);
        match changes.iter().find(|c| c.field == replacement.field) {
            Some(c) if c.outcome() == FieldChangeOutcome::NeedsReplacement => {}
            _ => fail!("{what}: expected {} NEEDS_REPLACEMENT, got {answer}", replacement.field),
        }
        for edit in &update.edits {
            let applied = changes.iter().any(|c| c.field == edit.field() && c.outcome() == FieldChangeOutcome::Applied);
            ensure!(applied, "{what}: expected {} APPLIED, got {answer}", edit.field());
        }
        update.expect_no_write(what).await?;
        update.base.must_delete(&m).await?;
        super::expect_no_leftovers(&update.fake, &m.name, ctx.settings.wait).await
    })
}

/// `update/lost-answer-retried`: the first write takes effect and its answer
/// is lost (fault phase `after`); UpdateMachine answers a retryable code (or
/// OK, when the driver retried itself), the retry answers OK and the tags are
/// as asked; a further call answers every field UNCHANGED with no write.
pub(crate) fn lost_answer_retried(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let update = Update::new(&ctx)?;
        let m = update.machine().await?;
        let (_, before) = update.tags(&m).await?;
        let concerned = concerned(&before, &update.edits, &spec_json(&update.base)?);
        update.reset_calls().await?;
        let fault = Fault { operation: "write", kind: "unavailable", times: Some(1), phase: "after" };
        update.fake.add_fault(fault).await.map_err(Stop::Fail)?;
        let class = update.retagged.class();
        match update.call(&m, &class, false).await {
            Ok(_) => {}
            Err(s) if is_retryable(s.code()) => {}
            Err(s) => fail!(
                "UpdateMachine whose first cloud write lost its answer: expected UNAVAILABLE (retryable) or OK, got {}",
                describe(&s)
            ),
        }
        let counts = update.fake.calls().await.map_err(Stop::Fail)?;
        ensure!(
            counts.lost_answers >= 1,
            "the fault struck no write (the update made no cloud write call?); calls {:?}",
            counts.calls
        );
        update.fake.clear_faults().await.map_err(Stop::Fail)?;
        let what = "UpdateMachine retried after a lost answer";
        let changes = update.must(&m, &class, false, what).await?;
        let bad = changes
            .iter()
            .find(|c| !matches!(c.outcome(), FieldChangeOutcome::Applied | FieldChangeOutcome::Unchanged));
        ensure!(bad.is_none(), "{what}: expected APPLIED or UNCHANGED fields only, got {}", shown(&changes));
        expect_retagged(&update, &m, &before, &concerned, what).await?;
        update.vm(&m).await?;
        repeat(&update, &m, "UpdateMachine after the retry converged").await?;
        update.delete(&m).await
    })
}

/// `update/foreign-vm-untouched`: UpdateMachine of a machine whose
/// providerID is a VM planted with another cluster's markers (and one
/// without markers) answers NOT_FOUND, with and without validate_only,
/// makes no write, and the VM keeps its tags.
pub(crate) fn foreign_vm_untouched(ctx: Ctx) -> BoxFuture<'static, StepResult> {
    Box::pin(async move {
        let update = Update::new(&ctx)?;
        let mut garden = Garden::new(&ctx)?;
        let result = foreign(&update, &mut garden).await;
        garden.finish(result).await
    })
}

async fn foreign(update: &Update, garden: &mut Garden) -> StepResult {
    let kinds = [
        (garden.inputs.other_cluster.clone(), "another cluster's VM", "otherCluster"),
        (garden.inputs.no_markers.clone(), "a VM without markers (made by hand)", "noMarkers"),
    ];
    for (vm, what, key) in kinds {
        let fresh = update.base.new_machine();
        let request = PlantRequest {
            name: fresh.name.clone(),
            tags: vm.tags.clone(),
            network_tags: vm.network_tags.clone(),
            scope: garden.inputs.scope.clone(),
            ..PlantRequest::default()
        };
        let plant = garden.plant_request(&request, what, key).await?;
        let m = Machine { provider_id: plant.provider_id.clone(), ..fresh };
        for validate_only in [true, false] {
            let call = format!("UpdateMachine of {} (validate_only {validate_only})", plant.label());
            update.reset_calls().await?;
            match update.settled(&m, &update.retagged.class(), validate_only).await {
                Err(s) if s.code() == Code::NotFound => {}
                Err(s) => fail!("{call}: expected NOT_FOUND, got {}", describe(&s)),
                Ok(answer) => fail!(
                    "{call}: expected NOT_FOUND, got OK ({}): the driver would change a VM it does not own",
                    shown(&answer.changes)
                ),
            }
            update.expect_no_write(&call).await?;
            garden.expect_untouched(&plant, &format!("after {call}"), false).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn change(field: &str, outcome: FieldChangeOutcome) -> FieldChange {
        FieldChange { field: field.into(), outcome: outcome as i32, detail: String::new() }
    }

    fn edit() -> TagEdit {
        TagEdit {
            path: vec!["tags".into()],
            set: [("team".to_owned(), "b".to_owned())].into(),
            removed: vec!["pool".into()],
        }
    }

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn the_retag_answer_applies_the_tag_field_and_nothing_else() {
        use FieldChangeOutcome::{Applied, NeedsReplacement, Unchanged, Unspecified};
        let edits = [edit()];
        let ok = [change("providerSpec.machineType", Unchanged), change("providerSpec.tags", Applied)];
        assert_eq!(judge_retag(&ok, &edits), Ok(()));
        let unsorted = [change("providerSpec.tags", Applied), change("providerSpec.machineType", Unchanged)];
        assert!(judge_retag(&unsorted, &edits).unwrap_err().contains("sorted"));
        let unchanged = [change("providerSpec.tags", Unchanged)];
        assert!(judge_retag(&unchanged, &edits).unwrap_err().contains("not APPLIED"));
        assert!(judge_retag(&[], &edits).unwrap_err().contains("not in the answer"));
        let replaced = [change("providerSpec.machineType", NeedsReplacement), change("providerSpec.tags", Applied)];
        assert!(judge_retag(&replaced, &edits).unwrap_err().contains("replacement"));
        let other = [change("providerSpec.ami", Applied), change("providerSpec.tags", Applied)];
        assert!(judge_retag(&other, &edits).unwrap_err().contains("does not touch"));
        let unspecified = [change("providerSpec.a", Unspecified), change("providerSpec.tags", Applied)];
        assert!(judge_retag(&unspecified, &edits).unwrap_err().contains("UNSPECIFIED"));
        assert_eq!(judge_unchanged(&[change("providerSpec.tags", Unchanged)]), Ok(()));
        assert!(judge_unchanged(&ok).is_err());
        assert!(judge_unchanged(&[]).is_err(), "an answer without fields compares nothing");
        assert_eq!(shown(&ok), "providerSpec.machineType UNCHANGED, providerSpec.tags APPLIED");
    }

    #[test]
    fn the_disk_answer_applies_the_disk_field_and_nothing_else() {
        use FieldChangeOutcome::{Applied, NeedsReplacement, Unchanged, Unspecified};
        let field = "providerSpec.blockDevices[0].ebs.iops";
        let ok = [change(field, Applied), change("providerSpec.tags", Unchanged)];
        assert_eq!(judge_disk(&ok, field), Ok(()));
        let unsorted = [change("providerSpec.tags", Unchanged), change(field, Applied)];
        assert!(judge_disk(&unsorted, field).unwrap_err().contains("sorted"));
        let unchanged = [change(field, Unchanged)];
        assert!(judge_disk(&unchanged, field).unwrap_err().contains("not APPLIED"));
        assert!(
            judge_disk(&[change("providerSpec.tags", Unchanged)], field).unwrap_err().contains("not in the answer")
        );
        let replaced = [change(field, Applied), change("providerSpec.machineType", NeedsReplacement)];
        assert!(judge_disk(&replaced, field).unwrap_err().contains("replacement"));
        let other = [change(field, Applied), change("providerSpec.tags", Applied)];
        assert!(judge_disk(&other, field).unwrap_err().contains("does not touch"));
        let unspecified = [change(field, Applied), change("providerSpec.x", Unspecified)];
        assert!(judge_disk(&unspecified, field).unwrap_err().contains("UNSPECIFIED"));

        let repeat = [change(field, Unchanged), change("providerSpec.tags", Unchanged)];
        assert_eq!(judge_disk_repeat(&repeat, field), Ok(()));
        assert!(judge_disk_repeat(&ok, field).unwrap_err().contains("UNCHANGED"));
        let without = [change("providerSpec.tags", Unchanged)];
        assert!(judge_disk_repeat(&without, field).unwrap_err().contains("not in the answer"));
    }

    #[test]
    fn disk_inputs_skip_with_the_reason_and_inventory_values_are_found() {
        let mut inputs: UpdateInputs = serde_json::from_value(json!({
            "source": "x",
            "tagsPatch": {"tags": {"team": "b"}},
            "replacement": {"patch": {}, "field": "providerSpec.machineType"},
            "noDisk": "Nova resizes no volume of a running server"
        }))
        .unwrap();
        match disk_input(&inputs) {
            Err(Stop::Skip(why)) => assert!(why.contains("update.disk") && why.contains("Nova"), "{why}"),
            other => panic!("expected a skip, got {other:?}"),
        }
        inputs.disk = Some(DiskInput { patch: json!("x"), field: "providerSpec.a".into(), inventory: None });
        assert!(matches!(disk_input(&inputs), Err(Stop::Fail(_))));

        let vm = crate::fake_admin::Instance {
            id: "i-1".into(),
            name: "m".into(),
            state: "running".into(),
            live: true,
            tags: BTreeMap::new(),
            extra: json!({"block_devices": [{"iops": 4000}]}).as_object().cloned().unwrap(),
        };
        let at = |pointer: &str| InventoryValue { pointer: pointer.into(), value: json!(4000) };
        assert_eq!(inventory_value(&vm, &at("/block_devices/0/iops")), json!(4000));
        assert_eq!(inventory_value(&vm, &at("/block_devices/1/iops")), Value::Null);
    }

    #[test]
    fn a_replacement_refusal_names_the_field_with_its_reason() {
        let mut details = tonic_types::ErrorDetails::new();
        details.set_error_info(NEEDS_REPLACEMENT, "machinedriver", std::collections::HashMap::new());
        let msg = "VM i-1: only a replacement can change providerSpec.machineType (nothing can be changed in place)";
        let refused = <Status as tonic_types::StatusExt>::with_error_details(Code::FailedPrecondition, msg, details);
        assert_eq!(judge_refused(&refused, "providerSpec.machineType"), Ok(()));
        assert!(judge_refused(&refused, "providerSpec.ami").unwrap_err().contains("does not name"));
        assert!(judge_refused(&Status::failed_precondition(msg), "providerSpec.machineType").is_err());
        assert!(judge_refused(&Status::invalid_argument(msg), "providerSpec.machineType").is_err());
    }

    #[test]
    fn dependents_mirroring_the_class_tags_are_concerned_and_checked() {
        let base = json!({"tags": {"team": "a", "pool": "p", "cluster": "c"}});
        let before: BTreeMap<String, BTreeMap<String, String>> = [
            ("the VM".to_owned(), tags(&[("team", "a"), ("pool", "p")])),
            ("nic m-nic (n1)".to_owned(), tags(&[("pool", "p"), ("cluster", "c")])),
            ("disk m-disk (d1)".to_owned(), tags(&[("cluster", "c")])),
            ("port m-port (p1)".to_owned(), tags(&[("pool", "other")])),
        ]
        .into();
        let edits = [edit()];
        let concerned = concerned(&before, &edits, &base);
        assert_eq!(concerned, ["nic m-nic (n1)", "the VM"]);
        let problems = tag_problems(&before, &concerned, &edits);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("nic m-nic (n1) lacks tag team=\"b\" (absent), tag pool removed"),
            "{problems:?}"
        );
        let mut after = before.clone();
        after.insert("the VM".into(), tags(&[("team", "b")]));
        after.insert("nic m-nic (n1)".into(), tags(&[("team", "b"), ("cluster", "c")]));
        assert!(tag_problems(&after, &concerned, &edits).is_empty());
        after.remove("nic m-nic (n1)");
        assert_eq!(tag_problems(&after, &concerned, &edits), ["nic m-nic (n1) is gone"]);
    }

    #[test]
    fn resource_tags_follow_the_vm_references() {
        let instance = |id: &str, name: &str, extra: Value| crate::fake_admin::Instance {
            id: id.into(),
            name: name.into(),
            state: "running".into(),
            live: true,
            tags: tags(&[("k", id)]),
            extra: extra.as_object().cloned().unwrap_or_default(),
        };
        let vm = instance("vm-1", "m", json!({"network_interfaces": ["NIC-1"]}));
        let inventory = Inventory {
            instances: vec![vm.clone()],
            images: vec![],
            dependents: vec![
                instance("nic-1", "m-nic", json!({"kind": "networkInterface"})),
                instance("nic-2", "other-nic", json!({"kind": "networkInterface"})),
            ],
        };
        let seen = resource_tags(&inventory, &vm);
        assert_eq!(seen.keys().collect::<Vec<_>>(), ["networkInterface m-nic (nic-1)", "the VM"]);
    }

    #[test]
    fn patches_that_change_nothing_are_refused() {
        let base = json!({"tags": {"a": "1"}});
        assert_eq!(patched(&base, &json!({"tags": {"a": "2"}}), "p").unwrap(), json!({"tags": {"a": "2"}}));
        assert!(patched(&base, &json!({"tags": {"a": "1"}}), "p").unwrap_err().contains("changes nothing"));
        assert!(patched(&base, &json!("x"), "p").unwrap_err().contains("JSON object"));
    }
}
