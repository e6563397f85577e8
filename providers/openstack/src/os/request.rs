//! Sending one HTTP request to an OpenStack service and reading its answer:
//! a [`Reply`] for 2xx (and Keystone's 300 version list), an [`OsFailure`]
//! otherwise.

use reqwest::Method;
use reqwest::header::HeaderMap;

use crate::errors::OsFailure;

/// Nova microversion the driver speaks (2.67: `volume_type` in block device
/// mappings; every release since Stein serves it), in both of Nova's headers.
pub(crate) const NOVA_MICROVERSION_HEADERS: &[(&str, &str)] =
    &[("OpenStack-API-Version", "compute 2.67"), ("X-OpenStack-Nova-API-Version", "2.67")];

/// A successful answer. Its headers may hold a token (`X-Subject-Token`):
/// `Debug` shows the status and body size only.
pub(crate) struct Reply {
    /// HTTP status.
    pub(crate) status: u16,
    headers: HeaderMap,
    /// The body.
    pub(crate) body: Vec<u8>,
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reply").field("status", &self.status).field("body_bytes", &self.body.len()).finish()
    }
}

impl Reply {
    /// A header's value.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Sends one request. `token` goes in `X-Auth-Token`; `body` is (bytes,
/// content type); `extra` are further headers (Nova's microversion).
pub(crate) async fn send(
    http: &reqwest::Client,
    method: Method,
    url: &str,
    token: Option<&str>,
    query: &[(&str, String)],
    body: Option<(&[u8], &str)>,
    extra: &[(&str, &str)],
) -> Result<Reply, OsFailure> {
    let mut rb = http.request(method, url).header("Accept", "application/json");
    if !query.is_empty() {
        rb = rb.query(query);
    }
    if let Some(token) = token {
        let mut value = reqwest::header::HeaderValue::from_str(token)
            .map_err(|_| OsFailure::transport("the token is not a valid header value"))?;
        value.set_sensitive(true);
        rb = rb.header("X-Auth-Token", value);
    }
    for (name, value) in extra {
        rb = rb.header(*name, *value);
    }
    if let Some((bytes, content_type)) = body {
        rb = rb.header("Content-Type", content_type).body(bytes.to_vec());
    }
    let response = rb.send().await.map_err(|e| OsFailure::transport(transport_message(e)))?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.bytes().await.map_err(|e| OsFailure::transport(transport_message(e)))?.to_vec();
    if (200..=300).contains(&status) {
        return Ok(Reply { status, headers, body });
    }
    let retry_after = headers.get("retry-after").and_then(|v| v.to_str().ok());
    Err(OsFailure::from_answer(status, retry_after, &body))
}

/// A transport error without the URL (it may carry a query with names, never
/// secrets, but keeps messages deterministic).
fn transport_message(e: reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_body() || e.is_decode() {
        "the answer broke off"
    } else {
        "the request failed"
    };
    format!("{what}: {}", e.without_url())
}
