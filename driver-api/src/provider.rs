//! [`Provider`]: how a cloud's binary builds its driver from the flags every
//! provider shares ([`CloudOptions`]).

use std::future::Future;

use crate::driver::Driver;
use crate::error::DriverError;

/// The cloud flags every provider binary shares (`--cloud-endpoint`,
/// `--cloud-rate-limit`, `--cloud-burst`), checked by the server before the
/// provider is built. A provider derives its own configuration from them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CloudOptions {
    /// API endpoint override: a private endpoint, or a fake cloud (`http://`).
    /// `None` means the cloud's own endpoints.
    pub endpoint: Option<String>,
    /// Client-side limit of requests per second, per account and region or
    /// project (0 = off).
    pub rate_limit: f64,
    /// Burst allowed above the rate.
    pub burst: u32,
}

impl CloudOptions {
    /// Checks what every cloud needs of these options: a finite, non-negative
    /// rate and an `http://` or `https://` endpoint. An empty endpoint is none.
    pub fn checked(mut self) -> Result<Self, DriverError> {
        if !self.rate_limit.is_finite() || self.rate_limit < 0.0 {
            return Err(DriverError::invalid_argument(
                "--cloud-rate-limit",
                format!("must be a non-negative number, got {}", self.rate_limit),
            ));
        }
        self.endpoint = self.endpoint.map(|e| e.trim().trim_end_matches('/').to_string()).filter(|e| !e.is_empty());
        if let Some(url) = &self.endpoint
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(DriverError::invalid_argument(
                "--cloud-endpoint",
                format!("{url:?} must start with http:// or https://"),
            ));
        }
        Ok(self)
    }
}

/// A cloud's driver as its binary builds it: the one template every provider
/// follows (see ARCHITECTURE.md, "Adding a cloud").
pub trait Provider: Driver + Sized {
    /// The binary's name (`machine-driver-<cloud>`).
    const BINARY: &'static str;
    /// One line for `--help` (`Machine driver sidecar for <cloud> ...`).
    const ABOUT: &'static str;
    /// Log targets of the cloud's SDK crates that print secrets below INFO
    /// (bearer tokens, request bodies with user data): the server caps them at
    /// INFO in the log and trace filters, whatever `--log` asks for.
    const SECRET_LOGGING_TARGETS: &'static [&'static str] = &[];

    /// Builds the driver from the checked shared cloud flags. Builds no
    /// client and calls no cloud: clients are made per credentials on first use.
    fn connect(options: CloudOptions) -> impl Future<Output = Result<Self, DriverError>> + Send;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked_naming_the_flag() {
        let ok = CloudOptions { endpoint: Some(" http://127.0.0.1:1/ ".into()), rate_limit: 2.0, burst: 1 }.checked();
        assert_eq!(ok.ok().and_then(|o| o.endpoint).as_deref(), Some("http://127.0.0.1:1"));
        let empty = CloudOptions { endpoint: Some(" ".into()), ..CloudOptions::default() }.checked();
        assert_eq!(empty.ok().map(|o| o.endpoint), Some(None));
        let bad = CloudOptions { endpoint: Some("ftp://x".into()), ..CloudOptions::default() }.checked();
        assert_eq!(bad.err().and_then(|e| e.field().map(str::to_string)).as_deref(), Some("--cloud-endpoint"));
        let rate = CloudOptions { rate_limit: f64::NAN, ..CloudOptions::default() }.checked();
        assert_eq!(rate.err().and_then(|e| e.field().map(str::to_string)).as_deref(), Some("--cloud-rate-limit"));
    }
}
