//! Nova's resources: flavors (static) and servers with their lifecycle.

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime};

/// A flavor: `(id, name, vcpus, ram MB, disk GB)`.
pub(crate) type Flavor = (&'static str, &'static str, u32, u32, u32);

/// The seeded flavors.
pub(crate) const FLAVORS: [Flavor; 4] = [
    ("2", "m1.small", 1, 2048, 20),
    ("3", "m1.medium", 2, 4096, 40),
    ("4", "m1.large", 4, 8192, 80),
    ("5", "m1.xlarge", 8, 16384, 160),
];

/// A flavor by id.
pub(crate) fn flavor(id: &str) -> Option<Flavor> {
    FLAVORS.iter().copied().find(|f| f.0 == id)
}

/// The fault Nova records when its scheduler finds no compute host for a
/// server (`nova.exception.NoValidHost`, `msg_fmt` "No valid host was found.
/// %(reason)s", with the filter scheduler's reason; an instance fault of code
/// 500, whose `details` Nova shows to administrators only).
pub(crate) const NO_VALID_HOST: &str = "No valid host was found. There are not enough hosts available.";

/// What Nova's scheduler decides for a server it accepted (`POST /servers`
/// answers 202 before the scheduler runs, so neither outcome is in that answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheduling {
    /// A compute host takes it: BUILD (`scheduling`, `spawning`), then ACTIVE.
    Placed,
    /// No host can take it (flavor or feature not offered in the zone, no
    /// capacity, an unsatisfiable server group): BUILD (`scheduling`), then
    /// ERROR with fault [`NO_VALID_HOST`]. Nothing was set up on a host: no
    /// port is bound or made for it and no boot volume is made (Nova does
    /// both on the compute host, after scheduling).
    NoValidHost,
}

/// A server fault (`fault` of a server in ERROR).
#[derive(Debug, Clone)]
pub(crate) struct ServerFault {
    /// HTTP-ish code (500).
    pub(crate) code: u16,
    /// The message.
    pub(crate) message: String,
    /// When it happened.
    pub(crate) created: SystemTime,
}

/// Where a server is in its life.
#[derive(Debug, Clone)]
pub(crate) enum ServerPhase {
    /// `BUILD`: task `scheduling` until `spawning_at`, then `spawning` until `until`;
    /// then ACTIVE, or ERROR with `fail`.
    Building {
        /// When the task state turns `spawning`.
        spawning_at: Instant,
        /// When the build ends.
        until: Instant,
        /// The fault to end in, for servers hit by `/_admin/openstack/server-failures`.
        fail: Option<(u16, String)>,
    },
    /// `BUILD` with task `scheduling` until `until`, then [`ServerPhase::Buried`]
    /// (a build request no host was found for).
    Unplaceable {
        /// When the scheduler gives up.
        until: Instant,
    },
    /// `ERROR` with the fault [`NO_VALID_HOST`], on no host: Nova's conductor
    /// buries the instance in cell0. Its `DELETE` is Nova's local delete (the
    /// compute API deletes an instance without a host itself, at once: no task
    /// `deleting`, 404 right after the 204).
    Buried,
    /// `ACTIVE`.
    Active,
    /// `ERROR` (see [`Server::fault`]).
    Error,
    /// Being deleted (task `deleting`) until `until`, showing the status it had.
    Deleting {
        /// When it is gone.
        until: Instant,
        /// The status it had when the delete came.
        was: &'static str,
    },
}

/// A volume attached through a block device mapping.
#[derive(Debug, Clone)]
pub(crate) struct AttachedVolume {
    /// Volume id.
    pub(crate) id: String,
    /// Deleted with the server.
    pub(crate) delete_on_termination: bool,
}

/// One Nova server.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    /// Creation order (list order key).
    pub(crate) seq: u64,
    /// UUID.
    pub(crate) id: String,
    /// Owning project.
    pub(crate) project_id: String,
    /// Creating user.
    pub(crate) user_id: String,
    /// Name.
    pub(crate) name: String,
    /// `created`.
    pub(crate) created: SystemTime,
    /// `updated`.
    pub(crate) updated: SystemTime,
    /// Reads do not see it before this instant (eventual consistency).
    pub(crate) visible_at: Instant,
    /// Lifecycle.
    pub(crate) phase: ServerPhase,
    /// Flavor id.
    pub(crate) flavor_id: String,
    /// Image id; `None` when booted from volume.
    pub(crate) image_id: Option<String>,
    /// Key pair.
    pub(crate) key_name: Option<String>,
    /// Availability zone.
    pub(crate) availability_zone: String,
    /// `config_drive`.
    pub(crate) config_drive: bool,
    /// Metadata.
    pub(crate) metadata: BTreeMap<String, String>,
    /// `user_data` (base64) as posted.
    pub(crate) user_data: Option<String>,
    /// Server group from the scheduler hints.
    pub(crate) server_group: Option<String>,
    /// Security group names as requested (or `default`).
    pub(crate) security_groups: Vec<String>,
    /// Attached ports, in request order.
    pub(crate) ports: Vec<String>,
    /// Attached volumes.
    pub(crate) volumes: Vec<AttachedVolume>,
    /// The fault once in ERROR.
    pub(crate) fault: Option<ServerFault>,
}

impl Server {
    /// Nova's `status`.
    pub(crate) fn status(&self) -> &'static str {
        match &self.phase {
            ServerPhase::Building { .. } | ServerPhase::Unplaceable { .. } => "BUILD",
            ServerPhase::Active => "ACTIVE",
            ServerPhase::Error | ServerPhase::Buried => "ERROR",
            ServerPhase::Deleting { was, .. } => was,
        }
    }

    /// `OS-EXT-STS:vm_state`.
    pub(crate) fn vm_state(&self) -> &'static str {
        match self.status() {
            "BUILD" => "building",
            "ERROR" => "error",
            _ => "active",
        }
    }

    /// `OS-EXT-STS:task_state` at `now`.
    pub(crate) fn task_state(&self, now: Instant) -> Option<&'static str> {
        match &self.phase {
            ServerPhase::Building { spawning_at, .. } if now < *spawning_at => Some("scheduling"),
            ServerPhase::Building { .. } => Some("spawning"),
            ServerPhase::Unplaceable { .. } => Some("scheduling"),
            ServerPhase::Deleting { .. } => Some("deleting"),
            ServerPhase::Active | ServerPhase::Error | ServerPhase::Buried => None,
        }
    }

    /// `OS-EXT-STS:power_state` (0 NOSTATE, 1 RUNNING).
    pub(crate) fn power_state(&self) -> u8 {
        u8::from(self.status() == "ACTIVE")
    }

    /// Whether no compute host ever took it (a build request, or one buried in
    /// cell0): Nova deletes such a server at once.
    pub(crate) fn without_host(&self) -> bool {
        matches!(self.phase, ServerPhase::Unplaceable { .. } | ServerPhase::Buried)
    }

    /// Whether it is being deleted.
    pub(crate) fn deleting(&self) -> bool {
        matches!(self.phase, ServerPhase::Deleting { .. })
    }
}
