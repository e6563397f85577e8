//! Shared helpers of the fake-arm integration tests: a running fake, tokens and ARM calls.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::time::Duration;

use fake_arm::{CLIENT_ID, CLIENT_SECRET, LOCATION, RESOURCE_GROUP, SUBNET, SUBSCRIPTION_ID, TENANT_ID, VNET};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

pub const API: &str = "2024-07-01";
pub const NET_API: &str = "2024-03-01";

/// A running fake, an HTTP client and a cluster token.
pub struct Fake {
    pub handle: fake_arm::FakeHandle,
    pub http: reqwest::Client,
    pub token: String,
}

/// An HTTP answer: status, headers, JSON body (Null when empty).
pub struct Answer {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
}

impl Fake {
    /// Starts a fake on a free port with fast timing (boot 200 ms, stop 200 ms) and a cluster token.
    pub async fn start() -> Self {
        let handle = fake_arm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let http = reqwest::Client::new();
        let mut fake = Self { handle, http, token: String::new() };
        fake.admin("timing", json!({"boot_ms": 200, "stop_ms": 200})).await;
        let (status, body) = fake.token_request(TENANT_ID, CLIENT_ID, Some(CLIENT_SECRET), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        fake.token = body["access_token"].as_str().unwrap().to_owned();
        fake
    }

    /// POSTs the AAD token endpoint with a form body.
    pub async fn token_request(
        &self,
        tenant: &str,
        client_id: &str,
        secret: Option<&str>,
        assertion: Option<&str>,
    ) -> (StatusCode, Value) {
        let mut form = format!(
            "grant_type=client_credentials&client_id={client_id}&scope=https%3A%2F%2Fmanagement.azure.com%2F.default"
        );
        if let Some(secret) = secret {
            form.push_str(&format!("&client_secret={secret}"));
        }
        if let Some(assertion) = assertion {
            form.push_str(&format!(
                "&client_assertion={assertion}&client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer"
            ));
        }
        let resp = self
            .http
            .post(format!("{}/{tenant}/oauth2/v2.0/token", self.handle.url()))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// A token for `client_id`/`secret`.
    pub async fn token_for(&self, client_id: &str, secret: &str) -> String {
        let (status, body) = self.token_request(TENANT_ID, client_id, Some(secret), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["access_token"].as_str().unwrap().to_owned()
    }

    /// POSTs an admin endpoint (asserting 200) and returns its JSON answer.
    pub async fn admin(&self, path: &str, body: Value) -> Value {
        let resp = self.http.post(format!("{}/{path}", self.handle.admin_url())).json(&body).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "admin {path}");
        resp.json().await.unwrap()
    }

    /// GETs an admin endpoint.
    pub async fn admin_get(&self, path: &str) -> Value {
        let resp = self.http.get(format!("{}/{path}", self.handle.admin_url())).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        resp.json().await.unwrap()
    }

    /// `URL + path` (path starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.handle.url())
    }

    /// Sends an ARM request with the cluster token.
    pub async fn call(&self, method: Method, url: &str, body: Option<Value>) -> Answer {
        self.call_as(&self.token.clone(), method, url, body).await
    }

    /// Sends an ARM request with `token` (absolute URL or path; adds api-version if absent).
    pub async fn call_as(&self, token: &str, method: Method, url: &str, body: Option<Value>) -> Answer {
        self.call_with_headers(token, method, url, body, &[]).await
    }

    /// Sends an ARM request with `token` and extra request headers.
    pub async fn call_with_headers(
        &self,
        token: &str,
        method: Method,
        url: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut url = if url.starts_with("http") { url.to_owned() } else { self.url(url) };
        if !url.contains("api-version=") {
            url.push_str(if url.contains('?') { "&" } else { "?" });
            url.push_str(&format!("api-version={API}"));
        }
        let mut req = self.http.request(method, url).bearer_auth(token);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp.json().await.unwrap_or(Value::Null);
        Answer { status, headers, body }
    }

    pub async fn get(&self, url: &str) -> Answer {
        self.call(Method::GET, url, None).await
    }

    /// Polls an `Azure-AsyncOperation` URL until the status is terminal.
    pub async fn wait_op(&self, url: &str) -> Value {
        for _ in 0..100 {
            let answer = self.get(url).await;
            assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
            if answer.body["status"] != "InProgress" {
                return answer.body;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("operation {url} never finished");
    }

    /// Polls an `Azure-AsyncOperation` URL with `token` until terminal.
    pub async fn wait_op_as(&self, token: &str, url: &str) -> Value {
        for _ in 0..100 {
            let answer = self.call_as(token, Method::GET, url, None).await;
            assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
            if answer.body["status"] != "InProgress" {
                return answer.body;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("operation {url} never finished");
    }

    /// PUTs a NIC `name` in the seeded subnet; returns the answer.
    pub async fn put_nic(&self, name: &str, tags: Value) -> Answer {
        self.call(Method::PUT, &format!("{}?api-version={NET_API}", nic_path(name)), Some(nic_body(tags))).await
    }

    /// PUTs VM `name` using NIC `nic`.
    pub async fn put_vm(&self, name: &str, body: Value) -> Answer {
        self.call(Method::PUT, &vm_path(name), Some(body)).await
    }

    /// PUTs VM `name` with `If-None-Match: value` (`*` makes the PUT create-only).
    pub async fn put_vm_if_none_match(&self, name: &str, value: &str, body: Value) -> Answer {
        let token = self.token.clone();
        self.call_with_headers(&token, Method::PUT, &vm_path(name), Some(body), &[("If-None-Match", value)]).await
    }

    /// Waits until `GET path` answers 404.
    pub async fn wait_gone(&self, path: &str) {
        for _ in 0..100 {
            if self.get(path).await.status == StatusCode::NOT_FOUND {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{path} never disappeared");
    }

    /// `GET /_admin/inventory`.
    pub async fn inventory(&self) -> Value {
        self.admin_get("inventory").await
    }
}

pub fn rg_path() -> String {
    format!("/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/{RESOURCE_GROUP}")
}

pub fn vm_path(name: &str) -> String {
    format!("{}/providers/Microsoft.Compute/virtualMachines/{name}", rg_path())
}

pub fn nic_path(name: &str) -> String {
    format!("{}/providers/Microsoft.Network/networkInterfaces/{name}", rg_path())
}

pub fn disk_path(name: &str) -> String {
    format!("{}/providers/Microsoft.Compute/disks/{name}", rg_path())
}

pub fn subnet_id() -> String {
    format!("{}/providers/Microsoft.Network/virtualNetworks/{VNET}/subnets/{SUBNET}", rg_path())
}

pub fn nic_body(tags: Value) -> Value {
    json!({
        "location": LOCATION,
        "tags": tags,
        "properties": {
            "enableIPForwarding": true,
            "enableAcceleratedNetworking": false,
            "nicType": "Standard",
            "ipConfigurations": [{
                "name": "ipconfig1",
                "properties": {"subnet": {"id": subnet_id()}, "privateIPAllocationMethod": "Dynamic", "primary": true}
            }]
        }
    })
}

/// A VM body as the Rust SDK sends it (with `null` read-only fields), using NIC `nic`.
pub fn vm_body(name: &str, nic: &str, tags: Value, custom_data: &str) -> Value {
    json!({
        "location": LOCATION,
        "tags": tags,
        "zones": ["1"],
        "properties": {
            "hardwareProfile": {"vmSize": "Standard_D2s_v3"},
            "storageProfile": {
                "imageReference": {"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "24.04.202501140"},
                "osDisk": {
                    "name": format!("{name}-os-disk"),
                    "createOption": "FromImage",
                    "diskSizeGB": 50,
                    "caching": "ReadWrite",
                    "managedDisk": {"storageAccountType": "Premium_LRS"},
                    "deleteOption": "Delete"
                },
                "dataDisks": [{
                    "lun": 0,
                    "name": format!("{name}-data-0-data-disk"),
                    "createOption": "Empty",
                    "diskSizeGB": 10,
                    "caching": "None",
                    "managedDisk": {"storageAccountType": "StandardSSD_LRS"},
                    "deleteOption": "Delete"
                }]
            },
            "osProfile": {
                "computerName": name,
                "adminUsername": "core",
                "customData": custom_data,
                "linuxConfiguration": {
                    "disablePasswordAuthentication": true,
                    "ssh": {"publicKeys": [{"path": "/home/core/.ssh/authorized_keys", "keyData": "ssh-rsa AAAAB3NzaC1yc2E fake"}]}
                }
            },
            "networkProfile": {"networkInterfaces": [{"id": format!("{}", nic_id(nic)), "properties": {"primary": true, "deleteOption": "Delete"}}]},
            "timeCreated": null,
            "provisioningState": null,
            "vmId": null,
            "instanceView": null
        }
    })
}

pub fn nic_id(name: &str) -> String {
    nic_path(name)
}
