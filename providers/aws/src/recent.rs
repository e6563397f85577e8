//! Instances this sidecar launched recently, so that a status call right after
//! CreateMachine, while EC2 does not show the instance yet, answers "not
//! initialized, wait" instead of NOT_FOUND.
//!
//! Two sources, either suffices: the kit's in-memory [`RecentCreates`]
//! ((credentials, uid) → launch: only requests with the credentials the launch
//! was made with use it), and the machine's `lastKnownState`, which
//! CreateMachine fills with the instance id and launch time so that the rule
//! also holds after a sidecar restart when the controller sends it back.
//!
//! `lastKnownState` is request data: its instance id and region are checked
//! against EC2's syntax as a providerID's are ([`Launch::from_state`]); a
//! state that fails is not a launch (the same as the Go provider's state).
//! A launch known from the state alone is *not* one this process judged: no
//! instance was read and no record of these credentials vouches for it.
//! GetMachineStatus still answers "not visible yet" for it (MCM sends the
//! state only back to the machine it set it for, and refusing would make a
//! restarted sidecar answer NOT_FOUND for every instance EC2 does not show
//! yet); the instance is judged as soon as EC2 shows it.

use std::time::{SystemTime, UNIX_EPOCH};

use machine_driver_api::{RecentCreates, VISIBILITY_GRACE};
use serde::{Deserialize, Serialize};

use crate::clients::CredentialsKey;
use crate::provider_id::{is_instance_id, is_region};

/// What CreateMachine remembers about a launch (also its `lastKnownState` JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Launch {
    /// The instance id.
    pub instance_id: String,
    /// Region of the instance.
    pub region: String,
    /// Private DNS name (node name) as RunInstances reported it.
    pub node_name: String,
    /// Launch time, seconds since the Unix epoch.
    pub launched_at: u64,
}

impl Launch {
    /// A launch happening now.
    pub(crate) fn now(instance_id: &str, region: &str, node_name: &str) -> Self {
        let launched_at = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        Self { instance_id: instance_id.into(), region: region.into(), node_name: node_name.into(), launched_at }
    }

    /// As `lastKnownState`.
    pub(crate) fn to_state(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// From `lastKnownState`: `None` for anything else (e.g. the Go
    /// provider's state), and for a state whose instance id or region is not
    /// EC2's syntax ([`is_instance_id`], [`is_region`], as a providerID's are
    /// checked) or whose node name is not a DNS name: they would be answered
    /// back as a providerID and node name.
    pub(crate) fn from_state(state: &str) -> Option<Self> {
        let launch: Self = serde_json::from_str(state).ok()?;
        let valid = is_instance_id(&launch.instance_id) && is_region(&launch.region) && is_dns_name(&launch.node_name);
        if !valid {
            tracing::warn!("machine.lastKnownState names an instance id, region or node name EC2 cannot have; ignored");
            return None;
        }
        Some(launch)
    }

    /// True while within [`VISIBILITY_GRACE`] of the launch.
    pub(crate) fn is_recent(&self) -> bool {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        now.saturating_sub(self.launched_at) < VISIBILITY_GRACE.as_secs()
    }
}

/// A private DNS name as RunInstances reports it (empty when it gave none):
/// at most 253 characters, dot-separated labels of ASCII letters, digits and
/// hyphens.
fn is_dns_name(name: &str) -> bool {
    name.is_empty()
        || (name.len() <= 253
            && name.split('.').all(|label| {
                (1..=63).contains(&label.len()) && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            }))
}

/// The in-memory record of recent launches, by (credentials, machine uid).
pub(crate) type RecentLaunches = RecentCreates<(CredentialsKey, String), Launch>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trip_and_grace() {
        let l = Launch::now("i-1234abcd", "eu-west-1", "ip-10-0-0-1.eu-west-1.compute.internal");
        assert_eq!(Launch::from_state(&l.to_state()), Some(l.clone()));
        assert!(l.is_recent());
        assert_eq!(Launch::from_state(""), None);
        let old = Launch { launched_at: l.launched_at - VISIBILITY_GRACE.as_secs() - 1, ..l.clone() };
        assert!(!old.is_recent());
        assert_eq!(
            Launch::from_state(&Launch { node_name: String::new(), ..l.clone() }.to_state()).unwrap().node_name,
            ""
        );
    }

    #[test]
    fn a_state_naming_what_ec2_cannot_have_is_not_a_launch() {
        let l = Launch::now("i-0123456789abcdef0", "eu-west-1", "ip-10-0-0-1.eu-west-1.compute.internal");
        assert!(Launch::from_state(&l.to_state()).is_some());
        for bad in [
            Launch { region: "evil.example.com".into(), ..l.clone() },
            Launch { region: "../eu-west-1".into(), ..l.clone() },
            Launch { region: String::new(), ..l.clone() },
            Launch { instance_id: "i-../../x".into(), ..l.clone() },
            Launch { instance_id: "i-*".into(), ..l.clone() },
            Launch { instance_id: "vol-0123456789abcdef0".into(), ..l.clone() },
            Launch { node_name: "ip-10/../x".into(), ..l.clone() },
            Launch { node_name: "a..b".into(), ..l.clone() },
        ] {
            assert_eq!(Launch::from_state(&bad.to_state()), None, "{bad:?}");
        }
    }
}
