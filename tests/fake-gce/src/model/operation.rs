//! `Operation`: the zonal long-running operation returned by insert, start and
//! delete (and recorded by GCE itself when it preempts a Spot VM).

use serde::Serialize;

/// A zone operation as GCE returns it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Operation {
    pub(crate) kind: &'static str,
    pub(crate) id: String,
    pub(crate) name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) client_operation_id: Option<String>,
    pub(crate) zone: String,
    pub(crate) operation_type: &'static str,
    pub(crate) target_link: String,
    pub(crate) target_id: String,
    pub(crate) status: &'static str,
    pub(crate) user: String,
    pub(crate) progress: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status_message: Option<String>,
    pub(crate) insert_time: String,
    pub(crate) start_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) end_time: Option<String>,
    pub(crate) self_link: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<OperationErrors>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) http_error_status_code: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) http_error_message: Option<&'static str>,
}

/// `error` of a failed operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct OperationErrors {
    pub(crate) errors: Vec<OperationError>,
}

/// One entry of `error.errors`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct OperationError {
    pub(crate) code: String,
    pub(crate) message: String,
}
