//! The fake's resources: instances, network interfaces, volumes, images, snapshots.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime};

/// How long terminated instances stay visible to DescribeInstances (EC2: about an hour).
pub(crate) const TERMINATED_RETENTION: Duration = Duration::from_secs(3600);

/// An instance state with its EC2 code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InstanceState {
    Pending,
    Running,
    ShuttingDown,
    Terminated,
    /// Stopped by EC2 itself (a Spot interruption whose behaviour is stop or
    /// hibernate); the fake has no StopInstances.
    Stopped,
}

impl InstanceState {
    /// The EC2 state code (`instanceState.code`).
    pub(crate) fn code(self) -> u8 {
        match self {
            Self::Pending => 0,
            Self::Running => 16,
            Self::ShuttingDown => 32,
            Self::Terminated => 48,
            Self::Stopped => 80,
        }
    }

    /// The EC2 state name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::ShuttingDown => "shutting-down",
            Self::Terminated => "terminated",
            Self::Stopped => "stopped",
        }
    }
}

/// `SpotMarketOptions.InstanceInterruptionBehavior`: what EC2 does to a Spot
/// instance it interrupts (EC2 User Guide, "Behavior of Spot Instance
/// interruptions": terminate is the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interruption {
    Terminate,
    Stop,
    Hibernate,
}

impl Interruption {
    /// From the API value (`terminate`, `stop`, `hibernate`); `None` for anything else.
    pub(crate) fn parse(value: &str) -> Option<Self> {
        match value {
            "terminate" => Some(Self::Terminate),
            "stop" => Some(Self::Stop),
            "hibernate" => Some(Self::Hibernate),
            _ => None,
        }
    }

    /// The API value.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Terminate => "terminate",
            Self::Stop => "stop",
            Self::Hibernate => "hibernate",
        }
    }
}

/// The market an instance was launched in with `InstanceMarketOptions`
/// (absent on an instance: on-demand).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Market {
    /// `instanceLifecycle`: the RunInstances market type (`spot`,
    /// `capacity-block`, `interruptible-capacity-reservation`).
    pub(crate) lifecycle: String,
    /// `spotInstanceRequestId`: the Spot request EC2 makes for a Spot launch (Spot only).
    pub(crate) spot_request_id: Option<String>,
    /// What a Spot interruption does to it.
    pub(crate) interruption: Interruption,
}

impl Market {
    /// Whether EC2 may interrupt it as a Spot instance.
    pub(crate) fn is_spot(&self) -> bool {
        self.lifecycle == "spot"
    }
}

/// Why EC2 itself stopped or terminated an instance: its `stateReason` and its
/// `reason` (StateTransitionReason) as DescribeInstances shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EndReason {
    /// `stateReason.code` (EC2 API reference, StateReason).
    pub(crate) code: &'static str,
    /// `stateReason.message`.
    pub(crate) message: &'static str,
    /// `reason`: `Service initiated (YYYY-MM-DD HH:MM:SS GMT)`.
    pub(crate) transition: String,
}

impl EndReason {
    /// A Spot instance EC2 terminated: `Server.SpotInstanceTermination` ("The
    /// instance was terminated because the number of Spot requests with a
    /// maximum price equal to or higher than the Spot price exceeded available
    /// capacity or because of an increase in the Spot price").
    pub(crate) fn spot_termination(at: SystemTime) -> Self {
        Self {
            code: "Server.SpotInstanceTermination",
            message: "Server.SpotInstanceTermination: Spot instance termination",
            transition: service_initiated(at),
        }
    }

    /// A Spot instance EC2 stopped (or hibernated, which ends stopped too; the
    /// StateReason reference lists no other Spot code): `Server.SpotInstanceShutdown`
    /// ("The instance was stopped because the number of Spot requests ...").
    pub(crate) fn spot_shutdown(at: SystemTime) -> Self {
        Self {
            code: "Server.SpotInstanceShutdown",
            message: "Server.SpotInstanceShutdown: Spot instance shutdown",
            transition: service_initiated(at),
        }
    }
}

/// EC2's StateTransitionReason of a change it made itself.
fn service_initiated(at: SystemTime) -> String {
    format!("Service initiated ({})", crate::clock::gmt(at))
}

/// Ordered tags (EC2 tag keys are unique per resource).
pub(crate) type Tags = BTreeMap<String, String>;

/// A network interface created with (and attached to) an instance.
#[derive(Debug, Clone)]
pub(crate) struct NetworkInterface {
    pub(crate) id: String,
    pub(crate) attachment_id: String,
    pub(crate) description: String,
    pub(crate) subnet_id: String,
    pub(crate) vpc_id: String,
    pub(crate) availability_zone: String,
    pub(crate) private_ip: String,
    pub(crate) private_dns: String,
    pub(crate) mac: String,
    pub(crate) source_dest_check: bool,
    pub(crate) interface_type: String,
    pub(crate) ipv6_addresses: Vec<String>,
    pub(crate) ipv6_prefixes: Vec<String>,
    pub(crate) device_index: i64,
    pub(crate) network_card_index: i64,
    pub(crate) delete_on_termination: bool,
    pub(crate) security_groups: Vec<String>,
    pub(crate) tags: Tags,
    /// Counter for addresses handed out inside this interface's IPv6 range.
    pub(crate) ipv6_next: u32,
    /// The /64 this interface's IPv6 addresses and /80 prefixes come from (without `::/64`).
    pub(crate) ipv6_base: String,
}

/// An EBS volume attached at launch.
#[derive(Debug, Clone)]
pub(crate) struct Volume {
    pub(crate) id: String,
    pub(crate) device_name: String,
    pub(crate) size_gib: i64,
    pub(crate) volume_type: String,
    pub(crate) delete_on_termination: bool,
    pub(crate) encrypted: bool,
    pub(crate) iops: Option<i64>,
    pub(crate) throughput: Option<i64>,
    pub(crate) kms_key_id: Option<String>,
    pub(crate) snapshot_id: Option<String>,
    pub(crate) tags: Tags,
    /// The most recent ModifyVolume of it (`None`: never modified).
    pub(crate) modification: Option<VolumeModification>,
}

/// What an EBS volume performs like: the attributes ModifyVolume changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VolumePerformance {
    pub(crate) size_gib: i64,
    pub(crate) volume_type: String,
    pub(crate) iops: Option<i64>,
    pub(crate) throughput: Option<i64>,
}

/// One ModifyVolume request and its progress (EC2 API reference,
/// VolumeModification, <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_VolumeModification.html>;
/// EBS User Guide, "Monitor the progress of Amazon EBS volume modifications",
/// <https://docs.aws.amazon.com/ebs/latest/userguide/monitoring-volume-modifications.html>):
/// `modifying`, then `optimizing` (the new size and performance take effect:
/// DescribeVolumes shows the target from here on), then `completed`. Each of
/// the first two states lasts the fake's `boot_ms`.
#[derive(Debug, Clone)]
pub(crate) struct VolumeModification {
    pub(crate) started: Instant,
    pub(crate) started_wall: SystemTime,
    /// How long each of `modifying` and `optimizing` lasts.
    pub(crate) phase: Duration,
    pub(crate) original: VolumePerformance,
    pub(crate) target: VolumePerformance,
}

impl VolumeModification {
    /// `modifying`, `optimizing` or `completed` at `now`.
    pub(crate) fn state(&self, now: Instant) -> &'static str {
        if now < self.started + self.phase {
            "modifying"
        } else if now < self.started + self.phase * 2 {
            "optimizing"
        } else {
            "completed"
        }
    }

    /// The progress in percent EC2 reports (0 while modifying).
    pub(crate) fn progress(&self, now: Instant) -> u64 {
        match self.state(now) {
            "modifying" => 0,
            "optimizing" => 50,
            _ => 100,
        }
    }
}

/// The IOPS EC2 gives a volume of `volume_type` and `size_gib` when none is
/// asked for (EBS User Guide, "Amazon EBS General Purpose SSD volumes"): gp3
/// 3000; gp2 its baseline of 3 IOPS per GiB, at least 100 and at most 16000;
/// other types none.
pub(crate) fn default_iops(volume_type: &str, size_gib: i64) -> Option<i64> {
    match volume_type {
        "gp3" => Some(3_000),
        "gp2" => Some((size_gib * 3).clamp(100, 16_000)),
        _ => None,
    }
}

/// The throughput in MiB/s EC2 gives a volume of `volume_type` when none is
/// asked for: gp3 125; other types show none.
pub(crate) fn default_throughput(volume_type: &str) -> Option<i64> {
    (volume_type == "gp3").then_some(125)
}

impl Volume {
    /// Fills in what EC2 shows for IOPS and throughput the launch did not set
    /// ([`default_iops`], [`default_throughput`]); a gp2 volume always shows
    /// its baseline.
    pub(crate) fn with_defaults(mut self) -> Self {
        if self.volume_type == "gp2" {
            self.iops = default_iops("gp2", self.size_gib);
        }
        self.iops = self.iops.or_else(|| default_iops(&self.volume_type, self.size_gib));
        self.throughput = self.throughput.or_else(|| default_throughput(&self.volume_type));
        self
    }

    /// The volume's own attributes: what it was launched with, or the target
    /// of its last modification (ModifyVolume sets them).
    pub(crate) fn own_performance(&self) -> VolumePerformance {
        VolumePerformance {
            size_gib: self.size_gib,
            volume_type: self.volume_type.clone(),
            iops: self.iops,
            throughput: self.throughput,
        }
    }

    /// What DescribeVolumes shows at `now`: the original attributes while a
    /// modification is `modifying`, its target once it is optimizing.
    pub(crate) fn performance(&self, now: Instant) -> VolumePerformance {
        match &self.modification {
            Some(m) if m.state(now) == "modifying" => m.original.clone(),
            _ => self.own_performance(),
        }
    }
}

/// An instance's metadata service options (EC2 API reference,
/// InstanceMetadataOptionsResponse,
/// <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceMetadataOptionsResponse.html>):
/// what RunInstances' `MetadataOptions` set (EC2's defaults for what it
/// omits: tokens `optional`, hop limit 1, endpoint `enabled`, IPv6 endpoint
/// and tags `disabled`; the AMI's `ImdsSupport` is not modelled) and
/// ModifyInstanceMetadataOptions changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MetadataOptions {
    /// `optional` or `required`.
    pub(crate) http_tokens: String,
    /// 1..=64.
    pub(crate) http_put_response_hop_limit: i64,
    /// `enabled` or `disabled`.
    pub(crate) http_endpoint: String,
    /// `enabled` or `disabled`.
    pub(crate) http_protocol_ipv6: String,
    /// `enabled` or `disabled`.
    pub(crate) instance_metadata_tags: String,
    /// The last ModifyInstanceMetadataOptions and how long it stays
    /// `pending` (the fake's `boot_ms`); `None`: never modified.
    pub(crate) modified: Option<(Instant, Duration)>,
}

impl Default for MetadataOptions {
    fn default() -> Self {
        Self {
            http_tokens: "optional".to_owned(),
            http_put_response_hop_limit: 1,
            http_endpoint: "enabled".to_owned(),
            http_protocol_ipv6: "disabled".to_owned(),
            instance_metadata_tags: "disabled".to_owned(),
            modified: None,
        }
    }
}

impl MetadataOptions {
    /// `pending` while a modification is being applied, then `applied`:
    /// DescribeInstances shows the new values in both states.
    pub(crate) fn state(&self, now: Instant) -> &'static str {
        match self.modified {
            Some((at, pending)) if now < at + pending => "pending",
            _ => "applied",
        }
    }
}

/// One instance and everything launched with it.
#[derive(Debug, Clone)]
pub(crate) struct Instance {
    pub(crate) id: String,
    pub(crate) reservation_id: String,
    pub(crate) owner: String,
    pub(crate) region: String,
    pub(crate) image_id: String,
    pub(crate) instance_type: String,
    pub(crate) key_name: Option<String>,
    pub(crate) availability_zone: String,
    pub(crate) security_groups: Vec<String>,
    pub(crate) tags: Tags,
    pub(crate) user_data: Option<String>,
    pub(crate) client_token: Option<String>,
    pub(crate) iam_instance_profile: Option<String>,
    pub(crate) metadata: MetadataOptions,
    pub(crate) ami_launch_index: usize,
    pub(crate) root_device_name: String,
    pub(crate) launch_time: SystemTime,
    pub(crate) created: Instant,
    pub(crate) boot: Duration,
    pub(crate) visible_at: Instant,
    pub(crate) terminate_requested: Option<(Instant, Duration)>,
    /// When EC2 stopped it (a Spot interruption with behaviour stop or hibernate).
    pub(crate) stopped_at: Option<Instant>,
    /// Why EC2 itself stopped or terminated it (`None`: running, or ended by a user).
    pub(crate) end_reason: Option<EndReason>,
    /// Launched with `InstanceMarketOptions` (`None`: on-demand).
    pub(crate) market: Option<Market>,
    pub(crate) interfaces: Vec<NetworkInterface>,
    pub(crate) volumes: Vec<Volume>,
}

impl Instance {
    /// The state at `now`, derived from the creation/termination times and their delays.
    pub(crate) fn state(&self, now: Instant) -> InstanceState {
        match self.terminate_requested {
            Some((at, stop)) if now >= at + stop => InstanceState::Terminated,
            Some(_) => InstanceState::ShuttingDown,
            None if self.stopped_at.is_some() => InstanceState::Stopped,
            None if now >= self.created + self.boot => InstanceState::Running,
            None => InstanceState::Pending,
        }
    }

    /// Whether `account` can see it at `now` (owner, past the consistency window, not long gone).
    pub(crate) fn visible_to(&self, account: &str, now: Instant) -> bool {
        let expired = matches!(self.terminate_requested, Some((at, stop)) if now >= at + stop + TERMINATED_RETENTION);
        self.owner == account && now >= self.visible_at && !expired
    }

    /// Ended by a user (TerminateInstances, or the admin API's terminate):
    /// what EC2 itself recorded about an earlier stop no longer applies.
    pub(crate) fn terminate_by_user(&mut self, at: Instant, stop: Duration) {
        if self.terminate_requested.is_none() {
            self.terminate_requested = Some((at, stop));
            self.end_reason = None;
        }
    }

    /// The primary interface (device index 0), if any.
    pub(crate) fn primary_interface(&self) -> Option<&NetworkInterface> {
        self.interfaces.iter().find(|eni| eni.device_index == 0).or(self.interfaces.first())
    }

    /// The `Name` tag.
    pub(crate) fn name(&self) -> &str {
        self.tags.get("Name").map_or("", String::as_str)
    }
}

/// A machine image.
#[derive(Debug, Clone)]
pub(crate) struct Image {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) owner: String,
    pub(crate) owner_alias: Option<String>,
    pub(crate) public: bool,
    pub(crate) launch_users: BTreeSet<String>,
    pub(crate) architecture: String,
    pub(crate) root_device_name: String,
    pub(crate) snapshot_id: String,
    pub(crate) volume_size: i64,
    pub(crate) creation_date: String,
    pub(crate) tags: Tags,
}

impl Image {
    /// Whether `account` may see and launch it.
    pub(crate) fn launchable_by(&self, account: &str) -> bool {
        self.public || self.owner == account || self.launch_users.contains(account)
    }
}

/// An EBS snapshot (backing an image).
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub(crate) id: String,
    pub(crate) owner: String,
    pub(crate) volume_size: i64,
    pub(crate) public: bool,
    pub(crate) create_volume_users: BTreeSet<String>,
    pub(crate) tags: Tags,
}

/// The state of a Spot Instance request (EC2 API reference, SpotInstanceRequest
/// `state`; EC2 User Guide, "State changes for a Spot request",
/// <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instances-request-status-lifecycle.html>).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpotRequestState {
    /// Waiting for an instance: a persistent request whose instance ended.
    Open,
    /// Fulfilled: its instance is pending or running.
    Active,
    /// Its instance was stopped by EC2 (a persistent request).
    Disabled,
    /// Ended by EC2 (a one-time request whose instance ended).
    Closed,
    /// Cancelled by the user: EC2 launches no instance for it any more.
    Cancelled,
}

impl SpotRequestState {
    /// The API value.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Active => "active",
            Self::Disabled => "disabled",
            Self::Closed => "closed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// A Spot Instance request, as RunInstances with Spot market options makes
/// one per instance (EC2 User Guide, "Spot Instance requests",
/// <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-requests.html>).
#[derive(Debug, Clone)]
pub(crate) struct SpotRequest {
    /// `sir-` and 8 hex digits.
    pub(crate) id: String,
    pub(crate) owner: String,
    /// `one-time` or `persistent`.
    pub(crate) request_type: String,
    pub(crate) interruption: Interruption,
    /// `spotPrice`: the maximum price asked for (`None`: the On-Demand price).
    pub(crate) max_price: Option<String>,
    pub(crate) created_wall: SystemTime,
    pub(crate) state: SpotRequestState,
    /// `status.code` (EC2 User Guide, "Spot request status codes").
    pub(crate) status_code: &'static str,
    pub(crate) status_updated: SystemTime,
    /// Its current (or last) instance.
    pub(crate) instance_id: String,
    /// When EC2 launches the next instance of this open persistent request,
    /// and how long that instance stays pending.
    pub(crate) relaunch: Option<(Instant, Duration)>,
    /// The instance as first launched: what a relaunch is made from.
    pub(crate) template: Box<Instance>,
}

impl SpotRequest {
    /// Whether it is a `persistent` request.
    pub(crate) fn is_persistent(&self) -> bool {
        self.request_type == "persistent"
    }

    /// Moves it to `state` with the status `code`.
    pub(crate) fn set(&mut self, state: SpotRequestState, code: &'static str) {
        self.state = state;
        self.status_code = code;
        self.status_updated = SystemTime::now();
    }
}
