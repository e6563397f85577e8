//! The fake's state behind one mutex, its seed data, and its admin hooks.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use axum::response::Response;
use fake_cloud_support::{
    CloudHooks, FaultKind, IdempotencyTokens, Inventory, InventoryInstance, OpClass, PlantError, PlantRequest, Planted,
    Reclaim,
};
use serde_json::json;

use crate::caller::{AMAZON_ACCOUNT, OWNER_ACCOUNT};
use crate::errors::{Ec2Error, StsError};
use crate::model::{EndReason, Image, Instance, InstanceState, Interruption, Snapshot, SpotRequest};

/// The public Amazon Linux image every account can launch.
pub const PUBLIC_IMAGE: &str = "ami-0123456789abcdef0";
/// A private image owned by [`OWNER_ACCOUNT`], shared with nobody initially.
pub const PRIVATE_IMAGE: &str = "ami-0000000000000a11d";
/// The snapshot behind [`PRIVATE_IMAGE`].
pub const PRIVATE_SNAPSHOT: &str = "snap-0000000000000a11d";
/// The default VPC every subnet belongs to.
pub(crate) const DEFAULT_VPC: &str = "vpc-0fa4e0000000000d1";
/// The subnet used when a launch names none.
pub(crate) const DEFAULT_SUBNET: &str = "subnet-0de0fa0000000000a";

/// Everything the fake knows.
#[derive(Debug, Default)]
pub(crate) struct World {
    pub(crate) instances: Vec<Instance>,
    /// The Spot Instance requests of Spot launches (one per instance).
    pub(crate) spot_requests: Vec<SpotRequest>,
    pub(crate) images: Vec<Image>,
    pub(crate) snapshots: Vec<Snapshot>,
    /// RunInstances client tokens by (account, token): the instance ids launched.
    pub(crate) client_tokens: IdempotencyTokens<(String, String), Vec<String>>,
    pub(crate) subnet_hosts: HashMap<String, u32>,
    pub(crate) ipv6_prefixes_handed_out: u32,
}

fn image(id: &str, name: &str, owner: &str, alias: Option<&str>, public: bool, snapshot: &str, size: i64) -> Image {
    Image {
        id: id.to_owned(),
        name: name.to_owned(),
        description: format!("{name} (fake)"),
        owner: owner.to_owned(),
        owner_alias: alias.map(str::to_owned),
        public,
        launch_users: BTreeSet::new(),
        architecture: "x86_64".to_owned(),
        root_device_name: "/dev/xvda".to_owned(),
        snapshot_id: snapshot.to_owned(),
        volume_size: size,
        creation_date: "2024-01-15T10:00:00.000Z".to_owned(),
        tags: Default::default(),
    }
}

fn snapshot(id: &str, owner: &str, public: bool, size: i64) -> Snapshot {
    Snapshot {
        id: id.to_owned(),
        owner: owner.to_owned(),
        volume_size: size,
        public,
        create_volume_users: BTreeSet::new(),
        tags: Default::default(),
    }
}

impl World {
    /// The initial state: no instances, the seeded images and snapshots.
    pub(crate) fn seeded() -> Self {
        Self {
            images: vec![
                image(
                    PUBLIC_IMAGE,
                    "amzn2-ami-hvm-2.0-x86_64-gp2",
                    AMAZON_ACCOUNT,
                    Some("amazon"),
                    true,
                    "snap-0123456789abcdef0",
                    8,
                ),
                image(PRIVATE_IMAGE, "gardenlinux-private", OWNER_ACCOUNT, None, false, PRIVATE_SNAPSHOT, 20),
                image(
                    "ami-0f1e2d3c4b5a69788",
                    "gardenlinux-1592.1-amd64",
                    AMAZON_ACCOUNT,
                    Some("amazon"),
                    true,
                    "snap-0f1e2d3c4b5a69788",
                    10,
                ),
            ],
            snapshots: vec![
                snapshot("snap-0123456789abcdef0", AMAZON_ACCOUNT, true, 8),
                snapshot(PRIVATE_SNAPSHOT, OWNER_ACCOUNT, false, 20),
                snapshot("snap-0f1e2d3c4b5a69788", AMAZON_ACCOUNT, true, 10),
            ],
            ..Self::default()
        }
    }
}

/// The shared state plus the admin hooks over it.
#[derive(Debug)]
pub(crate) struct Store {
    world: Mutex<World>,
    /// STS role sessions (temporary keys handed out for web identity tokens).
    pub(crate) sessions: crate::sts::Sessions,
}

impl Store {
    /// A store in its initial state.
    pub(crate) fn new() -> Self {
        Self { world: Mutex::new(World::seeded()), sessions: crate::sts::Sessions::default() }
    }

    /// Locks the world (never held across an `.await`).
    pub(crate) fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The EC2 operation → class table of `docs/fake-admin-api.md`.
pub(crate) fn operation_class(operation: &str) -> Option<OpClass> {
    Some(match operation {
        "RunInstances" => OpClass::Create,
        "DescribeInstances"
        | "DescribeNetworkInterfaces"
        | "DescribeImages"
        | "DescribeImageAttribute"
        | "DescribeSnapshotAttribute"
        | "DescribeVolumes"
        | "DescribeVolumesModifications"
        | "DescribeSpotInstanceRequests" => OpClass::Read,
        "ModifyNetworkInterfaceAttribute"
        | "AssignIpv6Addresses"
        | "ModifyImageAttribute"
        | "ModifySnapshotAttribute"
        | "CreateTags"
        | "DeleteTags"
        | "ModifyVolume"
        | "ModifyInstanceMetadataOptions" => OpClass::Write,
        "TerminateInstances" | "CancelSpotInstanceRequests" => OpClass::Delete,
        _ => return None,
    })
}

fn instance_inventory(instance: &Instance, now: Instant) -> InventoryInstance {
    let state = instance.state(now);
    let interfaces: Vec<_> = instance
        .interfaces
        .iter()
        .map(|eni| {
            json!({
                "id": eni.id,
                "device_index": eni.device_index,
                "network_card_index": eni.network_card_index,
                "subnet_id": eni.subnet_id,
                "private_ip": eni.private_ip,
                "private_dns_name": eni.private_dns,
                "source_dest_check": eni.source_dest_check,
                "interface_type": eni.interface_type,
                "ipv6_addresses": eni.ipv6_addresses,
                "ipv6_prefixes": eni.ipv6_prefixes,
                "security_groups": eni.security_groups,
                "tags": eni.tags,
            })
        })
        .collect();
    let volumes: Vec<_> = instance
        .volumes
        .iter()
        .map(|v| {
            let shown = v.performance(now);
            json!({
                "id": v.id, "device_name": v.device_name, "size_gib": shown.size_gib, "volume_type": shown.volume_type,
                "delete_on_termination": v.delete_on_termination, "encrypted": v.encrypted, "iops": shown.iops,
                "throughput": shown.throughput, "kms_key_id": v.kms_key_id, "snapshot_id": v.snapshot_id,
                "tags": v.tags, "modification_state": v.modification.as_ref().map(|m| m.state(now)),
            })
        })
        .collect();
    let extra = json!({
        "owner_account": instance.owner,
        "region": instance.region,
        "availability_zone": instance.availability_zone,
        "image_id": instance.image_id,
        "instance_type": instance.instance_type,
        "client_token": instance.client_token,
        "user_data_base64": instance.user_data,
        // The cloud-neutral field of docs/fake-admin-api.md: what the VM boots with, base64.
        "user_data": instance.user_data,
        "iam_instance_profile": instance.iam_instance_profile,
        "key_name": instance.key_name,
        "security_groups": instance.security_groups,
        "metadata_http_tokens": instance.metadata.http_tokens,
        "metadata_options": {
            "state": instance.metadata.state(now),
            "http_tokens": instance.metadata.http_tokens,
            "http_put_response_hop_limit": instance.metadata.http_put_response_hop_limit,
            "http_endpoint": instance.metadata.http_endpoint,
            "http_protocol_ipv6": instance.metadata.http_protocol_ipv6,
            "instance_metadata_tags": instance.metadata.instance_metadata_tags,
        },
        "instance_lifecycle": instance.market.as_ref().map(|m| &m.lifecycle),
        "spot_instance_request_id": instance.market.as_ref().and_then(|m| m.spot_request_id.as_ref()),
        "instance_interruption_behavior": instance.market.as_ref().filter(|m| m.is_spot()).map(|m| m.interruption.name()),
        "state_reason_code": instance.end_reason.as_ref().map(|r| r.code),
        "network_interfaces": interfaces,
        "block_devices": volumes,
    });
    InventoryInstance {
        id: instance.id.clone(),
        name: instance.name().to_owned(),
        state: state.name().to_owned(),
        live: instance.terminate_requested.is_none() && state != InstanceState::Terminated,
        tags: instance.tags.clone(),
        extra: match extra {
            serde_json::Value::Object(map) => map,
            _ => serde_json::Map::new(),
        },
    }
}

impl CloudHooks for Store {
    fn operation_class(&self, operation: &str) -> Option<OpClass> {
        operation_class(operation)
    }

    fn fault_response(&self, kind: FaultKind, operation: &str) -> Response {
        let request_id = uuid::Uuid::new_v4().to_string();
        if crate::sts::is_sts_action(operation) {
            StsError::from_fault(kind).to_response(&request_id)
        } else {
            Ec2Error::from_fault(kind).to_response(&request_id)
        }
    }

    fn inventory(&self) -> Inventory {
        let now = Instant::now();
        let mut world = self.world();
        crate::actions::spot::settle(&mut world, now);
        let images = world
            .images
            .iter()
            .map(|image| {
                let snapshot = world.snapshots.iter().find(|s| s.id == image.snapshot_id);
                json!({
                    "id": image.id,
                    "name": image.name,
                    "owner": image.owner,
                    "public": image.public,
                    "launch_permissions": image.launch_users,
                    "snapshot_id": image.snapshot_id,
                    "snapshot_size_gib": snapshot.map(|s| s.volume_size),
                    "create_volume_permissions": snapshot.map(|s| s.create_volume_users.clone()).unwrap_or_default(),
                    "tags": image.tags,
                })
            })
            .collect();
        Inventory {
            instances: world.instances.iter().map(|i| instance_inventory(i, now)).collect(),
            images,
            dependents: Vec::new(),
        }
    }

    fn reset(&self) {
        *self.world() = World::seeded();
        self.sessions.reset();
    }

    /// Terminated at once (no shutting-down), as a launch EC2 aborts (a bad
    /// KMS key) or a spot reclaim at launch: it stays listed as `terminated`,
    /// its ClientToken still taken, until the retention ends.
    fn terminate(&self, id: &str) -> bool {
        let now = Instant::now();
        let mut world = self.world();
        match world.instances.iter_mut().find(|i| i.id == id && i.terminate_requested.is_none()) {
            Some(instance) => {
                instance.terminate_by_user(now, Duration::ZERO);
                true
            }
            None => false,
        }
    }

    /// A Spot interruption as EC2 makes it (EC2 User Guide, "Behavior of Spot
    /// Instance interruptions", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/interruption-behavior.html;
    /// EC2 API reference, StateReason,
    /// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_StateReason.html), at once
    /// (no two-minute notice, no shutting-down/stopping):
    /// - behaviour `terminate` (the default): `terminated` (48), `stateReason`
    ///   `Server.SpotInstanceTermination`, `reason` `Service initiated (<time> GMT)`;
    ///   its interfaces and volumes go or stay by their `DeleteOnTermination`,
    ///   as on any termination; it stays listed, its ClientToken taken, until
    ///   the retention ends;
    /// - `stop` or `hibernate`: `stopped` (80), `stateReason`
    ///   `Server.SpotInstanceShutdown`; interfaces, private address and
    ///   volumes stay (only EC2 restarts it, when capacity returns, which the
    ///   fake never does).
    ///
    /// Its Spot request is `closed` (one-time, terminated) or `disabled`
    /// (persistent, stopped): [`crate::actions::spot`].
    ///
    /// Spot-ness is what RunInstances recorded (`instanceLifecycle` `spot`);
    /// any other instance (on-demand, capacity-block, interruptible capacity
    /// reservation) is [`Reclaim::NotSpot`]. Only a pending or running
    /// instance can be reclaimed.
    fn reclaim(&self, id: &str) -> Reclaim {
        let now = Instant::now();
        let mut world = self.world();
        let Some(instance) = world
            .instances
            .iter_mut()
            .find(|i| i.id == id && matches!(i.state(now), InstanceState::Pending | InstanceState::Running))
        else {
            return Reclaim::NotFound;
        };
        let Some(interruption) = instance.market.as_ref().filter(|m| m.is_spot()).map(|m| m.interruption) else {
            return Reclaim::NotSpot;
        };
        let at = SystemTime::now();
        let reason = match interruption {
            Interruption::Terminate => {
                instance.terminate_requested = Some((now, Duration::ZERO));
                EndReason::spot_termination(at)
            }
            Interruption::Stop | Interruption::Hibernate => {
                instance.stopped_at = Some(now);
                EndReason::spot_shutdown(at)
            }
        };
        let state = instance.state(now);
        let shown = format!(
            "{} ({}), stateReason {}, reason {}",
            state.name(),
            state.code(),
            reason.message,
            reason.transition
        );
        instance.end_reason = Some(reason);
        crate::actions::spot::interrupted(&mut world, id, interruption);
        Reclaim::Reclaimed(shown)
    }

    /// A running instance launched out of band (`crate::plant`).
    fn plant(&self, request: &PlantRequest) -> Result<Planted, PlantError> {
        crate::plant::plant(&mut self.world(), request)
    }
}
