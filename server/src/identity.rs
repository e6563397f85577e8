//! `IdentityService`: plugin info, capabilities and a Probe that makes no cloud call.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use machine_driver_api::DriverInfo;
use machine_driver_proto::v1 as pb;
use machine_driver_proto::v1::identity_service_server::IdentityService;
use tonic::{Request, Response, Status};

/// Serves the driver's identity; `ready` turns false when shutdown begins.
pub(crate) struct Identity {
    pub(crate) info: DriverInfo,
    pub(crate) ready: Arc<AtomicBool>,
}

#[tonic::async_trait]
impl IdentityService for Identity {
    async fn get_plugin_info(
        &self,
        _: Request<pb::GetPluginInfoRequest>,
    ) -> Result<Response<pb::GetPluginInfoResponse>, Status> {
        Ok(Response::new(pb::GetPluginInfoResponse {
            name: self.info.name.clone(),
            vendor_version: self.info.version.clone(),
            provider: self.info.provider.to_string(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<pb::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<pb::GetPluginCapabilitiesResponse>, Status> {
        let c = self.info.capabilities;
        let mut caps = vec![pb::Capability::RegistryConfig];
        if c.initialize_machine {
            caps.push(pb::Capability::InitializeMachine);
        }
        if c.list_machines {
            caps.push(pb::Capability::ListMachines);
        }
        if c.get_volume_ids {
            caps.push(pb::Capability::GetVolumeIds);
        }
        if c.share_image {
            caps.push(pb::Capability::ShareImage);
        }
        if c.revoke_image_share {
            caps.push(pb::Capability::RevokeImageShare);
        }
        if c.update_machine {
            caps.push(pb::Capability::UpdateMachine);
        }
        Ok(Response::new(pb::GetPluginCapabilitiesResponse {
            capabilities: caps.into_iter().map(|c| c as i32).collect(),
            max_user_data_bytes: self.info.max_user_data_bytes as u64,
        }))
    }

    async fn probe(&self, _: Request<pb::ProbeRequest>) -> Result<Response<pb::ProbeResponse>, Status> {
        Ok(Response::new(pb::ProbeResponse { ready: self.ready.load(Ordering::Relaxed) }))
    }
}
