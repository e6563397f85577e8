//! The per-fake admin state and the call gate every cloud API request passes through.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use axum::response::{IntoResponse, Response};

use crate::counters::CallCounts;
use crate::faults::{FaultKind, FaultSpec, FaultTable, Phase};
use crate::hooks::{CloudHooks, Inventory};
use crate::operations::OpClass;
use crate::rate_limit::TokenBucket;
use crate::settings::{Consistency, LatencyRules, LatencySpec, RateLimitSpec, Timing};

#[derive(Default)]
struct AdminState {
    counts: CallCounts,
    faults: FaultTable,
    latency: LatencyRules,
    bucket: TokenBucket,
    consistency: Consistency,
    timing: Timing,
}

struct AdminInner {
    hooks: Arc<dyn CloudHooks>,
    state: Mutex<AdminState>,
}

/// The admin side of one fake: counters, faults, latency, rate limit and settings.
///
/// Cheap to clone; every clone shares the same state.
#[derive(Clone)]
pub struct Admin {
    inner: Arc<AdminInner>,
}

impl fmt::Debug for Admin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admin").finish_non_exhaustive()
    }
}

/// Why a call was refused before it took effect, or had its answer replaced after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectionCause {
    /// The token bucket of `POST /_admin/rate-limit` was empty.
    RateLimited,
    /// A fault of `POST /_admin/faults` struck.
    Injected(Phase),
}

/// A refused call: the neutral kind plus the cloud's real error answer.
pub struct Rejection {
    /// The neutral fault kind (rate-limit refusals are `Throttle`).
    pub kind: FaultKind,
    /// Why the call was refused.
    pub cause: RejectionCause,
    response: Response,
}

impl fmt::Debug for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejection").field("kind", &self.kind).field("cause", &self.cause).finish_non_exhaustive()
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        self.response
    }
}

/// A call admitted by [`Admin::begin_call`]; use it to apply `after` faults once the effect happened.
#[derive(Debug)]
pub struct CallGuard {
    admin: Admin,
    operation: String,
    class: Option<OpClass>,
}

impl CallGuard {
    /// The exact operation name of this call.
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// The class of this call, if the fake classifies it.
    pub fn class(&self) -> Option<OpClass> {
        self.class
    }

    /// An `after` fault striking this call, if any (consumes one of its `times`).
    pub fn after_fault(&self) -> Option<Rejection> {
        self.admin.strike(&self.operation, self.class, Phase::After)
    }

    /// Returns `response`, or the injected error if an `after` fault strikes.
    pub fn finish(self, response: Response) -> Response {
        match self.after_fault() {
            Some(rejection) => rejection.into_response(),
            None => response,
        }
    }
}

impl Admin {
    /// A fresh admin state (no faults, no latency, no rate limit, default timing) for a fake.
    pub fn new(hooks: Arc<dyn CloudHooks>) -> Self {
        Self { inner: Arc::new(AdminInner { hooks, state: Mutex::new(AdminState::default()) }) }
    }

    fn state(&self) -> MutexGuard<'_, AdminState> {
        self.inner.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The fake's hooks.
    pub fn hooks(&self) -> &Arc<dyn CloudHooks> {
        &self.inner.hooks
    }

    /// Gate for one cloud API request: counts it, applies the rate limit, latency and
    /// `before` faults. On `Err` the caller answers with the rejection and does nothing else.
    pub async fn begin_call(&self, operation: &str) -> Result<CallGuard, Rejection> {
        let class = self.inner.hooks.operation_class(operation);
        let delay = {
            let mut state = self.state();
            state.counts.record(operation, class);
            if !state.bucket.try_acquire_at(Instant::now()) {
                state.counts.record_throttled();
                drop(state);
                return Err(self.reject(FaultKind::Throttle, RejectionCause::RateLimited, operation));
            }
            state.latency.delay_for(operation, class)
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if let Some(rejection) = self.strike(operation, class, Phase::Before) {
            return Err(rejection);
        }
        Ok(CallGuard { admin: self.clone(), operation: operation.to_owned(), class })
    }

    fn strike(&self, operation: &str, class: Option<OpClass>, phase: Phase) -> Option<Rejection> {
        let kind = {
            let mut state = self.state();
            let kind = state.faults.strike(operation, class, phase, rand::random::<f64>)?;
            state.counts.record_injected(kind, phase);
            kind
        };
        Some(self.reject(kind, RejectionCause::Injected(phase), operation))
    }

    fn reject(&self, kind: FaultKind, cause: RejectionCause, operation: &str) -> Rejection {
        tracing::debug!(operation, ?kind, ?cause, "fake refuses call");
        Rejection { kind, cause, response: self.inner.hooks.fault_response(kind, operation) }
    }

    /// A snapshot of the call counters.
    pub fn counts(&self) -> CallCounts {
        self.state().counts.clone()
    }

    /// Zeroes the call counters.
    pub fn reset_counts(&self) {
        self.state().counts = CallCounts::default();
    }

    /// Adds a fault; returns its id.
    pub fn add_fault(&self, spec: &FaultSpec) -> String {
        self.state().faults.add(spec)
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        self.state().faults.clear();
    }

    /// Sets or removes a latency rule.
    pub fn set_latency(&self, spec: &LatencySpec) {
        self.state().latency.set(spec);
    }

    /// Replaces the rate limit (a full bucket); `per_second: 0` disables it.
    pub fn set_rate_limit(&self, spec: &RateLimitSpec) {
        let burst = spec.burst.unwrap_or(spec.per_second);
        self.state().bucket = TokenBucket::new(spec.per_second, burst, Instant::now());
    }

    /// The eventual-consistency setting.
    pub fn consistency(&self) -> Consistency {
        self.state().consistency
    }

    /// Replaces the eventual-consistency setting.
    pub fn set_consistency(&self, consistency: Consistency) {
        self.state().consistency = consistency;
    }

    /// The state transition timing.
    pub fn timing(&self) -> Timing {
        self.state().timing
    }

    /// Replaces the state transition timing.
    pub fn set_timing(&self, timing: Timing) {
        self.state().timing = timing;
    }

    /// The fake's inventory.
    pub fn inventory(&self) -> Inventory {
        self.inner.hooks.inventory()
    }

    /// Back to the initial state: the fake's reset hook, then no faults, latency or rate limit,
    /// default consistency and timing, counters zero.
    pub fn reset(&self) {
        self.inner.hooks.reset();
        *self.state() = AdminState::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use std::time::Duration;

    struct Hooks;

    impl CloudHooks for Hooks {
        fn operation_class(&self, operation: &str) -> Option<OpClass> {
            match operation {
                "Create" => Some(OpClass::Create),
                "Get" => Some(OpClass::Read),
                _ => None,
            }
        }
        fn fault_response(&self, kind: FaultKind, _operation: &str) -> Response {
            let status = match kind {
                FaultKind::Throttle => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            (status, format!("{kind:?}")).into_response()
        }
        fn inventory(&self) -> Inventory {
            Inventory::default()
        }
        fn reset(&self) {}
        fn terminate(&self, _id: &str) -> bool {
            false
        }
    }

    fn admin() -> Admin {
        Admin::new(Arc::new(Hooks))
    }

    fn fault(operation: &str, kind: FaultKind, times: Option<u32>, phase: Phase) -> FaultSpec {
        FaultSpec { operation: operation.into(), kind, times, probability: None, phase }
    }

    #[tokio::test]
    async fn counts_every_call_including_refused_ones() {
        let admin = admin();
        admin.add_fault(&fault("create", FaultKind::Capacity, Some(1), Phase::Before));
        let refused = admin.begin_call("Create").await.expect_err("fault");
        assert_eq!(refused.kind, FaultKind::Capacity);
        assert_eq!(refused.into_response().status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(admin.begin_call("Create").await.is_ok());
        assert!(admin.begin_call("Get").await.is_ok());
        let counts = admin.counts();
        assert_eq!((counts.of("Create"), counts.of("Get"), counts.total), (2, 1, 3));
        assert_eq!((counts.injected.get(&FaultKind::Capacity), counts.lost_answers), (Some(&1), 0));
        admin.reset_counts();
        assert_eq!(admin.counts().total, 0);
    }

    #[tokio::test]
    async fn after_faults_strike_only_through_the_guard() {
        let admin = admin();
        admin.add_fault(&fault("Create", FaultKind::Internal, Some(1), Phase::After));
        let guard = admin.begin_call("Create").await.expect("before passes");
        let answer = guard.finish(StatusCode::OK.into_response());
        assert_eq!(answer.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let guard = admin.begin_call("Create").await.expect("before passes");
        assert_eq!(guard.finish(StatusCode::OK.into_response()).status(), StatusCode::OK);
        let counts = admin.counts();
        assert_eq!((counts.injected_total(), counts.lost_answers), (1, 1));
    }

    #[tokio::test]
    async fn rate_limit_refuses_with_throttle_and_counts_it() {
        let admin = admin();
        admin.set_rate_limit(&RateLimitSpec { per_second: 1.0, burst: Some(2.0) });
        assert!(admin.begin_call("Get").await.is_ok());
        assert!(admin.begin_call("Get").await.is_ok());
        let refused = admin.begin_call("Get").await.expect_err("bucket empty");
        assert_eq!((refused.kind, refused.cause), (FaultKind::Throttle, RejectionCause::RateLimited));
        assert_eq!(refused.into_response().status(), StatusCode::SERVICE_UNAVAILABLE);
        let counts = admin.counts();
        assert_eq!((counts.total, counts.throttled, counts.injected_total()), (3, 1, 0));
        admin.set_rate_limit(&RateLimitSpec { per_second: 0.0, burst: None });
        assert!(admin.begin_call("Get").await.is_ok());
    }

    #[tokio::test]
    async fn latency_delays_matching_calls() {
        let admin = admin();
        admin.set_latency(&LatencySpec { operation: "read".into(), ms: 60 });
        let start = Instant::now();
        admin.begin_call("Create").await.expect("ok");
        assert!(start.elapsed() < Duration::from_millis(50));
        let start = Instant::now();
        admin.begin_call("Get").await.expect("ok");
        assert!(start.elapsed() >= Duration::from_millis(60));
    }

    #[tokio::test]
    async fn reset_restores_defaults() {
        let admin = admin();
        admin.add_fault(&fault("*", FaultKind::Auth, None, Phase::Before));
        admin.set_timing(Timing { boot_ms: 1, stop_ms: 1, operation_ms: Some(1) });
        admin.set_consistency(Consistency { invisible_ms: 5 });
        admin.reset();
        assert!(admin.begin_call("Get").await.is_ok());
        assert_eq!(admin.timing(), Timing::default());
        assert_eq!(admin.consistency(), Consistency::default());
        assert_eq!(admin.counts().total, 1);
    }
}
