//! [`OpenStackConfig`]: how the driver reaches Keystone, from the shared cloud flags.

use machine_driver_api::CloudOptions;

/// How the driver reaches OpenStack.
#[derive(Debug, Clone, Default)]
pub struct OpenStackConfig {
    /// `--cloud-endpoint`: Keystone's URL, used instead of each secret's
    /// `authURL` (a fake cloud, or a private endpoint of Keystone); the other
    /// services are found in the token's catalog either way.
    pub auth_override: Option<String>,
    /// Client-side requests per second per credentials and region (0 = off).
    pub rate_limit: f64,
    /// Burst above the rate.
    pub burst: u32,
}

impl OpenStackConfig {
    /// From the checked shared cloud flags.
    pub fn from_options(options: &CloudOptions) -> Self {
        Self { auth_override: options.endpoint.clone(), rate_limit: options.rate_limit, burst: options.burst }
    }
}
