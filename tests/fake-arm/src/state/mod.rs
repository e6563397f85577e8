//! The fake's cloud state: resource groups, subnets, VMs, NICs, disks, galleries,
//! async operations and AAD tokens, behind one `std::sync::Mutex` that is never
//! held across an `.await`. Transitions (Creating → Succeeded, Deleting → gone,
//! cascades, NIC reservations) are applied lazily by [`State::advance`] whenever
//! the state is locked.

pub(crate) mod render;
pub(crate) mod seed;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use fake_cloud_support::InventoryInstance;
use serde_json::Value;

/// Default AAD token lifetime (`expires_in`).
pub(crate) const DEFAULT_TOKEN_SECONDS: u64 = 3599;
/// Default list page size: Compute answers a VM list 50 VMs a page (not
/// documented, but what every SDK's paging issue reports; e.g.
/// Azure/azure-sdk-for-node#4769). `POST /_admin/azure/page-size` changes it.
pub(crate) const DEFAULT_PAGE_SIZE: usize = 50;
/// Default NIC reservation window after a failed or deleted VM.
pub(crate) const DEFAULT_NIC_RESERVATION: Duration = Duration::from_secs(180);
/// How long deleted VMs stay in the inventory.
const DELETED_RETENTION: Duration = Duration::from_secs(600);
/// How long finished operations are remembered.
const OPERATION_RETENTION: Duration = Duration::from_secs(3600);

/// `(subscription, resource group, name)`, all lowercase: resource names are case-insensitive.
pub(crate) type Key = (String, String, String);

/// The lookup key of a resource.
pub(crate) fn key(sub: &str, rg: &str, name: &str) -> Key {
    (sub.to_ascii_lowercase(), rg.to_ascii_lowercase(), name.to_ascii_lowercase())
}

/// A random MAC address in Azure's form (`00-0D-3A-XX-XX-XX`: Microsoft's prefix, the
/// dash-separated uppercase hex that `networkInterfaces.get` shows in `macAddress`).
pub(crate) fn random_mac() -> String {
    let bytes = uuid::Uuid::new_v4();
    let b = bytes.as_bytes();
    format!("00-0D-3A-{:02X}-{:02X}-{:02X}", b[0], b[1], b[2])
}

/// An issued AAD access token.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    /// The client (application) id it was issued to.
    pub(crate) client_id: String,
    /// The only subscription that client may access.
    pub(crate) subscription: String,
    /// When it expires.
    pub(crate) expires_at: SystemTime,
}

/// A resource group.
#[derive(Debug, Clone)]
pub(crate) struct ResourceGroup {
    /// Subscription id as seeded.
    pub(crate) sub: String,
    /// Name as created.
    pub(crate) name: String,
    /// Azure region.
    pub(crate) location: String,
}

/// A subnet of a virtual network.
#[derive(Debug, Clone)]
pub(crate) struct Subnet {
    /// The subnet's ARM id.
    pub(crate) id: String,
    /// Subnet name.
    pub(crate) name: String,
    /// `10.250.0.0/16`.
    pub(crate) prefix: String,
    /// Next host offset to allocate (starts at 4: Azure reserves .0-.3).
    pub(crate) next_host: u32,
}

/// An async failure of a VM operation (`AllocationFailed`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// ARM error code.
    pub(crate) code: String,
    /// Human message.
    pub(crate) message: String,
}

impl Failure {
    /// A failure with ARM's realistic message for `code`.
    pub(crate) fn for_code(code: &str) -> Self {
        let message = match code {
            "AllocationFailed" => "Allocation failed. We do not have sufficient capacity for the requested VM size in this region. Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance".to_owned(),
            "ZonalAllocationFailed" => "Allocation failed. We do not have sufficient capacity for the requested VM size in this zone. Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance".to_owned(),
            "OverconstrainedAllocationRequest" => "Allocation failed. VM(s) with the following constraints cannot be allocated, because the condition is too restrictive. Please remove some constraints and try again.".to_owned(),
            "SkuNotAvailable" => "The requested VM size for resource 'Following SKUs have failed for Capacity Restrictions' is currently not available in location 'westeurope'. Please try another size or deploy to a different location or different zone. See https://aka.ms/azureskunotavailable for details.".to_owned(),
            "InternalExecutionError" | "InternalServerError" => "An internal execution error occurred. Please retry later.".to_owned(),
            other => format!("The virtual machine could not be provisioned (error code {other})."),
        };
        Self { code: code.to_owned(), message }
    }
}

/// Where a VM is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum VmPhase {
    /// Being created (`Creating`) or updated (`Updating`) until `until`, then Succeeded or `failure`.
    Provisioning {
        /// When provisioning ends.
        until: Instant,
        /// The failure it ends with, if any.
        failure: Option<Failure>,
        /// `Updating` instead of `Creating`.
        updating: bool,
        /// The operation id tracking it.
        op: String,
    },
    /// Provisioned.
    Succeeded,
    /// Provisioning failed; the VM stays (as on Azure).
    Failed(Failure),
    /// Being deleted until `until`, then gone (with cascades).
    Deleting {
        /// When it is gone.
        until: Instant,
    },
}

impl VmPhase {
    /// ARM's `provisioningState` word.
    pub(crate) fn word(&self) -> &'static str {
        match self {
            Self::Provisioning { updating: false, .. } => "Creating",
            Self::Provisioning { updating: true, .. } => "Updating",
            Self::Succeeded => "Succeeded",
            Self::Failed(_) => "Failed",
            Self::Deleting { .. } => "Deleting",
        }
    }
}

/// A NIC or disk a VM references, with its `deleteOption`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attachment {
    /// Lookup key of the NIC or disk.
    pub(crate) key: Key,
    /// Its ARM id.
    pub(crate) id: String,
    /// Its name.
    pub(crate) name: String,
    /// `Delete` or `Detach`.
    pub(crate) delete_option: String,
    /// Data disk LUN (None for NICs and the OS disk).
    pub(crate) lun: Option<i64>,
}

impl Attachment {
    /// Whether the resource goes with the VM.
    pub(crate) fn cascades(&self) -> bool {
        self.delete_option.eq_ignore_ascii_case("Delete")
    }
}

/// One virtual machine.
#[derive(Debug, Clone)]
pub(crate) struct VmRecord {
    /// Subscription as in the request path.
    pub(crate) sub: String,
    /// Resource group name as seeded.
    pub(crate) rg: String,
    /// VM name as created.
    pub(crate) name: String,
    /// The ARM id.
    pub(crate) id: String,
    /// Azure region.
    pub(crate) location: String,
    /// The request body as stored: nulls, read-only fields and `customData` removed.
    pub(crate) model: Value,
    /// `osProfile.customData` (base64), never returned by reads.
    pub(crate) custom_data: Option<String>,
    /// `properties.vmId`.
    pub(crate) vm_id: String,
    /// `properties.timeCreated`.
    pub(crate) time_created: String,
    /// Lifecycle.
    pub(crate) phase: VmPhase,
    /// Deallocated by a Spot eviction with `evictionPolicy: Deallocate`
    /// ([`crate::hooks::ArmHooks`]'s reclaim): the instance view shows
    /// `PowerState/deallocated` whatever the provisioning state; the VM,
    /// its NICs (with their private IPs) and its disks stay.
    pub(crate) deallocated: bool,
    /// Reads do not see the VM before this instant (eventual consistency).
    pub(crate) visible_at: Instant,
    /// Referenced NICs.
    pub(crate) nics: Vec<Attachment>,
    /// The OS disk.
    pub(crate) os_disk: Attachment,
    /// Data disks.
    pub(crate) data_disks: Vec<Attachment>,
}

/// A NIC reservation after a failed or deleted VM.
#[derive(Debug, Clone)]
pub(crate) struct Reservation {
    /// When the reservation started.
    pub(crate) since: Instant,
    /// The same instant on the wall clock (for the inventory).
    pub(crate) since_wall: SystemTime,
    /// The VM the NIC is reserved for.
    pub(crate) vm: String,
}

/// One network interface.
#[derive(Debug, Clone)]
pub(crate) struct NicRecord {
    /// Subscription as in the request path.
    pub(crate) sub: String,
    /// Resource group as seeded.
    pub(crate) rg: String,
    /// Name as created.
    pub(crate) name: String,
    /// The ARM id.
    pub(crate) id: String,
    /// Azure region.
    pub(crate) location: String,
    /// The stored request body (nulls and read-only fields removed).
    pub(crate) model: Value,
    /// The allocated private IP of the first IP configuration.
    pub(crate) private_ip: String,
    /// `properties.resourceGuid`.
    pub(crate) guid: String,
    /// `properties.macAddress` once attached.
    pub(crate) mac: String,
    /// The VM it is attached to.
    pub(crate) vm: Option<String>,
    /// The reservation, while one applies.
    pub(crate) reserved: Option<Reservation>,
    /// Being deleted until this instant.
    pub(crate) deleting_until: Option<Instant>,
    /// Changes with every write (for the `etag`).
    pub(crate) generation: u64,
    /// When it was made: Resource Graph shows it [`State::graph_lag`] later.
    pub(crate) created_at: Instant,
}

/// What Resource Graph still shows of a NIC after it is gone, until
/// [`State::graph_lag`] after its deletion.
#[derive(Debug, Clone)]
pub(crate) struct GoneNic {
    /// When it went.
    pub(crate) gone_at: Instant,
    /// The NIC as it was.
    pub(crate) nic: NicRecord,
}

/// Default Resource Graph lag behind ARM (a NIC shows this long after it is
/// made, and stays this long after it is gone).
pub(crate) const DEFAULT_GRAPH_LAG: Duration = Duration::from_millis(2000);
/// Resource Graph's default per-user quota: queries per window.
pub(crate) const DEFAULT_GRAPH_QUOTA: u32 = 15;
/// Resource Graph's default quota window.
pub(crate) const DEFAULT_GRAPH_WINDOW: Duration = Duration::from_secs(5);

/// Where a disk is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DiskPhase {
    /// Being created or updated until the instant.
    Updating(Instant),
    /// Ready.
    Succeeded,
    /// Being deleted until the instant, then gone.
    Deleting(Instant),
}

/// One managed disk.
#[derive(Debug, Clone)]
pub(crate) struct DiskRecord {
    /// Subscription as in the request path.
    pub(crate) sub: String,
    /// Resource group as seeded.
    pub(crate) rg: String,
    /// Name as created.
    pub(crate) name: String,
    /// The ARM id.
    pub(crate) id: String,
    /// Azure region.
    pub(crate) location: String,
    /// Tags (object) or None.
    pub(crate) tags: Option<Value>,
    /// Zones (array) or None.
    pub(crate) zones: Option<Value>,
    /// `sku.name`.
    pub(crate) sku: String,
    /// `properties.diskSizeGB`.
    pub(crate) size_gb: u64,
    /// `properties.creationData` as given (or implied).
    pub(crate) creation_data: Value,
    /// `Linux` for OS disks.
    pub(crate) os_type: Option<String>,
    /// The VM using it.
    pub(crate) managed_by: Option<String>,
    /// Lifecycle.
    pub(crate) phase: DiskPhase,
    /// `properties.timeCreated`.
    pub(crate) time_created: String,
    /// `properties.uniqueId`.
    pub(crate) unique_id: String,
    /// `properties.diskIOPSReadWrite` and `diskMBpsReadWrite` as provisioned
    /// (Ultra Disk and Premium SSD v2 only; `None`: the type's default, see
    /// [`crate::state::render::disk`]).
    pub(crate) performance: Option<(u64, u64)>,
    /// When each accepted performance change (Disks - Update) was made: at
    /// most [`PERFORMANCE_CHANGES_PER_DAY`] a day.
    pub(crate) performance_changes: Vec<Instant>,
}

/// How many times a day Azure lets an Ultra Disk's or a Premium SSD v2's
/// performance be changed (learn.microsoft.com/azure/virtual-machines/disks-types,
/// "Ultra Disk performance" and "Premium SSD v2 performance": adjustable up
/// to four times within 24 hours).
pub(crate) const PERFORMANCE_CHANGES_PER_DAY: usize = 4;

/// One gallery image definition with its versions.
#[derive(Debug, Clone)]
pub(crate) struct GalleryImage {
    /// Definition name.
    pub(crate) name: String,
    /// Version names.
    pub(crate) versions: Vec<String>,
    /// The regions each version is replicated to (its `publishingProfile.targetRegions`),
    /// by lowercase version name; a version not listed is in the gallery's region only.
    pub(crate) regions: BTreeMap<String, Vec<String>>,
}

impl GalleryImage {
    /// The regions `version` (as stored) is replicated to.
    pub(crate) fn regions_of(&self, version: &str, gallery_location: &str) -> Vec<String> {
        self.regions.get(&version.to_ascii_lowercase()).cloned().unwrap_or_else(|| vec![gallery_location.to_owned()])
    }
}

/// Whether `a` and `b` name the same region (`westeurope`, `West Europe`).
pub(crate) fn same_region(a: &str, b: &str) -> bool {
    a.replace(' ', "").eq_ignore_ascii_case(&b.replace(' ', ""))
}

/// One Azure Compute Gallery.
#[derive(Debug, Clone)]
pub(crate) struct GalleryRecord {
    /// Owner subscription.
    pub(crate) sub: String,
    /// Resource group.
    pub(crate) rg: String,
    /// Gallery name.
    pub(crate) name: String,
    /// Region.
    pub(crate) location: String,
    /// `identifier.uniqueName`, the consumer side's gallery name.
    pub(crate) unique_name: String,
    /// `sharingProfile.permissions` (`Private`, `Groups`, `Community`).
    pub(crate) permissions: String,
    /// `sharingProfile.groups`: `(type, ids)`.
    pub(crate) groups: Vec<(String, Vec<String>)>,
    /// Community sharing enabled.
    pub(crate) community: bool,
    /// The community gallery's public name (`<publicNamePrefix>-<guid>`), when it has one.
    pub(crate) public_name: Option<String>,
    /// Image definitions by lowercase name.
    pub(crate) images: BTreeMap<String, GalleryImage>,
}

impl GalleryRecord {
    /// The ARM id.
    pub(crate) fn id(&self) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/galleries/{}",
            self.sub, self.rg, self.name
        )
    }

    /// Whether the gallery is shared with `subscription` (directly or via its tenant).
    pub(crate) fn shared_with(&self, subscription: &str) -> bool {
        self.groups.iter().any(|(kind, ids)| {
            (kind.eq_ignore_ascii_case("Subscriptions") && ids.iter().any(|id| id.eq_ignore_ascii_case(subscription)))
                || (kind.eq_ignore_ascii_case("AADTenants")
                    && ids.iter().any(|id| id.eq_ignore_ascii_case(crate::TENANT_ID)))
        })
    }

    /// The image definition and version names as stored, if both exist.
    pub(crate) fn version(&self, image: &str, version: &str) -> Option<(&str, &str)> {
        let def = self.images.get(&image.to_ascii_lowercase())?;
        let ver = def.versions.iter().find(|v| v.eq_ignore_ascii_case(version))?;
        Some((&def.name, ver))
    }

    /// The version of `image` a reference names in `location`: `version`
    /// when it exists and is replicated there; without a version, the latest
    /// (last) one replicated there. `None` when there is none.
    pub(crate) fn version_in(&self, image: &str, version: Option<&str>, location: &str) -> Option<(&str, &str)> {
        let def = self.images.get(&image.to_ascii_lowercase())?;
        let here = |v: &String| def.regions_of(v, &self.location).iter().any(|r| same_region(r, location));
        let ver = match version {
            Some(version) => def.versions.iter().find(|v| v.eq_ignore_ascii_case(version)).filter(|v| here(v))?,
            None => def.versions.iter().rev().find(|v| here(v))?,
        };
        Some((&def.name, ver))
    }
}

/// One async operation (`Azure-AsyncOperation` / `Location` target).
#[derive(Debug, Clone)]
pub(crate) struct OpRecord {
    /// Operation id.
    pub(crate) id: String,
    /// Subscription (lowercase) it belongs to.
    pub(crate) sub: String,
    /// When it started (monotonic).
    pub(crate) started: Instant,
    /// When it started (wall clock).
    pub(crate) started_wall: SystemTime,
    /// When it is done.
    pub(crate) done_at: Instant,
    /// The failure it ends with, if any.
    pub(crate) failure: Option<Failure>,
    /// The result body served by the `Location` URL once done (e.g. a SharingUpdate).
    pub(crate) output: Option<Value>,
}

impl OpRecord {
    /// `InProgress`, `Succeeded` or `Failed` at `now`.
    pub(crate) fn status(&self, now: Instant) -> &'static str {
        if now < self.done_at {
            "InProgress"
        } else if self.failure.is_some() {
            "Failed"
        } else {
            "Succeeded"
        }
    }
}

/// A subscription's agreement to the terms of a marketplace purchase plan.
#[derive(Debug, Clone)]
pub(crate) struct Agreement {
    /// `properties.accepted`.
    pub(crate) accepted: bool,
    /// `properties.retrieveDatetime`: when the terms were read or accepted.
    pub(crate) retrieved: String,
}

/// `(subscription, publisher, offer, plan)`, lowercase.
pub(crate) type AgreementKey = (String, String, String, String);

/// The key of a subscription's agreement to a plan.
pub(crate) fn agreement_key(sub: &str, publisher: &str, offer: &str, plan: &str) -> AgreementKey {
    (sub.to_ascii_lowercase(), publisher.to_ascii_lowercase(), offer.to_ascii_lowercase(), plan.to_ascii_lowercase())
}

/// All mutable state.
#[derive(Debug)]
pub(crate) struct State {
    /// Issued access tokens.
    pub(crate) tokens: HashMap<String, Token>,
    /// How many tokens were issued (since start or reset).
    pub(crate) tokens_issued: u64,
    /// Lifetime of new tokens.
    pub(crate) token_lifetime: Duration,
    /// List page size.
    pub(crate) page_size: usize,
    /// NIC reservation window.
    pub(crate) nic_reservation: Duration,
    /// Queued async failure codes for the next accepted VM PUTs.
    pub(crate) vm_failures: VecDeque<String>,
    /// Resource groups by `(sub, rg)` lowercase.
    pub(crate) resource_groups: BTreeMap<(String, String), ResourceGroup>,
    /// Subnets by lowercase ARM id.
    pub(crate) subnets: BTreeMap<String, Subnet>,
    /// Virtual machines.
    pub(crate) vms: BTreeMap<Key, VmRecord>,
    /// Network interfaces.
    pub(crate) nics: BTreeMap<Key, NicRecord>,
    /// Managed disks.
    pub(crate) disks: BTreeMap<Key, DiskRecord>,
    /// Galleries.
    pub(crate) galleries: BTreeMap<Key, GalleryRecord>,
    /// Async operations by id.
    pub(crate) operations: HashMap<String, OpRecord>,
    /// Deleted VMs for the inventory, with when they went.
    pub(crate) deleted_vms: Vec<(Instant, InventoryInstance)>,
    /// Deleted NICs Resource Graph still shows.
    pub(crate) gone_nics: Vec<GoneNic>,
    /// How far Resource Graph lags behind ARM.
    pub(crate) graph_lag: Duration,
    /// Resource Graph queries allowed per user and window.
    pub(crate) graph_quota: u32,
    /// Resource Graph's quota window.
    pub(crate) graph_window: Duration,
    /// Per client id: when its current quota window started and the queries in it.
    pub(crate) graph_usage: HashMap<String, (Instant, u32)>,
    /// Marketplace agreements the subscriptions accepted (absent: not accepted).
    pub(crate) agreements: BTreeMap<AgreementKey, Agreement>,
    /// Whether the identities may accept marketplace terms
    /// (`Microsoft.MarketplaceOrdering/offertypes/publishers/offers/plans/agreements/write`).
    pub(crate) may_accept_terms: bool,
    /// Subscriptions (lowercase) with the feature `Microsoft.Compute/EncryptionAtHost`
    /// registered (seeded: the default subscription).
    pub(crate) encryption_at_host: BTreeSet<String>,
}

impl State {
    /// Stores a new NIC `name` of `sub`/`rg` (names as the request wrote them), free, with
    /// the next private IP of subnet `subnet_lc` (lowercase id), a random MAC and GUID.
    pub(crate) fn create_nic(
        &mut self,
        (sub, rg, name): (&str, &str, &str),
        id: String,
        location: String,
        model: Value,
        subnet_lc: &str,
        now: Instant,
    ) {
        let private_ip = self.allocate_ip(subnet_lc);
        let nic = NicRecord {
            sub: sub.to_owned(),
            rg: rg.to_owned(),
            name: name.to_owned(),
            id,
            location,
            model,
            private_ip,
            guid: uuid::Uuid::new_v4().to_string(),
            mac: random_mac(),
            vm: None,
            reserved: None,
            deleting_until: None,
            generation: 1,
            created_at: now,
        };
        self.nics.insert(key(sub, rg, name), nic);
    }

    /// The seeded initial state.
    pub(crate) fn initial() -> Self {
        let mut state = Self {
            tokens: HashMap::new(),
            tokens_issued: 0,
            token_lifetime: Duration::from_secs(DEFAULT_TOKEN_SECONDS),
            page_size: DEFAULT_PAGE_SIZE,
            nic_reservation: DEFAULT_NIC_RESERVATION,
            vm_failures: VecDeque::new(),
            resource_groups: BTreeMap::new(),
            subnets: BTreeMap::new(),
            vms: BTreeMap::new(),
            nics: BTreeMap::new(),
            disks: BTreeMap::new(),
            galleries: BTreeMap::new(),
            operations: HashMap::new(),
            deleted_vms: Vec::new(),
            gone_nics: Vec::new(),
            graph_lag: DEFAULT_GRAPH_LAG,
            graph_quota: DEFAULT_GRAPH_QUOTA,
            graph_window: DEFAULT_GRAPH_WINDOW,
            graph_usage: HashMap::new(),
            agreements: BTreeMap::new(),
            may_accept_terms: true,
            encryption_at_host: BTreeSet::from([crate::SUBSCRIPTION_ID.to_ascii_lowercase()]),
        };
        seed::seed(&mut state);
        state
    }

    /// The resource group, if it exists.
    pub(crate) fn resource_group(&self, sub: &str, rg: &str) -> Option<&ResourceGroup> {
        self.resource_groups.get(&(sub.to_ascii_lowercase(), rg.to_ascii_lowercase()))
    }

    /// Whether a NIC reservation is still in force at `now`.
    pub(crate) fn reservation_active(&self, reservation: &Reservation, now: Instant) -> bool {
        now < reservation.since + self.nic_reservation
    }

    /// The reservation window in whole seconds (for messages).
    pub(crate) fn reservation_seconds(&self) -> u64 {
        self.nic_reservation.as_millis().div_ceil(1000).try_into().unwrap_or(u64::MAX)
    }

    /// Registers a new operation and returns its id.
    pub(crate) fn new_operation(
        &mut self,
        sub: &str,
        now: Instant,
        done_at: Instant,
        failure: Option<Failure>,
        output: Option<Value>,
    ) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        let started_wall = SystemTime::now();
        self.operations.insert(
            id.clone(),
            OpRecord {
                id: id.clone(),
                sub: sub.to_ascii_lowercase(),
                started: now,
                started_wall,
                done_at,
                failure,
                output,
            },
        );
        id
    }

    /// Reserves NIC `key` for `vm` from `since` (a failed or deleted VM).
    pub(crate) fn reserve_nic(&mut self, key: &Key, vm: &str, since: Instant) {
        let elapsed = Instant::now().saturating_duration_since(since);
        if let Some(nic) = self.nics.get_mut(key) {
            nic.vm = None;
            nic.reserved = Some(Reservation {
                since,
                since_wall: SystemTime::now().checked_sub(elapsed).unwrap_or_else(SystemTime::now),
                vm: vm.to_owned(),
            });
            nic.generation += 1;
        }
    }

    /// Applies every transition due at `now`.
    pub(crate) fn advance(&mut self, now: Instant) {
        let mut gone = Vec::new();
        for (key, vm) in &mut self.vms {
            match &vm.phase {
                VmPhase::Provisioning { until, failure, .. } if now >= *until => {
                    vm.phase = match failure {
                        Some(failure) => VmPhase::Failed(failure.clone()),
                        None => VmPhase::Succeeded,
                    };
                }
                VmPhase::Deleting { until } if now >= *until => gone.push((key.clone(), *until)),
                _ => {}
            }
        }
        for (key, until) in gone {
            if let Some(vm) = self.vms.remove(&key) {
                self.cascade(&vm, until);
                self.deleted_vms.push((now, render::vm_inventory(&vm, "deleted", false)));
            }
        }
        let deleted: Vec<Key> = self
            .nics
            .iter()
            .filter(|(_, nic)| nic.deleting_until.is_some_and(|until| now >= until))
            .map(|(k, _)| k.clone())
            .collect();
        for key in deleted {
            if let Some(nic) = self.nics.remove(&key) {
                let at = nic.deleting_until.unwrap_or(now);
                self.gone_nics.push(GoneNic { gone_at: at, nic });
            }
        }
        let lag = self.graph_lag;
        self.gone_nics.retain(|g| now.saturating_duration_since(g.gone_at) < lag);
        let window = self.nic_reservation;
        for nic in self.nics.values_mut() {
            if nic.reserved.as_ref().is_some_and(|r| now >= r.since + window) {
                nic.reserved = None;
            }
        }
        self.disks.retain(|_, disk| !matches!(disk.phase, DiskPhase::Deleting(until) if now >= until));
        for disk in self.disks.values_mut() {
            if matches!(disk.phase, DiskPhase::Updating(until) if now >= until) {
                disk.phase = DiskPhase::Succeeded;
            }
        }
        self.deleted_vms.retain(|(at, _)| now.saturating_duration_since(*at) < DELETED_RETENTION);
        self.operations.retain(|_, op| now.saturating_duration_since(op.done_at) < OPERATION_RETENTION);
    }

    /// What happens to a deleted VM's NICs and disks.
    fn cascade(&mut self, vm: &VmRecord, at: Instant) {
        for nic in &vm.nics {
            let attached_here = self.nics.get(&nic.key).is_some_and(|n| n.vm.as_deref() == Some(vm.id.as_str()));
            if !attached_here {
                continue;
            }
            if nic.cascades() {
                if let Some(gone) = self.nics.remove(&nic.key) {
                    self.gone_nics.push(GoneNic { gone_at: at, nic: gone });
                }
            } else {
                self.reserve_nic(&nic.key, &vm.id, at);
            }
        }
        for disk in std::iter::once(&vm.os_disk).chain(&vm.data_disks) {
            let attached_here =
                self.disks.get(&disk.key).is_some_and(|d| d.managed_by.as_deref() == Some(vm.id.as_str()));
            if !attached_here {
                continue;
            }
            if disk.cascades() {
                self.disks.remove(&disk.key);
            } else if let Some(record) = self.disks.get_mut(&disk.key) {
                record.managed_by = None;
            }
        }
    }

    /// Allocates the next private IP of a subnet (by lowercase id).
    pub(crate) fn allocate_ip(&mut self, subnet_id_lc: &str) -> String {
        let Some(subnet) = self.subnets.get_mut(subnet_id_lc) else {
            return "10.0.0.4".to_owned();
        };
        let base =
            subnet.prefix.split('/').next().and_then(|ip| ip.parse::<std::net::Ipv4Addr>().ok()).map_or(0, u32::from);
        let ip = std::net::Ipv4Addr::from(base.wrapping_add(subnet.next_host));
        subnet.next_host += 1;
        ip.to_string()
    }
}

/// The shared store.
#[derive(Debug)]
pub(crate) struct Store {
    state: Mutex<State>,
}

impl Store {
    /// A store in its seeded state.
    pub(crate) fn new() -> Self {
        Self { state: Mutex::new(State::initial()) }
    }

    /// Locks the state and applies the transitions due at `now`.
    pub(crate) fn lock_at(&self, now: Instant) -> MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.advance(now);
        state
    }

    /// Back to the seeds; issued tokens stay valid (they are credentials, not cloud state).
    pub(crate) fn reset(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let tokens = std::mem::take(&mut state.tokens);
        *state = State::initial();
        state.tokens = tokens;
    }
}
