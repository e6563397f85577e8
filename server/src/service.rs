//! `MachineDriverService`: validates each request, converts it to domain types,
//! calls the provider and converts the answer back.

use std::sync::Arc;

use machine_driver_api as api;
use machine_driver_api::{Driver, DriverError, ErrorKind};
use machine_driver_proto::v1 as pb;
use machine_driver_proto::v1::machine_driver_service_server::MachineDriverService;
use tonic::{Request, Response, Status};

use crate::call::{self, CallLabels, CallSettings};
use crate::convert::{self, MachineNeeds};
use crate::user_data::UserDataPreparer;

/// The gRPC service around one provider.
pub(crate) struct DriverService<D> {
    pub(crate) driver: Arc<D>,
    pub(crate) info: api::DriverInfo,
    pub(crate) settings: CallSettings,
    pub(crate) user_data: UserDataPreparer,
    pub(crate) share_allow_list: Vec<String>,
}

type MachineParts = (api::Machine, api::MachineClass, Option<pb::RegistryConfig>, api::SecretData);

impl<D: Driver> DriverService<D> {
    fn parts(
        &self,
        machine: Option<pb::Machine>,
        needs: MachineNeeds,
        class: Option<pb::MachineClass>,
        secret: Option<pb::SecretData>,
    ) -> Result<MachineParts, DriverError> {
        let machine = convert::machine(machine, needs)?;
        let (class, registry) = convert::machine_class(class)?;
        let secret = convert::secret(secret, "secret", &self.info.secret_keys)?;
        Ok((machine, class, registry, secret))
    }

    fn labels<'a>(m: &'a Option<pb::Machine>) -> CallLabels<'a> {
        m.as_ref().map(|m| CallLabels { machine: &m.name, provider_id: &m.provider_id }).unwrap_or_default()
    }
}

#[tonic::async_trait]
impl<D: Driver> MachineDriverService for DriverService<D> {
    async fn create_machine(
        &self,
        request: Request<pb::CreateMachineRequest>,
    ) -> Result<Response<pb::CreateMachineResponse>, Status> {
        let ctx = call::context("CreateMachine", &request, self.settings.default_timeout);
        let (metadata, _, req) = request.into_parts();
        let labels = Self::labels(&req.machine);
        let work = async {
            let (machine, class, registry, secret) =
                self.parts(req.machine.clone(), MachineNeeds::NameAndUid, req.machine_class, req.secret)?;
            let user_data = self.user_data.prepare(&secret, registry.as_ref(), self.info.max_user_data_bytes)?;
            self.driver.create_machine(&ctx, api::CreateMachine { machine, class, secret, user_data }).await
        };
        call::run(&self.settings, ctx.clone(), &metadata, labels, work, |c| pb::CreateMachineResponse {
            provider_id: c.provider_id,
            node_name: c.node_name,
            last_known_state: c.last_known_state,
            addresses: c.addresses.into_iter().map(convert::address).collect(),
        })
        .await
    }

    async fn initialize_machine(
        &self,
        request: Request<pb::InitializeMachineRequest>,
    ) -> Result<Response<pb::InitializeMachineResponse>, Status> {
        let ctx = call::context("InitializeMachine", &request, self.settings.default_timeout);
        let (metadata, _, req) = request.into_parts();
        let labels = Self::labels(&req.machine);
        let work = async {
            if !self.info.capabilities.initialize_machine {
                return Err(DriverError::unimplemented("InitializeMachine"));
            }
            let (machine, class, _, secret) =
                self.parts(req.machine.clone(), MachineNeeds::Name, req.machine_class, req.secret)?;
            self.driver.initialize_machine(&ctx, api::MachineRef { machine, class, secret }).await
        };
        call::run(&self.settings, ctx.clone(), &metadata, labels, work, |i| pb::InitializeMachineResponse {
            provider_id: i.provider_id,
            node_name: i.node_name,
            applied_steps: i.applied_steps,
        })
        .await
    }

    async fn get_machine_status(
        &self,
        request: Request<pb::GetMachineStatusRequest>,
    ) -> Result<Response<pb::GetMachineStatusResponse>, Status> {
        let ctx = call::context("GetMachineStatus", &request, self.settings.default_timeout);
        let (metadata, _, req) = request.into_parts();
        let labels = Self::labels(&req.machine);
        let work = async {
            let (machine, class, _, secret) =
                self.parts(req.machine.clone(), MachineNeeds::Name, req.machine_class, req.secret)?;
            self.driver.get_machine_status(&ctx, api::MachineRef { machine, class, secret }).await
        };
        call::run(&self.settings, ctx.clone(), &metadata, labels, work, |s| pb::GetMachineStatusResponse {
            provider_id: s.provider_id,
            node_name: s.node_name,
            addresses: s.addresses.into_iter().map(convert::address).collect(),
            initialization: Some(pb::InitializationState {
                initialized: s.pending_steps.is_empty(),
                pending_steps: s.pending_steps,
            }),
            vm_state: s.vm_state,
        })
        .await
    }

    async fn delete_machine(
        &self,
        request: Request<pb::DeleteMachineRequest>,
    ) -> Result<Response<pb::DeleteMachineResponse>, Status> {
        let ctx = call::context("DeleteMachine", &request, self.settings.default_timeout);
        let (metadata, _, req) = request.into_parts();
        let labels = Self::labels(&req.machine);
        let work = async {
            let (machine, class, _, secret) =
                self.parts(req.machine.clone(), MachineNeeds::NameOrProviderId, req.machine_class, req.secret)?;
            self.driver.delete_machine(&ctx, api::MachineRef { machine, class, secret }).await
        };
        call::run(&self.settings, ctx.clone(), &metadata, labels, work, |d| pb::DeleteMachineResponse {
            last_known_state: d.last_known_state,
            already_gone: d.already_gone,
        })
        .await
    }

    async fn update_machine(
        &self,
        request: Request<pb::UpdateMachineRequest>,
    ) -> Result<Response<pb::UpdateMachineResponse>, Status> {
        let ctx = call::context("UpdateMachine", &request, self.settings.default_timeout);
        let (metadata, _, req) = request.into_parts();
        let labels = Self::labels(&req.machine);
        let work = async {
            if !self.info.capabilities.update_machine {
                return Err(DriverError::unimplemented("UpdateMachine"));
            }
            let (machine, class, _, secret) =
                self.parts(req.machine.clone(), MachineNeeds::NameAndProviderId, req.machine_class, req.secret)?;
            let previous_class = convert::previous_machine_class(req.previous_machine_class)?;
            let validate_only = req.validate_only;
            let update = api::UpdateMachine { machine, class, previous_class, secret, validate_only };
            self.driver.update_machine(&ctx, update).await
        };
        call::run(&self.settings, ctx.clone(), &metadata, labels, work, |u| pb::UpdateMachineResponse {
            provider_id: u.provider_id,
            changes: u.changes.into_iter().map(convert::field_change).collect(),
        })
        .await
    }

    async fn list_machines(
        &self,
        request: Request<pb::ListMachinesRequest>,
    ) -> Result<Response<pb::ListMachinesResponse>, Status> {
        let ctx = call::context("ListMachines", &request, self.settings.default_timeout);
        let (metadata, _, req) = request.into_parts();
        let work = async {
            if !self.info.capabilities.list_machines {
                return Err(DriverError::unimplemented("ListMachines"));
            }
            let (class, _) = convert::machine_class(req.machine_class)?;
            let secret = convert::secret(req.secret, "secret", &self.info.secret_keys)?;
            self.driver.list_machines(&ctx, api::ListMachines { class, secret }).await
        };
        call::run(&self.settings, ctx.clone(), &metadata, CallLabels::default(), work, |list| {
            pb::ListMachinesResponse { machines: list.into_iter().collect() }
        })
        .await
    }

    async fn get_volume_i_ds(
        &self,
        request: Request<pb::GetVolumeIDsRequest>,
    ) -> Result<Response<pb::GetVolumeIDsResponse>, Status> {
        let ctx = call::context("GetVolumeIDs", &request, self.settings.default_timeout);
        let (metadata, _, req) = request.into_parts();
        let work = async {
            if !self.info.capabilities.get_volume_ids {
                return Err(DriverError::unimplemented("GetVolumeIDs"));
            }
            let specs = req
                .pv_specs_json
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    serde_json::from_str::<serde_json::Value>(s)
                        .map_err(|_| DriverError::invalid_argument(format!("pv_specs_json[{i}]"), "is not valid JSON"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            self.driver.get_volume_ids(&specs)
        };
        call::run(&self.settings, ctx.clone(), &metadata, CallLabels::default(), work, |volume_ids| {
            pb::GetVolumeIDsResponse { volume_ids }
        })
        .await
    }

    async fn share_image(
        &self,
        request: Request<pb::ShareImageRequest>,
    ) -> Result<Response<pb::ShareImageResponse>, Status> {
        let ctx = call::context("ShareImage", &request, self.settings.default_timeout);
        let (metadata, _, req) = request.into_parts();
        let work = async {
            if !self.info.capabilities.share_image {
                return Err(DriverError::unimplemented("ShareImage"));
            }
            let req =
                self.share_request(req.image, req.region, req.owner_secret, req.consumer_secret, req.consumer_account)?;
            if !self.share_allow_list.iter().any(|a| a == &req.image) {
                return Err(DriverError::new(
                    ErrorKind::PermissionDenied,
                    machine_driver_api::reasons::IMAGE_NOT_ALLOWED,
                    format!("image {} is not on the operator's share allow-list", req.image),
                ));
            }
            self.driver.share_image(&ctx, req).await
        };
        call::run(&self.settings, ctx.clone(), &metadata, CallLabels::default(), work, |s| pb::ShareImageResponse {
            image_id: s.image_id,
            granted_now: s.granted_now,
            consumer_account: s.consumer_account,
        })
        .await
    }

    async fn revoke_image_share(
        &self,
        request: Request<pb::RevokeImageShareRequest>,
    ) -> Result<Response<pb::RevokeImageShareResponse>, Status> {
        let ctx = call::context("RevokeImageShare", &request, self.settings.default_timeout);
        let (metadata, _, req) = request.into_parts();
        let work = async {
            if !self.info.capabilities.revoke_image_share {
                return Err(DriverError::unimplemented("RevokeImageShare"));
            }
            // No allow-list check: taking an image off the list, then revoking it, is how it is withdrawn.
            let req =
                self.share_request(req.image, req.region, req.owner_secret, req.consumer_secret, req.consumer_account)?;
            let api::ShareImage { image, region, owner_secret, consumer_secret, consumer_account } = req;
            let Some(owner_secret) = owner_secret else {
                return Err(DriverError::owner_credentials_required(format!(
                    "revoking a share of image {image} needs the image owner's credentials"
                )));
            };
            let req = api::RevokeImageShare { image, region, owner_secret, consumer_secret, consumer_account };
            self.driver.revoke_image_share(&ctx, req).await
        };
        call::run(&self.settings, ctx.clone(), &metadata, CallLabels::default(), work, |r| {
            pb::RevokeImageShareResponse { revoked_now: r.revoked_now, consumer_account: r.consumer_account }
        })
        .await
    }

    async fn list_image_shares(
        &self,
        request: Request<pb::ListImageSharesRequest>,
    ) -> Result<Response<pb::ListImageSharesResponse>, Status> {
        let ctx = call::context("ListImageShares", &request, self.settings.default_timeout);
        let (metadata, _, req) = request.into_parts();
        let work = async {
            if !self.info.capabilities.revoke_image_share {
                return Err(DriverError::unimplemented("ListImageShares"));
            }
            let image = req.image.trim().to_string();
            if image.is_empty() {
                return Err(DriverError::invalid_argument("image", "is required"));
            }
            let Some(owner_secret) = convert::owner_secret(req.owner_secret, &self.info.secret_keys)? else {
                return Err(DriverError::owner_credentials_required(format!(
                    "listing the shares of image {image} needs the image owner's credentials"
                )));
            };
            let request =
                api::ListImageShares { image, region: Some(req.region).filter(|r| !r.trim().is_empty()), owner_secret };
            self.driver.list_image_shares(&ctx, request).await
        };
        call::run(&self.settings, ctx.clone(), &metadata, CallLabels::default(), work, |mut shares| {
            shares.consumer_accounts.sort();
            pb::ListImageSharesResponse { consumer_accounts: shares.consumer_accounts, public: shares.public }
        })
        .await
    }
}

impl<D: Driver> DriverService<D> {
    /// The ShareImage / RevokeImageShare input, checked: an image, the consumer's
    /// credentials with the driver's required keys, owner credentials when given.
    fn share_request(
        &self,
        image: String,
        region: String,
        owner_secret: Option<pb::SecretData>,
        consumer_secret: Option<pb::SecretData>,
        consumer_account: String,
    ) -> Result<api::ShareImage, DriverError> {
        let image = image.trim().to_string();
        if image.is_empty() {
            return Err(DriverError::invalid_argument("image", "is required"));
        }
        let consumer_secret = convert::secret(consumer_secret, "consumer_secret", &self.info.secret_keys)?;
        let owner_secret = convert::owner_secret(owner_secret, &self.info.secret_keys)?;
        let region = Some(region).filter(|r| !r.trim().is_empty());
        let consumer_account = Some(consumer_account).filter(|a| !a.trim().is_empty());
        Ok(api::ShareImage { image, region, owner_secret, consumer_secret, consumer_account })
    }
}
