//! Shared helpers of the fake-openstack integration tests: a running fake, Keystone
//! tokens and JSON calls to the services.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::time::Duration;

use fake_cloud_support::{AdminClient, CallCounts, Timing};
use fake_openstack::{
    DOMAIN_NAME, NETWORK_ID, OWNER_PASSWORD, OWNER_PROJECT_NAME, OWNER_USERNAME, PASSWORD, PROJECT_ID, PROJECT_NAME,
    PUBLIC_IMAGE, USERNAME,
};
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// An HTTP answer: status, headers, JSON body (Null when not JSON) and raw text.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Answer {
    /// Asserts `status` and returns the body.
    pub fn expect(self, status: u16) -> Value {
        assert_eq!(self.status.as_u16(), status, "{}", self.text);
        self.body
    }

    /// A header as text ("" when absent).
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }
}

/// A password auth body (user and project by name in the Default domain).
pub fn password_body(user: &str, password: &str, project: &str) -> Value {
    json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {"name": user, "domain": {"name": DOMAIN_NAME}, "password": password}}},
        "scope": {"project": {"name": project, "domain": {"name": DOMAIN_NAME}}},
    }})
}

/// A running fake, an HTTP client and a cluster and an owner token.
pub struct Fake {
    pub handle: fake_openstack::FakeHandle,
    pub http: reqwest::Client,
    /// The fake's admin API.
    pub admin_client: AdminClient,
    pub cluster: String,
    pub owner: String,
}

impl Fake {
    /// Starts a fake on a free port with boot 150 ms and stop 150 ms, and gets both tokens.
    pub async fn start() -> Self {
        let handle = fake_openstack::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let admin_client = AdminClient::new(&handle.admin_url()).expect("admin client");
        let mut fake =
            Self { handle, http: reqwest::Client::new(), admin_client, cluster: String::new(), owner: String::new() };
        fake.admin_client.set_timing(Timing { boot_ms: 150, stop_ms: 150, operation_ms: None }).await.expect("timing");
        fake.cluster = fake.token(password_body(USERNAME, PASSWORD, PROJECT_NAME)).await;
        fake.owner = fake.token(password_body(OWNER_USERNAME, OWNER_PASSWORD, OWNER_PROJECT_NAME)).await;
        fake
    }

    /// `POST /identity/v3/auth/tokens` with `body`.
    pub async fn auth(&self, body: Value) -> Answer {
        self.send(Method::POST, "/identity/v3/auth/tokens", None, Some(body), &[]).await
    }

    /// A token for `body` (asserting 201).
    pub async fn token(&self, body: Value) -> String {
        let answer = self.auth(body).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text);
        answer.header("x-subject-token").to_owned()
    }

    /// Any request; `token` goes into `X-Auth-Token`; `headers` are added as given.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut builder = self.http.request(method, format!("{}{path}", self.handle.url()));
        if let Some(token) = token {
            builder = builder.header("x-auth-token", token);
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        if let Some(body) = body {
            let is_patch = headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-type"));
            builder = if is_patch { builder.body(body.to_string()) } else { builder.json(&body) };
        }
        let resp = builder.send().await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap();
        Answer { status, headers, body: serde_json::from_str(&text).unwrap_or(Value::Null), text }
    }

    /// A call as the cluster.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        self.send(method, path, Some(&self.cluster.clone()), body, &[]).await
    }

    /// A GET as the cluster.
    pub async fn get(&self, path: &str) -> Answer {
        self.call(Method::GET, path, None).await
    }

    /// A Nova call as the cluster with microversion 2.96.
    pub async fn nova(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        self.nova_as(&self.cluster.clone(), method, path, body).await
    }

    /// A Nova call with `token` and microversion 2.96.
    pub async fn nova_as(&self, token: &str, method: Method, path: &str, body: Option<Value>) -> Answer {
        let path = format!("/compute/v2.1{path}");
        self.send(method, &path, Some(token), body, &[("OpenStack-API-Version", "compute 2.96")]).await
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

    /// Creates a server on the cluster network with `extra` fields; returns its id.
    pub async fn create_server(&self, name: &str, extra: Value) -> String {
        let mut server =
            json!({"name": name, "imageRef": PUBLIC_IMAGE, "flavorRef": "2", "networks": [{"uuid": NETWORK_ID}]});
        if let (Some(target), Some(fields)) = (server.as_object_mut(), extra.as_object()) {
            for (k, v) in fields {
                target.insert(k.clone(), v.clone());
            }
        }
        let body = self.nova(Method::POST, "/servers", Some(json!({"server": server}))).await.expect(202);
        body["server"]["id"].as_str().unwrap().to_owned()
    }

    /// GET of a server (Null when 404).
    pub async fn server(&self, id: &str) -> Value {
        let answer = self.nova(Method::GET, &format!("/servers/{id}"), None).await;
        if answer.status == StatusCode::NOT_FOUND { Value::Null } else { answer.expect(200)["server"].clone() }
    }

    /// Polls until server `id` has `status` ("gone" = 404).
    pub async fn wait_server(&self, id: &str, status: &str) -> Vec<String> {
        let mut seen = Vec::new();
        for _ in 0..300 {
            let server = self.server(id).await;
            let now = server["status"].as_str().unwrap_or("gone").to_owned();
            if seen.last() != Some(&now) {
                seen.push(now.clone());
            }
            if now == status {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{id} never reached {status}; saw {seen:?}");
    }

    /// `GET /_admin/inventory`.
    pub async fn inventory(&self) -> Value {
        self.admin_get("inventory").await
    }

    /// The volume API root of the cluster project.
    pub fn volumes_path(&self) -> String {
        format!("/volume/v3/{PROJECT_ID}/volumes")
    }
}
