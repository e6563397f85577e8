//! `Policy`: the IAM policy of an image, and the `setIamPolicy` request body.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An IAM policy (`version`, `etag`, `bindings`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Policy {
    #[serde(default)]
    pub(crate) version: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) etag: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) bindings: Vec<Binding>,
}

/// One role binding of a policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Binding {
    #[serde(default)]
    pub(crate) role: String,
    #[serde(default)]
    pub(crate) members: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) condition: Option<Value>,
}

/// The body of `images.setIamPolicy` (`GlobalSetPolicyRequest`).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct SetPolicyRequest {
    pub(crate) policy: Option<Policy>,
    pub(crate) etag: Option<String>,
    pub(crate) bindings: Option<Vec<Binding>>,
}

impl Policy {
    /// Whether `principal` (or `allUsers`/`allAuthenticatedUsers`) holds one of `roles`.
    pub(crate) fn grants(&self, principal: Option<&str>, roles: &[&str]) -> bool {
        self.bindings.iter().filter(|b| roles.contains(&b.role.as_str())).any(|b| {
            b.members.iter().any(|m| {
                m == "allUsers"
                    || (principal.is_some() && m == "allAuthenticatedUsers")
                    || principal.is_some_and(|p| p == m)
            })
        })
    }
}
