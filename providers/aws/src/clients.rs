//! SDK clients, cached per (access key id, secret fingerprint, region), and
//! one client-side rate limiter per (access key id, region).
//!
//! Clients are built once and reused: no SDK configuration, credential
//! provider or HTTP connection pool is created per call. Workload identity
//! (a token file and a role) has one role session per (role, token file,
//! region): the token is exchanged for temporary keys with one STS
//! AssumeRoleWithWebIdentity call, through the same call path as every other
//! request, and exchanged again shortly before the keys expire. Concurrent
//! RPCs that find the session expiring wait for one exchange. A renewal that
//! fails for a passing reason (STS throttled or down) while the keys still
//! work keeps them in use and is tried again 10 s later. Keys EC2 refused
//! (revoked, or the role's trust changed) are exchanged again on the next call
//! instead of being used until they expire; refused static keys are the
//! secret's own and stay until the secret changes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sdk_ec2::config::retry::RetryConfig;
use aws_sdk_ec2::config::timeout::TimeoutConfig;
use aws_sdk_ec2::config::{BehaviorVersion, Region};
use machine_driver_api::{CallContext, Coalescer, DriverError, ErrorKind, KeyedCache, RateLimiter, Result, SecretData};
use sha2::{Digest, Sha256};

use crate::aws_call;
use crate::config::AwsConfig;
use crate::credentials::{AwsCredentials, StaticKeys, WebIdentity};

/// The role session name the driver's temporary keys carry (CloudTrail shows it).
const ROLE_SESSION_NAME: &str = "gardener-machine-driver";
/// Temporary keys are renewed this long before they expire, at most (half
/// their lifetime when that is shorter).
const RENEW_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);

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
    /// Raised when EC2 refused these clients' credentials ([`crate::aws_call::noting_refusal`]).
    pub(crate) credentials_refused: Arc<AtomicBool>,
    /// Which credentials these clients sign with (without the region): what
    /// this process remembers of its launches is keyed by it, so that other
    /// credentials (another account) naming the same instance or uid do not
    /// use the record.
    pub(crate) credentials: CredentialsKey,
}

/// The credentials part of a client key: (access key id, SHA-256 of the
/// secret access key) for static keys, (role ARN, SHA-256 of the token file
/// path) for workload identity. Holds no secret.
pub(crate) type CredentialsKey = (String, String);

type ClientKey = (String, String, String);

/// The cache of SDK clients.
#[derive(Debug)]
pub(crate) struct ClientCache {
    config: AwsConfig,
    clients: KeyedCache<ClientKey, AwsClients>,
    sessions: KeyedCache<ClientKey, RoleSession>,
    limiters: KeyedCache<(String, String), RateLimiter>,
}

/// A workload identity's current temporary keys: their clients and when to renew them.
#[derive(Debug, Default)]
struct RoleSession {
    current: tokio::sync::Mutex<Option<SessionKeys>>,
}

/// Clients signing with one set of temporary keys.
#[derive(Debug)]
struct SessionKeys {
    clients: Arc<AwsClients>,
    /// When to exchange the token again.
    renew_at: SystemTime,
    /// When the keys stop working.
    expires: SystemTime,
}

/// After a renewal that failed for a passing reason while the keys still
/// work, the next attempt waits this long (calls meanwhile use the keys).
const RENEW_RETRY: Duration = Duration::from_secs(10);

/// When keys expiring at `expiration`, received at `now`, are renewed.
fn renew_at(now: SystemTime, expiration: SystemTime) -> SystemTime {
    let lifetime = expiration.duration_since(now).unwrap_or_default();
    expiration - RENEW_BEFORE_EXPIRY.min(lifetime / 2)
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
        Self {
            config,
            clients: KeyedCache::new(MAX_CACHED),
            sessions: KeyedCache::new(MAX_CACHED),
            limiters: KeyedCache::new(MAX_LIMITERS),
        }
    }

    /// The clients for the credentials in `secret` and `region`, built on first
    /// use; for workload identity, with keys no older than their renewal time
    /// (an STS call under `ctx` when they are).
    pub(crate) async fn get(&self, ctx: &CallContext, secret: &SecretData, region: &str) -> Result<Arc<AwsClients>> {
        match AwsCredentials::from_secret(secret)? {
            AwsCredentials::Keys(keys) => Ok(self.static_clients(&keys, region)),
            AwsCredentials::WebIdentity(identity) => self.role_clients(ctx, &identity, region).await,
        }
    }

    fn static_clients(&self, keys: &StaticKeys, region: &str) -> Arc<AwsClients> {
        let key = (keys.access_key_id.clone(), keys.secret_fingerprint(), region.to_string());
        self.clients.get_or_insert_with(&key, || {
            tracing::debug!(access_key_id = %keys.access_key_id, region, "building AWS clients");
            let creds =
                Credentials::new(&keys.access_key_id, &keys.secret_access_key, None, None, "machine-class-secret");
            self.build((key.0.clone(), key.1.clone()), creds, region)
        })
    }

    async fn role_clients(&self, ctx: &CallContext, identity: &WebIdentity, region: &str) -> Result<Arc<AwsClients>> {
        let file = hex::encode(Sha256::digest(identity.token_file.as_os_str().as_encoded_bytes()));
        let key = (identity.role_arn.clone(), file, region.to_string());
        let session = self.sessions.get_or_insert_with(&key, RoleSession::default);
        let mut current = session.current.lock().await;
        let refused = current.as_ref().is_some_and(|keys| keys.clients.credentials_refused.load(Ordering::Relaxed));
        if let Some(keys) = current.as_ref()
            && SystemTime::now() < keys.renew_at
            && !refused
        {
            return Ok(Arc::clone(&keys.clients));
        }
        match self.assume_role(ctx, identity, (key.0.clone(), key.1.clone()), region).await {
            Ok(keys) => {
                let clients = Arc::clone(&keys.clients);
                *current = Some(keys);
                Ok(clients)
            }
            // STS throttled, failed or slow while the keys still work: keep
            // using them, and try again a little later (once for all callers).
            // Keys EC2 refused do not work: the caller gets STS's failure.
            Err(e) if !refused && matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::DeadlineExceeded) => {
                let now = SystemTime::now();
                match current.as_mut().filter(|keys| now < keys.expires) {
                    Some(keys) => {
                        tracing::warn!(role_arn = %identity.role_arn, region, error = e.message(), "renewing the role session failed; its keys still work and are used meanwhile");
                        keys.renew_at = (now + RENEW_RETRY).min(keys.expires);
                        Ok(Arc::clone(&keys.clients))
                    }
                    None => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Exchanges the token for the role's temporary keys (one STS call); the
    /// clients are keyed by `credentials` (the role and its token file).
    async fn assume_role(
        &self,
        ctx: &CallContext,
        identity: &WebIdentity,
        credentials: CredentialsKey,
        region: &str,
    ) -> Result<SessionKeys> {
        let token = identity.read_token()?;
        let limiter = self.limiter(&identity.role_arn, region);
        let assume = self
            .anonymous_sts(region)
            .assume_role_with_web_identity()
            .role_arn(&identity.role_arn)
            .role_session_name(ROLE_SESSION_NAME)
            .web_identity_token(token);
        let out = aws_call::call(ctx, &limiter, "sts", "AssumeRoleWithWebIdentity", || assume.clone().send()).await?;
        let issued = SystemTime::now();
        let keys = out.credentials().ok_or_else(|| {
            DriverError::internal("STS AssumeRoleWithWebIdentity answered without credentials".to_string())
        })?;
        let expiration = SystemTime::try_from(*keys.expiration()).map_err(|_| {
            DriverError::internal("STS AssumeRoleWithWebIdentity answered an unusable expiration".to_string())
        })?;
        tracing::debug!(role_arn = %identity.role_arn, region, "assumed the role with the workload identity token");
        let creds = Credentials::new(
            keys.access_key_id(),
            keys.secret_access_key(),
            Some(keys.session_token().to_string()),
            Some(expiration),
            "workload-identity",
        );
        let clients = Arc::new(self.build(credentials, creds, region));
        Ok(SessionKeys { clients, renew_at: renew_at(issued, expiration), expires: expiration })
    }

    /// An STS client without credentials: AssumeRoleWithWebIdentity is not signed.
    fn anonymous_sts(&self, region: &str) -> aws_sdk_sts::Client {
        let mut sts = aws_sdk_sts::Config::builder()
            .behavior_version(aws_sdk_sts::config::BehaviorVersion::latest())
            .region(aws_sdk_sts::config::Region::new(region.to_string()))
            .retry_config(retry_config())
            .timeout_config(timeout_config());
        if let Some(url) = &self.config.sts_endpoint {
            sts = sts.endpoint_url(url);
        }
        aws_sdk_sts::Client::from_conf(sts.build())
    }

    fn limiter(&self, access_key_id: &str, region: &str) -> Arc<RateLimiter> {
        self.limiters.get_or_insert_with(&(access_key_id.to_string(), region.to_string()), || {
            RateLimiter::new(self.config.rate_limit, self.config.burst)
        })
    }

    /// Clients signing with `creds`, known as `credentials`, under the rate
    /// limiter of its identity (the access key id or the role ARN) in `region`.
    fn build(&self, credentials: CredentialsKey, creds: Credentials, region: &str) -> AwsClients {
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
        let limiter = self.limiter(&credentials.0, region);
        let credentials_refused = Arc::new(AtomicBool::new(false));
        let instances_by_id = Coalescer::new(
            "ec2 DescribeInstances",
            crate::lookup::batch_fetch(ec2.clone(), limiter.clone(), credentials_refused.clone()),
            crate::lookup::BATCH_SIZE,
            crate::lookup::BATCHES_IN_FLIGHT,
        );
        AwsClients {
            region: region.to_string(),
            ec2,
            sts: aws_sdk_sts::Client::from_conf(sts.build()),
            limiter,
            instances_by_id,
            credentials_refused,
            credentials,
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
        let ctx = CallContext::with_timeout("test", Duration::from_secs(5));
        let a = cache.get(&ctx, &secret("AK1", "s1"), "eu-west-1").await.unwrap();
        let b = cache.get(&ctx, &secret("AK1", "s1"), "eu-west-1").await.unwrap();
        assert!(Arc::ptr_eq(&a, &b), "same credentials and region reuse the clients");
        let rotated = cache.get(&ctx, &secret("AK1", "s2"), "eu-west-1").await.unwrap();
        assert!(!Arc::ptr_eq(&a, &rotated), "a rotated secret builds new clients");
        assert!(Arc::ptr_eq(&a.limiter, &rotated.limiter), "one limiter per access key and region");
        let other_region = cache.get(&ctx, &secret("AK1", "s1"), "us-east-1").await.unwrap();
        assert!(!Arc::ptr_eq(&a.limiter, &other_region.limiter));
        assert_eq!(a.credentials, other_region.credentials, "the credentials key holds no region");
        assert_ne!(a.credentials, rotated.credentials, "another secret key, other credentials");
        let other_key = cache.get(&ctx, &secret("AK2", "s1"), "eu-west-1").await.unwrap();
        assert_ne!(a.credentials, other_key.credentials, "another access key, other credentials");
        assert!(!a.credentials.1.contains("s1"), "no secret in the key");
    }

    #[test]
    fn keys_are_renewed_before_they_expire() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let hour = now + Duration::from_secs(3600);
        assert_eq!(renew_at(now, hour), hour - Duration::from_secs(300), "5 minutes ahead of a 1 h session");
        let short = now + Duration::from_secs(4);
        assert_eq!(renew_at(now, short), now + Duration::from_secs(2), "half of a short lifetime");
        assert_eq!(renew_at(now, now - Duration::from_secs(1)), now - Duration::from_secs(1), "already expired");
    }
}
