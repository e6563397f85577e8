//! [`AdminClient`]: the one typed client of the admin API
//! (`docs/fake-admin-api.md`), used by the conformance suite, the benchmark
//! harness and tests. It speaks HTTP only, so it works against a fake in this
//! process, in another process, or embedded in a driver.

use std::time::Duration;

use serde_json::{Value, json};

use crate::counters::CallCounts;
use crate::faults::FaultSpec;
use crate::hooks::{Inventory, InventoryInstance};
use crate::plant::{PlantRequest, Planted};
use crate::settings::Timing;

/// Connection to `<fake>/_admin`.
#[derive(Debug, Clone)]
pub struct AdminClient {
    base: String,
    http: reqwest::Client,
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

/// What the fake answered to `POST /_admin/instances/{id}/reclaim`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReclaimAnswer {
    /// 200: the cloud took the Spot VM back; how the cloud now shows it.
    Reclaimed(String),
    /// 404: no live instance has the id; the fake's reason.
    NotFound(String),
    /// 409: the VM is not a Spot VM (the cloud never reclaims it); the fake's reason.
    NotSpot(String),
    /// 501: the fake has no Spot VMs; the fake's reason.
    Unsupported(String),
}

impl ReclaimAnswer {
    /// The answer of an HTTP `status` with its JSON `body`; any status the
    /// admin API does not document is an error.
    fn of(status: reqwest::StatusCode, body: &Value) -> Result<Self, String> {
        let text = |key: &str| body.get(key).and_then(Value::as_str).unwrap_or("no reason given").to_owned();
        match status.as_u16() {
            200 => Ok(Self::Reclaimed(body.get("shown").and_then(Value::as_str).unwrap_or_default().to_owned())),
            404 => Ok(Self::NotFound(text("error"))),
            409 => Ok(Self::NotSpot(text("error"))),
            501 => Ok(Self::Unsupported(text("error"))),
            _ => Err(format!("fake admin POST /instances/{{id}}/reclaim: HTTP {status}: {body}")),
        }
    }
}

impl std::fmt::Display for ReclaimAnswer {
    /// The HTTP status and the fake's text, as the admin API answered them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Reclaimed(shown) => write!(f, "HTTP 200 OK: reclaimed, shown as {shown:?}"),
            Self::NotFound(why) => write!(f, "HTTP 404 Not Found: {why}"),
            Self::NotSpot(why) => write!(f, "HTTP 409 Conflict: {why}"),
            Self::Unsupported(why) => write!(f, "HTTP 501 Not Implemented: {why}"),
        }
    }
}

impl AdminClient {
    /// A client for the admin API at `base` (e.g. `http://127.0.0.1:8080/_admin`).
    pub fn new(base: &str) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("fake admin client: {e}"))?;
        Ok(Self { base: base.trim_end_matches('/').to_string(), http })
    }

    /// A client for the fake whose cloud API is at `cloud_url` (admin under `/_admin`).
    pub fn for_cloud_url(cloud_url: &str) -> Result<Self, String> {
        Self::new(&format!("{}{}", cloud_url.trim_end_matches('/'), crate::ADMIN_PREFIX))
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

    /// `POST <path>` with a JSON body; any non-2xx answer is an error.
    pub async fn post(&self, path: &str, body: Value) -> Result<(), String> {
        let path = format!("/{}", path.trim_start_matches('/'));
        self.send(self.http.post(format!("{}{path}", self.base)).json(&body), &path).await.map(|_| ())
    }

    /// `POST <path>` with a JSON body, answered with JSON (a fake's own admin
    /// routes, e.g. fake-gce's `/gce/sts`); any non-2xx answer is an error.
    pub async fn post_json(&self, path: &str, body: Value) -> Result<Value, String> {
        let path = format!("/{}", path.trim_start_matches('/'));
        let resp = self.send(self.http.post(format!("{}{path}", self.base)).json(&body), &path).await?;
        resp.json().await.map_err(|e| format!("fake admin {path}: {e}"))
    }

    /// `DELETE <path>` (a fake's own admin routes, e.g. fake-openstack's
    /// `/openstack/server-failures`); any non-2xx answer is an error.
    pub async fn delete(&self, path: &str) -> Result<(), String> {
        let path = format!("/{}", path.trim_start_matches('/'));
        self.send(self.http.delete(format!("{}{path}", self.base)), &format!("DELETE {path}")).await.map(|_| ())
    }

    /// `POST /reset`: back to a fresh fake (instances, counters, faults, settings).
    pub async fn reset(&self) -> Result<(), String> {
        self.post("/reset", json!({})).await
    }

    /// `POST /timing`: how long the fake's state transitions (and, when
    /// set, its long-running operations) take.
    pub async fn set_timing(&self, timing: Timing) -> Result<(), String> {
        let body = serde_json::to_value(timing).map_err(|e| format!("fake admin /timing: {e}"))?;
        self.post("/timing", body).await
    }

    /// `GET <path>` answered with JSON (a fake's own admin routes, e.g. fake-ec2's `/sts`).
    pub async fn get_json(&self, path: &str) -> Result<Value, String> {
        let path = format!("/{}", path.trim_start_matches('/'));
        let resp = self.send(self.http.get(format!("{}{path}", self.base)), &path).await?;
        resp.json().await.map_err(|e| format!("fake admin {path}: {e}"))
    }

    /// `GET /calls`: request counters since the last reset, by operation and by class.
    pub async fn calls(&self) -> Result<CallCounts, String> {
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

    /// `POST /faults` with a full rule (probability included); returns the fault's id.
    pub async fn add_fault_spec(&self, spec: &FaultSpec) -> Result<String, String> {
        let req = self.http.post(format!("{}/faults", self.base)).json(spec);
        let answer: Value =
            self.send(req, "/faults").await?.json().await.map_err(|e| format!("fake admin /faults: {e}"))?;
        Ok(answer.get("id").and_then(Value::as_str).unwrap_or_default().to_string())
    }

    /// `DELETE /faults`.
    pub async fn clear_faults(&self) -> Result<(), String> {
        self.send(self.http.delete(format!("{}/faults", self.base)), "DELETE /faults").await.map(|_| ())
    }

    /// `POST /consistency`: new instances stay invisible to reads for `ms`.
    pub async fn set_invisible_ms(&self, ms: u64) -> Result<(), String> {
        self.post("/consistency", json!({"invisible_ms": ms})).await
    }

    /// `POST /rate-limit`: a token bucket over all cloud requests (`per_second` 0 disables it).
    pub async fn set_rate_limit(&self, per_second: u32, burst: u32) -> Result<(), String> {
        self.post("/rate-limit", json!({"per_second": per_second, "burst": burst})).await
    }

    /// `POST /latency`: adds `ms` to every cloud request before the fake processes it (0 removes it).
    pub async fn set_latency(&self, ms: u64) -> Result<(), String> {
        self.post("/latency", json!({"operation": "*", "ms": ms})).await
    }

    /// `GET /inventory`: instances (live or not), images and dependents.
    pub async fn inventory(&self) -> Result<Inventory, String> {
        let resp = self.send(self.http.get(format!("{}/inventory", self.base)), "/inventory").await?;
        resp.json().await.map_err(|e| format!("fake admin /inventory: {e}"))
    }

    /// `GET /inventory`: every instance, live or not.
    pub async fn instances(&self) -> Result<Vec<InventoryInstance>, String> {
        Ok(self.inventory().await?.instances)
    }

    /// `<admin base>/instances/<id>/<action>`, the id one percent-encoded
    /// path segment (Azure ids hold `/`).
    fn instance_url(&self, id: &str, action: &str) -> Result<reqwest::Url, String> {
        let mut url = reqwest::Url::parse(&self.base).map_err(|e| format!("fake admin URL {}: {e}", self.base))?;
        url.path_segments_mut().map_err(|()| format!("fake admin URL {} cannot take a path", self.base))?.extend([
            "instances",
            id,
            action,
        ]);
        Ok(url)
    }

    /// `POST /instances/{id}/terminate`: ends the live instance `id` out of
    /// band, as a spot reclaim or an aborted launch does.
    pub async fn terminate(&self, id: &str) -> Result<(), String> {
        let url = self.instance_url(id, "terminate")?;
        self.send(self.http.post(url).json(&json!({})), "/instances/{id}/terminate").await.map(|_| ())
    }

    /// `POST /instances/{id}/reclaim`: the cloud takes the Spot VM `id` back
    /// (see [`crate::CloudHooks::reclaim`]), with every documented answer told
    /// apart; any other answer, or none, is an error.
    pub async fn reclaim_answer(&self, id: &str) -> Result<ReclaimAnswer, String> {
        let url = self.instance_url(id, "reclaim")?;
        let resp = self.http.post(url).json(&json!({})).send().await;
        let resp = resp.map_err(|e| format!("fake admin POST /instances/{{id}}/reclaim: {e}"))?;
        let status = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        ReclaimAnswer::of(status, &body)
    }

    /// [`Self::reclaim_answer`] for callers that expect the reclaim: answers
    /// how the cloud now shows the VM; the error names the HTTP status and the
    /// fake's reason (`409` for a VM that is not Spot, `501` for a fake
    /// without Spot VMs).
    pub async fn reclaim(&self, id: &str) -> Result<String, String> {
        match self.reclaim_answer(id).await? {
            ReclaimAnswer::Reclaimed(shown) => Ok(shown),
            refused => Err(format!("fake admin POST /instances/{{id}}/reclaim: {refused}")),
        }
    }

    /// `POST /instances`: plants a running VM out of band with exactly the
    /// request's markers (see [`crate::CloudHooks::plant`]). The error names
    /// the HTTP status and the fake's reason (`501` when the fake cannot plant).
    pub async fn plant(&self, request: &PlantRequest) -> Result<Planted, String> {
        let req = self.http.post(format!("{}/instances", self.base)).json(request);
        let resp = req.send().await.map_err(|e| format!("fake admin POST /instances: {e}"))?;
        let status = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            let why = body.get("error").and_then(Value::as_str).unwrap_or("no reason given");
            return Err(format!("fake admin POST /instances: HTTP {status}: {why}"));
        }
        serde_json::from_value(body).map_err(|e| format!("fake admin POST /instances: {e}"))
    }

    /// Live instances named `name`.
    pub async fn live_named(&self, name: &str) -> Result<Vec<InventoryInstance>, String> {
        Ok(self.instances().await?.into_iter().filter(|i| i.live && i.name == name).collect())
    }

    /// Undoes every setting a scenario may have made: faults, latency, rate limit, consistency.
    /// Instances and counters are left alone.
    pub async fn clean_settings(&self) -> Result<(), String> {
        self.clear_faults().await?;
        self.set_latency(0).await?;
        self.set_rate_limit(0, 0).await?;
        self.set_invisible_ms(0).await
    }
}

impl InventoryInstance {
    /// The user data the VM boots with, base64, when the fake reports it.
    pub fn user_data(&self) -> Option<&str> {
        self.extra.get("user_data").and_then(Value::as_str)
    }
}

#[cfg(test)]
mod tests {
    use reqwest::StatusCode;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_instance_id_is_one_percent_encoded_segment() {
        let azure = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/conf-a b";
        let client = AdminClient::new("http://127.0.0.1:8080/_admin/").unwrap();
        let url = client.instance_url(azure, "reclaim").unwrap();
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:8080/_admin/instances/%2Fsubscriptions%2Fs%2FresourceGroups%2Frg%2Fproviders%2F\
             Microsoft.Compute%2FvirtualMachines%2Fconf-a%20b/reclaim"
        );
        assert_eq!(url.path_segments().unwrap().count(), 4);
        assert!(AdminClient::new("not a url").unwrap().instance_url("i-1", "terminate").is_err());
    }

    #[test]
    fn every_documented_reclaim_answer_is_told_apart() {
        let shown = json!({"reclaimed": "i-1", "shown": "Server.SpotInstanceTermination"});
        assert_eq!(
            ReclaimAnswer::of(StatusCode::OK, &shown),
            Ok(ReclaimAnswer::Reclaimed("Server.SpotInstanceTermination".into()))
        );
        let why = json!({"error": "instance i-1 is not a Spot VM"});
        let refused = ReclaimAnswer::of(StatusCode::CONFLICT, &why).unwrap();
        assert_eq!(refused, ReclaimAnswer::NotSpot("instance i-1 is not a Spot VM".into()));
        assert_eq!(refused.to_string(), "HTTP 409 Conflict: instance i-1 is not a Spot VM");
        assert!(matches!(ReclaimAnswer::of(StatusCode::NOT_FOUND, &why), Ok(ReclaimAnswer::NotFound(_))));
        assert_eq!(
            ReclaimAnswer::of(StatusCode::NOT_IMPLEMENTED, &Value::Null),
            Ok(ReclaimAnswer::Unsupported("no reason given".into()))
        );
        let err = ReclaimAnswer::of(StatusCode::INTERNAL_SERVER_ERROR, &json!({"error": "boom"})).unwrap_err();
        assert!(err.contains("500") && err.contains("boom"), "{err}");
    }
}
