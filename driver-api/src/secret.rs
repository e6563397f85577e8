//! Secret data that never prints.

use std::collections::BTreeMap;
use std::fmt;

use crate::error::DriverError;

/// The merged secret data of a request: credentials and `userData`.
///
/// `Debug` prints the keys only; there is no `Display` and no way to log a
/// value by accident. Values leave this type only through the accessors below.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretData(BTreeMap<String, Vec<u8>>);

impl SecretData {
    /// Wraps a key → value map.
    pub fn new(data: BTreeMap<String, Vec<u8>>) -> Self {
        Self(data)
    }

    /// True when no key is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The raw value of `key`.
    pub fn get(&self, key: &str) -> Option<&[u8]> {
        self.0.get(key).map(Vec::as_slice)
    }

    /// True when `key` is set to a non-empty value.
    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some_and(|v| !v.is_empty())
    }

    /// The keys present (safe to log).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// The first non-empty value among `keys` (aliases of one setting), as UTF-8
    /// with surrounding whitespace trimmed. `Ok(None)` when none is set;
    /// INVALID_ARGUMENT naming the key when the value is not UTF-8.
    pub fn first_str(&self, keys: &[&str]) -> Result<Option<&str>, DriverError> {
        for key in keys {
            if let Some(raw) = self.get(key).filter(|v| !v.is_empty()) {
                let s = std::str::from_utf8(raw)
                    .map_err(|_| DriverError::invalid_argument(format!("secret.{key}"), "is not valid UTF-8"))?;
                return Ok(Some(s.trim()));
            }
        }
        Ok(None)
    }

    /// Like [`SecretData::first_str`] but a missing value is INVALID_ARGUMENT
    /// naming the first alias.
    pub fn require_str(&self, keys: &[&str]) -> Result<&str, DriverError> {
        self.first_str(keys)?.ok_or_else(|| {
            DriverError::invalid_argument(
                format!("secret.{}", keys.first().copied().unwrap_or("?")),
                format!("is required (accepted keys: {})", keys.join(", ")),
            )
        })
    }

    /// Inserts or replaces a value.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) {
        self.0.insert(key.into(), value.into());
    }
}

impl fmt::Debug for SecretData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.keys().map(|k| (k, "***stripped***"))).finish()
    }
}

impl<K: Into<String>, V: Into<Vec<u8>>> FromIterator<(K, V)> for SecretData {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self(iter.into_iter().map(|(k, v)| (k.into(), v.into())).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_keys_not_values() {
        let s: SecretData = [("secretAccessKey", "CANARY-123")].into_iter().collect();
        let printed = format!("{s:?}");
        assert!(printed.contains("secretAccessKey"));
        assert!(!printed.contains("CANARY"), "{printed}");
    }

    #[test]
    fn aliases_and_missing_keys() {
        let s: SecretData = [("accessKeyID", " AKID \n"), ("empty", "")].into_iter().collect();
        assert_eq!(s.first_str(&["providerAccessKeyId", "accessKeyID"]).unwrap(), Some("AKID"));
        assert_eq!(s.first_str(&["empty"]).unwrap(), None);
        let err = s.require_str(&["providerSecretAccessKey", "secretAccessKey"]).unwrap_err();
        assert_eq!(err.field(), Some("secret.providerSecretAccessKey"));
    }
}
