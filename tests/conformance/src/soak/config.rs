//! The soak's settings (`--soak-*` flags), their checks and the time scale.

use std::time::Duration;

/// Why a soak cannot run without a driver it can restart.
pub const NEEDS_RESTARTS: &str = "--soak-machines needs --spawn with --spawn-fake: the soak kills the driver \
     with SIGKILL and restarts it, which only works on a driver the suite started itself on a fake cloud \
     running on its own (an embedded fake dies with the driver; with --endpoint the suite does not own it)";

/// Settings of one soak run.
#[derive(Debug, Clone, PartialEq)]
pub struct SoakConfig {
    /// Machines that go through the lifecycle concurrently (`--soak-machines`).
    pub machines: usize,
    /// SIGKILL + restarts of the driver during the run, at least (`--soak-restarts`).
    pub restarts: usize,
    /// Share of classified cloud calls the fake fails (`--soak-fault-rate`).
    pub fault_rate: f64,
    /// Seed of the soak's own random choices: the moments of the restarts (`--soak-seed`).
    pub seed: u64,
    /// Factor applied to every retry delay: MCM's periods and the driver's RetryInfo
    /// (`--soak-time-scale`).
    pub time_scale: f64,
    /// How long new instances stay invisible to the fake's reads (`--soak-invisible-ms`).
    pub invisible_ms: u64,
    /// Upper bound of the whole run; machines not through by then fail (`--soak-timeout-secs`).
    pub timeout: Duration,
}

impl SoakConfig {
    /// Refuses settings that cannot make a meaningful run.
    pub fn check(&self) -> Result<(), String> {
        if self.machines == 0 {
            return Err("--soak-machines must be at least 1".into());
        }
        if !(0.0..=0.9).contains(&self.fault_rate) {
            return Err(format!("--soak-fault-rate {} must be within 0..=0.9", self.fault_rate));
        }
        if !(self.time_scale > 0.0 && self.time_scale <= 1.0) {
            return Err(format!("--soak-time-scale {} must be within (0, 1]", self.time_scale));
        }
        if self.timeout.is_zero() {
            return Err("--soak-timeout-secs must be positive".into());
        }
        Ok(())
    }

    /// `delay` multiplied by the time scale, at least 1 ms.
    pub fn scaled(&self, delay: Duration) -> Duration {
        delay.mul_f64(self.time_scale).max(Duration::from_millis(1))
    }

    /// The flags that reproduce this run's settings (seed included).
    pub fn flags(&self) -> String {
        format!(
            "--soak-machines {} --soak-restarts {} --soak-fault-rate {} --soak-seed {} --soak-time-scale {} \
             --soak-invisible-ms {} --soak-timeout-secs {}",
            self.machines,
            self.restarts,
            self.fault_rate,
            self.seed,
            self.time_scale,
            self.invisible_ms,
            self.timeout.as_secs()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> SoakConfig {
        SoakConfig {
            machines: 12,
            restarts: 5,
            fault_rate: 0.3,
            seed: 7,
            time_scale: 0.02,
            invisible_ms: 3000,
            timeout: Duration::from_secs(600),
        }
    }

    #[test]
    fn checks_ranges() {
        assert!(config().check().is_ok());
        assert!(SoakConfig { machines: 0, ..config() }.check().is_err());
        assert!(SoakConfig { fault_rate: 0.95, ..config() }.check().is_err());
        assert!(SoakConfig { fault_rate: -0.1, ..config() }.check().is_err());
        assert!(SoakConfig { time_scale: 0.0, ..config() }.check().is_err());
        assert!(SoakConfig { time_scale: 2.0, ..config() }.check().is_err());
        assert!(SoakConfig { timeout: Duration::ZERO, ..config() }.check().is_err());
    }

    #[test]
    fn scales_delays_with_a_floor() {
        let c = config();
        assert_eq!(c.scaled(Duration::from_secs(5)), Duration::from_millis(100));
        assert_eq!(c.scaled(Duration::from_secs(600)), Duration::from_secs(12));
        assert_eq!(c.scaled(Duration::ZERO), Duration::from_millis(1));
    }

    #[test]
    fn flags_name_every_setting() {
        let flags = config().flags();
        for word in ["--soak-machines 12", "--soak-restarts 5", "--soak-fault-rate 0.3", "--soak-seed 7"] {
            assert!(flags.contains(word), "{flags}");
        }
    }
}
