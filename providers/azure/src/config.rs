//! [`AzureConfig`]: how the driver reaches Azure, from the shared cloud flags,
//! and the endpoints of each Azure cloud ([`CloudEndpoints`]).

use azure_core::Url;
use machine_driver_api::{CloudOptions, DriverError};

/// How the driver reaches Azure.
#[derive(Debug, Clone)]
pub struct AzureConfig {
    /// `--cloud-endpoint`: ARM and the token endpoint of every cloud are
    /// there (a private endpoint or a fake). `None`: each cloud's own.
    pub(crate) endpoint: Option<Url>,
    /// Client-side requests per second per subscription (0 = off).
    pub rate_limit: f64,
    /// Burst above the rate.
    pub burst: u32,
}

impl AzureConfig {
    /// From the checked shared cloud flags.
    pub fn from_options(options: &CloudOptions) -> Result<Self, DriverError> {
        let endpoint = match options.endpoint.as_deref() {
            None => None,
            Some(e) => Some(
                Url::parse(&format!("{}/", e.trim_end_matches('/')))
                    .map_err(|err| DriverError::invalid_argument("--cloud-endpoint", err))?,
            ),
        };
        Ok(Self { endpoint, rate_limit: options.rate_limit, burst: options.burst })
    }
}

/// The endpoints of one Azure cloud.
#[derive(Debug, Clone)]
pub(crate) struct CloudEndpoints {
    /// The cloud's name as the spec writes it (`AzurePublic`).
    pub(crate) name: &'static str,
    /// Resource Manager.
    pub(crate) arm: Url,
    /// The Entra ID authority (token endpoint: `<authority>/<tenant>/oauth2/v2.0/token`).
    pub(crate) authority: Url,
    /// The token scope for ARM.
    pub(crate) scope: String,
}

/// (name, ARM, authority) of the clouds the Go provider knows.
const CLOUDS: &[(&str, &str, &str)] = &[
    ("AzurePublic", "https://management.azure.com/", "https://login.microsoftonline.com/"),
    ("AzureChina", "https://management.chinacloudapi.cn/", "https://login.chinacloudapi.cn/"),
    ("AzureGovernment", "https://management.usgovcloudapi.net/", "https://login.microsoftonline.us/"),
];

impl CloudEndpoints {
    /// The endpoints of `cloud` (`cloudConfiguration.name`; absent = AzurePublic,
    /// names matched case-insensitively as the Go provider does), all at
    /// `endpoint_override` when one is set.
    pub(crate) fn resolve(cloud: Option<&str>, endpoint_override: Option<&Url>) -> Result<Self, DriverError> {
        let wanted = cloud.map(str::trim).filter(|c| !c.is_empty()).unwrap_or("AzurePublic");
        let &(name, arm, authority) =
            CLOUDS.iter().find(|(n, _, _)| n.eq_ignore_ascii_case(wanted)).ok_or_else(|| {
                DriverError::invalid_argument(
                    "providerSpec.cloudConfiguration.name",
                    format!("{wanted:?} is not one of AzurePublic, AzureChina, AzureGovernment"),
                )
            })?;
        let parse =
            |u: &str| Url::parse(u).map_err(|_| DriverError::internal("a built-in Azure endpoint is not a URL"));
        let scope = format!("{}.default", arm);
        Ok(match endpoint_override {
            Some(url) => Self { name, arm: url.clone(), authority: url.clone(), scope },
            None => Self { name, arm: parse(arm)?, authority: parse(authority)?, scope },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clouds_resolve_by_name_and_override() {
        let public = CloudEndpoints::resolve(None, None).unwrap();
        assert_eq!(public.scope, "https://management.azure.com/.default");
        let china = CloudEndpoints::resolve(Some("azurechina"), None).unwrap();
        assert_eq!(china.arm.as_str(), "https://management.chinacloudapi.cn/");
        let fake = Url::parse("http://127.0.0.1:8090/").unwrap();
        let over = CloudEndpoints::resolve(Some("AzureGovernment"), Some(&fake)).unwrap();
        assert_eq!(over.arm, fake);
        assert_eq!(over.scope, "https://management.usgovcloudapi.net/.default");
        let bad = CloudEndpoints::resolve(Some("Mars"), None).unwrap_err();
        assert_eq!(bad.field(), Some("providerSpec.cloudConfiguration.name"));
    }
}
