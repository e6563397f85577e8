//! The fake's cloud state: vSwitches, security groups, images with their share lists,
//! instances and ClientTokens, behind one `std::sync::Mutex` that is never held across
//! an `.await`. Transitions (Pending → Starting → Running, Stopping → gone) are applied
//! lazily by [`State::advance`] whenever the state is locked.

pub(crate) mod seed;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use fake_cloud_support::{IdempotencyTokens, InventoryInstance, Reclaim};
use serde_json::{Value, json};

use crate::signing::Nonces;

/// Default maximum number of accounts one image may be shared with.
pub(crate) const DEFAULT_SHARE_QUOTA: usize = 50;
/// How long deleted instances stay in the inventory.
const DELETED_RETENTION: Duration = Duration::from_secs(600);
/// How long a reclaimed spot instance stays `Stopped` with the `Recycling` lock before
/// ECS releases it, unless `POST /_admin/ecs/reclaim-release` says otherwise. ECS's
/// guide says only that the instance is released after it entered the lock ("pending
/// release"); five minutes is this fake's choice of "some minutes".
pub(crate) const DEFAULT_RECLAIM_RELEASE: Duration = Duration::from_secs(300);
/// ECS's `LockReason` of a reclaimed spot instance waiting for release.
pub(crate) const RECYCLING: &str = "Recycling";

/// A vSwitch (subnet) of a VPC.
#[derive(Debug, Clone)]
pub(crate) struct VSwitch {
    /// `vsw-...`.
    pub(crate) id: String,
    /// The owning account.
    pub(crate) account: String,
    /// Its VPC.
    pub(crate) vpc: String,
    /// Its zone.
    pub(crate) zone: String,
    /// Network address of its CIDR block.
    pub(crate) network: Ipv4Addr,
    /// Prefix length of its CIDR block.
    pub(crate) prefix_len: u32,
    /// Next host offset to allocate.
    pub(crate) next_host: u32,
}

impl VSwitch {
    /// Whether `ip` lies in the CIDR block.
    pub(crate) fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = u32::MAX.checked_shl(32 - self.prefix_len).unwrap_or(0);
        (u32::from(ip) & mask) == (u32::from(self.network) & mask)
    }
}

/// A security group.
#[derive(Debug, Clone)]
pub(crate) struct SecurityGroup {
    /// The owning account.
    pub(crate) account: String,
    /// Its VPC.
    pub(crate) vpc: String,
}

/// An image in the region.
#[derive(Debug, Clone)]
pub(crate) struct Image {
    /// `m-...` or a system image name.
    pub(crate) id: String,
    /// `ImageName`.
    pub(crate) name: String,
    /// The owner account; `None` for system images.
    pub(crate) owner: Option<String>,
    /// Accounts it is shared with, in the order they were added.
    pub(crate) shared_with: Vec<String>,
    /// Shared with everyone (`IsPublic=true`, or a system image).
    pub(crate) is_public: bool,
    /// `OSName`.
    pub(crate) os_name: String,
    /// `Platform`.
    pub(crate) platform: String,
    /// `CreationTime`.
    pub(crate) creation_time: String,
}

impl Image {
    /// Whether `account` may see and launch the image: system, own, public or shared with it.
    pub(crate) fn visible_to(&self, account: &str) -> bool {
        match &self.owner {
            None => true,
            Some(owner) => owner == account || self.is_public || self.shared_with.iter().any(|a| a == account),
        }
    }

    /// `ImageOwnerAlias` as `account` sees it: `system`, `self` or `others`.
    pub(crate) fn alias_for(&self, account: &str) -> &'static str {
        match &self.owner {
            None => "system",
            Some(owner) if owner == account => "self",
            Some(_) => "others",
        }
    }
}

/// Where an instance is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// `Pending` until `starting_at`, then `Starting` until `until`, then Running.
    Booting {
        /// When `Starting` begins.
        starting_at: Instant,
        /// When it is `Running`.
        until: Instant,
    },
    /// `Running`.
    Running,
    /// `Stopping` until `until`, then released (gone).
    Stopping {
        /// When it is gone.
        until: Instant,
    },
    /// `Stopped` by a spot reclaim, locked for release (see [`Instance::recycling`]):
    /// ECS releases it at `release_at`.
    Reclaimed {
        /// When ECS releases it.
        release_at: Instant,
    },
}

/// A disk of an instance (its system disk or a data disk), as RunInstances made it
/// (`SystemDisk.*`, `DataDisk.N.*`) and DescribeDisks shows it: a `d-...` resource
/// of its own, with its own tags (RunInstances' `Tag.N` go on the instance, its
/// disks and its primary ENI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DataDisk {
    /// `d-...`.
    pub(crate) id: String,
    /// `DataDisk.N.Category` / `SystemDisk.Category`.
    pub(crate) category: String,
    /// `DataDisk.N.Size` / `SystemDisk.Size` (GiB); ResizeDisk grows it.
    pub(crate) size: u64,
    /// `PerformanceLevel` of an ESSD (`PL0`–`PL3`; RunInstances' default `PL1`),
    /// `None` for other categories.
    pub(crate) performance_level: Option<String>,
    /// Tags in the order they were set.
    pub(crate) tags: Vec<(String, String)>,
    /// `DataDisk.N.Encrypted`.
    pub(crate) encrypted: bool,
    /// `DataDisk.N.DiskName`.
    pub(crate) name: Option<String>,
    /// `DataDisk.N.Description`.
    pub(crate) description: Option<String>,
    /// `DataDisk.N.DeleteWithInstance` (default true; always true for a system disk).
    pub(crate) delete_with_instance: bool,
}

impl DataDisk {
    /// A disk of `category` and `size` GiB with a new id, the ESSD default
    /// performance level, no name and no tags, deleted with its instance.
    pub(crate) fn new(category: &str, size: u64) -> Self {
        Self {
            id: crate::wire::disk_id(),
            category: category.to_owned(),
            size,
            performance_level: (category == "cloud_essd").then(|| "PL1".to_owned()),
            tags: Vec::new(),
            encrypted: false,
            name: None,
            description: None,
            delete_with_instance: true,
        }
    }

    /// Its DescribeDisks-like inventory details (`id`, `category`, `size`, ...).
    fn details(&self) -> Value {
        json!({
            "id": self.id,
            "category": self.category,
            "size": self.size,
            "performance_level": self.performance_level,
            "encrypted": self.encrypted,
            "name": self.name,
            "description": self.description,
            "delete_with_instance": self.delete_with_instance,
        })
    }

    /// The inventory entry of this disk as a dependent (`kind` `disk`), attached
    /// to `instance` (`None`: detached, `Available`).
    pub(crate) fn inventory(&self, kind: &str, instance: Option<&str>, state: &str, live: bool) -> InventoryInstance {
        let mut extra = match self.details() {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        extra.remove("id");
        extra.remove("name");
        extra.insert("kind".into(), json!("disk"));
        extra.insert("type".into(), json!(kind));
        extra.insert("instance_id".into(), json!(instance));
        InventoryInstance {
            id: self.id.clone(),
            name: self.name.clone().unwrap_or_default(),
            state: state.to_owned(),
            live,
            tags: self.tags.iter().cloned().collect(),
            extra,
        }
    }
}

/// A disk kept after its instance was released (`DeleteWithInstance=false`): `Available`.
#[derive(Debug, Clone)]
pub(crate) struct DetachedDisk {
    /// The owning account.
    pub(crate) account: String,
    /// Its zone.
    pub(crate) zone: String,
    /// The disk.
    pub(crate) disk: DataDisk,
}

/// The spot terms of an instance launched with a spot strategy (kept beside
/// [`Instance`], by instance id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpotTerms {
    /// `SpotPriceLimit` as sent (`SpotWithPriceLimit` only).
    pub(crate) price_limit: Option<String>,
    /// `SpotDuration`: the protection hours, 0 or 1.
    pub(crate) duration: u8,
}

impl SpotTerms {
    /// Adds `spot_price_limit` and `spot_duration` to an inventory entry.
    pub(crate) fn annotate(&self, entry: &mut InventoryInstance) {
        entry.extra.insert("spot_price_limit".into(), json!(self.price_limit));
        entry.extra.insert("spot_duration".into(), json!(self.duration));
    }
}

/// One ECS instance.
#[derive(Debug, Clone)]
pub(crate) struct Instance {
    /// Creation order (NextToken paging key).
    pub(crate) seq: u64,
    /// `i-...`.
    pub(crate) id: String,
    /// The owning account.
    pub(crate) account: String,
    /// `InstanceName`.
    pub(crate) name: String,
    /// `HostName`.
    pub(crate) host_name: String,
    /// `ZoneId`.
    pub(crate) zone: String,
    /// `InstanceType`.
    pub(crate) instance_type: String,
    /// `ImageId`.
    pub(crate) image_id: String,
    /// `VSwitchId`.
    pub(crate) vswitch: String,
    /// `VpcId`.
    pub(crate) vpc: String,
    /// The primary private IP.
    pub(crate) private_ip: String,
    /// Security group ids.
    pub(crate) security_groups: Vec<String>,
    /// Tags in request order.
    pub(crate) tags: Vec<(String, String)>,
    /// `UserData` (base64) as received.
    pub(crate) user_data: Option<String>,
    /// The `ClientToken` it was created with.
    pub(crate) client_token: Option<String>,
    /// `CreationTime`.
    pub(crate) creation_time: String,
    /// Reads do not see the instance before this instant (eventual consistency).
    pub(crate) visible_at: Instant,
    /// Lifecycle.
    pub(crate) phase: Phase,
    /// `InstanceChargeType` (default `PostPaid`).
    pub(crate) instance_charge_type: String,
    /// `InternetChargeType` (default `PayByTraffic`).
    pub(crate) internet_charge_type: String,
    /// `InternetMaxBandwidthIn`.
    pub(crate) bandwidth_in: u64,
    /// `InternetMaxBandwidthOut`.
    pub(crate) bandwidth_out: u64,
    /// `SpotStrategy` (default `NoSpot`).
    pub(crate) spot_strategy: String,
    /// `IoOptimized` is `optimized` (default) or `none`.
    pub(crate) io_optimized: bool,
    /// `KeyPairName`.
    pub(crate) key_pair: Option<String>,
    /// The system disk (`SystemDisk.Category`, `SystemDisk.Size`).
    pub(crate) system_disk: DataDisk,
    /// Data disks.
    pub(crate) data_disks: Vec<DataDisk>,
    /// The primary ENI's id (`eni-...`), made with the instance and released with it.
    pub(crate) eni_id: String,
    /// The primary ENI's tags (RunInstances' `Tag.N`, then TagResources `eni`).
    pub(crate) eni_tags: Vec<(String, String)>,
    /// Locked for release by a spot reclaim (`OperationLocks` `LockReason: Recycling`),
    /// until it is gone (also while a DeleteInstance stops it).
    pub(crate) recycling: bool,
}

impl Instance {
    /// Its disks: the system disk first, then the data disks in request order.
    pub(crate) fn disks(&self) -> impl Iterator<Item = &DataDisk> {
        std::iter::once(&self.system_disk).chain(&self.data_disks)
    }

    /// Its disk `id`, for a change.
    pub(crate) fn disk_mut(&mut self, id: &str) -> Option<&mut DataDisk> {
        std::iter::once(&mut self.system_disk).chain(&mut self.data_disks).find(|d| d.id == id)
    }

    /// The inventory entries of its disks and its primary ENI (`kind` `disk` and
    /// `eni`), in `state` words of DescribeDisks (`In_use`) and
    /// DescribeNetworkInterfaces (`InUse`), or `Deleted` when not `live`.
    pub(crate) fn dependents(&self, live: bool) -> Vec<InventoryInstance> {
        let (disk_state, eni_state) = if live { ("In_use", "InUse") } else { ("Deleted", "Deleted") };
        let mut out: Vec<InventoryInstance> = self
            .disks()
            .enumerate()
            .map(|(i, d)| d.inventory(if i == 0 { "system" } else { "data" }, Some(&self.id), disk_state, live))
            .collect();
        let mut extra = serde_json::Map::new();
        extra.insert("kind".into(), json!("eni"));
        extra.insert("type".into(), json!("Primary"));
        extra.insert("instance_id".into(), json!(self.id));
        extra.insert("security_groups".into(), json!(self.security_groups));
        extra.insert("private_ip".into(), json!(self.private_ip));
        out.push(InventoryInstance {
            id: self.eni_id.clone(),
            name: String::new(),
            state: eni_state.to_owned(),
            live,
            tags: self.eni_tags.iter().cloned().collect(),
            extra,
        });
        out
    }

    /// ECS's `Status` word at `now`.
    pub(crate) fn status(&self, now: Instant) -> &'static str {
        match self.phase {
            Phase::Booting { starting_at, .. } if now < starting_at => "Pending",
            Phase::Booting { .. } => "Starting",
            Phase::Running => "Running",
            Phase::Stopping { .. } => "Stopping",
            Phase::Reclaimed { .. } => "Stopped",
        }
    }

    /// The `LockReason`s of its `OperationLocks`.
    pub(crate) fn lock_reasons(&self) -> Vec<&'static str> {
        if self.recycling { vec![RECYCLING] } else { Vec::new() }
    }

    /// The inventory entry of this instance.
    pub(crate) fn inventory(&self, state: &str, live: bool) -> InventoryInstance {
        let mut extra = serde_json::Map::new();
        extra.insert("kind".into(), json!("instance"));
        extra.insert("user_data".into(), self.user_data.as_ref().map_or(Value::Null, |u| json!(u)));
        extra.insert("account".into(), json!(self.account));
        extra.insert("zone".into(), json!(self.zone));
        extra.insert("private_ip".into(), json!(self.private_ip));
        extra.insert("client_token".into(), self.client_token.as_ref().map_or(Value::Null, |t| json!(t)));
        extra.insert("instance_type".into(), json!(self.instance_type));
        extra.insert("spot_strategy".into(), json!(self.spot_strategy));
        extra.insert("instance_charge_type".into(), json!(self.instance_charge_type));
        extra.insert("image_id".into(), json!(self.image_id));
        extra.insert("vswitch".into(), json!(self.vswitch));
        extra.insert("security_groups".into(), json!(self.security_groups));
        extra.insert("creation_time".into(), json!(self.creation_time));
        extra.insert("operation_locks".into(), json!(self.lock_reasons()));
        extra.insert("system_disk".into(), self.system_disk.details());
        extra.insert("data_disks".into(), json!(self.data_disks.iter().map(DataDisk::details).collect::<Vec<_>>()));
        extra.insert("network_interfaces".into(), json!([{"id": self.eni_id, "type": "Primary"}]));
        InventoryInstance {
            id: self.id.clone(),
            name: self.name.clone(),
            state: state.to_owned(),
            live,
            tags: self.tags.iter().cloned().collect(),
            extra,
        }
    }
}

/// All mutable cloud state.
#[derive(Debug)]
pub(crate) struct State {
    /// Next instance sequence number.
    pub(crate) next_seq: u64,
    /// Instances by id.
    pub(crate) instances: BTreeMap<String, Instance>,
    /// Released instances for the inventory, with when they went.
    pub(crate) deleted: Vec<(Instant, InventoryInstance)>,
    /// The disks and ENIs released with them, for the inventory, with when they went.
    pub(crate) deleted_dependents: Vec<(Instant, InventoryInstance)>,
    /// Data disks kept after their instance was released (`DeleteWithInstance=false`), by id.
    pub(crate) detached_disks: BTreeMap<String, DetachedDisk>,
    /// Images by id.
    pub(crate) images: BTreeMap<String, Image>,
    /// vSwitches by id.
    pub(crate) vswitches: BTreeMap<String, VSwitch>,
    /// Security groups by id.
    pub(crate) security_groups: BTreeMap<String, SecurityGroup>,
    /// RunInstances ClientTokens per `(account, token)` → instance ids.
    pub(crate) tokens: IdempotencyTokens<(String, String), Vec<String>>,
    /// Maximum number of accounts per image share list.
    pub(crate) share_quota: usize,
    /// The spot terms of instances launched with a spot strategy, by instance id.
    pub(crate) spot_terms: BTreeMap<String, SpotTerms>,
    /// How long a reclaimed spot instance waits for its release.
    pub(crate) reclaim_release: Duration,
}

impl State {
    /// The seeded initial state.
    pub(crate) fn initial() -> Self {
        let mut state = Self {
            next_seq: 1,
            instances: BTreeMap::new(),
            deleted: Vec::new(),
            deleted_dependents: Vec::new(),
            detached_disks: BTreeMap::new(),
            images: BTreeMap::new(),
            vswitches: BTreeMap::new(),
            security_groups: BTreeMap::new(),
            tokens: IdempotencyTokens::default(),
            share_quota: DEFAULT_SHARE_QUOTA,
            spot_terms: BTreeMap::new(),
            reclaim_release: DEFAULT_RECLAIM_RELEASE,
        };
        seed::seed(&mut state);
        state
    }

    /// Applies every transition due at `now`.
    pub(crate) fn advance(&mut self, now: Instant) {
        let mut gone = Vec::new();
        for (id, instance) in &mut self.instances {
            match instance.phase {
                Phase::Booting { until, .. } if now >= until => instance.phase = Phase::Running,
                Phase::Stopping { until } | Phase::Reclaimed { release_at: until } if now >= until => {
                    gone.push(id.clone());
                }
                _ => {}
            }
        }
        for id in gone {
            self.release(&id, now);
        }
        self.deleted.retain(|(at, _)| now.saturating_duration_since(*at) < DELETED_RETENTION);
        self.deleted_dependents.retain(|(at, _)| now.saturating_duration_since(*at) < DELETED_RETENTION);
    }

    /// Releases instance `id` at `now` (the end of DeleteInstance's `Stopping`, or an
    /// out-of-band release): DescribeInstances no longer lists it and the inventory keeps
    /// it as `Deleted` (`live: false`) for a while. Its ClientToken stays remembered.
    /// Its primary ENI and the disks with `DeleteWithInstance` go with it; a data disk
    /// without is detached and kept (`Available`), as ECS keeps it. `false` when no
    /// instance has `id`.
    pub(crate) fn release(&mut self, id: &str, now: Instant) -> bool {
        let Some(instance) = self.instances.remove(id) else { return false };
        for disk in instance.data_disks.iter().filter(|d| !d.delete_with_instance) {
            let kept =
                DetachedDisk { account: instance.account.clone(), zone: instance.zone.clone(), disk: disk.clone() };
            self.detached_disks.insert(disk.id.clone(), kept);
        }
        let kept: Vec<&str> = self.detached_disks.keys().map(String::as_str).collect();
        let gone: Vec<InventoryInstance> =
            instance.dependents(false).into_iter().filter(|d| !kept.contains(&d.id.as_str())).collect();
        self.deleted_dependents.extend(gone.into_iter().map(|d| (now, d)));
        let mut entry = instance.inventory("Deleted", false);
        if let Some(terms) = self.spot_terms.remove(id) {
            terms.annotate(&mut entry);
        }
        self.deleted.push((now, entry));
        true
    }

    /// Reclaims the live spot instance `id` at `now`, as ECS takes a spot instance back
    /// (its guide "Detect and handle spot instance interruptions",
    /// <https://www.alibabacloud.com/help/en/ecs/user-guide/best-practices-for-preemptible-instances>:
    /// DescribeInstances shows `OperationLocks` with `LockReason: Recycling`, "interrupted
    /// and pending release"; the `LockReason` data type lists it as the pending-release
    /// lock of a spot instance): `Stopped`, locked, released [`State::reclaim_release`]
    /// later. Only the default interruption behaviour (release) is modelled: RunInstances
    /// here takes no `SpotInterruptionBehavior`. The SpotDuration protection hour is not
    /// enforced (a reclaim is an admin action). A second reclaim of a reclaimed instance
    /// answers as the first and keeps its release time.
    pub(crate) fn reclaim(&mut self, id: &str, now: Instant) -> Reclaim {
        let release = self.reclaim_release;
        let Some(instance) = self.instances.get_mut(id) else { return Reclaim::NotFound };
        if matches!(instance.phase, Phase::Stopping { .. }) {
            return Reclaim::NotFound;
        }
        if instance.spot_strategy == "NoSpot" {
            return Reclaim::NotSpot;
        }
        if !instance.recycling {
            instance.phase = Phase::Reclaimed { release_at: now + release };
            instance.recycling = true;
        }
        Reclaim::Reclaimed(format!(
            "Status {}, OperationLocks.LockReason[].LockReason {RECYCLING} (SpotStrategy {}, pending release)",
            instance.status(now),
            instance.spot_strategy,
        ))
    }

    /// Whether a live instance uses `ip` in `vswitch`.
    pub(crate) fn ip_in_use(&self, vswitch: &str, ip: &str) -> bool {
        self.instances.values().any(|i| i.vswitch == vswitch && i.private_ip == ip)
    }

    /// Allocates the next free private IP of a vSwitch.
    pub(crate) fn allocate_ip(&mut self, vswitch_id: &str) -> Option<String> {
        loop {
            let vswitch = self.vswitches.get_mut(vswitch_id)?;
            let ip = Ipv4Addr::from(u32::from(vswitch.network).wrapping_add(vswitch.next_host));
            vswitch.next_host += 1;
            if !vswitch.contains(ip) {
                return None;
            }
            let ip = ip.to_string();
            if !self.ip_in_use(vswitch_id, &ip) {
                return Some(ip);
            }
        }
    }
}

/// The shared store: cloud state (reset by the admin API) plus authentication state (kept).
#[derive(Debug)]
pub(crate) struct Store {
    state: Mutex<State>,
    nonces: Mutex<Nonces>,
    refused: Mutex<BTreeMap<String, u64>>,
}

impl Store {
    /// A store in its seeded state.
    pub(crate) fn new() -> Self {
        Self { state: Mutex::new(State::initial()), nonces: Mutex::default(), refused: Mutex::default() }
    }

    /// Locks the state and applies the transitions due at `now`.
    pub(crate) fn lock_at(&self, now: Instant) -> MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.advance(now);
        state
    }

    /// The nonce table.
    pub(crate) fn nonces(&self) -> MutexGuard<'_, Nonces> {
        self.nonces.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a request refused before the call gate, by error code.
    pub(crate) fn count_refused(&self, code: &str) {
        *self.refused.lock().unwrap_or_else(PoisonError::into_inner).entry(code.to_owned()).or_default() += 1;
    }

    /// Refused requests by error code.
    pub(crate) fn refused(&self) -> BTreeMap<String, u64> {
        self.refused.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Back to the seeds; refusal counters zero. Remembered nonces stay (they are
    /// replay protection of credentials, not cloud state).
    pub(crate) fn reset(&self) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = State::initial();
        self.refused.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }
}
