//! Shared helpers of the fake-gce integration tests: a running fake and a plain HTTP client.

#![allow(dead_code, unreachable_pub)]

use fake_cloud_support::{AdminClient, CallCounts, Timing};
use reqwest::StatusCode;
use serde_json::{Value, json};

pub const PROJECT: &str = "proj";
pub const ZONE: &str = "us-central1-a";

/// A running fake plus an HTTP client.
pub struct Fake {
    pub handle: fake_gce::FakeHandle,
    pub http: reqwest::Client,
    /// The fake's admin API.
    pub admin_client: AdminClient,
}

impl Fake {
    /// Starts a fake on a free port with fast timing (boot 200 ms, stop 200 ms).
    pub async fn start() -> Self {
        let handle = fake_gce::start("127.0.0.1:0".parse().expect("addr")).await.expect("fake starts");
        let admin_client = AdminClient::new(&handle.admin_url()).expect("admin client");
        let fake = Self { handle, http: reqwest::Client::new(), admin_client };
        fake.admin_client.set_timing(Timing { boot_ms: 200, stop_ms: 200, operation_ms: None }).await.expect("timing");
        fake
    }

    /// `URL/compute/v1/projects/proj/zones/us-central1-a/<path>`.
    pub fn zonal(&self, path: &str) -> String {
        format!("{}/compute/v1/projects/{PROJECT}/zones/{ZONE}/{path}", self.handle.url())
    }

    /// `URL/compute/v1/<path>`.
    pub fn api(&self, path: &str) -> String {
        format!("{}/compute/v1/{path}", self.handle.url())
    }

    /// POSTs an admin endpoint through [`AdminClient::post_json`] (a fake's own
    /// routes) and returns its JSON answer.
    pub async fn admin(&self, path: &str, body: Value) -> Value {
        self.admin_client.post_json(path, body).await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// GETs an admin endpoint through [`AdminClient::get_json`].
    pub async fn admin_get(&self, path: &str) -> Value {
        self.admin_client.get_json(path).await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// `GET /_admin/calls`.
    pub async fn calls(&self) -> CallCounts {
        self.admin_client.calls().await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// Sends a request and returns status and JSON body.
    pub async fn send(&self, req: reqwest::RequestBuilder) -> (StatusCode, Value) {
        let resp = req.send().await.expect("request sent");
        let status = resp.status();
        let body = resp.json::<Value>().await.unwrap_or(Value::Null);
        (status, body)
    }

    pub async fn get(&self, url: String) -> (StatusCode, Value) {
        self.send(self.http.get(url).query(&[("$alt", "json")])).await
    }

    /// instances.insert with a minimal valid body.
    pub async fn insert(&self, body: &Value, request_id: Option<&str>) -> (StatusCode, Value) {
        let mut req = self.http.post(self.zonal("instances")).query(&[("$alt", "json")]).json(body);
        if let Some(id) = request_id {
            req = req.query(&[("requestId", id)]);
        }
        self.send(req).await
    }

    pub async fn get_instance(&self, name: &str) -> (StatusCode, Value) {
        self.get(self.zonal(&format!("instances/{name}"))).await
    }

    pub async fn delete(&self, name: &str, request_id: Option<&str>) -> (StatusCode, Value) {
        let mut req = self.http.delete(self.zonal(&format!("instances/{name}")));
        if let Some(id) = request_id {
            req = req.query(&[("requestId", id)]);
        }
        self.send(req).await
    }

    pub async fn list(&self, query: &[(&str, &str)]) -> (StatusCode, Value) {
        self.send(self.http.get(self.zonal("instances")).query(query)).await
    }

    pub async fn operation(&self, name: &str) -> (StatusCode, Value) {
        self.get(self.zonal(&format!("operations/{name}"))).await
    }

    pub async fn wait(&self, name: &str) -> (StatusCode, Value) {
        self.send(self.http.post(self.zonal(&format!("operations/{name}/wait"))).json(&json!({}))).await
    }

    /// Waits (via zoneOperations.wait) until the operation is DONE.
    pub async fn wait_done(&self, name: &str) -> Value {
        for _ in 0..10 {
            let (status, op) = self.wait(name).await;
            assert_eq!(status, StatusCode::OK, "{op}");
            if op["status"] == "DONE" {
                return op;
            }
        }
        panic!("operation {name} never finished");
    }

    /// The instances of the admin inventory.
    pub async fn inventory(&self) -> Vec<Value> {
        self.admin_get("inventory").await["instances"].as_array().cloned().unwrap_or_default()
    }
}

/// A valid insert body like the driver sends.
pub fn instance_body(name: &str, labels: Value) -> Value {
    json!({
        "name": name,
        "machineType": format!("zones/{ZONE}/machineTypes/e2-small"),
        "labels": labels,
        "canIpForward": true,
        "disks": [{
            "boot": true,
            "autoDelete": true,
            "initializeParams": {"sourceImage": fake_gce::PUBLIC_IMAGE, "diskSizeGb": "20"}
        }],
        "networkInterfaces": [{
            "network": "global/networks/default",
            "subnetwork": "regions/us-central1/subnetworks/nodes",
            "accessConfigs": [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]
        }],
        "metadata": {"items": [{"key": "user-data", "value": "#cloud-config\n"}]},
        "tags": {"items": ["node"]},
        "serviceAccounts": [{"email": "nodes@proj.iam.gserviceaccount.com", "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}]
    })
}

pub fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}
