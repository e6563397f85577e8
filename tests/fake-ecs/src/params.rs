//! The request parameters of one RPC call: the query string merged with a form body,
//! with ECS's flattened list syntax (`Tag.1.Key`, `AddAccount.2`, `DataDisk.1.Size`).

use std::collections::BTreeMap;

use crate::error::EcsError;

/// Parameters that belong to the protocol (signature, format), not to the action.
pub(crate) const COMMON: &[&str] = &[
    "Action",
    "Version",
    "Format",
    "AccessKeyId",
    "SignatureMethod",
    "SignatureVersion",
    "SignatureNonce",
    "SignatureType",
    "Timestamp",
    "Signature",
    "SecurityToken",
];

/// Request parameters by exact (case-sensitive) name; a later duplicate wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Params {
    map: BTreeMap<String, String>,
}

impl Params {
    /// Parameters from decoded pairs (query first, then body).
    pub(crate) fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        Self { map: pairs.into_iter().collect() }
    }

    /// A parameter's value; empty values count as absent (the Go SDK sends unset fields as `X=`).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.map.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// A mandatory parameter, or 400 `MissingParameter`.
    pub(crate) fn required(&self, name: &str) -> Result<&str, EcsError> {
        self.get(name).ok_or_else(|| EcsError::missing(name))
    }

    /// A boolean parameter (`true`/`false`, any case); absent = `default`.
    pub(crate) fn flag(&self, name: &str, default: bool) -> Result<bool, EcsError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(_) => Err(EcsError::invalid_parameter(name)),
        }
    }

    /// An integer parameter within `range`; absent = `default`.
    pub(crate) fn int(&self, name: &str, default: u64, range: std::ops::RangeInclusive<u64>) -> Result<u64, EcsError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|n| range.contains(n))
                .ok_or_else(|| EcsError::invalid_parameter(name)),
        }
    }

    /// The indices `N` present for `prefix.N` or `prefix.N.<field>`, ascending.
    pub(crate) fn indices(&self, prefix: &str) -> Vec<u32> {
        let dotted = format!("{prefix}.");
        let mut found: Vec<u32> = self
            .map
            .keys()
            .filter_map(|key| key.strip_prefix(&dotted))
            .filter_map(|rest| rest.split('.').next()?.parse::<u32>().ok())
            .collect();
        found.sort_unstable();
        found.dedup();
        found
    }

    /// The values of a repeated list `prefix.1`, `prefix.2`, ... (by index; empty ones skipped).
    pub(crate) fn list(&self, prefix: &str) -> Vec<(u32, String)> {
        self.indices(prefix)
            .into_iter()
            .filter_map(|n| self.get(&format!("{prefix}.{n}")).map(|v| (n, v.to_owned())))
            .collect()
    }

    /// `prefix.N.field` for one index.
    pub(crate) fn field(&self, prefix: &str, n: u32, field: &str) -> Option<&str> {
        self.get(&format!("{prefix}.{n}.{field}"))
    }

    /// `Tag.N.Key`/`Tag.N.Value` pairs in index order; a value without a key is skipped,
    /// a key without a value has `None`.
    pub(crate) fn tags(&self) -> Vec<(String, Option<String>)> {
        self.indices("Tag")
            .into_iter()
            .filter_map(|n| {
                let key = self.field("Tag", n, "Key")?;
                Some((key.to_owned(), self.field("Tag", n, "Value").map(str::to_owned)))
            })
            .collect()
    }

    /// A fingerprint of the action's own parameters (common protocol parameters and
    /// `ClientToken` excluded), for ClientToken idempotency.
    pub(crate) fn fingerprint(&self) -> String {
        self.map
            .iter()
            .filter(|(k, v)| !COMMON.contains(&k.as_str()) && k.as_str() != "ClientToken" && !v.is_empty())
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Params {
        Params::from_pairs(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())))
    }

    #[test]
    fn lists_tags_and_fingerprints() {
        let p = params(&[
            ("Tag.2.Key", "b"),
            ("Tag.1.Key", "a"),
            ("Tag.1.Value", "1"),
            ("Tag.3.Value", "orphan"),
            ("AddAccount.10", "x"),
            ("AddAccount.2", "y"),
            ("Empty", ""),
            ("ClientToken", "t"),
            ("SignatureNonce", "n"),
        ]);
        assert_eq!(p.tags(), vec![("a".to_owned(), Some("1".to_owned())), ("b".to_owned(), None)]);
        assert_eq!(p.list("AddAccount"), vec![(2, "y".to_owned()), (10, "x".to_owned())]);
        assert_eq!(p.get("Empty"), None);
        assert_eq!(
            p.fingerprint(),
            "AddAccount.10=x&AddAccount.2=y&Tag.1.Key=a&Tag.1.Value=1&Tag.2.Key=b&Tag.3.Value=orphan"
        );
        assert!(p.required("Missing").is_err());
        assert_eq!(params(&[("Force", "TRUE")]).flag("Force", false), Ok(true));
        assert!(params(&[("Force", "yes")]).flag("Force", false).is_err());
        assert_eq!(params(&[("PageSize", "100")]).int("PageSize", 10, 1..=100), Ok(100));
        assert!(params(&[("PageSize", "101")]).int("PageSize", 10, 1..=100).is_err());
    }
}
