//! The fake's cloud state: instances, zone operations, `requestId`s and images,
//! behind one `std::sync::Mutex` that is never held across an `.await`.

pub(crate) mod lifecycle;
pub(crate) mod operations;
pub(crate) mod seed;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use fake_cloud_support::{IdempotencyTokens, InventoryInstance};
use sha2::{Digest, Sha256};

use crate::model::disk::Disk;
use crate::model::image::Image;
use crate::model::instance::Instance;
use crate::model::policy::Policy;
use lifecycle::Lifecycle;
use operations::OperationRecord;

/// How long a `requestId` is remembered (GCE documents "at least 60 minutes").
const REQUEST_ID_RETENTION: Duration = Duration::from_secs(2 * 60 * 60);

/// `(project, zone, name)` of a zonal resource.
pub(crate) type ZonalKey = (String, String, String);

/// One instance and its lifecycle.
#[derive(Debug, Clone)]
pub(crate) struct InstanceRecord {
    /// The resource as returned (its `status` is refreshed on every read).
    pub(crate) resource: Instance,
    /// Where the instance is in its life.
    pub(crate) lifecycle: Lifecycle,
    /// Reads do not see the instance before this instant (eventual consistency).
    pub(crate) visible_at: Instant,
}

impl InstanceRecord {
    /// The resource with its current status, or `None` once gone.
    pub(crate) fn render(&self, now: Instant) -> Option<Instance> {
        let status = self.lifecycle.status(now)?;
        let mut resource = self.resource.clone();
        resource.status = status.to_string();
        Some(resource)
    }
}

/// One image and its IAM policy.
#[derive(Debug, Clone)]
pub(crate) struct ImageRecord {
    /// The image resource.
    pub(crate) image: Image,
    /// The IAM policy (its `etag` is derived from `policy_version`).
    pub(crate) policy: Policy,
    /// Bumped on every policy change; the etag encodes it.
    pub(crate) policy_version: u64,
}

impl ImageRecord {
    /// The current policy etag (URL-safe base64, like GCE's `BwX...` etags).
    pub(crate) fn etag(&self) -> String {
        let mut bytes = Vec::with_capacity(16);
        bytes.extend_from_slice(&[0x07, 0x05]);
        bytes.extend_from_slice(&self.policy_version.to_be_bytes());
        bytes.extend_from_slice(&fingerprint_bytes(self.image.id.as_bytes())[..2]);
        base64::engine::general_purpose::URL_SAFE.encode(bytes)
    }

    /// The policy as returned by `getIamPolicy`, with its etag.
    pub(crate) fn policy_with_etag(&self) -> Policy {
        Policy { version: 1, etag: Some(self.etag()), bindings: self.policy.bindings.clone() }
    }
}

/// All mutable cloud state.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Existing instances (including those still stopping), by `(project, zone, name)`.
    pub(crate) instances: BTreeMap<ZonalKey, InstanceRecord>,
    /// Instances that no longer exist, for the admin inventory.
    pub(crate) deleted: Vec<InventoryInstance>,
    /// Persistent disks by `(project, zone, name)`: those the inserts made
    /// (`initializeParams`); an instance's `autoDelete` disks go with it.
    pub(crate) disks: BTreeMap<ZonalKey, Disk>,
    /// Zone operations by `(project, zone, name)`.
    pub(crate) operations: HashMap<ZonalKey, OperationRecord>,
    /// `(project, zone, requestId)` → the operation name (GCE does not compare
    /// the requests: a repeated `requestId` answers with the first operation).
    pub(crate) request_ids: IdempotencyTokens<ZonalKey, String>,
    /// Images by `(project, name)`.
    pub(crate) images: BTreeMap<(String, String), ImageRecord>,
    /// Principal assumed for requests without an `sa:`/`user:` bearer token.
    pub(crate) default_caller: Option<String>,
    /// How long `zoneOperations.wait` blocks at most (`POST /_admin/gce/wait`);
    /// `None` = the fake's default.
    pub(crate) wait_limit: Option<Duration>,
    /// Allocation counter for internal and external IPs.
    pub(crate) addresses: u32,
    /// Addresses handed out as alias IP ranges (from `10.64.0.0/10`).
    pub(crate) alias_offset: u32,
    /// Allocation counter for IPv6 ranges.
    pub(crate) ipv6_ranges: u32,
}

impl State {
    /// The initial state: no instances, seeded images.
    pub(crate) fn initial() -> Self {
        Self { images: seed::images(), request_ids: IdempotencyTokens::new(REQUEST_ID_RETENTION), ..Self::default() }
    }

    /// Moves instances that no longer exist at `now` to `deleted`.
    pub(crate) fn sweep(&mut self, now: Instant) {
        let gone: Vec<ZonalKey> = self
            .instances
            .iter()
            .filter(|(_, record)| record.lifecycle.status(now).is_none())
            .map(|(key, _)| key.clone())
            .collect();
        for key in gone {
            if let Some(record) = self.instances.remove(&key) {
                self.release_disks(&record.resource);
                self.deleted.push(inventory_entry(&record.resource, "DELETED", &self.disks, false));
            }
        }
    }

    /// Stores the disks `instance`'s insert made (moved out of its attached
    /// disks), replacing any stored disk of the same name.
    pub(crate) fn store_disks_of(&mut self, instance: &mut Instance) {
        for attached in &mut instance.disks {
            if let Some(disk) = attached.created.take()
                && let Some(key) = disk_key(&disk.self_link)
            {
                self.disks.insert(key, *disk);
            }
        }
    }

    /// An instance is gone: its `autoDelete` disks are deleted with it, the
    /// others only lose it from their `users`.
    fn release_disks(&mut self, instance: &Instance) {
        for attached in &instance.disks {
            let Some(key) = disk_key(&attached.source) else { continue };
            if attached.auto_delete {
                self.disks.remove(&key);
            } else if let Some(disk) = self.disks.get_mut(&key) {
                disk.users.retain(|u| *u != instance.self_link);
            }
        }
    }

    /// The next internal IP (`10.128.x.y`) and external NAT IP (`34.x.y.z`).
    pub(crate) fn allocate_addresses(&mut self) -> (String, String) {
        self.addresses += 1;
        let n = self.addresses + 1;
        let internal = format!("10.{}.{}.{}", 128 + ((n >> 16) & 0x3f), (n >> 8) & 0xff, n & 0xff);
        let external = format!("34.{}.{}.{}", 64 + ((n >> 16) & 0x3f), (n >> 8) & 0xff, n & 0xff);
        (internal, external)
    }

    /// The next free block of `2^(32-prefix)` addresses for an alias IP range
    /// `/prefix` (8..=32), from `10.64.0.0/10`, as `a.b.c.d/prefix`; `None`
    /// when the pool is exhausted (GCE: the subnetwork range is full).
    pub(crate) fn allocate_alias_range(&mut self, prefix: u8) -> Option<String> {
        const BASE: u32 = 0x0A40_0000; // 10.64.0.0
        const POOL: u64 = 1 << 22; // a /10
        let size = 1u64 << (32 - u32::from(prefix.clamp(8, 32)));
        let start = u64::from(self.alias_offset).div_ceil(size) * size;
        if start + size > POOL {
            return None;
        }
        self.alias_offset = u32::try_from(start + size).ok()?;
        let addr = std::net::Ipv4Addr::from(BASE + u32::try_from(start).ok()?);
        Some(format!("{addr}/{prefix}"))
    }

    /// The next `/96` IPv6 range of an interface: an internal one (from GCE's
    /// `fd20::/20` ULA space) and an external one (from `2600:1900::/28`).
    pub(crate) fn allocate_ipv6(&mut self) -> (String, String) {
        self.ipv6_ranges += 1;
        let n = self.ipv6_ranges;
        let (hi, lo) = (n >> 16, n & 0xffff);
        // The subnetwork's /64, then the interface's /96, uncompressed as GCE writes them.
        (format!("fd20:a0b:c0d:0:{hi:x}:{lo:x}:0:0"), format!("2600:1900:4010:0:{hi:x}:{lo:x}:0:0"))
    }
}

/// The shared store.
#[derive(Debug)]
pub(crate) struct Store {
    state: Mutex<State>,
}

impl Store {
    /// A store in its initial state.
    pub(crate) fn new() -> Self {
        Self { state: Mutex::new(State::initial()) }
    }

    /// Locks the state and sweeps it to `now`.
    pub(crate) fn lock_at(&self, now: Instant) -> MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.sweep(now);
        state
    }

    /// Back to the initial state.
    pub(crate) fn reset(&self) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = State::initial();
    }
}

/// The `(project, zone, name)` of a disk URL (`.../projects/P/zones/Z/disks/D`).
pub(crate) fn disk_key(url: &str) -> Option<ZonalKey> {
    match crate::urls::strip_base(url).split('/').collect::<Vec<_>>().as_slice() {
        ["projects", p, "zones", z, "disks", d] => Some(((*p).to_string(), (*z).to_string(), (*d).to_string())),
        _ => None,
    }
}

/// The inventory entry of an instance (`tags` = labels, plus metadata items
/// and `disks`: each attached disk as `disks.get` shows it, when stored).
pub(crate) fn inventory_entry(
    instance: &Instance,
    state: &str,
    disks: &BTreeMap<ZonalKey, Disk>,
    live: bool,
) -> InventoryInstance {
    let mut extra = serde_json::Map::new();
    let attached: Vec<serde_json::Value> = instance
        .disks
        .iter()
        .filter_map(|a| disks.get(&disk_key(&a.source)?))
        .filter_map(|d| serde_json::to_value(d).ok())
        .collect();
    extra.insert("disks".into(), serde_json::Value::Array(attached));
    let metadata: serde_json::Map<String, serde_json::Value> = instance
        .metadata
        .items
        .iter()
        .map(|item| (item.key.clone(), item.value.clone().map_or(serde_json::Value::Null, serde_json::Value::String)))
        .collect();
    // The cloud-neutral field of docs/fake-admin-api.md: what the VM boots with, base64.
    let user_data = ["user-data", "startup-script"]
        .iter()
        .find_map(|k| metadata.get(*k).and_then(serde_json::Value::as_str))
        .map(|v| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, v));
    extra.insert("user_data".into(), user_data.map_or(serde_json::Value::Null, serde_json::Value::String));
    extra.insert("metadata".into(), serde_json::Value::Object(metadata));
    // GCE's network tags (`tags.items`), what firewall rules and the Go provider's lookups match.
    extra.insert("network_tags".into(), serde_json::json!(instance.tags.items));
    extra.insert("zone".into(), instance.zone.rsplit('/').next().unwrap_or_default().into());
    extra.insert("machineType".into(), instance.machine_type.rsplit('/').next().unwrap_or_default().into());
    extra.insert("selfLink".into(), instance.self_link.clone().into());
    extra.insert(
        "networkInterfaces".into(),
        serde_json::to_value(&instance.network_interfaces).unwrap_or(serde_json::Value::Null),
    );
    InventoryInstance {
        id: instance.id.clone(),
        name: instance.name.clone(),
        state: state.to_string(),
        live,
        tags: instance.labels.clone(),
        extra,
    }
}

/// A new numeric resource id (19 digits, as GCE's are).
pub(crate) fn new_id() -> String {
    (1_000_000_000_000_000_000u64 + rand::random::<u64>() % 8_000_000_000_000_000_000).to_string()
}

/// The first 8 bytes of the SHA-256 of `data`.
pub(crate) fn fingerprint_bytes(data: &[u8]) -> [u8; 8] {
    let digest = Sha256::digest(data);
    let mut out = [0u8; 8];
    out.copy_from_slice(&digest[..8]);
    out
}

/// A GCE-style fingerprint (URL-safe base64 of 8 bytes, the encoding of the REST
/// API's `bytes` fields, which the Rust client decodes strictly) of some content.
pub(crate) fn fingerprint(data: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE.encode(fingerprint_bytes(data))
}

/// A fresh fingerprint for a resource whose labels or tags were just written
/// (GCE's changes on every write, so that a client holding the old one is refused).
pub(crate) fn new_fingerprint() -> String {
    fingerprint(&rand::random::<[u8; 16]>())
}

/// Whether the fingerprint a client `sent` is `current`: compared as the
/// bytes they encode (clients may re-encode them in the standard base64
/// alphabet, with or without padding). Missing or empty never matches.
pub(crate) fn same_fingerprint(sent: Option<&str>, current: &str) -> bool {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let decode =
        |s: &str| [URL_SAFE, URL_SAFE_NO_PAD, STANDARD, STANDARD_NO_PAD].iter().find_map(|e| e.decode(s.trim()).ok());
    match (sent.filter(|s| !s.is_empty()).and_then(decode), decode(current)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_use_the_url_safe_alphabet() {
        for i in 0..200u32 {
            let f = fingerprint(&i.to_be_bytes());
            assert!(!f.contains('+') && !f.contains('/'), "{f}");
            assert_eq!(f.len(), 12);
        }
    }

    #[test]
    fn fingerprints_compare_as_bytes_whatever_the_alphabet() {
        let f = fingerprint(b"x");
        let bytes = base64::engine::general_purpose::URL_SAFE.decode(&f).unwrap_or_default();
        let standard = base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes);
        assert!(same_fingerprint(Some(&f), &f));
        assert!(same_fingerprint(Some(&standard), &f));
        assert!(!same_fingerprint(Some(&fingerprint(b"y")), &f));
        assert!(!same_fingerprint(None, &f) && !same_fingerprint(Some(""), &f));
    }
}
