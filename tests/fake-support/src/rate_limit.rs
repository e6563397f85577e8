//! A token bucket over all cloud API requests.

use std::time::{Duration, Instant};

/// A token bucket: `burst` tokens at most, refilled at `per_second`; disabled when `per_second` is 0.
#[derive(Debug)]
pub struct TokenBucket {
    per_second: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Default for TokenBucket {
    fn default() -> Self {
        Self::new(0.0, 0.0, Instant::now())
    }
}

impl TokenBucket {
    /// A full bucket. `burst` below 1 is raised to 1 so that some request can pass.
    pub fn new(per_second: f64, burst: f64, now: Instant) -> Self {
        let burst = burst.max(1.0);
        Self { per_second: per_second.max(0.0), burst, tokens: burst, last: now }
    }

    /// Whether the bucket limits anything.
    pub fn enabled(&self) -> bool {
        self.per_second > 0.0
    }

    /// Takes one token at `now` if there is one; always succeeds when disabled.
    pub fn try_acquire_at(&mut self, now: Instant) -> bool {
        if !self.enabled() {
            return true;
        }
        let elapsed = now.saturating_duration_since(self.last);
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed.as_secs_f64() * self.per_second).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Time until the next token is available (zero when one is available or disabled).
    pub fn wait_hint(&self) -> Duration {
        if !self.enabled() || self.tokens >= 1.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64((1.0 - self.tokens) / self.per_second)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_bucket_passes_everything() {
        let mut bucket = TokenBucket::default();
        let now = Instant::now();
        assert!((0..10_000).all(|_| bucket.try_acquire_at(now)));
    }

    #[test]
    fn burst_then_refill() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(10.0, 3.0, start);
        assert!(bucket.try_acquire_at(start));
        assert!(bucket.try_acquire_at(start));
        assert!(bucket.try_acquire_at(start));
        assert!(!bucket.try_acquire_at(start), "burst exhausted");
        assert!(bucket.wait_hint() > Duration::ZERO);
        // 10/s: one token per 100 ms.
        assert!(!bucket.try_acquire_at(start + Duration::from_millis(50)));
        assert!(bucket.try_acquire_at(start + Duration::from_millis(110)));
        assert!(!bucket.try_acquire_at(start + Duration::from_millis(120)));
        // Refill never exceeds the burst.
        let later = start + Duration::from_secs(60);
        let passed = (0..10).filter(|_| bucket.try_acquire_at(later)).count();
        assert_eq!(passed, 3);
    }

    #[test]
    fn sustained_rate_is_respected() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(20.0, 1.0, start);
        // Offer 1000 requests/s for 2 s: about 20/s + the initial token pass.
        let passed = (0..2000).filter(|i| bucket.try_acquire_at(start + Duration::from_millis(*i))).count();
        assert!((40..=42).contains(&passed), "passed = {passed}");
    }
}
