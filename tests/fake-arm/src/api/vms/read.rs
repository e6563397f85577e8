//! The VM reads: `GET` one VM and the paged list, both blind to a VM until it is visible.

use std::time::Instant;

use axum::http::StatusCode;
use axum::response::Response;

use super::not_found;
use crate::api::{Ctx, Req, list_in_group, respond};
use crate::error::ArmError;
use crate::state::{key, render};

/// `GET .../virtualMachines/NAME[?$expand=instanceView]`; 404 while still invisible.
pub(crate) fn get(ctx: &Ctx, req: &Req, sub: &str, rg: &str, name: &str) -> Result<Response, ArmError> {
    let now = Instant::now();
    let st = ctx.store.lock_at(now);
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let record =
        st.vms.get(&key(sub, rg, name)).filter(|vm| now >= vm.visible_at).ok_or_else(|| not_found(name, rg))?;
    let expand = req.param("$expand").is_some_and(|e| e.eq_ignore_ascii_case("instanceView"));
    Ok(respond(StatusCode::OK, Some(render::vm(record, expand)), &[]))
}

/// `GET .../virtualMachines`: paged by name.
pub(crate) fn list(ctx: &Ctx, req: &Req, sub: &str, rg: &str) -> Result<Response, ArmError> {
    let now = Instant::now();
    let st = ctx.store.lock_at(now);
    list_in_group(&st, req, (sub, rg), &st.vms, |vm| now >= vm.visible_at, |vm| render::vm(vm, false))
}
