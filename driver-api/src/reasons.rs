//! The reason catalogue: every reason (the `ErrorInfo.reason` of a driver
//! error's gRPC status) that the kit, the server or more than one provider
//! answers, each named once here with what it means and the gRPC code it
//! goes with. The proto's error table (`proto/machinedriver/v1/driver.proto`)
//! lists the same reasons for the machine-controller.
//!
//! A reason one provider alone answers is a named constant in that
//! provider's `errors.rs`; a reason the cloud itself names (an EC2 error
//! code such as `InsufficientInstanceCapacity`, a GCE `errors[].reason`) is
//! passed through as the cloud wrote it, and a failure with only an HTTP
//! status is [`http_status`]`(n)` (`HTTP_503`). No call site spells a
//! reason as a string literal (the tidy test `reasons` checks it).

pub use crate::absent::DUPLICATE_VMS;
pub use crate::error::{OWNER_CREDENTIALS_REQUIRED, SPOT_RECLAIMED};
pub use crate::update::NEEDS_REPLACEMENT;

/// INVALID_ARGUMENT: a spec, secret or request field is bad; the status
/// names the field ([`DriverError::invalid_argument`](crate::DriverError::invalid_argument)).
pub const INVALID_FIELD: &str = "INVALID_FIELD";

/// NOT_FOUND: the VM (or image) does not exist
/// ([`DriverError::not_found`](crate::DriverError::not_found)).
pub const NOT_FOUND: &str = "NOT_FOUND";

/// DEADLINE_EXCEEDED: the call's deadline passed before its work finished.
pub const DEADLINE_EXCEEDED: &str = "DEADLINE_EXCEEDED";

/// UNIMPLEMENTED: the provider does not offer the RPC.
pub const UNIMPLEMENTED: &str = "UNIMPLEMENTED";

/// INTERNAL: a bug, or a cloud answer the driver cannot understand.
pub const INTERNAL: &str = "INTERNAL";

/// UNAVAILABLE (retry soon): the machine's VM exists or is on its way (this
/// process created it a moment ago, or the cloud said it exists) but the
/// cloud's reads do not show it yet; clouds are eventually consistent and a
/// retry converges. One spelling for every provider (formerly also
/// `SERVER_NOT_VISIBLE`, `VM_NOT_VISIBLE` and `INSTANCE_NOT_VISIBLE_YET`).
pub const NOT_VISIBLE_YET: &str = "NOT_VISIBLE_YET";

/// UNAVAILABLE (retry soon): the cloud could not be reached, or its answer
/// could not be read off the connection (no HTTP status).
pub const TRANSPORT: &str = "TRANSPORT";

/// INTERNAL: the cloud answered with a body the driver cannot decode.
pub const UNDECODABLE_RESPONSE: &str = "UNDECODABLE_RESPONSE";

/// UNAUTHENTICATED: no credentials could be built from the secret (the
/// cloud SDK's credential step failed before any request was sent).
pub const CREDENTIALS: &str = "CREDENTIALS";

/// UNAUTHENTICATED: the workload identity token file (the projected service
/// account token a cloud's STS exchanges for credentials) is missing,
/// unreadable, not UTF-8 or empty; the message names the path. One spelling
/// for every provider (AWS answered `WEB_IDENTITY_TOKEN_UNREADABLE` before).
pub const WORKLOAD_IDENTITY_TOKEN_UNREADABLE: &str = "WORKLOAD_IDENTITY_TOKEN_UNREADABLE";

/// UNAVAILABLE (retry soon): a paged read got back a page token it had
/// already been given (the read would never end) and was stopped.
pub const PAGE_TOKEN_REPEATED: &str = "PAGE_TOKEN_REPEATED";

/// UNAVAILABLE (retry soon): a paged read exceeded its page cap
/// ([`MAX_PAGES`](crate::MAX_PAGES)) and was stopped.
pub const TOO_MANY_PAGES: &str = "TOO_MANY_PAGES";

/// ALREADY_EXISTS: CreateMachine on a cloud that keeps names unique found a
/// VM of the machine's name that is not the machine's; it is left untouched.
pub const NAME_TAKEN_BY_FOREIGN_VM: &str = "NAME_TAKEN_BY_FOREIGN_VM";

/// PERMISSION_DENIED: ShareImage of an image that is not on the operator's
/// share allow-list (answered by the server before the provider is called).
pub const IMAGE_NOT_ALLOWED: &str = "IMAGE_NOT_ALLOWED";

/// UNAVAILABLE (retry soon): the call was abandoned because the driver is
/// shutting down; another replica (or this one, restarted) serves the retry.
pub const SHUTTING_DOWN: &str = "SHUTTING_DOWN";

/// The reason of a cloud failure that carries only an HTTP status `status`
/// (no error code of the cloud's own): `HTTP_<status>`, e.g. `HTTP_503`.
/// Its gRPC code is the provider's HTTP-status table's.
pub fn http_status(status: u16) -> String {
    format!("HTTP_{status}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_upper_snake_and_distinct() {
        let all = [
            DUPLICATE_VMS,
            OWNER_CREDENTIALS_REQUIRED,
            SPOT_RECLAIMED,
            NEEDS_REPLACEMENT,
            INVALID_FIELD,
            NOT_FOUND,
            DEADLINE_EXCEEDED,
            UNIMPLEMENTED,
            INTERNAL,
            NOT_VISIBLE_YET,
            TRANSPORT,
            UNDECODABLE_RESPONSE,
            CREDENTIALS,
            WORKLOAD_IDENTITY_TOKEN_UNREADABLE,
            PAGE_TOKEN_REPEATED,
            TOO_MANY_PAGES,
            NAME_TAKEN_BY_FOREIGN_VM,
            IMAGE_NOT_ALLOWED,
            SHUTTING_DOWN,
        ];
        for r in all {
            assert!(r.chars().all(|c| c.is_ascii_uppercase() || c == '_'), "{r}");
        }
        let distinct: std::collections::BTreeSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len());
        assert_eq!(http_status(503), "HTTP_503");
    }
}
