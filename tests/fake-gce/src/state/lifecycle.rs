//! Where an instance is in its life, and the status word GCE shows for it.
//!
//! Status is computed from timestamps on every read instead of by timers:
//! `PROVISIONING` for the first half of `boot_ms`, `STAGING` for the second
//! half, then `RUNNING`; after delete `STOPPING` for `stop_ms`, then gone.
//! An insert hit by a `capacity` or `placement` fault in phase `after` stays
//! `PROVISIONING` and vanishes when its operation fails (as GCE does on a
//! stockout). With an operation duration (`operation_ms` of
//! `POST /_admin/timing`) an insert is `PROVISIONING` until its operation is
//! done, then `STAGING` for half of `boot_ms`, then `RUNNING`.

use std::time::{Duration, Instant};

/// The lifecycle of one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    /// Created; boots for `boot`, counted from `created`.
    Booting {
        /// When insert took effect.
        created: Instant,
        /// Total boot time (PROVISIONING + STAGING).
        boot: Duration,
    },
    /// Created with a set operation duration: `PROVISIONING` for `staged`
    /// (when its insert operation is done), `STAGING` until `running`.
    Inserting {
        /// When insert took effect.
        created: Instant,
        /// Time to `STAGING` (the insert operation's duration).
        staged: Duration,
        /// Time to `RUNNING`.
        running: Duration,
    },
    /// Created, but the zone has no capacity: disappears at `until`.
    Stockout {
        /// When the insert operation fails and the instance disappears.
        until: Instant,
    },
    /// Stopped by GCE (a preempted Spot VM whose termination action is
    /// STOP): `TERMINATED`, disks kept, until `instances.start` or a delete.
    Terminated,
    /// Being deleted: `STOPPING` until `until`, then gone.
    Deleting {
        /// When the instance is gone and its delete operation DONE.
        until: Instant,
    },
}

impl Lifecycle {
    /// The GCE status word at `now`, or `None` once the instance no longer exists.
    pub(crate) fn status(&self, now: Instant) -> Option<&'static str> {
        match *self {
            Self::Booting { created, boot } => {
                let elapsed = now.saturating_duration_since(created);
                Some(if elapsed >= boot {
                    "RUNNING"
                } else if elapsed >= boot / 2 {
                    "STAGING"
                } else {
                    "PROVISIONING"
                })
            }
            Self::Inserting { created, staged, running } => {
                let elapsed = now.saturating_duration_since(created);
                Some(if elapsed >= running {
                    "RUNNING"
                } else if elapsed >= staged {
                    "STAGING"
                } else {
                    "PROVISIONING"
                })
            }
            Self::Stockout { until } => (now < until).then_some("PROVISIONING"),
            Self::Terminated => Some("TERMINATED"),
            Self::Deleting { until } => (now < until).then_some("STOPPING"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_then_delete() {
        let t0 = Instant::now();
        let boot = Lifecycle::Booting { created: t0, boot: Duration::from_millis(100) };
        assert_eq!(boot.status(t0), Some("PROVISIONING"));
        assert_eq!(boot.status(t0 + Duration::from_millis(60)), Some("STAGING"));
        assert_eq!(boot.status(t0 + Duration::from_millis(100)), Some("RUNNING"));
        let slow = Lifecycle::Inserting {
            created: t0,
            staged: Duration::from_secs(20),
            running: Duration::from_millis(20_150),
        };
        assert_eq!(slow.status(t0 + Duration::from_millis(19_999)), Some("PROVISIONING"));
        assert_eq!(slow.status(t0 + Duration::from_secs(20)), Some("STAGING"));
        assert_eq!(slow.status(t0 + Duration::from_millis(20_150)), Some("RUNNING"));
        let del = Lifecycle::Deleting { until: t0 + Duration::from_millis(50) };
        assert_eq!(del.status(t0), Some("STOPPING"));
        assert_eq!(del.status(t0 + Duration::from_millis(50)), None);
        assert_eq!(Lifecycle::Terminated.status(t0 + Duration::from_secs(3600)), Some("TERMINATED"));
    }
}
