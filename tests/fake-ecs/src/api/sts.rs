//! STS `GetCallerIdentity` (version 2015-04-01): who the AccessKey belongs to.

use axum::response::Response;
use serde_json::json;

use super::Call;
use crate::error::ok;

/// `GetCallerIdentity` for the caller's account (the AccessKeys are root keys).
pub(super) fn caller_identity(call: &Call) -> Response {
    let account = call.account;
    ok(json!({
        "AccountId": account,
        "UserId": account,
        "Arn": format!("acs:ram::{account}:root"),
        "IdentityType": "Account",
        "PrincipalId": account,
    }))
}
