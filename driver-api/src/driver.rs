//! The trait every cloud provider implements, with its request and response types.

use std::future::Future;

use crate::context::CallContext;
use crate::error::{DriverError, Result};
use crate::machine::{Address, Machine, MachineClass};
use crate::secret::SecretData;
use crate::secret_keys::SecretKeys;
use crate::update::{UpdateMachine, UpdatedMachine};

/// Static facts about a driver, served by the identity service.
#[derive(Debug, Clone)]
pub struct DriverInfo {
    /// DNS-like plugin name, e.g. `<cloud>.machine-driver.gardener.cloud`.
    pub name: String,
    /// Vendor version.
    pub version: String,
    /// Short cloud name used in metrics (the `<cloud>` of `providers/<cloud>`).
    pub provider: &'static str,
    /// Optional RPCs this driver implements.
    pub capabilities: Capabilities,
    /// Largest user data the cloud accepts (raw bytes, before any transport encoding).
    pub max_user_data_bytes: usize,
    /// Secret keys every machine RPC needs, in each credential form the
    /// provider accepts. The server rejects a secret that completes no form
    /// before provider code runs.
    pub secret_keys: SecretKeys,
}

/// Optional RPCs a driver implements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// InitializeMachine does real work.
    pub initialize_machine: bool,
    /// ListMachines is implemented.
    pub list_machines: bool,
    /// GetVolumeIDs is implemented.
    pub get_volume_ids: bool,
    /// ShareImage is implemented.
    pub share_image: bool,
    /// RevokeImageShare and ListImageShares are implemented.
    pub revoke_image_share: bool,
    /// UpdateMachine is implemented.
    pub update_machine: bool,
}

/// CreateMachine input.
#[derive(Debug, Clone)]
pub struct CreateMachine {
    /// The machine (name and uid are set).
    pub machine: Machine,
    /// Its class.
    pub class: MachineClass,
    /// Credentials (and the original `userData`; use [`CreateMachine::user_data`]).
    pub secret: SecretData,
    /// The user data to launch with: the secret's `userData` with the registry
    /// configuration already merged and the cloud's size limit checked. Secret.
    pub user_data: SecretBytes,
}

/// Bytes that never print (user data).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretBytes(pub Vec<u8>);

impl std::fmt::Debug for SecretBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "***stripped*** ({} bytes)", self.0.len())
    }
}

/// Input of the RPCs that address one existing machine (initialize, status, delete).
#[derive(Debug, Clone)]
pub struct MachineRef {
    /// The machine; for delete from the orphan collector only `provider_id` may be set.
    pub machine: Machine,
    /// Its class.
    pub class: MachineClass,
    /// Credentials.
    pub secret: SecretData,
}

/// ListMachines input.
#[derive(Debug, Clone)]
pub struct ListMachines {
    /// The class whose cluster/role tags select the VMs.
    pub class: MachineClass,
    /// Credentials.
    pub secret: SecretData,
}

/// The image owner's credentials, present by type: a request that carries
/// one has owner keys (the server builds it from a non-empty `owner_secret`
/// and checks the driver's required keys), so no provider checks for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerSecret(SecretData);

impl OwnerSecret {
    /// Wraps the owner's secret data; `None` when it has no key (no owner
    /// credentials were given).
    pub fn new(secret: SecretData) -> Option<Self> {
        (!secret.is_empty()).then_some(Self(secret))
    }

    /// The owner's secret data.
    pub fn secret(&self) -> &SecretData {
        &self.0
    }
}

impl std::ops::Deref for OwnerSecret {
    type Target = SecretData;

    fn deref(&self) -> &SecretData {
        &self.0
    }
}

/// ShareImage input.
#[derive(Debug, Clone)]
pub struct ShareImage {
    /// Image reference in the owner account.
    pub image: String,
    /// Region of the image, if regional.
    pub region: Option<String>,
    /// Owner credentials, when given: ShareImage needs them only when the
    /// consumer cannot use the image yet (see [`ShareImage::owner_secret_required`]).
    pub owner_secret: Option<OwnerSecret>,
    /// Consumer credentials.
    pub consumer_secret: SecretData,
    /// Consumer account id, when given.
    pub consumer_account: Option<String>,
}

impl ShareImage {
    /// The owner's credentials, for a grant the consumer's own view showed is
    /// needed; FAILED_PRECONDITION [`OWNER_CREDENTIALS_REQUIRED`](crate::OWNER_CREDENTIALS_REQUIRED)
    /// naming the image when none were given (the one answer for every cloud).
    pub fn owner_secret_required(&self) -> Result<&OwnerSecret> {
        self.owner_secret.as_ref().ok_or_else(|| {
            DriverError::owner_credentials_required(format!(
                "image {} is not usable by the consumer account and no owner credentials were given: \
                 configure the image owner's credentials to share it",
                self.image
            ))
        })
    }
}

/// RevokeImageShare input: the ShareImage fields, with the owner's
/// credentials present (the server answers OWNER_CREDENTIALS_REQUIRED without).
#[derive(Debug, Clone)]
pub struct RevokeImageShare {
    /// Image reference in the owner account.
    pub image: String,
    /// Region of the image, if regional.
    pub region: Option<String>,
    /// Owner credentials.
    pub owner_secret: OwnerSecret,
    /// Consumer credentials (they name the consumer when `consumer_account` is not given).
    pub consumer_secret: SecretData,
    /// Consumer account id, when given.
    pub consumer_account: Option<String>,
}

/// ListImageShares input: the image and the owner's credentials (present; the
/// server answers OWNER_CREDENTIALS_REQUIRED without).
#[derive(Debug, Clone)]
pub struct ListImageShares {
    /// Image reference in the owner account.
    pub image: String,
    /// Region of the image, if regional.
    pub region: Option<String>,
    /// Owner credentials.
    pub owner_secret: OwnerSecret,
}

/// RevokeImageShare output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevokedImageShare {
    /// True when this call took access back; false when the consumer had none.
    pub revoked_now: bool,
    /// The consumer account.
    pub consumer_account: String,
}

/// ListImageShares output.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageShares {
    /// The accounts the image is shared with, as ShareImage names them, sorted.
    pub consumer_accounts: Vec<String>,
    /// True when every account can use the image.
    pub public: bool,
}

/// CreateMachine output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedMachine {
    /// Cloud id as providerID.
    pub provider_id: String,
    /// Node name.
    pub node_name: String,
    /// Opaque state for machine.last_known_state.
    pub last_known_state: String,
    /// Addresses known now.
    pub addresses: Vec<Address>,
}

/// GetMachineStatus output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineStatus {
    /// Cloud id as providerID.
    pub provider_id: String,
    /// Node name.
    pub node_name: String,
    /// Current addresses.
    pub addresses: Vec<Address>,
    /// Post-creation steps still to do; empty means initialized.
    pub pending_steps: Vec<String>,
    /// Cloud lifecycle state of the VM.
    pub vm_state: String,
}

impl MachineStatus {
    /// The one answer for a machine created a moment ago that the cloud does
    /// not show yet: OK, not initialized, pending step
    /// [`AWAIT_VISIBILITY`](crate::AWAIT_VISIBILITY), state `pending`
    /// (see [`RecentCreates`](crate::RecentCreates)).
    pub fn not_visible_yet(provider_id: String, node_name: String) -> Self {
        Self {
            provider_id,
            node_name,
            addresses: Vec::new(),
            pending_steps: vec![crate::AWAIT_VISIBILITY.to_string()],
            vm_state: "pending".to_string(),
        }
    }
}

/// InitializeMachine output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitializedMachine {
    /// Cloud id as providerID.
    pub provider_id: String,
    /// Node name.
    pub node_name: String,
    /// Steps this call applied (empty when nothing was left).
    pub applied_steps: Vec<String>,
}

/// DeleteMachine output.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeletedMachine {
    /// Opaque state for machine.last_known_state.
    pub last_known_state: String,
    /// True when the VM was already gone.
    pub already_gone: bool,
}

/// ShareImage output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedImage {
    /// Image id the consumer uses.
    pub image_id: String,
    /// True when this call made the grant.
    pub granted_now: bool,
    /// The consumer account.
    pub consumer_account: String,
}

/// A cloud's machine driver. Implemented once per cloud; served by the server crate.
///
/// Every method is called after the server validated the request (machine name
/// and uid where required, provider spec is a JSON object, required secret keys
/// present), and must honour [`CallContext::remaining`]. Methods return plain
/// domain types; no gRPC type crosses this boundary.
pub trait Driver: Send + Sync + 'static {
    /// Identity, capabilities and requirements.
    fn info(&self) -> DriverInfo;

    /// Creates the VM of a machine, idempotently on `machine.uid`.
    fn create_machine(
        &self,
        ctx: &CallContext,
        req: CreateMachine,
    ) -> impl Future<Output = Result<CreatedMachine>> + Send;

    /// Reports the VM and its initialization state; NOT_FOUND when absent.
    fn get_machine_status(
        &self,
        ctx: &CallContext,
        req: MachineRef,
    ) -> impl Future<Output = Result<MachineStatus>> + Send;

    /// Applies pending post-creation steps, convergently.
    fn initialize_machine(
        &self,
        ctx: &CallContext,
        req: MachineRef,
    ) -> impl Future<Output = Result<InitializedMachine>> + Send {
        let _ = (ctx, req);
        async { Err(DriverError::unimplemented("InitializeMachine")) }
    }

    /// Deletes the VM; OK when it is already gone.
    fn delete_machine(&self, ctx: &CallContext, req: MachineRef)
    -> impl Future<Output = Result<DeletedMachine>> + Send;

    /// Lists the cluster's VMs of the class's role: providerID → machine name.
    fn list_machines(
        &self,
        ctx: &CallContext,
        req: ListMachines,
    ) -> impl Future<Output = Result<Vec<(String, String)>>> + Send {
        let _ = (ctx, req);
        async { Err(DriverError::unimplemented("ListMachines")) }
    }

    /// Volume ids of this cloud found in PersistentVolume specs (JSON values).
    fn get_volume_ids(&self, pv_specs: &[serde_json::Value]) -> Result<Vec<String>> {
        let _ = pv_specs;
        Err(DriverError::unimplemented("GetVolumeIDs"))
    }

    /// Shares an allow-listed image with the consumer account.
    fn share_image(&self, ctx: &CallContext, req: ShareImage) -> impl Future<Output = Result<SharedImage>> + Send {
        let _ = (ctx, req);
        async { Err(DriverError::unimplemented("ShareImage")) }
    }

    /// Takes back a share: the consumer account can no longer launch the image.
    fn revoke_image_share(
        &self,
        ctx: &CallContext,
        req: RevokeImageShare,
    ) -> impl Future<Output = Result<RevokedImageShare>> + Send {
        let _ = (ctx, req);
        async { Err(DriverError::unimplemented("RevokeImageShare")) }
    }

    /// The accounts an image is shared with.
    fn list_image_shares(
        &self,
        ctx: &CallContext,
        req: ListImageShares,
    ) -> impl Future<Output = Result<ImageShares>> + Send {
        let _ = (ctx, req);
        async { Err(DriverError::unimplemented("ListImageShares")) }
    }

    /// Changes the machine's running VM in place to what `req.class` asks for
    /// (see [`crate::UpdatePlan`]); convergent, ownership-checked like status.
    fn update_machine(
        &self,
        ctx: &CallContext,
        req: UpdateMachine,
    ) -> impl Future<Output = Result<UpdatedMachine>> + Send {
        let _ = (ctx, req);
        async { Err(DriverError::unimplemented("UpdateMachine")) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(owner: SecretData) -> ShareImage {
        ShareImage {
            image: "img-1".into(),
            region: None,
            owner_secret: OwnerSecret::new(owner),
            consumer_secret: SecretData::default(),
            consumer_account: None,
        }
    }

    #[test]
    fn an_owner_secret_has_keys_and_share_image_answers_the_one_owner_error_without() {
        assert!(OwnerSecret::new(SecretData::default()).is_none());
        let err = share(SecretData::default()).owner_secret_required().unwrap_err();
        assert_eq!(
            (err.kind(), err.reason()),
            (crate::ErrorKind::FailedPrecondition, crate::OWNER_CREDENTIALS_REQUIRED)
        );
        assert!(err.to_string().contains("img-1"), "{err}");
        let owner: SecretData = [("key", "v")].into_iter().collect();
        let req = share(owner.clone());
        assert_eq!(req.owner_secret_required().ok().map(OwnerSecret::secret), Some(&owner));
        assert!(req.owner_secret_required().is_ok_and(|o| o.has("key")));
    }
}
