//! Entry points for the fuzz targets in `fuzz/` (not an API: hidden from the
//! docs, and kept in step with what the service does before provider code runs).

use machine_driver_api::DriverError;
use machine_driver_proto::v1 as pb;
use prost::Message;

use crate::convert::{self, MachineNeeds};
use crate::user_data::UserDataPreparer;

/// Decodes `bytes` as a CreateMachineRequest and checks it as the server does
/// before the provider sees it (machine, class, secret with the `required` keys,
/// user data within `max_user_data` with the class's registry configuration
/// merged in). `Ok(None)` when the bytes are no such message (tonic answers
/// that itself); a refusal must be INVALID_ARGUMENT naming a field.
pub fn create_machine_request(
    bytes: &[u8],
    required: &machine_driver_api::SecretKeys,
    max_user_data: usize,
) -> Result<Option<()>, DriverError> {
    let Ok(req) = pb::CreateMachineRequest::decode(bytes) else {
        return Ok(None);
    };
    let _machine = convert::machine(req.machine, MachineNeeds::NameAndUid)?;
    let (_class, registry) = convert::machine_class(req.machine_class)?;
    let secret = convert::secret(req.secret, "secret", required)?;
    let preparer = UserDataPreparer::load(None).map_err(|e| DriverError::internal(e.to_string()))?;
    preparer.prepare(&secret, registry.as_ref(), max_user_data)?;
    Ok(Some(()))
}

/// Feeds `data` to the HTTP/2 `:authority` rewriter every Unix connection
/// passes through (`authority::frames`): the first byte picks the size of the
/// pieces the rest arrives in, the rest is what a client sends. `Err` names
/// the property broken: the same output fed at once and in pieces, a
/// connection that is not rewritten unchanged, a rewritten one well-formed
/// (complete header blocks, literals only, usable `:authority`).
pub fn authority_rewrite(data: &[u8]) -> Result<(), String> {
    let Some((&step, input)) = data.split_first() else {
        return Ok(());
    };
    crate::authority::frames::check_invariants(input, usize::from(step % 64) + 1)
}
