//! What a scenario step returns and what the runner reports for a scenario.

use std::time::Duration;

/// Why a scenario stopped before passing: a failed expectation or a reason to skip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// An expectation of the contract was not met.
    Fail(String),
    /// The scenario cannot run here (missing input or capability).
    Skip(String),
}

/// Result of a scenario or of one of its steps.
pub type StepResult<T = ()> = Result<T, Stop>;

/// Final result of one scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every expectation held.
    Pass,
    /// An expectation failed, with the reason.
    Fail(String),
    /// Not run, with the reason.
    Skip(String),
}

impl From<StepResult> for Outcome {
    fn from(r: StepResult) -> Self {
        match r {
            Ok(()) => Outcome::Pass,
            Err(Stop::Fail(why)) => Outcome::Fail(why),
            Err(Stop::Skip(why)) => Outcome::Skip(why),
        }
    }
}

/// One scenario's reported result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioReport {
    /// Fixed scenario name.
    pub name: String,
    /// Its outcome.
    pub outcome: Outcome,
    /// Wall time, including cleanup.
    pub duration: Duration,
}

/// Returns `Err(Stop::Fail(..))` from the enclosing function with a formatted reason.
#[macro_export]
macro_rules! fail {
    ($($arg:tt)*) => {
        return Err($crate::outcome::Stop::Fail(format!($($arg)*)))
    };
}

/// Fails the enclosing scenario step with a formatted reason unless `cond` holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            $crate::fail!($($arg)*);
        }
    };
}

/// Skips the enclosing scenario with a formatted reason.
#[macro_export]
macro_rules! skip {
    ($($arg:tt)*) => {
        return Err($crate::outcome::Stop::Skip(format!($($arg)*)))
    };
}
