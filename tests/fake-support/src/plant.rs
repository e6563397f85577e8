//! Planting VMs out of band (`POST /_admin/instances`): a running VM made by
//! someone other than the driver under test (another cluster, an operator,
//! an older driver), described in cloud-neutral words. Each fake turns the
//! request into its cloud's own record (EC2 tags, GCE labels and network tags,
//! ARM tags, ECS tags, Nova metadata); it knows nothing of any driver's
//! conventions, so the markers come from the caller.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Body of `POST /_admin/instances`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlantRequest {
    /// The VM's name as the cloud keeps it (EC2 `Name` tag, GCE instance
    /// name, Azure VM name, ECS `InstanceName`, Nova server name).
    pub name: String,
    /// Exactly the tags the VM carries (GCE: labels; OpenStack: server metadata).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// GCE network tags (`tags.items`); refused by clouds that have none.
    #[serde(default)]
    pub network_tags: Vec<String>,
    /// Where the VM lives (account, project, region, zone, resource group, ...),
    /// in the fake's own keys; what is absent the fake takes from its seeded
    /// state, and keys it does not know are refused.
    #[serde(default)]
    pub scope: BTreeMap<String, String>,
}

/// Answer of `POST /_admin/instances`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planted {
    /// The inventory id (`GET /_admin/inventory`, `POST /_admin/instances/{id}/terminate`).
    pub id: String,
    /// The VM's name.
    pub name: String,
    /// The scope the VM was planted in, every key resolved (defaults included).
    #[serde(default)]
    pub scope: BTreeMap<String, String>,
}

impl Planted {
    /// The answer for VM `id` named `name`, planted in `scope` (its keys and resolved values).
    pub fn new<'a>(id: String, name: String, scope: impl IntoIterator<Item = (&'a str, String)>) -> Self {
        Self { id, name, scope: scope.into_iter().map(|(k, v)| (k.to_owned(), v)).collect() }
    }
}

/// Why a fake refused to plant a VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlantError {
    /// The fake cannot plant VMs (501).
    Unsupported,
    /// The request is not valid for this cloud (400): a bad name, tag,
    /// network tag or scope key.
    Invalid(String),
    /// The cloud already has a VM of that name where names are unique (409).
    Conflict(String),
}

impl fmt::Display for PlantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlantError::Unsupported => f.write_str("this fake cannot plant instances"),
            PlantError::Invalid(why) | PlantError::Conflict(why) => f.write_str(why),
        }
    }
}

impl PlantRequest {
    /// The scope value `key`, or `default` when absent.
    pub fn scope_or(&self, key: &str, default: &str) -> String {
        self.scope.get(key).cloned().unwrap_or_else(|| default.to_owned())
    }

    /// The scope value `key`, or [`PlantError::Invalid`] naming it when absent.
    pub fn scope_required(&self, key: &str) -> Result<String, PlantError> {
        self.scope.get(key).cloned().ok_or_else(|| PlantError::Invalid(format!("scope.{key} is required")))
    }

    /// Refuses scope keys outside `known` (a typo must not plant the VM somewhere else).
    pub fn check_scope_keys(&self, known: &[&str]) -> Result<(), PlantError> {
        match self.scope.keys().find(|k| !known.contains(&k.as_str())) {
            Some(bad) => Err(PlantError::Invalid(format!("unknown scope key {bad:?} (known: {})", known.join(", ")))),
            None => Ok(()),
        }
    }

    /// Refuses network tags (for clouds without them).
    pub fn refuse_network_tags(&self, cloud: &str) -> Result<(), PlantError> {
        if self.network_tags.is_empty() {
            Ok(())
        } else {
            Err(PlantError::Invalid(format!("{cloud} has no network tags; network_tags must be empty")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_helpers() {
        let req = PlantRequest {
            name: "m".into(),
            scope: [("region".to_owned(), "eu-west-1".to_owned())].into(),
            ..Default::default()
        };
        assert_eq!(req.scope_or("region", "x"), "eu-west-1");
        assert_eq!(req.scope_or("zone", "z"), "z");
        assert_eq!(req.scope_required("zone"), Err(PlantError::Invalid("scope.zone is required".into())));
        assert!(req.check_scope_keys(&["region"]).is_ok());
        assert!(req.check_scope_keys(&["zone"]).unwrap_err().to_string().contains("\"region\""));
        assert!(req.refuse_network_tags("EC2").is_ok());
        let tagged = PlantRequest { network_tags: vec!["t".into()], ..req };
        assert!(tagged.refuse_network_tags("EC2").is_err());
    }

    #[test]
    fn request_refuses_unknown_fields() {
        assert!(serde_json::from_str::<PlantRequest>(r#"{"name": "m", "labels": {}}"#).is_err());
        let req: PlantRequest = serde_json::from_str(r#"{"name": "m"}"#).unwrap();
        assert!(req.tags.is_empty() && req.network_tags.is_empty() && req.scope.is_empty());
    }
}
