//! SDK clients, cached per (access key id, secret fingerprint, region), and
//! one client-side rate limiter per (access key id, region).
//!
//! Clients are built once and reused: no SDK configuration, credential
//! provider or HTTP connection pool is created per call.

use std::sync::Arc;
use std::time::Duration;

use aws_credential_types::Credentials;
use aws_sdk_ec2::config::retry::RetryConfig;
use aws_sdk_ec2::config::timeout::TimeoutConfig;
use aws_sdk_ec2::config::{BehaviorVersion, Region};
use machine_driver_api::{Coalescer, KeyedCache, RateLimiter, Result, SecretData};

use crate::config::AwsConfig;
use crate::credentials::StaticKeys;

/// Most cached client sets (rotated keys leave old entries behind).
const MAX_CACHED: usize = 256;
/// Most rate limiters (one per access key and region).
const MAX_LIMITERS: usize = 1024;

/// Everything needed to call AWS for one account and region.
#[derive(Debug)]
pub(crate) struct AwsClients {
    /// The region these clients talk to.
    pub(crate) region: String,
    /// EC2.
    pub(crate) ec2: aws_sdk_ec2::Client,
    /// STS (GetCallerIdentity for ShareImage).
    pub(crate) sts: aws_sdk_sts::Client,
    /// Shared by every client of this access key and region.
    pub(crate) limiter: Arc<RateLimiter>,
    /// Point lookups by instance id, coalesced into batched DescribeInstances calls.
    pub(crate) instances_by_id: Coalescer<String, aws_sdk_ec2::types::Instance>,
}

type ClientKey = (String, String, String);

/// The cache of SDK clients.
#[derive(Debug)]
pub(crate) struct ClientCache {
    config: AwsConfig,
    clients: KeyedCache<ClientKey, AwsClients>,
    limiters: KeyedCache<(String, String), RateLimiter>,
}

/// Retries: none inside the SDK. One RPC makes exactly the EC2 calls its
/// documentation lists; throttling and 5xx come back as UNAVAILABLE with a
/// retry delay, and the machine-controller retries (5 s). The client-side
/// limiter keeps the request rate below AWS's throttling in the first place.
fn retry_config() -> RetryConfig {
    RetryConfig::standard().with_max_attempts(1)
}

fn timeout_config() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(5))
        .operation_attempt_timeout(Duration::from_secs(30))
        .build()
}

impl ClientCache {
    /// An empty cache for `config`.
    pub(crate) fn new(config: AwsConfig) -> Self {
        Self { config, clients: KeyedCache::new(MAX_CACHED), limiters: KeyedCache::new(MAX_LIMITERS) }
    }

    /// The clients for the credentials in `secret` and `region`, built on first use.
    pub(crate) fn get(&self, secret: &SecretData, region: &str) -> Result<Arc<AwsClients>> {
        let keys = StaticKeys::from_secret(secret)?;
        let key = (keys.access_key_id.clone(), keys.secret_fingerprint(), region.to_string());
        Ok(self.clients.get_or_insert_with(&key, || {
            tracing::debug!(access_key_id = %keys.access_key_id, region, "building AWS clients");
            self.build(&keys, region)
        }))
    }

    fn limiter(&self, access_key_id: &str, region: &str) -> Arc<RateLimiter> {
        self.limiters.get_or_insert_with(&(access_key_id.to_string(), region.to_string()), || {
            RateLimiter::new(self.config.rate_limit, self.config.burst)
        })
    }

    fn build(&self, keys: &StaticKeys, region: &str) -> AwsClients {
        let creds = Credentials::new(&keys.access_key_id, &keys.secret_access_key, None, None, "machine-class-secret");
        let mut ec2 = aws_sdk_ec2::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(region.to_string()))
            .credentials_provider(creds.clone())
            .retry_config(retry_config())
            .timeout_config(timeout_config());
        if let Some(url) = &self.config.ec2_endpoint {
            ec2 = ec2.endpoint_url(url);
        }
        let mut sts = aws_sdk_sts::Config::builder()
            .behavior_version(aws_sdk_sts::config::BehaviorVersion::latest())
            .region(aws_sdk_sts::config::Region::new(region.to_string()))
            .credentials_provider(creds)
            .retry_config(retry_config())
            .timeout_config(timeout_config());
        if let Some(url) = &self.config.sts_endpoint {
            sts = sts.endpoint_url(url);
        }
        let ec2 = aws_sdk_ec2::Client::from_conf(ec2.build());
        let limiter = self.limiter(&keys.access_key_id, region);
        let instances_by_id = Coalescer::new(
            "ec2 DescribeInstances",
            crate::lookup::batch_fetch(ec2.clone(), limiter.clone()),
            crate::lookup::BATCH_SIZE,
            crate::lookup::BATCHES_IN_FLIGHT,
        );
        AwsClients {
            region: region.to_string(),
            ec2,
            sts: aws_sdk_sts::Client::from_conf(sts.build()),
            limiter,
            instances_by_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(akid: &str, sk: &str) -> SecretData {
        [("accessKeyID", akid), ("secretAccessKey", sk)].into_iter().collect()
    }

    #[tokio::test]
    async fn clients_are_reused_and_limiters_shared_per_key_and_region() {
        let cache = ClientCache::new(AwsConfig { rate_limit: 1.0, burst: 1, ..Default::default() });
        let a = cache.get(&secret("AK1", "s1"), "eu-west-1").unwrap();
        let b = cache.get(&secret("AK1", "s1"), "eu-west-1").unwrap();
        assert!(Arc::ptr_eq(&a, &b), "same credentials and region reuse the clients");
        let rotated = cache.get(&secret("AK1", "s2"), "eu-west-1").unwrap();
        assert!(!Arc::ptr_eq(&a, &rotated), "a rotated secret builds new clients");
        assert!(Arc::ptr_eq(&a.limiter, &rotated.limiter), "one limiter per access key and region");
        let other_region = cache.get(&secret("AK1", "s1"), "us-east-1").unwrap();
        assert!(!Arc::ptr_eq(&a.limiter, &other_region.limiter));
    }
}
