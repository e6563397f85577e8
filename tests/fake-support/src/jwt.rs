//! The claims of a JWT presented to a fake's token exchange (AWS STS
//! `AssumeRoleWithWebIdentity`, Google STS): the fakes check the token's shape
//! and expiry, never its signature. Each fake keeps its own cloud's refusal.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwtRefusal {
    /// Not three base64url parts with a JSON object as payload.
    Malformed,
    /// `exp` (seconds since the epoch) is not after `now`.
    Expired {
        /// The token's `exp`.
        exp: i64,
        /// The fake's clock, seconds since the epoch.
        now: i64,
    },
}

/// The payload of `token` (`header.payload.signature`, base64url, padding
/// tolerated) when it is a JSON object whose `exp`, if present, has not passed.
pub fn unexpired_claims(token: &str) -> Result<serde_json::Value, JwtRefusal> {
    let parts: Vec<&str> = token.trim().split('.').collect();
    let [_, payload, _] = parts.as_slice() else {
        return Err(JwtRefusal::Malformed);
    };
    let claims: serde_json::Value = URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .filter(serde_json::Value::is_object)
        .ok_or(JwtRefusal::Malformed)?;
    if let Some(exp) = claims.get("exp").and_then(serde_json::Value::as_i64) {
        let now = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs())
            .unwrap_or(i64::MAX);
        if exp <= now {
            return Err(JwtRefusal::Expired { exp, now });
        }
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: &serde_json::Value) -> String {
        format!("eyJhbGciOiJSUzI1NiJ9.{}.c2ln", URL_SAFE_NO_PAD.encode(claims.to_string()))
    }

    #[test]
    fn claims_of_an_unexpired_token() {
        let claims = serde_json::json!({"sub": "sa", "exp": i64::MAX / 2});
        assert_eq!(unexpired_claims(&jwt(&claims)), Ok(claims));
        let padded = format!("{}==", jwt(&serde_json::json!({"sub": "x"})).rsplit_once('.').unwrap().0);
        assert!(unexpired_claims(&format!("{padded}.sig")).is_ok(), "padding is tolerated");
    }

    #[test]
    fn refusals() {
        assert_eq!(unexpired_claims("not-a-jwt"), Err(JwtRefusal::Malformed));
        assert_eq!(unexpired_claims("a.%%%.c"), Err(JwtRefusal::Malformed));
        assert_eq!(unexpired_claims(&format!("a.{}.c", URL_SAFE_NO_PAD.encode("[1]"))), Err(JwtRefusal::Malformed));
        let expired = unexpired_claims(&jwt(&serde_json::json!({"exp": 1})));
        assert!(matches!(expired, Err(JwtRefusal::Expired { exp: 1, now }) if now > 1), "{expired:?}");
    }
}
