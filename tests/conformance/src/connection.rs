//! gRPC connection to the driver under test and what it advertises.

use std::collections::BTreeSet;

use machine_driver_proto::v1::identity_service_client::IdentityServiceClient;
use machine_driver_proto::v1::machine_driver_service_client::MachineDriverServiceClient;
use machine_driver_proto::v1::{Capability, GetPluginCapabilitiesRequest, GetPluginInfoRequest, GetPluginInfoResponse};
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::health_client::HealthClient;

/// Clients of the three services a driver serves, over one channel.
#[derive(Debug, Clone)]
pub struct Connection {
    /// `machinedriver.v1.MachineDriverService`.
    pub driver: MachineDriverServiceClient<Channel>,
    /// `machinedriver.v1.IdentityService`.
    pub identity: IdentityServiceClient<Channel>,
    /// `grpc.health.v1.Health`.
    pub health: HealthClient<Channel>,
}

/// The URI tonic dials for a driver endpoint: `unix:///p` and bare absolute paths
/// become `unix:///p`, `tcp://h:p` becomes `http://h:p`.
pub fn dial_uri(endpoint: &str) -> Result<String, String> {
    if let Some(path) = endpoint.strip_prefix("unix://") {
        if !path.starts_with('/') {
            return Err(format!("endpoint {endpoint:?}: the socket path must be absolute (unix:///path)"));
        }
        return Ok(endpoint.to_string());
    }
    if endpoint.starts_with('/') {
        return Ok(format!("unix://{endpoint}"));
    }
    if let Some(addr) = endpoint.strip_prefix("tcp://") {
        return Ok(format!("http://{addr}"));
    }
    Err(format!("endpoint {endpoint:?}: expected unix:///abs/path.sock, an absolute path or tcp://host:port"))
}

impl Connection {
    /// Connects to `endpoint` (see [`dial_uri`]).
    pub async fn connect(endpoint: &str) -> Result<Self, String> {
        let uri = dial_uri(endpoint)?;
        let channel = Endpoint::from_shared(uri)
            .map_err(|e| format!("endpoint {endpoint:?}: {e}"))?
            .connect()
            .await
            .map_err(|e| format!("connecting to {endpoint}: {e}"))?;
        Ok(Self {
            driver: MachineDriverServiceClient::new(channel.clone()),
            identity: IdentityServiceClient::new(channel.clone()),
            health: HealthClient::new(channel),
        })
    }

    /// Plugin info and advertised capabilities.
    pub async fn describe(&self) -> Result<(GetPluginInfoResponse, Capabilities), String> {
        let info = self
            .identity
            .clone()
            .get_plugin_info(GetPluginInfoRequest {})
            .await
            .map_err(|s| format!("GetPluginInfo: {:?}: {}", s.code(), s.message()))?
            .into_inner();
        let caps = self
            .identity
            .clone()
            .get_plugin_capabilities(GetPluginCapabilitiesRequest {})
            .await
            .map_err(|s| format!("GetPluginCapabilities: {:?}: {}", s.code(), s.message()))?
            .into_inner();
        Ok((info, Capabilities::from_raw(&caps.capabilities)))
    }
}

/// The capabilities a driver advertises.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities(BTreeSet<i32>);

impl Capabilities {
    /// From the raw enum values of `GetPluginCapabilitiesResponse.capabilities`.
    pub fn from_raw(raw: &[i32]) -> Self {
        Self(raw.iter().copied().collect())
    }

    /// Whether `cap` is advertised.
    pub fn has(&self, cap: Capability) -> bool {
        self.0.contains(&(cap as i32))
    }
}

/// The proto name of a capability, for skip reasons.
pub fn capability_name(cap: Capability) -> &'static str {
    cap.as_str_name()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_map_to_dial_uris() {
        assert_eq!(dial_uri("unix:///tmp/d.sock").unwrap(), "unix:///tmp/d.sock");
        assert_eq!(dial_uri("/tmp/d.sock").unwrap(), "unix:///tmp/d.sock");
        assert_eq!(dial_uri("tcp://127.0.0.1:9000").unwrap(), "http://127.0.0.1:9000");
        assert!(dial_uri("unix://rel.sock").is_err());
        assert!(dial_uri("d.sock").is_err());
    }

    #[test]
    fn capabilities_lookup() {
        let caps = Capabilities::from_raw(&[Capability::ListMachines as i32, 99]);
        assert!(caps.has(Capability::ListMachines));
        assert!(!caps.has(Capability::ShareImage));
        assert_eq!(capability_name(Capability::ShareImage), "CAPABILITY_SHARE_IMAGE");
    }
}
