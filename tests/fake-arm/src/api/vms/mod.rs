//! `virtualMachines` (`createOrUpdate`, `update`, `get`, `list`, `delete`) and the
//! marketplace image read `virtualMachineImages.get`, one module a job:
//!
//! - [`spec`] holds the checks of a VM PUT body, ending in a validated [`spec::VmSpec`];
//! - [`image`] holds the image reference and purchase plan checks, and the marketplace image read;
//! - [`network`] holds the NICs a VM PUT references or makes, and the reservation after a refused PUT;
//! - [`provision`] holds the create/update lifecycle of a PUT (OS and data disks, NICs, the
//!   provisioning operation);
//! - [`patch`] holds `PATCH` (tags and delete options);
//! - [`read`] holds `GET` and the paged list;
//! - [`delete`] holds `DELETE`.

mod delete;
mod image;
mod network;
mod patch;
mod provision;
mod read;
mod spec;

use serde_json::Value;

use crate::error::ArmError;

pub(crate) use delete::delete;
pub(crate) use image::marketplace_image;
pub(crate) use network::reserve_on_refusal;
pub(crate) use patch::patch;
pub(crate) use provision::put;
pub(crate) use read::{get, list};

/// The ARM id of VM `name`.
fn vm_id(sub: &str, rg: &str, name: &str) -> String {
    format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{name}")
}

/// The ARM id of managed disk `name`.
fn disk_id(sub: &str, rg: &str, name: &str) -> String {
    format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/disks/{name}")
}

/// ARM's 404 for VM `name` in resource group `rg`.
fn not_found(name: &str, rg: &str) -> ArmError {
    ArmError::resource_not_found(&format!("Microsoft.Compute/virtualMachines/{name}"), rg)
}

/// 32 random hex digits (ARM's suffix of the disk names it makes).
fn hex32() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A `deleteOption` as stored: `Delete` (any case) or else `Detach`.
fn delete_option(value: Option<&Value>) -> String {
    match value.and_then(Value::as_str) {
        Some(v) if v.eq_ignore_ascii_case("Delete") => "Delete".to_owned(),
        _ => "Detach".to_owned(),
    }
}
