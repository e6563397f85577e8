//! A client-side token bucket that waits instead of letting the cloud throttle.

use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// How long [`RateLimiter::penalize`] pauses when no limit is configured: the
/// cloud just throttled us, and resending at once would only add to its load.
pub const UNLIMITED_THROTTLE_PAUSE: Duration = Duration::from_millis(250);

/// Token bucket: `rate` requests per second, bursts up to `burst`.
///
/// [`RateLimiter::acquire`] waits for a token, so a busy sidecar slows down to
/// the configured rate instead of running into the cloud's throttling. A rate of
/// zero disables limiting.
#[derive(Debug)]
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    /// A limiter of `rate` per second with `burst` capacity (at least 1).
    pub fn new(rate: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self { rate, burst, state: Mutex::new(Bucket { tokens: burst, last: Instant::now() }) }
    }

    /// Takes one token, waiting as long as needed.
    pub async fn acquire(&self) {
        if self.rate <= 0.0 {
            return;
        }
        loop {
            let wait = {
                let mut b = self.state.lock().await;
                let now = Instant::now();
                let elapsed = now.duration_since(b.last).as_secs_f64();
                b.tokens = (b.tokens + elapsed * self.rate).min(self.burst);
                b.last = now;
                if b.tokens >= 1.0 {
                    b.tokens -= 1.0;
                    return;
                }
                Duration::from_secs_f64((1.0 - b.tokens) / self.rate)
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// The cloud throttled us although the bucket had a token: its view of the
    /// window differs from ours. Empties the bucket so that the next request
    /// waits a full token interval, resynchronising with the cloud. Without a
    /// limit (rate 0) it pauses [`UNLIMITED_THROTTLE_PAUSE`] instead.
    pub async fn penalize(&self) {
        if self.rate <= 0.0 {
            tokio::time::sleep(UNLIMITED_THROTTLE_PAUSE).await;
            return;
        }
        let mut b = self.state.lock().await;
        b.tokens = b.tokens.min(0.0);
        b.last = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn spends_burst_then_paces() {
        let l = RateLimiter::new(10.0, 5);
        let start = Instant::now();
        for _ in 0..5 {
            l.acquire().await;
        }
        assert!(start.elapsed() < Duration::from_millis(1), "burst is immediate");
        for _ in 0..10 {
            l.acquire().await;
        }
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(990) && took <= Duration::from_millis(1100), "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn penalize_empties_the_bucket() {
        let l = RateLimiter::new(10.0, 5);
        l.acquire().await;
        l.penalize().await;
        let start = Instant::now();
        l.acquire().await;
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(99) && took <= Duration::from_millis(120), "{took:?}");
    }

    #[tokio::test]
    async fn zero_rate_never_waits() {
        let l = RateLimiter::new(0.0, 1);
        for _ in 0..1000 {
            l.acquire().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn penalize_without_a_limit_pauses() {
        let l = RateLimiter::new(0.0, 1);
        let started = Instant::now();
        l.penalize().await;
        assert_eq!(started.elapsed(), UNLIMITED_THROTTLE_PAUSE);
        l.acquire().await;
        assert_eq!(started.elapsed(), UNLIMITED_THROTTLE_PAUSE, "acquire stays free without a limit");
    }
}
