//! The suite's inputs: the machine class and secret to create machines with, the
//! provider's conformance file (invalid specs, share-image inputs) and tunables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::fake_admin::{AttachedKind, Instance as InventoryInstance, PlantAttached, PlantRequest};

/// Everything a scenario needs besides the connections.
#[derive(Debug, Clone)]
pub struct Settings {
    /// providerSpec JSON text exactly as read from `--machine-class`.
    pub provider_spec: String,
    /// Secret data from `--secret` (credentials and `userData`).
    pub secret: BTreeMap<String, String>,
    /// How often idempotent steps are repeated (`--repeat`).
    pub repeat: usize,
    /// Upper bound of every "wait until" poll (visibility, initialization, deletion).
    pub wait: Duration,
    /// Deadline of each single RPC.
    pub rpc_timeout: Duration,
    /// The provider's conformance file, if any.
    pub provider: ProviderConformance,
}

/// The provider's `conformance.json` (see the README): inputs that cannot be derived generically.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderConformance {
    /// The fake cloud's binary (`fake-ec2`): the test script and CI start the
    /// provider against it, so that no shared script lists clouds.
    #[serde(default)]
    pub fake: Option<String>,
    /// Spec patches that each must be refused with INVALID_ARGUMENT naming `field`.
    #[serde(default)]
    pub invalid_specs: Vec<InvalidSpec>,
    /// Inputs of the share-image scenarios.
    #[serde(default)]
    pub share_image: Option<ShareImageInputs>,
    /// Most cloud API calls each lifecycle step may make (`lifecycle/cloud-call-budget`).
    #[serde(default)]
    pub call_budget: Option<CallBudget>,
    /// Admin calls made to the fake before the first scenario: cloud-realistic
    /// timings scaled down so the suite's wait bound covers them (Azure's
    /// 180 s NIC reservation).
    #[serde(default)]
    pub fake_setup: Vec<FakeSetupCall>,
    /// How to make the fake fail the next VM after accepting it, and the
    /// answer the driver must give for it (`status/failed-vm-reported`).
    #[serde(default)]
    pub failed_vm: Option<FailedVm>,
    /// JSON patterns every initialized machine's dependents must match: each
    /// pattern is matched (as a subset) by at least one live dependent named
    /// after the machine (`initialize/post-creation-state`), e.g. an OpenStack
    /// port with every pod CIDR among its allowed address pairs.
    #[serde(default)]
    pub initialized_dependents: Vec<Value>,
    /// Machine classes as the Gardener provider extension writes them
    /// (`compat/gardener-classes`): each must go through create, initialize
    /// (first call), status initialized, delete.
    #[serde(default)]
    pub gardener_classes: Vec<GardenerClass>,
    /// VMs to plant beside the driver's (`ownership/*`): how a VM of another
    /// cluster, one without markers, one the Go provider made and one with
    /// only a firewall-style marker look in this cloud.
    #[serde(default)]
    pub ownership: Option<OwnershipInputs>,
    /// Migration from the Go provider and rollback to it (`migration/*`): a
    /// VM planted exactly as the Go provider makes it (with what it attaches),
    /// and what a VM this driver makes must carry for the Go provider's own
    /// lookups and orphan listing. Needs `ownership` for the scope and the
    /// providerID template.
    #[serde(default)]
    pub migration: Option<MigrationInputs>,
    /// The cloud can refuse a VM for its placement (size or feature not
    /// offered in the region or zone) and the fake injects it
    /// (`fake/placement-on-create-resource-exhausted`).
    #[serde(default)]
    pub placement: bool,
    /// Spot VMs (`spot/*`): how a class asks for one, and what the driver's
    /// SPOT_RECLAIMED answer shows once the fake reclaims it. Absent on clouds
    /// without Spot VMs (OpenStack).
    #[serde(default)]
    pub spot: Option<SpotInputs>,
    /// Inputs of the hot-update scenarios (`update/*`, UpdateMachine): how a
    /// class edit changes tags, and an edit only a replacement can make.
    /// Written by each provider that advertises CAPABILITY_UPDATE_MACHINE.
    #[serde(default)]
    pub update: Option<UpdateInputs>,
}

/// Inputs of `update/*` (README, "The provider's conformance file").
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateInputs {
    /// The API reference the in-place changes follow, for the reader.
    pub source: String,
    /// JSON merge patch on the class that adds, changes and (with `null`)
    /// removes tags (labels, metadata); every object in it whose members are
    /// all strings or `null` is a tag map of the class (`{"tags": {...}}`,
    /// OpenStack `{"spec": {"tags": {...}}}`).
    pub tags_patch: Value,
    /// A tag key `tagsPatch` removes that the example class lacks: the
    /// scenarios add it to the class they create the machine with, so that
    /// the update has a tag to remove (AWS `cost-center`).
    #[serde(default)]
    pub removable: Option<String>,
    /// A class edit only a new VM can have.
    pub replacement: ReplacementInput,
    /// A disk's size or performance changed in place (`update/disk-changed`);
    /// absent where the cloud changes no disk of a running VM (see `noDisk`).
    #[serde(default)]
    pub disk: Option<DiskInput>,
    /// Why the cloud changes no disk of a running VM in place, when `disk` is
    /// absent (OpenStack): the reason `update/disk-changed` skips with.
    #[serde(default)]
    pub no_disk: Option<String>,
}

/// An in-place disk edit (`update.disk`) and the field the answer names.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiskInput {
    /// JSON merge patch on the class that changes a disk's size or
    /// performance (arrays are replaced whole: the patch repeats the disk list).
    pub patch: Value,
    /// The field UpdateMachine answers APPLIED for it
    /// (`providerSpec.blockDevices[0].ebs.iops`).
    pub field: String,
    /// Where the fake's inventory shows the disk attribute, when it does.
    #[serde(default)]
    pub inventory: Option<InventoryValue>,
}

/// A value the fake's inventory record of the VM must show once the edit is applied.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InventoryValue {
    /// JSON Pointer (RFC 6901) into the VM's inventory fields besides id,
    /// name, state and tags (`/block_devices/0/iops`).
    pub pointer: String,
    /// The value it shows after the update (and not before).
    pub value: Value,
}

impl DiskInput {
    /// An error naming what is wrong: the patch not an object, the field not
    /// a `providerSpec.` path, the pointer not a JSON Pointer.
    pub fn check(&self) -> Result<(), String> {
        if !self.patch.is_object() {
            return Err(format!(
                "update.disk.patch must be a JSON object (a merge patch on the class), got {}",
                self.patch
            ));
        }
        if !self.field.starts_with("providerSpec.") {
            return Err(format!("update.disk.field {:?} must start with \"providerSpec.\"", self.field));
        }
        if let Some(shown) = &self.inventory
            && !shown.pointer.starts_with('/')
        {
            return Err(format!(
                "update.disk.inventory.pointer {:?} must be a JSON Pointer (start with /)",
                shown.pointer
            ));
        }
        Ok(())
    }
}

/// A replacement-only class edit and the field the driver must name.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplacementInput {
    /// JSON merge patch on the class (`{"machineType": "m5.xlarge"}`).
    pub patch: Value,
    /// The field the FAILED_PRECONDITION answer names (`providerSpec.machineType`).
    pub field: String,
}

/// One tag map of the class as `tagsPatch` edits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagEdit {
    /// Object keys from the spec's root to the map (`["spec", "tags"]`).
    pub path: Vec<String>,
    /// Tags added or changed, with their new values.
    pub set: BTreeMap<String, String>,
    /// Tag keys removed (`null` in the patch).
    pub removed: Vec<String>,
}

impl TagEdit {
    /// The class field the map is (`providerSpec.spec.tags`), as UpdateMachine's answer names it.
    pub fn field(&self) -> String {
        format!("providerSpec.{}", self.path.join("."))
    }

    /// Every way `tags` (a resource's tags once the edit is applied) differs
    /// from what the edit asks for, one phrase each (values of tags set by the
    /// edit; removed keys must be absent). Empty: the resource has it all.
    pub fn missing(&self, tags: &BTreeMap<String, String>) -> Vec<String> {
        let mut out = Vec::new();
        for (key, value) in &self.set {
            match tags.get(key) {
                Some(v) if v == value => {}
                Some(v) => out.push(format!("tag {key}={value:?} (it is {v:?})")),
                None => out.push(format!("tag {key}={value:?} (absent)")),
            }
        }
        out.extend(self.removed.iter().filter(|k| tags.contains_key(*k)).map(|k| format!("tag {k} removed")));
        out
    }
}

impl UpdateInputs {
    /// The tag maps `tagsPatch` edits; an error when it has none (nothing
    /// the scenarios could check on the VM).
    pub fn tag_edits(&self) -> Result<Vec<TagEdit>, String> {
        fn walk(value: &Value, path: &mut Vec<String>, out: &mut Vec<TagEdit>) {
            let Value::Object(members) = value else { return };
            let is_map = !members.is_empty() && members.values().all(|v| v.is_string() || v.is_null());
            if is_map {
                let set = members.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect();
                let removed = members.iter().filter(|(_, v)| v.is_null()).map(|(k, _)| k.clone()).collect();
                out.push(TagEdit { path: path.clone(), set, removed });
                return;
            }
            for (key, member) in members {
                path.push(key.clone());
                walk(member, path, out);
                path.pop();
            }
        }
        let mut out = Vec::new();
        walk(&self.tags_patch, &mut Vec::new(), &mut out);
        if out.is_empty() {
            return Err(format!(
                "update.tagsPatch {} holds no tag map (an object whose members are all strings or null)",
                self.tags_patch
            ));
        }
        Ok(out)
    }

    /// The merge patch that gives the example class the `removable` tag
    /// (value `conformance`), at the path of the tag map `tagsPatch` removes
    /// it from; `None` without `removable`. An error when `tagsPatch` does
    /// not remove that key.
    pub fn removable_patch(&self) -> Result<Option<Value>, String> {
        let Some(key) = &self.removable else { return Ok(None) };
        let edits = self.tag_edits()?;
        let Some(edit) = edits.iter().find(|e| e.removed.contains(key)) else {
            return Err(format!(
                "update.removable {key:?}: update.tagsPatch does not remove it (no null member {key:?})"
            ));
        };
        let mut patch = Value::Object([(key.clone(), Value::String("conformance".into()))].into_iter().collect());
        for segment in edit.path.iter().rev() {
            patch = Value::Object([(segment.clone(), patch)].into_iter().collect());
        }
        Ok(Some(patch))
    }
}

/// Inputs of `spot/*` (README, "The provider's conformance file").
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpotInputs {
    /// Where the Spot fields and the reclaim behaviour come from (API
    /// reference, Gardener extension file).
    pub source: String,
    /// JSON merge patch on the example class that makes its VM a Spot VM.
    pub patch: Value,
    /// Text the SPOT_RECLAIMED answer's message must contain (how the cloud
    /// shows the reclaim, e.g. EC2's `Server.SpotInstanceTermination`).
    pub shown: String,
}

/// Inputs of `migration/*` (README, "The provider's conformance file").
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MigrationInputs {
    /// This cluster's VM as the Go provider makes it.
    pub go_made: GoMadeVm,
    /// What a VM this driver makes must carry so that the Go provider, after a
    /// rollback, finds it (status, delete) and lists it (orphan collection).
    pub rollback: RollbackMarkers,
}

/// A VM exactly as the Go provider makes it. Every string may hold `{name}`,
/// the machine's name.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GoMadeVm {
    /// Exactly the tags (GCE labels, Nova metadata) the VM carries.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// GCE network tags.
    #[serde(default)]
    pub network_tags: Vec<String>,
    /// Instance metadata besides tags (GCE `metadata.items`).
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// What it makes with the VM, in order.
    #[serde(default)]
    pub attached: Vec<GoMadeResource>,
    /// The Go provider's code that makes the VM so (repository, file, function).
    #[serde(default)]
    pub source: String,
}

/// One resource the Go provider makes with its VM (`PlantAttached` of the
/// fake admin API, in the conformance file's camelCase).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GoMadeResource {
    /// `nic`, `disk`, `port` or `volume`.
    pub kind: AttachedKind,
    /// Its name (`{name}-nic`); empty: the cloud's default.
    #[serde(default)]
    pub name: String,
    /// Exactly its key-value tags (Azure tags, GCE disk labels, Cinder metadata, EC2 volume tags).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Plain string tags (Neutron port tags).
    #[serde(default)]
    pub string_tags: Vec<String>,
    /// The disk or volume the VM boots from.
    #[serde(default)]
    pub boot: bool,
    /// Deleted with the VM (absent: the cloud's API default).
    #[serde(default)]
    pub delete_with_vm: Option<bool>,
    /// Size in GiB.
    #[serde(default)]
    pub size_gb: Option<u64>,
    /// Subnets of a port's fixed IPs.
    #[serde(default)]
    pub subnets: Vec<String>,
    /// Security groups of a port (ids or names).
    #[serde(default)]
    pub security_groups: Vec<String>,
    /// The Go provider's code that makes it so.
    #[serde(default)]
    pub source: String,
}

/// Fills `{name}` in `text`.
fn fill(text: &str, name: &str) -> String {
    text.replace("{name}", name)
}

fn fill_map(map: &BTreeMap<String, String>, name: &str) -> BTreeMap<String, String> {
    map.iter().map(|(k, v)| (fill(k, name), fill(v, name))).collect()
}

fn fill_list(list: &[String], name: &str) -> Vec<String> {
    list.iter().map(|v| fill(v, name)).collect()
}

impl GoMadeVm {
    /// The plant request of this VM named `name` in `scope`.
    pub fn plant_request(&self, name: &str, scope: &BTreeMap<String, String>) -> PlantRequest {
        PlantRequest {
            name: name.to_owned(),
            tags: fill_map(&self.tags, name),
            network_tags: fill_list(&self.network_tags, name),
            scope: scope.clone(),
            metadata: fill_map(&self.metadata, name),
            attached: self
                .attached
                .iter()
                .map(|a| PlantAttached {
                    kind: a.kind,
                    name: fill(&a.name, name),
                    tags: fill_map(&a.tags, name),
                    string_tags: fill_list(&a.string_tags, name),
                    boot: a.boot,
                    delete_with_vm: a.delete_with_vm,
                    size_gb: a.size_gb,
                    subnets: a.subnets.clone(),
                    security_groups: a.security_groups.clone(),
                })
                .collect(),
        }
    }
}

/// What the Go provider's lookups and orphan listing filter on, for a VM this
/// driver makes (and its attached resources the Go provider lists or deletes).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RollbackMarkers {
    /// On the VM.
    pub vm: Markers,
    /// On each attached resource of a `kind` (every one of that kind the VM's
    /// inventory entry refers to must match, and there must be one).
    #[serde(default)]
    pub attached: Vec<Markers>,
}

/// Markers on one resource; strings may hold `{name}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Markers {
    /// The kind of attached resource they are for (`nic`, `disk`, `port`,
    /// `volume`); absent on the VM's.
    #[serde(default)]
    pub kind: Option<AttachedKind>,
    /// Its name as the cloud keeps it (`{name}`).
    #[serde(default)]
    pub name: Option<String>,
    /// Tags it carries with exactly these values.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Tag keys it carries (any value).
    #[serde(default)]
    pub tag_keys: Vec<String>,
    /// GCE network tags it carries.
    #[serde(default)]
    pub network_tags: Vec<String>,
    /// The Go provider's code that filters on them.
    #[serde(default)]
    pub source: String,
}

impl Markers {
    /// Every marker `resource` lacks, one phrase each (empty: it carries them all);
    /// `{name}` is the machine's name.
    pub fn missing(&self, resource: &InventoryInstance, name: &str) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(wanted) = &self.name {
            let wanted = fill(wanted, name);
            if resource.name != wanted {
                out.push(format!("the name {wanted:?} (it is {:?})", resource.name));
            }
        }
        for (key, value) in fill_map(&self.tags, name) {
            match resource.tags.get(&key) {
                Some(v) if *v == value => {}
                Some(v) => out.push(format!("tag {key}={value:?} (it is {v:?})")),
                None => out.push(format!("tag {key}={value:?}")),
            }
        }
        for key in fill_list(&self.tag_keys, name) {
            if !resource.tags.contains_key(&key) {
                out.push(format!("tag key {key}"));
            }
        }
        if !self.network_tags.is_empty() {
            match network_tags(resource) {
                None => out.push("network tags (the fake's inventory shows none: `network_tags` is missing)".into()),
                Some(have) => {
                    for tag in fill_list(&self.network_tags, name) {
                        if !have.contains(&tag) {
                            out.push(format!("network tag {tag}"));
                        }
                    }
                }
            }
        }
        out
    }
}

/// The GCE network tags of an inventory entry (`network_tags`), when the fake shows them.
fn network_tags(resource: &InventoryInstance) -> Option<Vec<String>> {
    let list = resource.extra.get("network_tags").or_else(|| resource.extra.get("networkTags"))?.as_array()?;
    Some(list.iter().filter_map(Value::as_str).map(str::to_owned).collect())
}

/// Inputs of the `ownership/*` scenarios: the VMs the fake plants through
/// `POST /_admin/instances`, each described as the cloud would hold it. The
/// fake knows no driver's conventions; the marker spellings live here.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OwnershipInputs {
    /// The scope of every planted VM (the fake's keys: region, project, zone,
    /// ...): the class's cluster scope, so that only the markers differ.
    #[serde(default)]
    pub scope: BTreeMap<String, String>,
    /// The providerID the driver gives a planted VM, with `{id}`, `{name}` and
    /// `{<scope key>}` of the plant answer filled in (`aws:///{region}/{id}`).
    pub provider_id: String,
    /// Same name, another cluster's markers (as that cluster's driver made it, without a uid).
    pub other_cluster: PlantedVm,
    /// Same name, no markers at all (made by hand).
    pub no_markers: PlantedVm,
    /// This cluster's VM as the Go provider made it (its markers, no uid): the driver adopts and lists it.
    pub go_made: PlantedVm,
    /// A VM whose only marker is a firewall-style one (the cluster marker without
    /// the role, e.g. a GCE network tag a firewall rule targets).
    pub firewall_tag_only: PlantedVm,
}

impl OwnershipInputs {
    /// The providerID of a planted VM: the template with `{id}`, `{name}` and
    /// the answer's scope keys filled in; an unknown placeholder is an error.
    pub fn provider_id_of(&self, id: &str, name: &str, scope: &BTreeMap<String, String>) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = self.provider_id.as_str();
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let Some(len) = rest[open..].find('}') else {
                return Err(format!("ownership.providerId {:?}: unclosed '{{'", self.provider_id));
            };
            let key = &rest[open + 1..open + len];
            let value = match key {
                "id" => id,
                "name" => name,
                other => scope.get(other).map(String::as_str).ok_or_else(|| {
                    format!("ownership.providerId {:?}: no {{{other}}} in the plant answer", self.provider_id)
                })?,
            };
            out.push_str(value);
            rest = &rest[open + len + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// One VM to plant: its markers in the cloud's own representation.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlantedVm {
    /// Exactly the tags (GCE labels, Nova metadata) the VM carries.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// GCE network tags.
    #[serde(default)]
    pub network_tags: Vec<String>,
    /// The code that marks VMs this way (repository, file, function), for the reader.
    #[serde(default)]
    pub source: String,
}

/// One machine class shape as a Gardener provider extension writes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GardenerClass {
    /// Short name of the shape, reported per shape (`dual-stack`).
    pub name: String,
    /// The extension's code the shape follows (repository and file), for the reader.
    #[serde(default)]
    pub source: String,
    /// RFC 7386 merge patch over the `--machine-class` spec (a `null` member
    /// removes the key; use `spec` to send explicit `null`s).
    #[serde(default)]
    pub patch: Option<Value>,
    /// The full providerSpec instead of a patch, sent as written (explicit
    /// `null`s and `{}` included).
    #[serde(default)]
    pub spec: Option<Value>,
    /// Applied after `patch`/`spec`: members set verbatim at a path (dot
    /// separated object keys, `[i]` array indexes), so that a patch can still
    /// write an explicit `null` (`{"path": "cpuOptions.coreCount", "value": null}`).
    #[serde(default)]
    pub set: Vec<SetMember>,
}

/// One member written verbatim into a shape's spec.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetMember {
    /// `a.b[0].c`: object keys separated by dots, array elements by `[i]`.
    pub path: String,
    /// The value, `null` included.
    pub value: Value,
}

/// A VM the cloud accepts and then fails (Nova ERROR, Azure `Failed`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailedVm {
    /// The admin call that makes the fake fail the next VM.
    pub setup: FakeSetupCall,
    /// The gRPC code the driver answers for it (`RESOURCE_EXHAUSTED`), from
    /// CreateMachine or, when the create was accepted, from GetMachineStatus.
    pub code: String,
    /// Text the answer's message must contain (the cloud's failure message).
    pub message_contains: String,
}

/// One `POST /_admin<path>` with its JSON body.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FakeSetupCall {
    /// Path below `/_admin` (`/azure/nic-reservation`).
    pub path: String,
    /// The JSON body.
    #[serde(default)]
    pub body: Value,
}

/// Cloud API calls allowed per lifecycle step, counted by the fake.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallBudget {
    /// GetMachineStatus of a machine that was never created.
    pub status_absent: u64,
    /// CreateMachine.
    pub create: u64,
    /// GetMachineStatus of a live machine.
    pub status: u64,
    /// One successful InitializeMachine.
    #[serde(default)]
    pub initialize: u64,
    /// DeleteMachine.
    pub delete: u64,
    /// GetMachineStatus after the delete.
    pub status_gone: u64,
    /// Cloud operations GetMachineStatus must never use (e.g. a zone-wide list).
    #[serde(default)]
    pub status_forbidden: Vec<String>,
}

/// One invalid provider spec: a JSON merge patch over the valid spec and the field it breaks.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InvalidSpec {
    /// RFC 7386 merge patch applied to the `--machine-class` spec.
    pub patch: Value,
    /// The field the driver must name (ErrorInfo metadata `field` or BadRequest), e.g. `providerSpec.machineType`.
    pub field: String,
}

/// Images and credentials for the share-image scenarios.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShareImageInputs {
    /// A private image of the owner account on the driver's allow-list, not yet visible to the consumer.
    pub allowed_image: String,
    /// An image the consumer can already use (public); must also be on the allow-list.
    pub visible_image: String,
    /// An image that is not on the allow-list.
    pub not_allowed_image: String,
    /// Region of the images (empty for global images).
    #[serde(default)]
    pub region: String,
    /// Image-owner credentials (same keys as a machine secret).
    pub owner_secret: BTreeMap<String, String>,
    /// Consumer credentials; the `--secret` data when absent.
    #[serde(default)]
    pub consumer_secret: Option<BTreeMap<String, String>>,
    /// Consumer account id; derived by the driver when absent.
    #[serde(default)]
    pub consumer_account: String,
    /// A JSON merge patch over the machine class spec that makes it boot the
    /// shared image; every string `${IMAGE_ID}` in it becomes ShareImage's
    /// `image_id` (scenario `share-image/shared-image-launches`).
    #[serde(default)]
    pub launch_patch: Option<serde_json::Value>,
}

impl ShareImageInputs {
    /// The images the driver must allow (`--share-image-allow-list` when the suite spawns it).
    pub fn allow_list(&self) -> Vec<String> {
        vec![self.allowed_image.clone(), self.visible_image.clone()]
    }
}

/// Reads the `--secret` file: a JSON object of string values.
pub fn read_secret(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let raw = std::fs::read(path).map_err(|e| format!("--secret {}: {e}", path.display()))?;
    // serde_json's message may quote a value; report only the position.
    serde_json::from_slice(&raw).map_err(|e| {
        format!(
            "--secret {}: expected a JSON object of strings (problem at line {} column {})",
            path.display(),
            e.line(),
            e.column()
        )
    })
}

/// Reads the `--machine-class` file and checks that it is a JSON object.
pub fn read_provider_spec(path: &Path) -> Result<String, String> {
    let raw = std::fs::read_to_string(path).map_err(|e| format!("--machine-class {}: {e}", path.display()))?;
    match serde_json::from_str::<Value>(&raw) {
        Ok(Value::Object(_)) => Ok(raw),
        Ok(_) => Err(format!("--machine-class {}: expected a JSON object (the providerSpec)", path.display())),
        Err(e) => Err(format!("--machine-class {}: not JSON: {e}", path.display())),
    }
}

/// Reads a conformance file.
pub fn read_provider_conformance(path: &Path) -> Result<ProviderConformance, String> {
    let raw = std::fs::read(path).map_err(|e| format!("--config {}: {e}", path.display()))?;
    serde_json::from_slice(&raw).map_err(|e| format!("--config {}: {e}", path.display()))
}

/// The conformance file to use: `explicit`, else `conformance.json` next to the machine class file if present.
pub fn conformance_file(explicit: Option<&Path>, machine_class: &Path) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    let sibling = machine_class.parent().unwrap_or(Path::new(".")).join("conformance.json");
    sibling.is_file().then_some(sibling)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conformance_file_parses_and_refuses_unknown_keys() {
        let ok: ProviderConformance = serde_json::from_str(
            r#"{"invalidSpecs":[{"patch":{"machineType":""},"field":"providerSpec.machineType"}],
                "shareImage":{"allowedImage":"a","visibleImage":"v","notAllowedImage":"n","ownerSecret":{"k":"v"}}}"#,
        )
        .unwrap();
        assert_eq!(ok.invalid_specs[0].field, "providerSpec.machineType");
        assert_eq!(ok.share_image.unwrap().allow_list(), vec!["a".to_string(), "v".to_string()]);
        assert!(serde_json::from_str::<ProviderConformance>(r#"{"invalidSpec":[]}"#).is_err());
    }

    #[test]
    fn ownership_provider_ids_fill_the_template() {
        let o: OwnershipInputs = serde_json::from_value(serde_json::json!({
            "scope": {"region": "eu-west-1"},
            "providerId": "aws:///{region}/{id}",
            "otherCluster": {"tags": {"kubernetes.io/cluster/other": "1"}, "source": "x"},
            "noMarkers": {},
            "goMade": {"tags": {}, "networkTags": ["a"]},
            "firewallTagOnly": {"tags": {}},
        }))
        .unwrap();
        let scope: BTreeMap<String, String> = [("region".to_owned(), "eu-west-1".to_owned())].into();
        assert_eq!(o.provider_id_of("i-1", "m", &scope).unwrap(), "aws:///eu-west-1/i-1");
        assert_eq!(o.go_made.network_tags, ["a"]);
        let gce = OwnershipInputs { provider_id: "gce:///{project}/{zone}/{name}".into(), ..o.clone() };
        assert!(gce.provider_id_of("1", "m", &scope).unwrap_err().contains("{project}"));
        let open = OwnershipInputs { provider_id: "x{id".into(), ..o };
        assert!(open.provider_id_of("1", "m", &scope).is_err());
    }

    #[test]
    fn go_made_vms_fill_the_name_and_rollback_markers_name_what_is_missing() {
        let m: MigrationInputs = serde_json::from_value(serde_json::json!({
            "goMade": {
                "tags": {"Name": "{name}", "k": "1"},
                "attached": [{"kind": "nic", "name": "{name}-nic", "tags": {"k": "1"}, "deleteWithVm": true, "source": "x"}],
                "source": "y"
            },
            "rollback": {
                "vm": {"name": "{name}", "tags": {"Name": "{name}"}, "tagKeys": ["k"], "networkTags": ["t"]},
                "attached": [{"kind": "disk", "tagKeys": ["k"]}]
            }
        }))
        .unwrap();
        let scope: BTreeMap<String, String> = [("region".to_owned(), "r".to_owned())].into();
        let req = m.go_made.plant_request("m-1", &scope);
        assert_eq!(req.tags["Name"], "m-1");
        assert_eq!(req.attached[0].name, "m-1-nic");
        assert_eq!(req.attached[0].delete_with_vm, Some(true));
        assert_eq!(req.scope, scope);
        let mut vm = InventoryInstance {
            id: "i".into(),
            name: "m-1".into(),
            state: "running".into(),
            live: true,
            tags: [("Name".to_owned(), "m-1".to_owned()), ("k".to_owned(), String::new())].into(),
            extra: serde_json::Map::new(),
        };
        let missing = m.rollback.vm.missing(&vm, "m-1");
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert!(missing[0].contains("network tags"), "{missing:?}");
        vm.extra.insert("network_tags".into(), serde_json::json!(["t"]));
        assert!(m.rollback.vm.missing(&vm, "m-1").is_empty());
        vm.tags.remove("k");
        vm.name = "other".into();
        assert_eq!(m.rollback.vm.missing(&vm, "m-1").len(), 2);
        assert_eq!(m.rollback.attached[0].kind, Some(AttachedKind::Disk));
        assert!(
            serde_json::from_value::<MigrationInputs>(serde_json::json!({"goMade": {}, "rollback": {"vm": {"x": 1}}}))
                .is_err()
        );
    }

    #[test]
    fn update_inputs_find_the_tag_maps_and_the_removable_tag() {
        let u: UpdateInputs = serde_json::from_value(serde_json::json!({
            "source": "x",
            "tagsPatch": {"spec": {"tags": {"team": "b", "old": null}, "flavorName": "f"}},
            "removable": "old",
            "replacement": {"patch": {"spec": {"flavorName": "g"}}, "field": "providerSpec.spec.flavorName"}
        }))
        .unwrap();
        let edits = u.tag_edits().unwrap();
        assert_eq!(edits.len(), 1, "{edits:?}");
        assert_eq!(edits[0].field(), "providerSpec.spec.tags");
        assert_eq!(edits[0].set, [("team".to_owned(), "b".to_owned())].into());
        assert_eq!(edits[0].removed, ["old"]);
        assert_eq!(u.removable_patch().unwrap(), Some(serde_json::json!({"spec": {"tags": {"old": "conformance"}}})));
        let have: BTreeMap<String, String> =
            [("team".to_owned(), "a".to_owned()), ("old".to_owned(), "1".to_owned())].into();
        assert_eq!(edits[0].missing(&have), ["tag team=\"b\" (it is \"a\")", "tag old removed"]);
        assert!(edits[0].missing(&[("team".to_owned(), "b".to_owned())].into()).is_empty());
        assert!(edits[0].missing(&BTreeMap::new())[0].contains("absent"));

        let not_removed = UpdateInputs { removable: Some("team".into()), ..u.clone() };
        assert!(not_removed.removable_patch().unwrap_err().contains("does not remove"));
        let no_map = UpdateInputs { tags_patch: serde_json::json!({"spec": {"count": 1}}), ..u.clone() };
        assert!(no_map.tag_edits().unwrap_err().contains("no tag map"));
        assert_eq!(UpdateInputs { removable: None, ..u }.removable_patch().unwrap(), None);
        let unknown =
            serde_json::json!({"source": "", "tagsPatch": {}, "replacement": {"patch": {}, "field": "f"}, "x": 1});
        assert!(serde_json::from_value::<UpdateInputs>(unknown).is_err());
    }

    #[test]
    fn disk_inputs_parse_and_are_checked() {
        let u: UpdateInputs = serde_json::from_value(serde_json::json!({
            "source": "x",
            "tagsPatch": {"tags": {"team": "b"}},
            "replacement": {"patch": {"machineType": "m"}, "field": "providerSpec.machineType"},
            "disk": {
                "patch": {"disks": [{"sizeGb": 60}]},
                "field": "providerSpec.disks[0].sizeGb",
                "inventory": {"pointer": "/disks/0/sizeGb", "value": "60"}
            }
        }))
        .unwrap();
        let disk = u.disk.clone().unwrap();
        assert_eq!(disk.check(), Ok(()));
        assert_eq!(disk.inventory.as_ref().unwrap().value, serde_json::json!("60"));
        assert!(u.no_disk.is_none());
        let bad_patch = DiskInput { patch: serde_json::json!([1]), ..disk.clone() };
        assert!(bad_patch.check().unwrap_err().contains("update.disk.patch"));
        let bad_field = DiskInput { field: "disks[0].sizeGb".into(), ..disk.clone() };
        assert!(bad_field.check().unwrap_err().contains("update.disk.field"));
        let bad_pointer =
            DiskInput { inventory: Some(InventoryValue { pointer: "disks".into(), value: Value::Null }), ..disk };
        assert!(bad_pointer.check().unwrap_err().contains("JSON Pointer"));
        let unknown = serde_json::json!({"patch": {}, "field": "providerSpec.x", "y": 1});
        assert!(serde_json::from_value::<DiskInput>(unknown).is_err());
        let none: UpdateInputs = serde_json::from_value(serde_json::json!({
            "source": "x",
            "tagsPatch": {"tags": {"team": "b"}},
            "replacement": {"patch": {}, "field": "f"},
            "noDisk": "no in-place disk change"
        }))
        .unwrap();
        assert!(none.disk.is_none());
        assert_eq!(none.no_disk.as_deref(), Some("no in-place disk change"));
    }

    #[test]
    fn every_provider_conformance_file_parses() {
        let providers = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../providers");
        let mut seen = 0;
        for entry in std::fs::read_dir(&providers).unwrap() {
            let file = entry.unwrap().path().join("examples/conformance.json");
            if !file.is_file() {
                continue;
            }
            let parsed = read_provider_conformance(&file).unwrap_or_else(|e| panic!("{e}"));
            if let Some(update) = parsed.update {
                update.tag_edits().unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                update.removable_patch().unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                if let Some(disk) = &update.disk {
                    disk.check().unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                }
                assert!(
                    update.disk.is_none() || update.no_disk.is_none(),
                    "{}: update has both disk and noDisk",
                    file.display()
                );
            }
            seen += 1;
        }
        assert!(seen > 0, "no providers/*/examples/conformance.json found");
    }

    #[test]
    fn sibling_conformance_file_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let class = dir.path().join("machine-class.json");
        assert_eq!(conformance_file(None, &class), None);
        std::fs::write(dir.path().join("conformance.json"), "{}").unwrap();
        assert_eq!(conformance_file(None, &class), Some(dir.path().join("conformance.json")));
        assert_eq!(conformance_file(Some(Path::new("/x.json")), &class), Some(PathBuf::from("/x.json")));
    }

    #[test]
    fn secret_errors_do_not_echo_content() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        std::fs::write(&p, r#"{"key": "CANARY-SECRET", "n": 1}"#).unwrap();
        let err = read_secret(&p).unwrap_err();
        assert!(!err.contains("CANARY-SECRET"), "{err}");
        std::fs::write(&p, r#""CANARY-SECRET""#).unwrap();
        let err = read_secret(&p).unwrap_err();
        assert!(!err.contains("CANARY-SECRET"), "{err}");
        std::fs::write(&p, r#"{"key": "v"}"#).unwrap();
        assert_eq!(read_secret(&p).unwrap()["key"], "v");
    }
}
