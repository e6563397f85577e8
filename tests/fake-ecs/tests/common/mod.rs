//! Shared helpers of the fake-ecs integration tests: a running fake and a small,
//! independent V3 (ACS3-HMAC-SHA256) and V1 (HMAC-SHA1) signer on reqwest.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use fake_cloud_support::{AdminClient, CallCounts, Timing};
use fake_ecs::{ACCESS_KEY_ID, ACCESS_KEY_SECRET, ECS_VERSION, PUBLIC_IMAGE, REGION, SECURITY_GROUP, VSWITCH};
use hmac::{Hmac, KeyInit, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The cluster credentials.
pub const CLUSTER: (&str, &str) = (ACCESS_KEY_ID, ACCESS_KEY_SECRET);
/// The image owner's credentials.
pub const OWNER: (&str, &str) = (fake_ecs::OWNER_ACCESS_KEY_ID, fake_ecs::OWNER_ACCESS_KEY_SECRET);

/// An HTTP answer: status and JSON body (Null when not JSON).
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

impl Answer {
    /// The ECS error `Code` (empty on success).
    pub fn code(&self) -> &str {
        self.body["Code"].as_str().unwrap_or("")
    }

    /// Asserts 200 and returns the body.
    pub fn ok(self) -> Value {
        assert_eq!(self.status, StatusCode::OK, "{}", self.body);
        assert!(self.body["RequestId"].is_string(), "{}", self.body);
        self.body
    }

    /// Asserts status and code.
    pub fn expect(&self, status: u16, code: &str) {
        assert_eq!((self.status.as_u16(), self.code()), (status, code), "{}", self.body);
        for field in ["RequestId", "HostId", "Message", "Recommend"] {
            assert!(self.body[field].is_string(), "error body lacks {field}: {}", self.body);
        }
    }
}

/// RFC 3986 percent-encoding (unreserved characters stay, space → %20).
pub fn pct(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn canonical_query(params: &[(String, String)]) -> String {
    let mut pairs: Vec<(String, String)> = params.iter().map(|(k, v)| (pct(k), pct(v))).collect();
    pairs.sort();
    pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&")
}

/// `YYYY-MM-DDTHH:MM:SSZ` of `at`.
pub fn timestamp(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).unwrap().as_secs();
    let days = i64::try_from(secs / 86_400).unwrap();
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, (rem % 3600) / 60, rem % 60)
}

static NONCE: AtomicU64 = AtomicU64::new(0);

/// A fresh nonce.
pub fn nonce() -> String {
    format!("nonce-{}-{}", std::process::id(), NONCE.fetch_add(1, Ordering::Relaxed))
}

/// One V3 request, with every knob a test may turn.
#[derive(Debug, Clone)]
pub struct V3 {
    pub access_key_id: String,
    pub secret: String,
    pub action: String,
    pub version: String,
    pub method: &'static str,
    pub query: Vec<(String, String)>,
    pub form: Option<Vec<(String, String)>>,
    pub nonce: String,
    pub date: String,
    /// Overrides the x-acs-content-sha256 header (signed as sent).
    pub content_sha256: Option<String>,
    /// Leaves these headers out of SignedHeaders.
    pub unsigned: Vec<&'static str>,
}

impl V3 {
    /// A POST of `action` (ECS version) with `params` in the query, as the cluster.
    pub fn new(action: &str, params: &[(&str, &str)]) -> Self {
        Self {
            access_key_id: CLUSTER.0.to_owned(),
            secret: CLUSTER.1.to_owned(),
            action: action.to_owned(),
            version: ECS_VERSION.to_owned(),
            method: "POST",
            query: params.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            form: None,
            nonce: nonce(),
            date: timestamp(SystemTime::now()),
            content_sha256: None,
            unsigned: Vec::new(),
        }
    }

    /// Signs as `(access key id, secret)`.
    pub fn signed_by(mut self, (ak, secret): (&str, &str)) -> Self {
        self.access_key_id = ak.to_owned();
        self.secret = secret.to_owned();
        self
    }
}

/// A running fake and an HTTP client.
pub struct Fake {
    pub handle: fake_ecs::FakeHandle,
    pub http: reqwest::Client,
    /// The fake's admin API.
    pub admin_client: AdminClient,
}

impl Fake {
    /// Starts a fake on a free port with boot 200 ms and stop 200 ms.
    pub async fn start() -> Self {
        let handle = fake_ecs::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let admin_client = AdminClient::new(&handle.admin_url()).expect("admin client");
        let fake = Self { handle, http: reqwest::Client::new(), admin_client };
        fake.admin_client.set_timing(Timing { boot_ms: 200, stop_ms: 200, operation_ms: None }).await.expect("timing");
        fake
    }

    /// Sends a V3-signed request.
    pub async fn send_v3(&self, req: V3) -> Answer {
        let host = self.handle.local_addr().to_string();
        let body = req.form.as_ref().map(|form| canonical_query(form)).unwrap_or_default();
        let body_hash = hex::encode(Sha256::digest(body.as_bytes()));
        let content_sha = req.content_sha256.clone().unwrap_or(body_hash);
        let mut headers: Vec<(&str, String)> = vec![
            ("host", host),
            ("x-acs-action", req.action.clone()),
            ("x-acs-version", req.version.clone()),
            ("x-acs-date", req.date.clone()),
            ("x-acs-signature-nonce", req.nonce.clone()),
            ("x-acs-content-sha256", content_sha.clone()),
        ];
        if req.form.is_some() {
            headers.push(("content-type", "application/x-www-form-urlencoded".to_owned()));
        }
        headers.sort();
        let signed: Vec<&(&str, String)> = headers.iter().filter(|(name, _)| !req.unsigned.contains(name)).collect();
        let canonical_headers: String = signed.iter().map(|(k, v)| format!("{k}:{}\n", v.trim())).collect();
        let signed_names = signed.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(";");
        let query = canonical_query(&req.query);
        let canonical = format!("{}\n/\n{query}\n{canonical_headers}\n{signed_names}\n{content_sha}", req.method);
        let string_to_sign = format!("ACS3-HMAC-SHA256\n{}", hex::encode(Sha256::digest(canonical.as_bytes())));
        let mut mac = Hmac::<Sha256>::new_from_slice(req.secret.as_bytes()).unwrap();
        mac.update(string_to_sign.as_bytes());
        let signature = hex::encode(mac.finalize().into_bytes());
        let url = if query.is_empty() {
            format!("{}/", self.handle.url())
        } else {
            format!("{}/?{query}", self.handle.url())
        };
        let mut builder = self.http.request(req.method.parse().unwrap(), url);
        for (name, value) in &headers {
            if *name != "host" {
                builder = builder.header(*name, value);
            }
        }
        builder = builder.header(
            "authorization",
            format!(
                "ACS3-HMAC-SHA256 Credential={},SignedHeaders={signed_names},Signature={signature}",
                req.access_key_id
            ),
        );
        if req.form.is_some() {
            builder = builder.body(body);
        }
        let resp = builder.send().await.unwrap();
        let status = resp.status();
        Answer { status, body: resp.json().await.unwrap_or(Value::Null) }
    }

    /// A V3 ECS call as the cluster.
    pub async fn call(&self, action: &str, params: &[(&str, &str)]) -> Answer {
        self.send_v3(V3::new(action, params)).await
    }

    /// A V3 ECS call as `identity`.
    pub async fn call_as(&self, identity: (&str, &str), action: &str, params: &[(&str, &str)]) -> Answer {
        self.send_v3(V3::new(action, params).signed_by(identity)).await
    }

    /// A V1-signed call (parameters and signature in the query, POST), as aliyun-python-sdk-core sends it.
    pub async fn call_v1(
        &self,
        (ak, secret): (&str, &str),
        action: &str,
        version: &str,
        params: &[(&str, &str)],
        nonce: &str,
    ) -> Answer {
        let mut all: Vec<(String, String)> = params.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        for (k, v) in [
            ("Action", action.to_owned()),
            ("Version", version.to_owned()),
            ("Format", "JSON".to_owned()),
            ("AccessKeyId", ak.to_owned()),
            ("SignatureMethod", "HMAC-SHA1".to_owned()),
            ("SignatureVersion", "1.0".to_owned()),
            ("SignatureNonce", nonce.to_owned()),
            ("SignatureType", String::new()),
            ("Timestamp", timestamp(SystemTime::now())),
        ] {
            all.push((k.to_owned(), v));
        }
        let string_to_sign = format!("POST&%2F&{}", pct(&canonical_query(&all)));
        let mut mac = Hmac::<sha1::Sha1>::new_from_slice(format!("{secret}&").as_bytes()).unwrap();
        mac.update(string_to_sign.as_bytes());
        let signature = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
        all.push(("Signature".to_owned(), signature));
        let resp = self.http.post(format!("{}/?{}", self.handle.url(), canonical_query(&all))).send().await.unwrap();
        let status = resp.status();
        Answer { status, body: resp.json().await.unwrap_or(Value::Null) }
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

    /// RunInstances (public image, seeded network) with `extra` parameters; returns the answer.
    pub async fn run_as(&self, identity: (&str, &str), extra: &[(&str, &str)]) -> Answer {
        let mut params = vec![
            ("RegionId", REGION),
            ("ImageId", PUBLIC_IMAGE),
            ("InstanceType", "ecs.g7.large"),
            ("SecurityGroupId", SECURITY_GROUP),
            ("VSwitchId", VSWITCH),
        ];
        for (k, v) in extra {
            params.retain(|(name, _)| name != k);
            params.push((k, v));
        }
        self.call_as(identity, "RunInstances", &params).await
    }

    /// RunInstances as the cluster; asserts success and returns the ids.
    pub async fn run(&self, extra: &[(&str, &str)]) -> Vec<String> {
        let body = self.run_as(CLUSTER, extra).await.ok();
        body["InstanceIdSets"]["InstanceIdSet"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    }

    /// DescribeInstances for one id; the instance object or Null.
    pub async fn describe_one(&self, id: &str) -> Value {
        let ids = json!([id]).to_string();
        let body = self.call("DescribeInstances", &[("RegionId", REGION), ("InstanceIds", &ids)]).await.ok();
        body["Instances"]["Instance"].get(0).cloned().unwrap_or(Value::Null)
    }

    /// Polls until instance `id` has `status` (or, for "gone", disappears).
    pub async fn wait_status(&self, id: &str, status: &str) -> Vec<String> {
        let mut seen = Vec::new();
        for _ in 0..200 {
            let instance = self.describe_one(id).await;
            let now = instance["Status"].as_str().unwrap_or("gone").to_owned();
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
}
