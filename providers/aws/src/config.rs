//! Settings of the AWS driver, resolved once at start.

/// How the driver reaches AWS.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AwsConfig {
    /// EC2 endpoint override (private endpoints, fakes); `None` = AWS's regional endpoint.
    pub ec2_endpoint: Option<String>,
    /// STS endpoint override; `None` = AWS's regional endpoint.
    pub sts_endpoint: Option<String>,
    /// Client-side limit of AWS requests per second, per access key and region (0 = off).
    pub rate_limit: f64,
    /// Burst above the rate.
    pub burst: u32,
}

impl AwsConfig {
    /// Endpoints from an explicit override (`--cloud-endpoint`, used for EC2
    /// and STS alike), else from the standard environment variables
    /// `AWS_ENDPOINT_URL_EC2` / `AWS_ENDPOINT_URL_STS` / `AWS_ENDPOINT_URL`.
    pub fn with_endpoints(mut self, explicit: Option<String>, env: impl Fn(&str) -> Option<String>) -> Self {
        let non_empty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
        let explicit = non_empty(explicit);
        let general = non_empty(env("AWS_ENDPOINT_URL"));
        self.ec2_endpoint =
            explicit.clone().or_else(|| non_empty(env("AWS_ENDPOINT_URL_EC2"))).or_else(|| general.clone());
        self.sts_endpoint = explicit.or_else(|| non_empty(env("AWS_ENDPOINT_URL_STS"))).or(general);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_endpoint_wins_then_service_specific_env_then_general_env() {
        let env = |k: &str| match k {
            "AWS_ENDPOINT_URL" => Some("http://general".to_string()),
            "AWS_ENDPOINT_URL_STS" => Some("http://sts".to_string()),
            _ => None,
        };
        let c = AwsConfig::default().with_endpoints(None, env);
        assert_eq!(c.ec2_endpoint.as_deref(), Some("http://general"));
        assert_eq!(c.sts_endpoint.as_deref(), Some("http://sts"));
        let c = AwsConfig::default().with_endpoints(Some("http://fake".into()), env);
        assert_eq!(c.ec2_endpoint.as_deref(), Some("http://fake"));
        assert_eq!(c.sts_endpoint.as_deref(), Some("http://fake"));
        let c = AwsConfig::default().with_endpoints(None, |_| None);
        assert_eq!(c.ec2_endpoint, None);
    }
}
