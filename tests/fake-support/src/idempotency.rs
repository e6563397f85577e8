//! [`IdempotencyTokens`]: what a cloud remembers of requests sent with an
//! idempotency token (EC2 `ClientToken`, GCE `requestId`, ARM and ECS client
//! tokens): per scope and token, the request's fingerprint and its result, for
//! the cloud's retention period.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// What a repeated token means.
#[derive(Debug, PartialEq, Eq)]
pub enum Replay<'a, V> {
    /// The token is new (or forgotten): process the request.
    New,
    /// The same request again: answer with the first one's result.
    Same(&'a V),
    /// The token was used with a different request (EC2 `IdempotentParameterMismatch`).
    Mismatch,
}

#[derive(Debug)]
struct Entry<V> {
    fingerprint: String,
    value: V,
    at: Instant,
}

/// Tokens by key (account or project scope plus the token), each with the
/// fingerprint of its request and its result, forgotten after `retention`.
#[derive(Debug)]
pub struct IdempotencyTokens<K, V> {
    retention: Duration,
    entries: HashMap<K, Entry<V>>,
}

impl<K: Hash + Eq, V> IdempotencyTokens<K, V> {
    /// An empty table keeping tokens for `retention`.
    pub fn new(retention: Duration) -> Self {
        Self { retention, entries: HashMap::new() }
    }

    /// What a request with `key` and `fingerprint` is, at `now`. A cloud that
    /// does not compare requests (GCE) passes the same fingerprint always.
    pub fn check(&self, key: &K, fingerprint: &str, now: Instant) -> Replay<'_, V> {
        match self.entries.get(key) {
            Some(e) if now.saturating_duration_since(e.at) < self.retention => {
                if e.fingerprint == fingerprint {
                    Replay::Same(&e.value)
                } else {
                    Replay::Mismatch
                }
            }
            _ => Replay::New,
        }
    }

    /// Remembers the result of a new request (and forgets expired tokens).
    pub fn record(&mut self, key: K, fingerprint: String, value: V, now: Instant) {
        let retention = self.retention;
        self.entries.retain(|_, e| now.saturating_duration_since(e.at) < retention);
        self.entries.insert(key, Entry { fingerprint, value, at: now });
    }

    /// Forgets every token (the fake's reset).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

impl<K: Hash + Eq, V> Default for IdempotencyTokens<K, V> {
    /// Tokens kept for 24 hours.
    fn default() -> Self {
        Self::new(Duration::from_secs(24 * 3600))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_request_replays_other_request_mismatches_and_tokens_expire() {
        let t0 = Instant::now();
        let mut tokens: IdempotencyTokens<(&str, &str), u32> = IdempotencyTokens::new(Duration::from_secs(60));
        assert_eq!(tokens.check(&("acct", "tok"), "f1", t0), Replay::New);
        tokens.record(("acct", "tok"), "f1".into(), 7, t0);
        assert_eq!(tokens.check(&("acct", "tok"), "f1", t0), Replay::Same(&7));
        assert_eq!(tokens.check(&("acct", "tok"), "f2", t0), Replay::Mismatch);
        assert_eq!(tokens.check(&("other", "tok"), "f1", t0), Replay::New, "tokens are scoped");
        assert_eq!(tokens.check(&("acct", "tok"), "f1", t0 + Duration::from_secs(61)), Replay::New, "expired");
    }
}
