//! Keystone v3: the token answer (`X-Subject-Token`, project, catalog,
//! expiry), the endpoint of a service in a region, and version discovery of an
//! unversioned `authURL`.

use serde::Deserialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::time::Instant;

use crate::errors::OsFailure;

/// Most of a token's lifetime the driver uses it: it is fetched anew this long
/// before it expires (or after three quarters of a short lifetime).
const REFRESH_MARGIN: std::time::Duration = std::time::Duration::from_secs(300);

/// The OpenStack services the driver calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Service {
    /// Nova.
    Compute,
    /// Neutron.
    Network,
    /// Glance.
    Image,
    /// Cinder (only for the boot volumes the Go provider made, see [`crate::go_volumes`]).
    BlockStorage,
}

impl Service {
    /// The label of the service in metrics and traces.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Compute => "compute",
            Self::Network => "network",
            Self::Image => "image",
            Self::BlockStorage => "volume",
        }
    }

    /// Catalog types, preferred first.
    fn catalog_types(self) -> &'static [&'static str] {
        match self {
            Self::Compute => &["compute"],
            Self::Network => &["network"],
            Self::Image => &["image"],
            Self::BlockStorage => &["block-storage", "volumev3"],
        }
    }

    /// The API root from a catalog URL: a version the catalog names at the
    /// end of the path (Nova's legacy `/v2/<project>` included) is replaced by
    /// the one the driver speaks: Nova `/v2.1` (microversions need it),
    /// Neutron `/v2.0`, Glance `/v2`. Cinder's catalog URL is kept as it is
    /// when it names a version (`/v3/<project>`, or `/v3` where the project is
    /// optional), else `/v3` is appended.
    fn api_root(self, url: &str) -> String {
        let url = url.trim_end_matches('/');
        let path_at = url.find("://").map_or(0, |s| url[s + 3..].find('/').map_or(url.len(), |p| s + 3 + p));
        let (base, path) = url.split_at(path_at);
        let mut segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let is_version =
            |s: &str| s.len() > 1 && s.starts_with('v') && s[1..].bytes().all(|b| b.is_ascii_digit() || b == b'.');
        if self == Self::BlockStorage {
            if !segments.iter().any(|s| is_version(s)) {
                segments.push("v3");
            }
            return format!("{base}/{}", segments.join("/"));
        }
        match segments.as_slice() {
            [.., v, _project] if self == Self::Compute && is_version(v) => segments.truncate(segments.len() - 2),
            [.., v] if is_version(v) => segments.truncate(segments.len() - 1),
            _ => {}
        }
        let version = match self {
            Self::Compute => "v2.1",
            Self::Network => "v2.0",
            Self::Image | Self::BlockStorage => "v2",
        };
        segments.push(version);
        format!("{base}/{}", segments.join("/"))
    }
}

/// A Keystone token and what came with it.
pub(crate) struct Token {
    /// The `X-Subject-Token` value (a secret: never logged).
    pub(crate) value: String,
    /// The project the token is scoped to.
    pub(crate) project_id: String,
    /// The service catalog.
    catalog: Vec<CatalogService>,
    /// When the driver fetches a new token instead.
    refresh_at: Instant,
    /// Which fetch of its session this is (a 401 invalidates only the token it was answered for).
    pub(crate) generation: u64,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token").field("project_id", &self.project_id).field("generation", &self.generation).finish()
    }
}

impl Token {
    /// Reads `POST /v3/auth/tokens`'s answer, fetched at `fetched`.
    pub(crate) fn from_answer(
        value: String,
        body: &[u8],
        fetched: Instant,
        generation: u64,
    ) -> Result<Self, OsFailure> {
        let answer: TokenAnswer = serde_json::from_slice(body)
            .map_err(|_| OsFailure::transport("identity tokens.create answered a body that is not a token"))?;
        let t = answer.token;
        let parse = |s: &str| OffsetDateTime::parse(s, &Rfc3339).ok();
        let lifetime = match (parse(&t.expires_at), parse(&t.issued_at)) {
            // Both from Keystone's clock: the local clock's skew does not matter.
            (Some(expires), Some(issued)) if expires > issued => {
                std::time::Duration::try_from(expires - issued).unwrap_or_default()
            }
            (Some(expires), None) => {
                std::time::Duration::try_from(expires - OffsetDateTime::now_utc()).unwrap_or_default()
            }
            _ => std::time::Duration::ZERO,
        };
        let margin = REFRESH_MARGIN.min(lifetime / 4);
        Ok(Self {
            value,
            project_id: t.project.map(|p| p.id).unwrap_or_default(),
            catalog: t.catalog,
            refresh_at: fetched + lifetime.saturating_sub(margin),
            generation,
        })
    }

    /// True while the token may still be used.
    pub(crate) fn is_fresh(&self) -> bool {
        Instant::now() < self.refresh_at
    }

    /// The API root of `service` in `region` (public interface).
    pub(crate) fn endpoint(&self, service: Service, region: &str) -> Result<String, OsFailure> {
        for kind in service.catalog_types() {
            let found = self
                .catalog
                .iter()
                .filter(|s| s.service_type == *kind)
                .flat_map(|s| &s.endpoints)
                .find(|e| e.interface == "public" && (e.region == region || e.region_id == region));
            if let Some(e) = found {
                return Ok(service.api_root(&e.url));
            }
        }
        Err(OsFailure::setup(
            "NoEndpoint",
            format!("the catalog has no public {} endpoint in region {region:?}", service.label()),
        ))
    }
}

#[derive(Deserialize)]
struct TokenAnswer {
    token: TokenBody,
}

#[derive(Deserialize)]
struct TokenBody {
    #[serde(default)]
    expires_at: String,
    #[serde(default)]
    issued_at: String,
    #[serde(default)]
    project: Option<ProjectRef>,
    #[serde(default)]
    catalog: Vec<CatalogService>,
}

#[derive(Deserialize)]
struct ProjectRef {
    #[serde(default)]
    id: String,
}

#[derive(Debug, Deserialize)]
struct CatalogService {
    #[serde(default, rename = "type")]
    service_type: String,
    #[serde(default)]
    endpoints: Vec<CatalogEndpoint>,
}

#[derive(Debug, Deserialize)]
struct CatalogEndpoint {
    #[serde(default)]
    interface: String,
    #[serde(default)]
    region: String,
    #[serde(default)]
    region_id: String,
    #[serde(default)]
    url: String,
}

/// True when `auth_url` already names Keystone's v3 API.
pub(crate) fn is_v3(auth_url: &str) -> bool {
    auth_url.trim_end_matches('/').ends_with("/v3")
}

/// The v3 root from a version discovery document (`GET <authURL>`), or `<authURL>/v3`.
pub(crate) fn v3_from_discovery(auth_url: &str, body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Doc {
        versions: Versions,
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Versions {
        Wrapped { values: Vec<Version> },
        Plain(Vec<Version>),
    }
    #[derive(Deserialize)]
    struct Version {
        #[serde(default)]
        id: String,
        #[serde(default)]
        links: Vec<super::model::Link>,
    }
    let versions = match serde_json::from_slice::<Doc>(body).map(|d| d.versions) {
        Ok(Versions::Wrapped { values }) | Ok(Versions::Plain(values)) => values,
        Err(_) => Vec::new(),
    };
    versions
        .into_iter()
        .filter(|v| v.id.starts_with("v3"))
        .find_map(|v| v.links.into_iter().find(|l| l.rel == "self").map(|l| l.href))
        .map(|href| href.trim_end_matches('/').to_string())
        .unwrap_or_else(|| format!("{}/v3", auth_url.trim_end_matches('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = r#"{"token":{"issued_at":"2026-12-01T10:00:00.000000Z","expires_at":"2026-12-01T11:00:00.000000Z",
        "project":{"id":"p-1","name":"proj"},
        "catalog":[
          {"type":"compute","endpoints":[{"interface":"public","region":"RegionOne","url":"https://nova/v2.1"},
                                          {"interface":"internal","region":"RegionOne","url":"http://internal"}]},
          {"type":"network","endpoints":[{"interface":"public","region_id":"RegionTwo","url":"https://neutron:9696/"}]},
          {"type":"image","endpoints":[{"interface":"public","region":"RegionOne","url":"https://glance"}]},
          {"type":"volumev3","endpoints":[{"interface":"public","region":"RegionOne","url":"https://cinder/v3/p-1"}]}]}}"#;

    #[tokio::test(start_paused = true)]
    async fn catalog_and_lifetime() {
        let now = Instant::now();
        let t = Token::from_answer("tok".into(), ANSWER.as_bytes(), now, 1).unwrap();
        assert_eq!(t.project_id, "p-1");
        assert_eq!(t.endpoint(Service::Compute, "RegionOne").unwrap(), "https://nova/v2.1");
        assert_eq!(t.endpoint(Service::Network, "RegionTwo").unwrap(), "https://neutron:9696/v2.0");
        assert_eq!(t.endpoint(Service::Image, "RegionOne").unwrap(), "https://glance/v2");
        assert!(t.endpoint(Service::Compute, "RegionTwo").unwrap_err().setup);
        assert!(t.is_fresh());
        tokio::time::advance(std::time::Duration::from_secs(3300 - 1)).await;
        assert!(t.is_fresh());
        tokio::time::advance(std::time::Duration::from_secs(2)).await;
        assert!(!t.is_fresh(), "refreshed five minutes before expiry");
        assert!(!format!("{t:?}").contains("tok"));
    }

    #[test]
    fn api_roots_from_catalog_urls() {
        assert_eq!(Service::Compute.api_root("https://nova:8774/v2.1/"), "https://nova:8774/v2.1");
        assert_eq!(Service::Compute.api_root("https://nova:8774/v2/0123abcd"), "https://nova:8774/v2.1");
        assert_eq!(
            Service::Compute.api_root("https://v2cloud.example/compute"),
            "https://v2cloud.example/compute/v2.1"
        );
        assert_eq!(Service::Compute.api_root("https://nova:8774"), "https://nova:8774/v2.1");
        assert_eq!(Service::Network.api_root("https://neutron:9696/"), "https://neutron:9696/v2.0");
        assert_eq!(Service::Network.api_root("https://cloud/network/v2.0"), "https://cloud/network/v2.0");
        assert_eq!(Service::Image.api_root("https://glance:9292/v2"), "https://glance:9292/v2");
        assert_eq!(Service::Image.api_root("https://cloud/image"), "https://cloud/image/v2");
        assert_eq!(
            Service::BlockStorage.api_root("https://cinder:8776/v3/0123abcd/"),
            "https://cinder:8776/v3/0123abcd"
        );
        assert_eq!(Service::BlockStorage.api_root("https://cloud/volume/v3"), "https://cloud/volume/v3");
        assert_eq!(Service::BlockStorage.api_root("https://cloud/volume"), "https://cloud/volume/v3");
    }

    #[test]
    fn discovery() {
        assert!(is_v3("https://k:5000/v3/"));
        assert!(!is_v3("https://k:5000"));
        let doc = br#"{"versions":{"values":[{"id":"v3.14","status":"stable","links":[{"rel":"self","href":"https://k/identity/v3/"}]}]}}"#;
        assert_eq!(v3_from_discovery("https://k/identity", doc), "https://k/identity/v3");
        assert_eq!(v3_from_discovery("https://k/", b"<html>"), "https://k/v3");
    }
}
