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
            ServerPhase::Building { .. } => "BUILD",
            ServerPhase::Active => "ACTIVE",
            ServerPhase::Error => "ERROR",
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
            ServerPhase::Deleting { .. } => Some("deleting"),
            ServerPhase::Active | ServerPhase::Error => None,
        }
    }

    /// `OS-EXT-STS:power_state` (0 NOSTATE, 1 RUNNING).
    pub(crate) fn power_state(&self) -> u8 {
        u8::from(self.status() == "ACTIVE")
    }

    /// Whether it is being deleted.
    pub(crate) fn deleting(&self) -> bool {
        matches!(self.phase, ServerPhase::Deleting { .. })
    }
}
