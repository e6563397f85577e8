//! Spot instances EC2 interrupted, as DescribeInstances shows them.
//!
//! EC2 interrupts a Spot instance by its `InstanceInterruptionBehavior`
//! (EC2 User Guide, "Behavior of Spot Instance interruptions",
//! <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/interruption-behavior.html>):
//! `terminate` (the default) leaves it `shutting-down`, then `terminated`,
//! with the state reason `Server.SpotInstanceTermination`; `stop` and
//! `hibernate` leave it `stopping`, then `stopped`, with
//! `Server.SpotInstanceShutdown` (EC2 API reference, StateReason,
//! <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_StateReason.html>).
//! Only EC2 starts an interrupted stopped Spot instance again, when capacity
//! returns. Both are read from fields every DescribeInstances answer already
//! carries (`instanceState`, `stateReason`, `reason`): telling a reclaim
//! apart costs no call.

use aws_sdk_ec2::types::Instance;
use machine_driver_api::{ClusterMarkers, DriverError, Machine, Ownership};

use crate::ownership::Tagged;

/// The state reason codes of EC2's Spot interruptions (`Server.SpotInstanceTermination`,
/// `Server.SpotInstanceShutdown`) share this prefix; no other code has it.
const SPOT_REASON_PREFIX: &str = "Server.SpotInstance";

/// Longest cloud text (state reason message, transition reason) kept in the answer.
const MAX_TEXT: usize = 200;

/// How EC2 shows that it interrupted the Spot instance `i`: its state, state
/// reason and transition reason, e.g. `terminated, stateReason
/// Server.SpotInstanceTermination: Spot instance termination, reason Service
/// initiated (2026-12-02 10:00:00 GMT)`. `None` for an instance that runs (or
/// is starting: EC2 restarting a stopped one) and for one that ended for any
/// other reason (a user's termination, a failed launch).
pub(crate) fn reclaimed(i: &Instance) -> Option<String> {
    let state = crate::status::state_name(i);
    if matches!(state, "pending" | "running" | "") {
        return None;
    }
    let reason = i.state_reason()?;
    let code = reason.code().filter(|c| c.starts_with(SPOT_REASON_PREFIX))?;
    let message = reason.message().filter(|m| !m.is_empty()).unwrap_or(code);
    let mut shown = format!("{state}, stateReason {}", clip(message));
    if let Some(transition) = i.state_transition_reason().filter(|t| !t.is_empty()) {
        shown.push_str(&format!(", reason {}", clip(transition)));
    }
    Some(shown)
}

/// SPOT_RECLAIMED for the live (stopped) instance `i` when EC2 interrupted it.
pub(crate) fn reclaimed_error(i: &Instance) -> Option<DriverError> {
    reclaimed(i).map(|shown| DriverError::spot_reclaimed(i.instance_id().unwrap_or_default(), shown))
}

/// The answer for a machine whose providerID instance `i` is shutting down or
/// terminated (and no other live instance is this machine's): SPOT_RECLAIMED
/// when EC2 interrupted it and the kit judges it this machine's, NOT_FOUND as
/// for any ended instance otherwise (a foreign instance is never reported as
/// this machine's).
pub(crate) fn dead_answer(i: &Instance, markers: &ClusterMarkers, machine: &Machine) -> DriverError {
    let not_found = || DriverError::not_found(format!("instance of machine {}", machine.name));
    match markers.judge(&Tagged(i.tags()), machine) {
        Ownership::Mine => reclaimed_error(i).unwrap_or_else(not_found),
        Ownership::Foreign(why) => {
            tracing::debug!(machine = %machine.name, instance_id = i.instance_id().unwrap_or_default(), %why,
                "the ended instance of the providerID is not this machine's");
            not_found()
        }
    }
}

/// `text` cut to [`MAX_TEXT`] characters.
fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::types::{InstanceState, InstanceStateName, StateReason};

    use super::*;

    fn instance(state: InstanceStateName, code: Option<&str>) -> Instance {
        let mut b = Instance::builder()
            .instance_id("i-0123456789abcdef0")
            .state(InstanceState::builder().name(state).build())
            .state_transition_reason("Service initiated (2026-12-02 10:00:00 GMT)");
        if let Some(code) = code {
            b = b.state_reason(StateReason::builder().code(code).message(format!("{code}: as EC2 says")).build());
        }
        b.build()
    }

    #[test]
    fn a_spot_interruption_is_told_from_the_state_and_its_reason() {
        let shown =
            reclaimed(&instance(InstanceStateName::Terminated, Some("Server.SpotInstanceTermination"))).unwrap();
        assert_eq!(
            shown,
            "terminated, stateReason Server.SpotInstanceTermination: as EC2 says, \
             reason Service initiated (2026-12-02 10:00:00 GMT)"
        );
        for (state, code) in [
            (InstanceStateName::ShuttingDown, "Server.SpotInstanceTermination"),
            (InstanceStateName::Stopped, "Server.SpotInstanceShutdown"),
            (InstanceStateName::Stopping, "Server.SpotInstanceShutdown"),
        ] {
            assert!(reclaimed(&instance(state.clone(), Some(code))).is_some(), "{state:?} {code}");
        }
        let error =
            reclaimed_error(&instance(InstanceStateName::Stopped, Some("Server.SpotInstanceShutdown"))).unwrap();
        assert_eq!(error.reason(), machine_driver_api::SPOT_RECLAIMED);
        assert!(
            error.message().contains("i-0123456789abcdef0") && error.message().contains("Server.SpotInstanceShutdown")
        );
    }

    #[test]
    fn other_ends_and_running_instances_are_no_reclaim() {
        for (state, code) in [
            (InstanceStateName::Terminated, Some("Client.UserInitiatedShutdown")),
            (InstanceStateName::Terminated, Some("Server.InternalError")),
            (InstanceStateName::Terminated, Some("Server.InsufficientInstanceCapacity")),
            (InstanceStateName::Stopped, Some("Client.UserInitiatedShutdown")),
            (InstanceStateName::Stopped, Some("Server.ScheduledStop")),
            (InstanceStateName::Terminated, None),
            // EC2 starting a stopped Spot instance again: it runs.
            (InstanceStateName::Pending, Some("Server.SpotInstanceShutdown")),
            (InstanceStateName::Running, Some("Server.SpotInstanceShutdown")),
        ] {
            assert_eq!(reclaimed(&instance(state.clone(), code)), None, "{state:?} {code:?}");
        }
    }

    #[test]
    fn cloud_text_is_clipped() {
        let long = "x".repeat(1000);
        let i = Instance::builder()
            .state(InstanceState::builder().name(InstanceStateName::Terminated).build())
            .state_reason(StateReason::builder().code("Server.SpotInstanceTermination").message(&long).build())
            .build();
        let shown = reclaimed(&i).unwrap();
        assert!(shown.chars().count() < 250, "{}", shown.len());
    }
}
