//! The shape of a scenario and its gating by capabilities and fake admin access.

use futures::future::BoxFuture;
use machine_driver_proto::v1::Capability;

use crate::connection::{Capabilities, capability_name};
use crate::context::Ctx;
use crate::outcome::StepResult;

/// A scenario body: runs against a fresh [`Ctx`] (its own tracker).
pub type ScenarioFn = fn(Ctx) -> BoxFuture<'static, StepResult>;

/// One registered scenario.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Fixed name, `area/what` (reported, filtered, used in JUnit).
    pub name: &'static str,
    /// Short tag used in machine names `conf-<short>-<random>` (lower-case, no dots).
    pub short: &'static str,
    /// Capabilities the driver must advertise, else the scenario is skipped.
    pub capabilities: &'static [Capability],
    /// Whether the scenario needs the fake cloud's admin API.
    pub needs_fake_admin: bool,
    /// The body.
    pub run: ScenarioFn,
}

impl Scenario {
    /// Why the scenario must be skipped here, if it must.
    pub fn skip_reason(&self, caps: &Capabilities, has_fake_admin: bool) -> Option<String> {
        let missing: Vec<&str> =
            self.capabilities.iter().filter(|c| !caps.has(**c)).map(|c| capability_name(*c)).collect();
        if !missing.is_empty() {
            return Some(format!("driver does not advertise {}", missing.join(", ")));
        }
        if self.needs_fake_admin && !has_fake_admin {
            return Some("needs the fake cloud's admin API (--fake-admin or --spawn)".to_string());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(_: Ctx) -> BoxFuture<'static, StepResult> {
        Box::pin(async { Ok(()) })
    }

    #[test]
    fn gated_by_capabilities_then_fake_admin() {
        let s = Scenario {
            name: "x/y",
            short: "xy",
            capabilities: &[Capability::ShareImage, Capability::ListMachines],
            needs_fake_admin: true,
            run: body,
        };
        let none = Capabilities::from_raw(&[]);
        let all = Capabilities::from_raw(&[Capability::ShareImage as i32, Capability::ListMachines as i32]);
        assert_eq!(
            s.skip_reason(&none, true).unwrap(),
            "driver does not advertise CAPABILITY_SHARE_IMAGE, CAPABILITY_LIST_MACHINES"
        );
        assert!(s.skip_reason(&all, false).unwrap().contains("fake"));
        assert_eq!(s.skip_reason(&all, true), None);
    }
}
