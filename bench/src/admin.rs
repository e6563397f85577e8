//! The fake cloud's admin API (`docs/fake-admin-api.md`): the conformance
//! suite's client, plus what the benchmarks need beyond it (throttled count,
//! rate limit, operation classes).

use std::collections::BTreeMap;
use std::time::Duration;

use machine_driver_conformance::fake_admin::FakeAdmin;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// `GET /_admin/calls`, including the throttled count.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub(crate) struct CallCounts {
    /// Requests by exact cloud operation name.
    #[serde(default)]
    pub(crate) calls: BTreeMap<String, u64>,
    /// All requests received (throttled ones included).
    #[serde(default)]
    pub(crate) total: u64,
    /// Requests refused by the fake's rate limit.
    #[serde(default)]
    pub(crate) throttled: u64,
}

impl CallCounts {
    /// Requests of the `read` class (describe/get/list, operation polls).
    pub(crate) fn reads(&self) -> u64 {
        self.calls.iter().filter(|(op, _)| is_read(op)).map(|(_, n)| n).sum()
    }

    /// `Op×n, Op×n` in name order, or `none`.
    pub(crate) fn breakdown(&self) -> String {
        if self.calls.is_empty() {
            return "none".into();
        }
        self.calls.iter().map(|(op, n)| format!("{op}×{n}")).collect::<Vec<_>>().join(", ")
    }
}

/// Whether an exact operation name belongs to the admin API's `read` class.
pub(crate) fn is_read(operation: &str) -> bool {
    matches!(
        operation,
        "DescribeInstances"
            | "DescribeNetworkInterfaces"
            | "DescribeImages"
            | "DescribeImageAttribute"
            | "instances.get"
            | "instances.list"
            | "images.get"
            | "images.getIamPolicy"
            | "zoneOperations.get"
            | "zoneOperations.wait"
    )
}

/// Admin client of one fake.
#[derive(Debug, Clone)]
pub(crate) struct Admin {
    shared: FakeAdmin,
    base: String,
    http: reqwest::Client,
}

impl Admin {
    /// A client for the fake whose cloud API is at `cloud_url`.
    pub(crate) fn new(cloud_url: &str) -> Result<Self, String> {
        let base = format!("{}/_admin", cloud_url.trim_end_matches('/'));
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("fake admin client: {e}"))?;
        Ok(Self { shared: FakeAdmin::new(&base)?, base, http })
    }

    /// Zeroes the counters.
    pub(crate) async fn reset_calls(&self) -> Result<(), String> {
        self.shared.reset_calls().await
    }

    /// Counters since the last reset.
    pub(crate) async fn calls(&self) -> Result<CallCounts, String> {
        let resp = self
            .http
            .get(format!("{}/calls", self.base))
            .send()
            .await
            .map_err(|e| format!("fake admin /calls: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("fake admin /calls: HTTP {}", resp.status()));
        }
        resp.json().await.map_err(|e| format!("fake admin /calls: {e}"))
    }

    /// Token bucket over all cloud requests (`per_second` 0 disables it).
    pub(crate) async fn set_rate_limit(&self, per_second: u32, burst: u32) -> Result<(), String> {
        self.post("rate-limit", json!({"per_second": per_second, "burst": burst})).await
    }

    /// Adds `ms` to every cloud request before the fake processes it (0 removes it).
    pub(crate) async fn set_latency(&self, ms: u64) -> Result<(), String> {
        self.post("latency", json!({"operation": "*", "ms": ms})).await
    }

    /// `POST /_admin/<path>` with a JSON body; any non-2xx answer is an error.
    async fn post(&self, path: &str, body: serde_json::Value) -> Result<(), String> {
        let resp = self
            .http
            .post(format!("{}/{path}", self.base))
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("fake admin /{path}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("fake admin /{path}: HTTP {}", resp.status()));
        }
        Ok(())
    }

    /// Live instances in the fake's inventory.
    pub(crate) async fn live_instances(&self) -> Result<usize, String> {
        Ok(self.shared.instances().await?.into_iter().filter(|i| i.live).count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_parse_and_classify() {
        let c: CallCounts = serde_json::from_str(
            r#"{"calls":{"RunInstances":1,"DescribeInstances":2,"zoneOperations.get":1},"total":4,"throttled":1}"#,
        )
        .unwrap();
        assert_eq!((c.total, c.throttled, c.reads()), (4, 1, 3));
        assert_eq!(c.breakdown(), "DescribeInstances×2, RunInstances×1, zoneOperations.get×1");
        assert_eq!(CallCounts::default().breakdown(), "none");
        assert!(!is_read("instances.insert"));
    }
}
