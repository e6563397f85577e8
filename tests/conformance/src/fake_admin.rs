//! Client of the fake clouds' cloud-neutral admin API (`docs/fake-admin-api.md`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

/// Connection to `<fake>/_admin`.
#[derive(Debug, Clone)]
pub struct FakeAdmin {
    base: String,
    http: reqwest::Client,
}

/// `GET /_admin/calls`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Calls {
    /// Requests by exact cloud operation name.
    #[serde(default)]
    pub calls: BTreeMap<String, u64>,
    /// All requests.
    #[serde(default)]
    pub total: u64,
}

/// One instance of `GET /_admin/inventory`.
#[derive(Debug, Clone, Deserialize)]
pub struct Instance {
    /// Cloud id.
    pub id: String,
    /// Machine name.
    #[serde(default)]
    pub name: String,
    /// Cloud state.
    #[serde(default)]
    pub state: String,
    /// False once terminated/deleted.
    pub live: bool,
    /// The user data the VM boots with, base64 (null when none).
    #[serde(default)]
    pub user_data: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Inventory {
    #[serde(default)]
    instances: Vec<Instance>,
}

/// A fault to inject (`POST /_admin/faults`).
#[derive(Debug, Clone, Copy)]
pub struct Fault<'a> {
    /// Operation class (`create`, `read`, `write`, `delete`, `*`) or exact name.
    pub operation: &'a str,
    /// Neutral kind (`throttle`, `capacity`, `unavailable`, `internal`, `auth`, `permission`, `invalid`).
    pub kind: &'a str,
    /// How many calls it strikes; every matching call when `None`.
    pub times: Option<u32>,
    /// `before` (no effect) or `after` (effect happens, answer lost).
    pub phase: &'a str,
}

impl FakeAdmin {
    /// A client for the admin API at `base` (e.g. `http://127.0.0.1:8080/_admin`).
    pub fn new(base: &str) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("fake admin client: {e}"))?;
        Ok(Self { base: base.trim_end_matches('/').to_string(), http })
    }

    /// The admin base URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    async fn send(&self, req: reqwest::RequestBuilder, what: &str) -> Result<reqwest::Response, String> {
        let resp = req.send().await.map_err(|e| format!("fake admin {what}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("fake admin {what}: HTTP {}", resp.status()));
        }
        Ok(resp)
    }

    async fn post(&self, path: &str, body: Value) -> Result<(), String> {
        self.send(self.http.post(format!("{}{path}", self.base)).json(&body), path).await.map(|_| ())
    }

    /// `GET /calls`: request counters since the last reset.
    pub async fn calls(&self) -> Result<Calls, String> {
        let resp = self.send(self.http.get(format!("{}/calls", self.base)), "/calls").await?;
        resp.json().await.map_err(|e| format!("fake admin /calls: {e}"))
    }

    /// `POST /calls/reset`.
    pub async fn reset_calls(&self) -> Result<(), String> {
        self.post("/calls/reset", json!({})).await
    }

    /// `POST /faults`.
    pub async fn add_fault(&self, fault: Fault<'_>) -> Result<(), String> {
        let mut body = json!({"operation": fault.operation, "kind": fault.kind, "phase": fault.phase});
        if let (Some(times), Some(obj)) = (fault.times, body.as_object_mut()) {
            obj.insert("times".into(), json!(times));
        }
        self.post("/faults", body).await
    }

    /// `DELETE /faults`.
    pub async fn clear_faults(&self) -> Result<(), String> {
        self.send(self.http.delete(format!("{}/faults", self.base)), "DELETE /faults").await.map(|_| ())
    }

    /// `POST /consistency`.
    pub async fn set_invisible_ms(&self, ms: u64) -> Result<(), String> {
        self.post("/consistency", json!({"invisible_ms": ms})).await
    }

    /// `GET /inventory`: every instance, live or not.
    pub async fn instances(&self) -> Result<Vec<Instance>, String> {
        let resp = self.send(self.http.get(format!("{}/inventory", self.base)), "/inventory").await?;
        let inv: Inventory = resp.json().await.map_err(|e| format!("fake admin /inventory: {e}"))?;
        Ok(inv.instances)
    }

    /// Live instances named `name`.
    pub async fn live_named(&self, name: &str) -> Result<Vec<Instance>, String> {
        Ok(self.instances().await?.into_iter().filter(|i| i.live && i.name == name).collect())
    }

    /// Undoes every setting a scenario may have made: faults, latency, rate limit, consistency.
    /// Instances and counters are left alone.
    pub async fn clean_settings(&self) -> Result<(), String> {
        self.clear_faults().await?;
        self.post("/latency", json!({"operation": "*", "ms": 0})).await?;
        self.post("/rate-limit", json!({"per_second": 0, "burst": 0})).await?;
        self.set_invisible_ms(0).await
    }
}
