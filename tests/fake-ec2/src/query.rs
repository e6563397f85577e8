//! The AWS Query wire format of requests: `Action=...&Version=...&InstanceId.1=...&Filter.1.Name=...`.

use std::collections::BTreeMap;

use crate::errors::Ec2Error;

/// Decoded request parameters (keys as sent, e.g. `Filter.1.Value.2`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Params {
    values: BTreeMap<String, String>,
}

impl Params {
    /// Parses an `application/x-www-form-urlencoded` body or query string
    /// ([`fake_cloud_support::wire::parse_form`]; a repeated key keeps its last value).
    pub(crate) fn parse(raw: &str) -> Self {
        Self { values: fake_cloud_support::wire::parse_form(raw).into_iter().collect() }
    }

    /// Builds parameters from pairs (tests).
    #[cfg(test)]
    pub(crate) fn from_pairs<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        Self { values: pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect() }
    }

    /// One scalar parameter.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// A required scalar parameter, or `MissingParameter`.
    pub(crate) fn required(&self, key: &str) -> Result<&str, Ec2Error> {
        self.get(key).filter(|v| !v.is_empty()).ok_or_else(|| Ec2Error::missing_parameter(key))
    }

    /// A boolean parameter (`true`/`false`), or `InvalidParameterValue`.
    pub(crate) fn bool(&self, key: &str) -> Result<Option<bool>, Ec2Error> {
        match self.get(key) {
            None => Ok(None),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(Some(true)),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some(v) => Err(Ec2Error::invalid_value(key, v)),
        }
    }

    /// An integer parameter, or `InvalidParameterValue`.
    pub(crate) fn int(&self, key: &str) -> Result<Option<i64>, Ec2Error> {
        self.get(key).map(|v| v.parse::<i64>().map_err(|_| Ec2Error::invalid_value(key, v))).transpose()
    }

    /// A flattened list of scalars: `Prefix.1`, `Prefix.2`, ... in index order.
    pub(crate) fn list(&self, prefix: &str) -> Vec<String> {
        let mut items: Vec<(u32, String)> = self
            .values
            .iter()
            .filter_map(|(key, value)| {
                let rest = key.strip_prefix(prefix)?.strip_prefix('.')?;
                Some((rest.parse::<u32>().ok()?, value.clone()))
            })
            .collect();
        items.sort_by_key(|(index, _)| *index);
        items.into_iter().map(|(_, value)| value).collect()
    }

    /// A flattened list of structures: `Prefix.N.Member...`, each as its own `Params`, in index order.
    pub(crate) fn members(&self, prefix: &str) -> Vec<Params> {
        let mut groups: BTreeMap<u32, Params> = BTreeMap::new();
        for (key, value) in &self.values {
            let Some(rest) = key.strip_prefix(prefix).and_then(|r| r.strip_prefix('.')) else { continue };
            let Some((index, member)) = rest.split_once('.') else { continue };
            let Ok(index) = index.parse::<u32>() else { continue };
            groups.entry(index).or_default().values.insert(member.to_owned(), value.clone());
        }
        groups.into_values().collect()
    }

    /// Whether there is no parameter at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// A nested structure `Prefix.Member...` as its own `Params`.
    pub(crate) fn nested(&self, prefix: &str) -> Params {
        let values = self
            .values
            .iter()
            .filter_map(|(key, value)| {
                let member = key.strip_prefix(prefix)?.strip_prefix('.')?;
                Some((member.to_owned(), value.clone()))
            })
            .collect();
        Params { values }
    }

    /// A canonical text of every parameter except the ones listed (idempotency fingerprints).
    pub(crate) fn fingerprint(&self, except: &[&str]) -> String {
        self.values
            .iter()
            .filter(|(key, _)| !except.contains(&key.as_str()))
            .map(|(key, value)| format!("{key}={value}\n"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_lists_and_members() {
        let params = Params::parse(
            "Action=DescribeInstances&InstanceId.2=i-2&InstanceId.1=i-1&InstanceId.10=i-10\
             &Filter.1.Name=tag%3AName&Filter.1.Value.1=a+b&Filter.2.Name=tag-key&Filter.2.Value.1=x%2Fy",
        );
        assert_eq!(params.get("Action"), Some("DescribeInstances"));
        assert_eq!(params.list("InstanceId"), ["i-1", "i-2", "i-10"]);
        let filters = params.members("Filter");
        assert_eq!(filters.len(), 2);
        assert_eq!(filters[0].get("Name"), Some("tag:Name"));
        assert_eq!(filters[0].list("Value"), ["a b"]);
        assert_eq!(filters[1].list("Value"), ["x/y"]);
        assert_eq!(params.nested("Filter.1").get("Name"), Some("tag:Name"));
    }

    #[test]
    fn typed_accessors_reject_garbage() {
        let params = Params::parse("A=true&B=nope&C=12&D=x");
        assert_eq!(params.bool("A").ok(), Some(Some(true)));
        assert!(params.bool("B").is_err());
        assert_eq!(params.int("C").ok(), Some(Some(12)));
        assert!(params.int("D").is_err());
        assert!(params.required("Z").is_err());
    }
}
