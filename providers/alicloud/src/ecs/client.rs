//! [`EcsClient`]: one access key pair's requests to ECS and STS.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::ecs::signer::{Unsigned, sign};
use crate::errors::EcsFailure;

/// ECS's API version.
pub(crate) const ECS_VERSION: &str = "2014-05-26";
/// The body's content type.
const FORM: &str = "application/x-www-form-urlencoded";

/// STS's API version.
pub(crate) const STS_VERSION: &str = "2015-04-01";

/// The API a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Service {
    /// Elastic Compute Service (regional endpoint).
    Ecs,
    /// Security Token Service (global endpoint).
    Sts,
}

/// Where requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Endpoints {
    /// Alibaba Cloud's own: `https://ecs.<region>.aliyuncs.com`, `https://sts.aliyuncs.com`.
    Alibaba,
    /// Both APIs at one URL (a private endpoint or a fake).
    Override(String),
}

/// One access key pair's client (one region for ECS).
pub(crate) struct EcsClient {
    http: reqwest::Client,
    ecs_url: String,
    sts_url: String,
    access_key_id: String,
    access_key_secret: String,
}

impl std::fmt::Debug for EcsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EcsClient")
            .field("ecs_url", &self.ecs_url)
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// ECS's error body.
#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
struct ErrorBody {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    request_id: String,
}

impl EcsClient {
    /// The HTTP client every key pair shares: no redirects (a redirect would
    /// carry the signed request elsewhere), no `Referer`, a connect timeout.
    pub(crate) fn http() -> Result<reqwest::Client, EcsFailure> {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .referer(false)
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|_| EcsFailure::transport("building the HTTP client failed"))
    }

    /// A client for `region` with the key pair, on the shared `http` client.
    pub(crate) fn new(
        http: reqwest::Client,
        endpoints: &Endpoints,
        region: &str,
        access_key_id: &str,
        access_key_secret: &str,
    ) -> Result<Self, EcsFailure> {
        let (ecs_url, sts_url) = match endpoints {
            Endpoints::Alibaba => {
                (format!("https://ecs.{region}.aliyuncs.com/"), "https://sts.aliyuncs.com/".to_string())
            }
            Endpoints::Override(url) => {
                let url = format!("{}/", url.trim_end_matches('/'));
                (url.clone(), url)
            }
        };
        Ok(Self {
            http,
            ecs_url,
            sts_url,
            access_key_id: access_key_id.to_string(),
            access_key_secret: access_key_secret.to_string(),
        })
    }

    /// Sends `action` with `params` and decodes the answer into `T`.
    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        service: Service,
        action: &str,
        params: &BTreeMap<String, String>,
    ) -> Result<T, EcsFailure> {
        let (base, version) = match service {
            Service::Ecs => (&self.ecs_url, ECS_VERSION),
            Service::Sts => (&self.sts_url, STS_VERSION),
        };
        let url = reqwest::Url::parse(base).map_err(|_| EcsFailure::transport("the endpoint is not a URL"))?;
        let host = match (url.host_str(), url.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => return Err(EcsFailure::transport("the endpoint has no host")),
        };
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let date = now_utc();
        // Parameters travel in the form body, signed through its hash: user data stays out of URLs.
        let body = crate::ecs::signer::canonical_query(params);
        let no_query = BTreeMap::new();
        let signed = sign(
            &Unsigned {
                method: "POST",
                host: &host,
                action,
                version,
                query: &no_query,
                body: body.as_bytes(),
                content_type: Some(FORM),
                date: &date,
                nonce: &nonce,
            },
            &self.access_key_id,
            &self.access_key_secret,
        );
        let mut request = self.http.post(base.as_str()).body(body);
        for (name, value) in &signed.headers {
            if name != "host" {
                request = request.header(name.as_str(), value.as_str());
            }
        }
        let response = request.send().await.map_err(|e| {
            EcsFailure::transport(if e.is_timeout() { "the request timed out" } else { "the endpoint did not answer" })
        })?;
        let status = response.status().as_u16();
        if (300..400).contains(&status) {
            return Err(EcsFailure::transport(format!("the endpoint redirected {action} (HTTP {status})")));
        }
        let bytes = response.bytes().await.map_err(|_| EcsFailure::transport("reading the answer failed"))?;
        if (200..300).contains(&status) {
            return serde_json::from_slice(&bytes).map_err(|e| {
                tracing::debug!(action, error = %e, "undecodable ECS answer");
                EcsFailure::transport(format!("the answer to {action} is not ECS's JSON"))
            });
        }
        let body: ErrorBody = serde_json::from_slice(&bytes).unwrap_or_default();
        tracing::debug!(action, status, code = %body.code, request_id = %body.request_id, "ECS call failed");
        if body.code.is_empty() {
            return Err(EcsFailure::answered(status, "", ""));
        }
        Err(EcsFailure::answered(status, body.code, body.message))
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` now (UTC).
fn now_utc() -> String {
    let t = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Builds the flattened parameters of one request (`Tag.1.Key`, `DataDisk.2.Size`).
#[derive(Debug, Default, Clone)]
pub(crate) struct Params(pub(crate) BTreeMap<String, String>);

impl Params {
    /// Sets `name` to `value`.
    pub(crate) fn set(&mut self, name: impl Into<String>, value: impl ToString) -> &mut Self {
        self.0.insert(name.into(), value.to_string());
        self
    }

    /// Sets `name` when `value` is present and not empty.
    pub(crate) fn opt(&mut self, name: impl Into<String>, value: Option<impl ToString>) -> &mut Self {
        if let Some(v) = value.map(|v| v.to_string()).filter(|v| !v.is_empty()) {
            self.0.insert(name.into(), v);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_seconds() {
        let d = now_utc();
        assert_eq!(d.len(), 20, "{d}");
        assert!(d.ends_with('Z') && d.as_bytes()[10] == b'T');
    }

    #[test]
    fn params_skip_empty_optionals() {
        let mut p = Params::default();
        p.set("RegionId", "eu-central-1")
            .opt("ZoneId", Some(""))
            .opt("KeyPairName", None::<String>)
            .opt("VSwitchId", Some("vsw-1"));
        assert_eq!(p.0.keys().collect::<Vec<_>>(), ["RegionId", "VSwitchId"]);
    }
}
