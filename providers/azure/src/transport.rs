//! The HTTP stack every ARM and AAD request goes over: `azure_core`'s reqwest
//! client, wrapped so that the headers the SDK's errors drop (`Retry-After`,
//! `x-ms-request-id`) reach the classification of the failure.
//!
//! `azure_core` turns a non-2xx answer into an `HttpError` whose headers are
//! private. The wrapper copies the two headers of every answer into a
//! task-local slot that [`with_meta`] opens around one request, so that a
//! throttled request's delay and the request id (for logs) are known.

use std::cell::RefCell;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use azure_core::headers::{HeaderName, Headers};
use azure_core::{HttpClient, Request, Response};

tokio::task_local! {
    static META: RefCell<ResponseMeta>;
}

/// What the last answer of one request said besides its body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ResponseMeta {
    /// `Retry-After` in seconds (ARM sends seconds).
    pub(crate) retry_after: Option<Duration>,
    /// `x-ms-request-id`: for logs only, never for error messages.
    pub(crate) request_id: Option<String>,
}

impl ResponseMeta {
    /// Reads the headers of one answer.
    pub(crate) fn from_headers(headers: &Headers) -> Self {
        Self {
            retry_after: retry_after(headers),
            request_id: headers.get_optional_string(&HeaderName::from_static("x-ms-request-id")),
        }
    }
}

/// `Retry-After` (delta seconds; ARM never sends the HTTP-date form), at most 10 minutes.
pub(crate) fn retry_after(headers: &Headers) -> Option<Duration> {
    let raw = headers.get_optional_str(&HeaderName::from_static("retry-after"))?;
    let secs: u64 = raw.trim().parse().ok()?;
    Some(Duration::from_secs(secs.min(600)))
}

/// Resource Graph's `x-ms-user-quota-resets-after` (`hh:mm:ss`): when the
/// caller's query quota is back, rounded up to a second, at most 10 minutes.
pub(crate) fn quota_resets_after(headers: &Headers) -> Option<Duration> {
    let raw = headers.get_optional_str(&HeaderName::from_static("x-ms-user-quota-resets-after"))?;
    let mut secs = 0f64;
    for part in raw.trim().split(':') {
        secs = secs * 60.0 + part.trim().parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0)?;
    }
    Some(Duration::from_secs((secs.ceil() as u64).clamp(1, 600)))
}

/// Runs one request with a fresh metadata slot; returns the error together
/// with the metadata of the answer it came from.
pub(crate) async fn with_meta<T, F>(request: F) -> Result<T, (azure_core::Error, ResponseMeta)>
where
    F: Future<Output = azure_core::Result<T>>,
{
    META.scope(RefCell::new(ResponseMeta::default()), async move {
        match request.await {
            Ok(v) => Ok(v),
            Err(e) => Err((e, META.with(|m| m.take()))),
        }
    })
    .await
}

/// `azure_core`'s HTTP client, recording each answer's [`ResponseMeta`].
#[derive(Debug)]
pub(crate) struct RecordingTransport {
    inner: Arc<dyn HttpClient>,
}

impl RecordingTransport {
    /// Wraps `azure_core`'s default (reqwest, rustls) client.
    pub(crate) fn new() -> Self {
        Self { inner: azure_core::new_http_client() }
    }
}

#[async_trait::async_trait]
impl HttpClient for RecordingTransport {
    async fn execute_request(&self, request: &Request) -> azure_core::Result<Response> {
        let response = self.inner.execute_request(request).await?;
        let meta = ResponseMeta::from_headers(response.headers());
        // Outside `with_meta` (the SDK's own token requests) there is no slot: nothing to record.
        let _ = META.try_with(|slot| *slot.borrow_mut() = meta);
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_in_seconds_and_bounded() {
        let mut h = Headers::new();
        h.insert("retry-after", "17");
        assert_eq!(retry_after(&h), Some(Duration::from_secs(17)));
        h.insert("retry-after", "86400");
        assert_eq!(retry_after(&h), Some(Duration::from_secs(600)));
        h.insert("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT");
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn quota_resets_after_reads_hours_minutes_seconds() {
        let mut h = Headers::new();
        assert_eq!(quota_resets_after(&h), None);
        h.insert("x-ms-user-quota-resets-after", "00:00:03");
        assert_eq!(quota_resets_after(&h), Some(Duration::from_secs(3)));
        h.insert("x-ms-user-quota-resets-after", "00:01:02.5");
        assert_eq!(quota_resets_after(&h), Some(Duration::from_secs(63)));
        h.insert("x-ms-user-quota-resets-after", "soon");
        assert_eq!(quota_resets_after(&h), None);
    }

    #[tokio::test]
    async fn an_error_carries_the_metadata_of_its_answer() {
        let failed = with_meta(async {
            let mut h = Headers::new();
            h.insert("retry-after", "3");
            h.insert("x-ms-request-id", "req-1");
            let meta = ResponseMeta::from_headers(&h);
            META.with(|slot| *slot.borrow_mut() = meta);
            Err::<(), _>(azure_core::Error::message(azure_core::error::ErrorKind::Other, "x"))
        })
        .await;
        let (_, meta) = failed.err().unwrap();
        assert_eq!(meta.retry_after, Some(Duration::from_secs(3)));
        assert_eq!(meta.request_id.as_deref(), Some("req-1"));
    }
}
