//! [`GcpConfig`]: how the driver reaches Compute Engine, from the shared cloud flags.

use machine_driver_api::CloudOptions;

use crate::clients::ComputeEndpoint;

/// How the driver reaches Compute Engine.
#[derive(Debug, Clone)]
pub struct GcpConfig {
    /// Google's endpoint, an HTTPS override, or a plain-HTTP fake.
    pub(crate) endpoint: ComputeEndpoint,
    /// Client-side requests per second per project (0 = off).
    pub rate_limit: f64,
    /// Burst above the rate.
    pub burst: u32,
}

impl GcpConfig {
    /// From the shared cloud flags: `--cloud-endpoint` starting with `http://`
    /// is a fake (requests carry the service account email instead of a token).
    pub fn from_options(options: &CloudOptions) -> Self {
        Self {
            endpoint: ComputeEndpoint::from_override(options.endpoint.as_deref()),
            rate_limit: options.rate_limit,
            burst: options.burst,
        }
    }
}
