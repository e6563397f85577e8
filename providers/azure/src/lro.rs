//! Long-running ARM operations, polled by the driver.
//!
//! A PUT or DELETE that ARM accepts answers 201/202 with an
//! `Azure-AsyncOperation` URL (the operation's status) and/or a `Location`
//! URL (202 until done). The SDK's `.await` would re-send the whole request
//! instead of polling, so the provider reads the URL from the first answer and
//! polls it here, each poll a counted call (`operations.get`), until the
//! operation ends or the RPC's deadline (less a margin for the answer) comes.

use std::time::Duration;

use azure_core::Url;
use azure_core::headers::{HeaderName, Headers};
use serde::Deserialize;

use crate::clients::{Answer, Api};
use crate::errors::ArmFailure;

/// First wait before a poll (when ARM suggests none).
const FIRST_POLL: Duration = Duration::from_millis(250);
/// Longest wait between polls (when ARM suggests none).
const MAX_POLL: Duration = Duration::from_secs(5);

/// Where an accepted request's progress is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tracker {
    /// `Azure-AsyncOperation`: a status document.
    AsyncOperation(Url),
    /// `Location`: 202 while running.
    Location(Url),
}

impl Tracker {
    /// The tracker of an accepted request's answer, preferring `Azure-AsyncOperation`.
    pub(crate) fn from_headers(headers: &Headers) -> Option<Self> {
        let url = |name: &'static str| {
            headers.get_optional_str(&HeaderName::from_static(name)).and_then(|u| Url::parse(u).ok())
        };
        url("azure-asyncoperation").map(Self::AsyncOperation).or_else(|| url("location").map(Self::Location))
    }
}

/// How an operation ended, as far as the driver waited.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Done.
    Succeeded,
    /// Ended with ARM's error (or canceled).
    Failed(ArmFailure),
    /// Still running when the wait ended.
    Running,
}

/// The status document of `Azure-AsyncOperation`.
#[derive(Deserialize)]
struct OperationStatus {
    #[serde(default)]
    status: String,
    #[serde(default)]
    error: Option<OperationError>,
}

#[derive(Deserialize)]
struct OperationError {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: String,
}

/// Polls `tracker` until the operation ends, or until less than `keep` is
/// left of the RPC's deadline (then [`Outcome::Running`]).
pub(crate) async fn wait(api: &Api<'_>, service: &'static str, tracker: &Tracker, keep: Duration) -> Answer<Outcome> {
    let mut delay = FIRST_POLL;
    loop {
        if api.context().remaining() < keep + delay {
            return Ok(Outcome::Running);
        }
        tokio::time::sleep(delay).await;
        let (outcome, suggested) = match poll(api, service, tracker).await {
            Ok(polled) => polled,
            // The deadline came during the poll: the operation is still running as far as we know.
            Err(machine_driver_api::CallFailure::Deadline(_)) => return Ok(Outcome::Running),
            Err(e) => return Err(e),
        };
        if !matches!(outcome, Outcome::Running) {
            return Ok(outcome);
        }
        delay = suggested.unwrap_or((delay * 2).min(MAX_POLL));
    }
}

/// One poll: the outcome so far and the wait ARM suggests before the next.
async fn poll(api: &Api<'_>, service: &'static str, tracker: &Tracker) -> Answer<(Outcome, Option<Duration>)> {
    match tracker {
        Tracker::AsyncOperation(url) => {
            let answer = api.get_raw(service, "operations.get", url).await?;
            let status: OperationStatus =
                serde_json::from_slice(&answer.body).unwrap_or(OperationStatus { status: String::new(), error: None });
            let outcome = match status.status.to_ascii_lowercase().as_str() {
                "succeeded" => Outcome::Succeeded,
                "failed" | "canceled" => {
                    let error = status.error.unwrap_or(OperationError { code: None, message: String::new() });
                    let code = error.code.or_else(|| Some(status.status.clone()));
                    Outcome::Failed(ArmFailure::operation(code, error.message))
                }
                _ => Outcome::Running,
            };
            Ok((outcome, answer.retry_after))
        }
        Tracker::Location(url) => match api.get_raw(service, "operations.get", url).await {
            Ok(a) if a.status == 202 => Ok((Outcome::Running, None)),
            Ok(_) => Ok((Outcome::Succeeded, None)),
            Err(machine_driver_api::CallFailure::Cloud(_, f)) if f.http_status.is_some() => {
                Ok((Outcome::Failed(f), None))
            }
            Err(e) => Err(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_async_operation_header_is_preferred() {
        let mut h = Headers::new();
        h.insert("location", "https://management.azure.com/l");
        assert_eq!(
            Tracker::from_headers(&h),
            Some(Tracker::Location(Url::parse("https://management.azure.com/l").unwrap()))
        );
        h.insert("azure-asyncoperation", "https://management.azure.com/op");
        assert_eq!(
            Tracker::from_headers(&h),
            Some(Tracker::AsyncOperation(Url::parse("https://management.azure.com/op").unwrap()))
        );
        assert_eq!(Tracker::from_headers(&Headers::new()), None);
    }
}
