//! [`AlicloudConfig`]: how the driver reaches ECS and STS, from the shared cloud flags.

use machine_driver_api::CloudOptions;

use crate::ecs::client::Endpoints;

/// How the driver reaches Alibaba Cloud.
#[derive(Debug, Clone)]
pub struct AlicloudConfig {
    /// Alibaba's regional endpoints, or both APIs at `--cloud-endpoint`.
    pub(crate) endpoints: Endpoints,
    /// Client-side requests per second per access key and region (0 = off).
    pub rate_limit: f64,
    /// Burst above the rate.
    pub burst: u32,
}

impl AlicloudConfig {
    /// From the checked shared cloud flags.
    pub fn from_options(options: &CloudOptions) -> Self {
        let endpoints = match options.endpoint.as_deref() {
            Some(url) => Endpoints::Override(url.to_string()),
            None => Endpoints::Alibaba,
        };
        Self { endpoints, rate_limit: options.rate_limit, burst: options.burst }
    }
}
