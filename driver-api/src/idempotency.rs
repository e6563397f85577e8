//! Deterministic idempotency tokens.

use sha2::{Digest, Sha256};

/// A token derived from a machine uid (and a purpose), stable across retries,
/// sidecar restarts and replicas: SHA-256 of `purpose/uid`, hex, cut to `len`
/// characters (EC2 ClientToken allows 64; GCE requestId wants a UUID, see the provider).
pub fn idempotency_token(purpose: &str, uid: &str, len: usize) -> String {
    let mut h = Sha256::new();
    h.update(purpose.as_bytes());
    h.update(b"/");
    h.update(uid.as_bytes());
    let mut s = hex::encode(h.finalize());
    s.truncate(len);
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn stable_and_distinct() {
        let a = super::idempotency_token("create", "uid-1", 40);
        assert_eq!(a, super::idempotency_token("create", "uid-1", 40));
        assert_ne!(a, super::idempotency_token("create", "uid-2", 40));
        assert_eq!(a.len(), 40);
    }
}
