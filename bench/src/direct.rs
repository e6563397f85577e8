//! The irreducible cost: the same cloud read GetMachineStatus needs, made
//! directly with the cloud's SDK against the same fake.

use std::collections::BTreeMap;

#[cfg(feature = "aws")]
use aws_sdk_ec2::config::{BehaviorVersion, Credentials, Region};
#[cfg(feature = "gcp")]
use google_cloud_auth::credentials::anonymous::Builder as Anonymous;
#[cfg(feature = "gcp")]
use google_cloud_compute_v1::client::Instances;

/// One instance, read with the cloud's SDK.
#[derive(Debug)]
pub(crate) enum DirectClient {
    /// EC2 DescribeInstances by instance id.
    #[cfg(feature = "aws")]
    Aws {
        /// The SDK client (static credentials, endpoint = the fake).
        client: aws_sdk_ec2::Client,
        /// `i-...`.
        instance_id: String,
    },
    /// Compute Engine instances.get.
    #[cfg(feature = "gcp")]
    Gcp {
        /// The SDK client (anonymous credentials, endpoint = the fake).
        client: Instances,
        /// Project of the instance.
        project: String,
        /// Zone of the instance.
        zone: String,
        /// Instance name.
        name: String,
    },
    /// A build without any direct client (`--no-default-features`): never made.
    #[cfg(not(any(feature = "aws", feature = "gcp")))]
    #[allow(dead_code)]
    None(std::convert::Infallible),
}

/// The non-empty `/`-separated segments of a providerID after `prefix`.
#[cfg(any(feature = "aws", feature = "gcp"))]
fn segments<'a>(provider_id: &'a str, prefix: &str) -> Result<Vec<&'a str>, String> {
    let rest = provider_id
        .strip_prefix(prefix)
        .ok_or_else(|| format!("providerID {provider_id:?} does not start with {prefix:?}"))?;
    Ok(rest.split('/').filter(|s| !s.is_empty()).collect())
}

impl DirectClient {
    /// A client reading the instance behind `provider_id` (`aws:///<region>/<id>` or
    /// `gce:///<project>/<zone>/<name>`) from the fake at `cloud_url`.
    /// Whether this build has a direct client for the provider behind
    /// `provider_id`. A cloud without one is benchmarked without phase 1's
    /// direct comparison (adding a cloud needs no change here).
    pub(crate) fn available_for(provider_id: &str) -> bool {
        (cfg!(feature = "aws") && provider_id.starts_with("aws://"))
            || (cfg!(feature = "gcp") && provider_id.starts_with("gce://"))
    }

    pub(crate) async fn new(
        provider_id: &str,
        cloud_url: &str,
        secret: &BTreeMap<String, String>,
    ) -> Result<Self, String> {
        #[cfg(feature = "aws")]
        if provider_id.starts_with("aws://") {
            let [region, id] = segments(provider_id, "aws://")?[..] else {
                return Err(format!("providerID {provider_id:?}: expected aws:///<region>/<instance-id>"));
            };
            let key = secret.get("accessKeyID").ok_or("secret has no accessKeyID")?;
            let secret_key = secret.get("secretAccessKey").ok_or("secret has no secretAccessKey")?;
            let conf = aws_sdk_ec2::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .region(Region::new(region.to_string()))
                .credentials_provider(Credentials::new(key, secret_key, None, None, "bench-static"))
                .endpoint_url(cloud_url)
                .build();
            return Ok(Self::Aws { client: aws_sdk_ec2::Client::from_conf(conf), instance_id: id.to_string() });
        }
        #[cfg(feature = "gcp")]
        if provider_id.starts_with("gce://") {
            let [project, zone, name] = segments(provider_id, "gce://")?[..] else {
                return Err(format!("providerID {provider_id:?}: expected gce:///<project>/<zone>/<name>"));
            };
            let client = Instances::builder()
                .with_endpoint(cloud_url)
                .with_credentials(Anonymous::new().build())
                .build()
                .await
                .map_err(|e| format!("building the Compute client: {e}"))?;
            return Ok(Self::Gcp {
                client,
                project: project.to_string(),
                zone: zone.to_string(),
                name: name.to_string(),
            });
        }
        let _ = (cloud_url, secret);
        Err(format!(
            "providerID {provider_id:?}: no direct SDK client for this provider in this build (features: aws, gcp)"
        ))
    }

    /// What [`DirectClient::read`] calls, for the report.
    pub(crate) fn call_name(&self) -> &'static str {
        match self {
            #[cfg(feature = "aws")]
            Self::Aws { .. } => "EC2 DescribeInstances (aws-sdk-ec2, by instance id)",
            #[cfg(feature = "gcp")]
            Self::Gcp { .. } => "Compute instances.get (google-cloud-compute-v1)",
            #[cfg(not(any(feature = "aws", feature = "gcp")))]
            Self::None(never) => match *never {},
        }
    }

    /// One read of the instance; fails unless the instance was found.
    pub(crate) async fn read(&self) -> Result<(), String> {
        match self {
            #[cfg(feature = "aws")]
            Self::Aws { client, instance_id } => {
                let out = client
                    .describe_instances()
                    .instance_ids(instance_id)
                    .send()
                    .await
                    .map_err(|e| format!("DescribeInstances: {}", aws_sdk_ec2::error::DisplayErrorContext(e)))?;
                let found = out.reservations().iter().flat_map(|r| r.instances()).count();
                if found == 0 {
                    return Err(format!("DescribeInstances {instance_id}: no instance"));
                }
                Ok(())
            }
            #[cfg(feature = "gcp")]
            Self::Gcp { client, project, zone, name } => {
                client
                    .get()
                    .set_project(project)
                    .set_zone(zone)
                    .set_instance(name)
                    .send()
                    .await
                    .map_err(|e| format!("instances.get: {e}"))?;
                Ok(())
            }
            #[cfg(not(any(feature = "aws", feature = "gcp")))]
            Self::None(never) => match *never {},
        }
    }
}

#[cfg(all(test, feature = "aws", feature = "gcp"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn provider_ids_are_parsed_per_cloud() {
        let secret = BTreeMap::from([
            ("accessKeyID".to_string(), "AKID".to_string()),
            ("secretAccessKey".to_string(), "s".to_string()),
        ]);
        let aws = DirectClient::new("aws:///eu-west-1/i-0abc", "http://127.0.0.1:1", &secret).await.unwrap();
        assert!(matches!(aws, DirectClient::Aws { ref instance_id, .. } if instance_id == "i-0abc"));
        let gcp = DirectClient::new("gce:///p/z/n", "http://127.0.0.1:1", &secret).await.unwrap();
        assert!(matches!(gcp, DirectClient::Gcp { ref project, ref zone, ref name, .. }
            if project == "p" && zone == "z" && name == "n"));
        assert!(DirectClient::new("aws:///eu-west-1", "http://x", &secret).await.is_err());
        assert!(DirectClient::new("azure:///x", "http://x", &secret).await.is_err());
        assert!(DirectClient::new("aws:///r/i-1", "http://x", &BTreeMap::new()).await.is_err());
    }
}
