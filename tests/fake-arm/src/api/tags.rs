//! The Tags API at a resource's scope (Microsoft.Resources, api-version 2021-04-01):
//! `GET`, `PUT` and `PATCH {resource id}/providers/Microsoft.Resources/tags/default`
//! (`tags.getAtScope`, `.createOrUpdateAtScope`, `.updateAtScope`) for VMs, NICs and disks.
//!
//! - `PUT {"properties": {"tags": {..}}}` replaces the resource's tags;
//! - `PATCH {"operation": "Merge" | "Replace" | "Delete", "properties": {"tags": {..}}}`
//!   merges them in (a tag of the same name is overwritten), replaces them all, or
//!   deletes the named ones (a `Delete` with a value deletes the tag only when the
//!   value matches);
//! - every answer is 200 `{"id": "<scope>/providers/Microsoft.Resources/tags/default",
//!   "name": "default", "type": "Microsoft.Resources/tags", "properties": {"tags": {..}}}`;
//! - a resource that is not there (or not visible yet) is 404 `ResourceNotFound`;
//! - ARM's tag limits (learn.microsoft.com/azure/azure-resource-manager/management/tag-resources,
//!   "Limitations"; learn.microsoft.com/rest/api/resources/tags/update-at-scope: "a maximum
//!   of 50 tags at the end of the operation") refuse the request with 400 and change nothing:
//!   a name given to `PUT`, `Merge` or `Replace` with `<>%&\?/` or a control character,
//!   `InvalidTagNameCharacters`; a name over 512 characters, `InvalidTagName`; a value over
//!   256, `InvalidTagValueLength`; more than 50 tags once applied, `InvalidTags`. The codes
//!   and messages are those ARM answers, as Azure PowerShell's Az.Migrate module repeats
//!   them client-side (its `Set-AzMigrateServerReplication` tag checks).

use std::time::Instant;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::routes::Kind;
use super::{Ctx, Req, respond};
use crate::error::ArmError;
use crate::state::key;
use crate::wire::{field, path};

/// A tags request at the scope of one VM, NIC or disk.
pub(crate) fn at_scope(
    ctx: &Ctx,
    req: &Req,
    method: &str,
    sub: &str,
    rg: &str,
    kind: Kind,
    name: &str,
) -> Result<Response, ArmError> {
    let now = Instant::now();
    let body = if method == "GET" { None } else { Some(req.json_body()?) };
    let mut st = ctx.store.lock_at(now);
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let k = key(sub, rg, name);
    let typed = match kind {
        Kind::Vm => "Microsoft.Compute/virtualMachines",
        Kind::Nic => "Microsoft.Network/networkInterfaces",
        Kind::Disk => "Microsoft.Compute/disks",
    };
    let missing = || ArmError::resource_not_found(&format!("{typed}/{name}"), rg);
    // The resource's id and current tags.
    let (id, stored) = match kind {
        Kind::Vm => {
            let vm = st.vms.get(&k).filter(|vm| now >= vm.visible_at).ok_or_else(missing)?;
            (vm.id.clone(), field(&vm.model, "tags").cloned())
        }
        Kind::Nic => {
            let nic = st.nics.get(&k).filter(|n| n.deleting_until.is_none()).ok_or_else(missing)?;
            (nic.id.clone(), field(&nic.model, "tags").cloned())
        }
        Kind::Disk => {
            let disk = st.disks.get(&k).ok_or_else(missing)?;
            (disk.id.clone(), disk.tags.clone())
        }
    };
    let mut current: Map<String, Value> = stored.as_ref().and_then(Value::as_object).cloned().unwrap_or_default();
    if let Some(body) = &body {
        let given: Map<String, Value> =
            path(body, &["properties", "tags"]).and_then(Value::as_object).cloned().unwrap_or_default();
        if let Some((bad, _)) = given.iter().find(|(_, v)| !v.is_string()) {
            return Err(ArmError::invalid_parameter(format!("The value of tag '{bad}' must be a string."), "tags"));
        }
        let operation = if method == "PUT" {
            "Replace".to_owned()
        } else {
            field(body, "operation").and_then(Value::as_str).ok_or_else(|| ArmError::required("operation"))?.to_owned()
        };
        if !operation.eq_ignore_ascii_case("delete") {
            check_names(&given)?;
        }
        match operation.to_ascii_lowercase().as_str() {
            "replace" => current = given,
            "merge" => {
                for (k, v) in given {
                    // Tag names are case-insensitive: the new value replaces any casing of the name.
                    current.retain(|old, _| !old.eq_ignore_ascii_case(&k));
                    current.insert(k, v);
                }
            }
            "delete" => {
                current.retain(|old, value| {
                    !given.iter().any(|(k, v)| {
                        old.eq_ignore_ascii_case(k) && (v.as_str().is_none_or(str::is_empty) || v == value)
                    })
                });
            }
            other => {
                return Err(ArmError::invalid_parameter(
                    format!(
                        "The value '{other}' of parameter 'operation' is invalid; allowed: Merge, Replace, Delete."
                    ),
                    "operation",
                ));
            }
        }
        if current.len() > MAX_TAGS {
            return Err(ArmError::new(
                StatusCode::BAD_REQUEST,
                "InvalidTags",
                format!(
                    "Too many tags specified. Requested tag count - '{}'. Maximum number of tags allowed - '{MAX_TAGS}'.",
                    current.len()
                ),
            ));
        }
        let new = (!current.is_empty()).then(|| Value::Object(current.clone()));
        match kind {
            Kind::Vm => {
                if let Some(model) = st.vms.get_mut(&k).and_then(|vm| vm.model.as_object_mut()) {
                    set_tags(model, new);
                }
            }
            Kind::Nic => {
                if let Some(nic) = st.nics.get_mut(&k) {
                    if let Some(model) = nic.model.as_object_mut() {
                        set_tags(model, new);
                    }
                    nic.generation += 1;
                }
            }
            Kind::Disk => {
                if let Some(disk) = st.disks.get_mut(&k) {
                    disk.tags = new;
                }
            }
        }
    }
    Ok(respond(
        StatusCode::OK,
        Some(json!({
            "id": format!("{id}/providers/Microsoft.Resources/tags/default"),
            "name": "default",
            "type": "Microsoft.Resources/tags",
            "properties": {"tags": Value::Object(current)},
        })),
        &[],
    ))
}

/// Most tags on one resource.
const MAX_TAGS: usize = 50;
/// Longest tag name (characters; VMs, NICs, disks).
const MAX_NAME: usize = 512;
/// Longest tag value (characters).
const MAX_VALUE: usize = 256;

/// ARM's checks of the tag names and values a request gives.
fn check_names(given: &Map<String, Value>) -> Result<(), ArmError> {
    let bad: Vec<&str> = given
        .keys()
        .filter(|k| k.chars().any(|c| "<>%&\\?/".contains(c) || c.is_control()))
        .map(String::as_str)
        .collect();
    if !bad.is_empty() {
        return Err(ArmError::new(
            StatusCode::BAD_REQUEST,
            "InvalidTagNameCharacters",
            format!(
                "The tag names '{}' have reserved characters '<,>,%,&,\\,?,/' or control characters.",
                bad.join(", ")
            ),
        ));
    }
    if let Some(long) = given.keys().find(|k| k.chars().count() > MAX_NAME) {
        return Err(ArmError::new(
            StatusCode::BAD_REQUEST,
            "InvalidTagName",
            format!(
                "Tag key too large. Following tag name '{long}' exceeded the maximum length. Maximum allowed length for tag name - '{MAX_NAME}' characters."
            ),
        ));
    }
    if let Some(long) = given.values().filter_map(Value::as_str).find(|v| v.chars().count() > MAX_VALUE) {
        return Err(ArmError::new(
            StatusCode::BAD_REQUEST,
            "InvalidTagValueLength",
            format!(
                "Tag value too large. Following tag value '{long}' exceeded the maximum length. Maximum allowed length for tag value - '{MAX_VALUE}' characters."
            ),
        ));
    }
    Ok(())
}

fn set_tags(model: &mut Map<String, Value>, tags: Option<Value>) {
    model.retain(|k, _| !k.eq_ignore_ascii_case("tags"));
    if let Some(tags) = tags {
        model.insert("tags".to_owned(), tags);
    }
}
