//! `DELETE .../virtualMachines/NAME`: the VM turns `Deleting` for the stop time (a repeated
//! DELETE joins the one in progress); when that ends, the state transition removes it and
//! deletes or detaches its NICs and disks by their delete options.

use std::time::Instant;

use axum::http::StatusCode;
use axum::response::Response;

use crate::api::{Ctx, Req, operations, respond};
use crate::error::ArmError;
use crate::state::{VmPhase, key};

/// `DELETE .../virtualMachines/NAME[?forceDeletion=]`: 202 + async op, or 204 when absent.
pub(crate) fn delete(ctx: &Ctx, req: &Req, sub: &str, rg: &str, name: &str) -> Result<Response, ArmError> {
    let now = Instant::now();
    let stop = ctx.admin.timing().stop();
    let mut st = ctx.store.lock_at(now);
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let vm_key = key(sub, rg, name);
    let Some(record) = st.vms.get_mut(&vm_key) else {
        return Ok(respond(StatusCode::NO_CONTENT, None, &[]));
    };
    let until = match record.phase {
        VmPhase::Deleting { until } => until,
        _ => now + stop,
    };
    record.phase = VmPhase::Deleting { until };
    let location = record.location.clone();
    let op = st.new_operation(sub, now, until, None, None);
    let headers = operations::compute_headers(&st, req, sub, &location, &op, now, true);
    Ok(respond(StatusCode::ACCEPTED, None, &headers))
}
