//! UpdateMachine (hot update): the request, the per-field answer and the two
//! pieces every provider's implementation is made of — [`TagPlan`] (which
//! tags to set and which to remove, on the VM and each dependent) and
//! [`UpdatePlan`] (the answer, with the one rule for when it is an error).
//!
//! A provider's `update_machine` reads the VM as GetMachineStatus does
//! (ownership judged the same way), then, field by field: a field the cloud
//! changes in place is compared and, unless `validate_only`, applied
//! ([`UpdatePlan::applied`] / [`UpdatePlan::unchanged`]); a field only a new
//! VM can have is compared and, when it differs, reported
//! ([`UpdatePlan::compare_replacement`]). [`UpdatePlan::finish`] sorts the
//! answer and turns "only replacements differ" into FAILED_PRECONDITION.
//!
//! Nothing a class changes is dropped: a plan made with
//! [`UpdatePlan::for_request`] compares the previous class's providerSpec with
//! the new one at [`UpdatePlan::finish`], and every changed path no recorded
//! field covers (the provider neither applied nor compared it) is answered
//! NEEDS_REPLACEMENT ([`unrecorded_changes`]). Without a previous class only
//! what the VM shows can be compared.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::error::{DriverError, ErrorKind, Result};
use crate::machine::{Machine, MachineClass};
use crate::secret::SecretData;

/// The reason of the FAILED_PRECONDITION answered when every differing field
/// needs a replacement.
pub const NEEDS_REPLACEMENT: &str = "NEEDS_REPLACEMENT";

/// UpdateMachine input.
#[derive(Debug, Clone)]
pub struct UpdateMachine {
    /// The machine (name and provider id are set).
    pub machine: Machine,
    /// The class as it is now: what the VM is changed to.
    pub class: MachineClass,
    /// The class the machine was created or last updated with, when the
    /// caller knows it: tags it has and `class` lacks are removed.
    pub previous_class: Option<MachineClass>,
    /// Credentials.
    pub secret: SecretData,
    /// Answer what would be done; change nothing.
    pub validate_only: bool,
}

/// What UpdateMachine did with one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ChangeOutcome {
    /// Changed in place by this call (`validate_only`: would be).
    Applied,
    /// The VM already has what the class asks for.
    Unchanged,
    /// Only a new VM can have it; not applied.
    NeedsReplacement,
}

/// One compared field of an UpdateMachine answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldChange {
    /// The class field as an INVALID_ARGUMENT names it (`providerSpec.tags`).
    pub field: String,
    /// What was done with it.
    pub outcome: ChangeOutcome,
    /// What changed, in words; never a secret.
    pub detail: String,
}

/// UpdateMachine output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdatedMachine {
    /// Cloud id as providerID.
    pub provider_id: String,
    /// One entry per compared field, sorted by field.
    pub changes: Vec<FieldChange>,
}

/// The answer being built by a provider's `update_machine`.
#[derive(Debug, Clone)]
pub struct UpdatePlan {
    provider_id: String,
    validate_only: bool,
    changes: Vec<FieldChange>,
    /// The previous and the new class's providerSpec, when the request had a
    /// previous class: [`UpdatePlan::finish`] reports what changed between
    /// them and no recorded field covers.
    classes: Option<(serde_json::Value, serde_json::Value)>,
}

impl UpdatePlan {
    /// An empty answer for the VM `provider_id`.
    pub fn new(provider_id: impl Into<String>, validate_only: bool) -> Self {
        Self { provider_id: provider_id.into(), validate_only, changes: Vec::new(), classes: None }
    }

    /// The plan every provider's `update_machine` starts with: an empty
    /// answer for the VM `provider_id`, `validate_only` from `req`, and
    /// `req`'s previous and new providerSpec, so that [`UpdatePlan::finish`]
    /// reports a changed field the provider did not record as
    /// NEEDS_REPLACEMENT instead of dropping it.
    pub fn for_request(provider_id: impl Into<String>, req: &UpdateMachine) -> Self {
        let mut plan = Self::new(provider_id, req.validate_only);
        plan.classes = req.previous_class.as_ref().and_then(|previous| {
            let old = serde_json::from_slice(&previous.provider_spec).ok()?;
            let new = serde_json::from_slice(&req.class.provider_spec).ok()?;
            Some((old, new))
        });
        plan
    }

    /// Whether the caller asked to change nothing: the provider computes every
    /// field and makes no write.
    pub fn validate_only(&self) -> bool {
        self.validate_only
    }

    /// Records `field` as changed in place (or, with `validate_only`, as what
    /// would be changed), `detail` saying what.
    pub fn applied(&mut self, field: impl Into<String>, detail: impl Into<String>) {
        self.push(field.into(), ChangeOutcome::Applied, detail.into());
    }

    /// Records `field` as already what the class asks for.
    pub fn unchanged(&mut self, field: impl Into<String>) {
        self.push(field.into(), ChangeOutcome::Unchanged, String::new());
    }

    /// Records a field only a new VM can change: UNCHANGED when `current`
    /// equals `desired`, else NEEDS_REPLACEMENT with `current -> desired`.
    /// Returns whether it differs.
    pub fn compare_replacement(&mut self, field: impl Into<String>, current: &str, desired: &str) -> bool {
        let differs = current != desired;
        let detail = if differs { format!("{current:?} -> {desired:?}") } else { String::new() };
        let outcome = if differs { ChangeOutcome::NeedsReplacement } else { ChangeOutcome::Unchanged };
        self.push(field.into(), outcome, detail);
        differs
    }

    /// Records a tag field from its plans, one per resource it covers (`what`
    /// names the resource: "the VM", "NIC m-1-nic"): APPLIED with what is
    /// set and removed where, or UNCHANGED when every plan is empty.
    pub fn tags<'a>(&mut self, field: impl Into<String>, plans: impl IntoIterator<Item = (&'a str, &'a TagPlan)>) {
        let done: Vec<String> =
            plans.into_iter().filter(|(_, p)| !p.is_empty()).map(|(what, p)| format!("{p} on {what}")).collect();
        if done.is_empty() {
            self.unchanged(field);
        } else {
            self.applied(field, done.join("; "));
        }
    }

    fn push(&mut self, field: String, outcome: ChangeOutcome, detail: String) {
        self.changes.push(FieldChange { field, outcome, detail });
    }

    /// The answer, sorted by field. FAILED_PRECONDITION (reason
    /// [`NEEDS_REPLACEMENT`], naming the fields) when some field needs a
    /// replacement and none was applied: the caller asked only for what a
    /// new VM would give it.
    pub fn finish(mut self) -> Result<UpdatedMachine> {
        if let Some((old, new)) = self.classes.take() {
            let recorded: Vec<&str> = self.changes.iter().map(|c| c.field.as_str()).collect();
            for field in unrecorded_changes(&old, &new, &recorded) {
                self.push(field, ChangeOutcome::NeedsReplacement, UNRECORDED_DETAIL.to_string());
            }
        }
        self.changes.sort_by(|a, b| a.field.cmp(&b.field));
        let replace: Vec<&str> = self
            .changes
            .iter()
            .filter(|c| c.outcome == ChangeOutcome::NeedsReplacement)
            .map(|c| c.field.as_str())
            .collect();
        let applied = self.changes.iter().any(|c| c.outcome == ChangeOutcome::Applied);
        if !replace.is_empty() && !applied {
            return Err(DriverError::new(
                ErrorKind::FailedPrecondition,
                NEEDS_REPLACEMENT,
                format!(
                    "VM {}: only a replacement can change {} (nothing can be changed in place)",
                    self.provider_id,
                    replace.join(", ")
                ),
            ));
        }
        Ok(UpdatedMachine { provider_id: self.provider_id, changes: self.changes })
    }
}

/// The detail of a changed field the provider did not record. Values are
/// never echoed: a providerSpec may carry what a log must not show.
const UNRECORDED_DETAIL: &str = "changed in the class; this driver cannot change it on a running VM";

/// The paths (`providerSpec.a.b[2].c`, the spelling of [`FieldChange::field`])
/// where `new` differs from `old` and no `recorded` field covers: a recorded
/// field covers its own path and everything under it (`providerSpec.tags`
/// covers `providerSpec.tags.team`). Objects are compared key by key and
/// arrays element by element; a key or element on one side only, or a value
/// of another type, is one path.
pub fn unrecorded_changes(old: &serde_json::Value, new: &serde_json::Value, recorded: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    diff_paths("providerSpec".to_string(), Some(old), Some(new), &mut out);
    out.retain(|path| !recorded.iter().any(|r| covers(r, path)));
    out
}

/// Whether the recorded field `field` is `path` or one of its ancestors.
fn covers(field: &str, path: &str) -> bool {
    path.strip_prefix(field).is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
}

fn diff_paths(path: String, old: Option<&serde_json::Value>, new: Option<&serde_json::Value>, out: &mut Vec<String>) {
    use serde_json::Value;
    // A null is what an absent key means in a class.
    let (old, new) = (old.filter(|v| !v.is_null()), new.filter(|v| !v.is_null()));
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                diff_paths(format!("{path}.{k}"), a.get(k), b.get(k), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for i in 0..a.len().max(b.len()) {
                diff_paths(format!("{path}[{i}]"), a.get(i), b.get(i), out);
            }
        }
        (a, b) if a != b => out.push(path),
        _ => {}
    }
}

/// Which tags to set and which to remove on one resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TagPlan {
    /// Tags to add or change, with their new values.
    pub set: BTreeMap<String, String>,
    /// Tag keys to remove.
    pub remove: BTreeSet<String>,
}

impl TagPlan {
    /// The difference between a resource's `current` tags and the `desired`
    /// ones: every desired tag missing or with another value is set; a key is
    /// removed only when the `previous` class set it, the new class does not,
    /// and the resource still has it. Without `previous` nothing is removed:
    /// a tag the driver did not set (an operator's, a policy's) is never touched.
    pub fn new(
        current: &BTreeMap<String, String>,
        desired: &BTreeMap<String, String>,
        previous: Option<&BTreeMap<String, String>>,
    ) -> Self {
        let set = desired
            .iter()
            .filter(|(k, v)| current.get(k.as_str()) != Some(v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let remove = previous
            .into_iter()
            .flat_map(BTreeMap::keys)
            .filter(|k| !desired.contains_key(k.as_str()) && current.contains_key(k.as_str()))
            .cloned()
            .collect();
        Self { set, remove }
    }

    /// Whether the resource already has what the class asks for.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.remove.is_empty()
    }

    /// The resource's tags once the plan is applied to `current`.
    pub fn apply_to(&self, current: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut out = current.clone();
        out.retain(|k, _| !self.remove.contains(k));
        out.extend(self.set.iter().map(|(k, v)| (k.clone(), v.clone())));
        out
    }
}

impl fmt::Display for TagPlan {
    /// `set a, b; removed c` (keys only: values may be anything an operator wrote).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = |it: &mut dyn Iterator<Item = &String>| it.map(String::as_str).collect::<Vec<_>>().join(", ");
        match (self.set.is_empty(), self.remove.is_empty()) {
            (true, true) => write!(f, "nothing"),
            (false, true) => write!(f, "set {}", keys(&mut self.set.keys())),
            (true, false) => write!(f, "removed {}", keys(&mut self.remove.iter())),
            (false, false) => {
                write!(f, "set {}; removed {}", keys(&mut self.set.keys()), keys(&mut self.remove.iter()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn a_tag_plan_sets_what_differs_and_removes_only_what_the_previous_class_set() {
        let current = tags(&[("team", "a"), ("cost", "1"), ("operator", "x"), ("old", "y")]);
        let desired = tags(&[("team", "b"), ("cost", "1"), ("new", "z")]);
        let previous = tags(&[("team", "a"), ("cost", "1"), ("old", "y"), ("gone-already", "q")]);
        let plan = TagPlan::new(&current, &desired, Some(&previous));
        assert_eq!(plan.set, tags(&[("new", "z"), ("team", "b")]));
        assert_eq!(plan.remove.iter().map(String::as_str).collect::<Vec<_>>(), ["old"]);
        assert_eq!(plan.to_string(), "set new, team; removed old");
        assert_eq!(plan.apply_to(&current), tags(&[("cost", "1"), ("new", "z"), ("operator", "x"), ("team", "b")]));
        let without_previous = TagPlan::new(&current, &desired, None);
        assert!(without_previous.remove.is_empty(), "an operator's or a policy's tag is never removed");
        assert!(TagPlan::new(&plan.apply_to(&current), &desired, Some(&previous)).is_empty(), "a repeat is a no-op");
    }

    #[test]
    fn only_replacements_are_a_failed_precondition_naming_the_fields() {
        let mut plan = UpdatePlan::new("i-1", false);
        plan.unchanged("providerSpec.tags");
        assert!(plan.compare_replacement("providerSpec.machineType", "m5.large", "m5.xlarge"));
        assert!(!plan.compare_replacement("providerSpec.ami", "ami-1", "ami-1"));
        let err = plan.finish().err().map(|e| (e.kind(), e.reason().to_owned(), e.message().to_owned()));
        let (kind, reason, message) = err.unwrap_or_else(|| panic!("only a replacement differs: must be refused"));
        assert_eq!((kind, reason.as_str()), (ErrorKind::FailedPrecondition, NEEDS_REPLACEMENT));
        assert!(message.contains("providerSpec.machineType") && !message.contains("providerSpec.ami"), "{message}");
    }

    #[test]
    fn an_applied_field_beside_a_replacement_answers_both_sorted() {
        let mut plan = UpdatePlan::new("i-1", true);
        plan.compare_replacement("providerSpec.machineType", "a", "b");
        let on_vm = TagPlan::new(&tags(&[]), &tags(&[("k", "v")]), None);
        let nic = TagPlan::default();
        plan.tags("providerSpec.tags", [("the VM", &on_vm), ("NIC n-1", &nic)]);
        let done = plan.finish().unwrap_or_else(|e| panic!("{e:?}"));
        let fields: Vec<_> = done.changes.iter().map(|c| (c.field.as_str(), c.outcome)).collect();
        assert_eq!(
            fields,
            [
                ("providerSpec.machineType", ChangeOutcome::NeedsReplacement),
                ("providerSpec.tags", ChangeOutcome::Applied)
            ]
        );
        assert_eq!(done.changes[1].detail, "set k on the VM");
    }

    #[test]
    fn nothing_differing_is_all_unchanged() {
        let mut plan = UpdatePlan::new("i-1", false);
        plan.tags("providerSpec.tags", [("the VM", &TagPlan::default())]);
        plan.compare_replacement("providerSpec.machineType", "a", "a");
        let done = plan.finish().unwrap_or_else(|e| panic!("{e:?}"));
        assert!(done.changes.iter().all(|c| c.outcome == ChangeOutcome::Unchanged));
    }

    fn request(old: serde_json::Value, new: serde_json::Value) -> UpdateMachine {
        let class =
            |v: &serde_json::Value| MachineClass { provider_spec: v.to_string().into_bytes(), ..Default::default() };
        UpdateMachine {
            machine: Machine::default(),
            class: class(&new),
            previous_class: Some(class(&old)),
            secret: SecretData::default(),
            validate_only: false,
        }
    }

    #[test]
    fn a_changed_field_no_provider_recorded_needs_a_replacement() {
        let old = serde_json::json!({"tags": {"a": "1"}, "keyPairName": "k1", "disks": [{"size": 10, "enc": false}], "x": null});
        let new = serde_json::json!({"tags": {"a": "2", "b": "3"}, "keyPairName": "k2", "disks": [{"size": 20, "enc": true}, {"size": 5}]});
        let mut plan = UpdatePlan::for_request("p", &request(old, new));
        plan.applied("providerSpec.tags", "a=2, b=3");
        plan.applied("providerSpec.disks[0].size", "10 -> 20");
        let answer = plan.finish().expect("something was applied");
        let replace: Vec<(&str, &str)> = answer
            .changes
            .iter()
            .filter(|c| c.outcome == ChangeOutcome::NeedsReplacement)
            .map(|c| (c.field.as_str(), c.detail.as_str()))
            .collect();
        assert_eq!(
            replace,
            [
                ("providerSpec.disks[0].enc", UNRECORDED_DETAIL),
                ("providerSpec.disks[1]", UNRECORDED_DETAIL),
                ("providerSpec.keyPairName", UNRECORDED_DETAIL),
            ],
            "the tags' own keys are covered by providerSpec.tags; a null is an absent key; values never echoed"
        );
    }

    #[test]
    fn only_unrecorded_changes_are_a_failed_precondition_naming_them() {
        let old = serde_json::json!({"keyPairName": "k1", "tags": {"a": "1"}});
        let new = serde_json::json!({"keyPairName": "k2", "tags": {"a": "1"}});
        let mut plan = UpdatePlan::for_request("p", &request(old.clone(), new));
        plan.unchanged("providerSpec.tags");
        let e = plan.finish().expect_err("nothing can be changed in place");
        assert_eq!((e.kind(), e.reason()), (ErrorKind::FailedPrecondition, NEEDS_REPLACEMENT));
        assert!(e.message().contains("providerSpec.keyPairName"), "{}", e.message());
        assert!(!e.message().contains("k2"), "no value echoed: {}", e.message());

        let mut same = UpdatePlan::for_request("p", &request(old.clone(), old));
        same.unchanged("providerSpec.tags");
        assert_eq!(same.finish().expect("equal classes").changes.len(), 1, "equal specs add nothing");
    }

    #[test]
    fn a_recorded_field_covers_its_subtree_only_at_a_boundary() {
        assert!(covers("providerSpec.tags", "providerSpec.tags"));
        assert!(covers("providerSpec.tags", "providerSpec.tags.team"));
        assert!(covers("providerSpec.disks[0]", "providerSpec.disks[0].size"));
        assert!(!covers("providerSpec.tags", "providerSpec.tagsExtra"));
        assert!(!covers("providerSpec.disks[1]", "providerSpec.disks[10].size"));
        assert!(!covers("providerSpec.disks[0].size", "providerSpec.disks[0]"));
    }
}
