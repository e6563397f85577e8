//! `resources.listByResourceGroup` (generic list with a `$filter` by tag or
//! by resource type) and `resourceGroups.get` / `resourceGroups.checkExistence`.
//!
//! As ARM does, a list filtered by tag answers the resources **without** their
//! `tags` (Azure/azure-cli#3180); filtered by type (or not at all), with them.

use std::time::Instant;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::{Ctx, Req, respond};
use crate::error::ArmError;
use crate::paging;
use crate::wire::{field, tag_map};

/// A parsed `$filter`: tag name (case-insensitive) and optional value (case-sensitive).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TagFilter {
    name: String,
    value: Option<String>,
}

fn quoted(text: &str) -> Option<(String, &str)> {
    let rest = text.trim_start().strip_prefix('\'')?;
    let mut out = String::new();
    let mut chars = rest.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\'' {
            if chars.peek().is_some_and(|(_, n)| *n == '\'') {
                out.push('\'');
                chars.next();
                continue;
            }
            return Some((out, &rest[i + 1..]));
        }
        out.push(c);
    }
    None
}

fn keyword<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let text = text.trim_start();
    let head = text.get(..word.len())?;
    head.eq_ignore_ascii_case(word).then(|| &text[word.len()..])
}

/// A parsed `$filter`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Filter {
    /// By tag.
    Tag(TagFilter),
    /// `resourceType eq 'A' or resourceType eq 'B' ...` (case-insensitive).
    Types(Vec<String>),
}

/// Parses a tag filter (see [`parse_filter`]) or `resourceType eq 'T'` joined by `or`.
pub(crate) fn parse_any_filter(filter: &str) -> Result<Filter, ArmError> {
    if keyword(filter, "resourceType").is_none() {
        return parse_filter(filter).map(Filter::Tag);
    }
    let invalid = || {
        ArmError::new(
            StatusCode::BAD_REQUEST,
            "InvalidFilterInQueryString",
            format!("Invalid $filter '{filter}' specified in the query string."),
        )
    };
    let mut types = Vec::new();
    let mut rest = filter;
    loop {
        let after = keyword(rest, "resourceType").and_then(|r| keyword(r, "eq")).ok_or_else(invalid)?;
        let (t, after) = quoted(after).ok_or_else(invalid)?;
        types.push(t.to_ascii_lowercase());
        if after.trim().is_empty() {
            return Ok(Filter::Types(types));
        }
        rest = keyword(after, "or").ok_or_else(invalid)?;
    }
}

/// Parses `tagName eq 'k'` or `tagName eq 'k' and tagValue eq 'v'`.
pub(crate) fn parse_filter(filter: &str) -> Result<TagFilter, ArmError> {
    let invalid = || {
        ArmError::new(
            StatusCode::BAD_REQUEST,
            "InvalidFilterInQueryString",
            format!("Invalid $filter '{filter}' specified in the query string."),
        )
    };
    let rest = keyword(filter, "tagName").and_then(|r| keyword(r, "eq")).ok_or_else(invalid)?;
    let (name, rest) = quoted(rest).ok_or_else(invalid)?;
    if rest.trim().is_empty() {
        return Ok(TagFilter { name, value: None });
    }
    let rest =
        keyword(rest, "and").and_then(|r| keyword(r, "tagValue")).and_then(|r| keyword(r, "eq")).ok_or_else(invalid)?;
    let (value, rest) = quoted(rest).ok_or_else(invalid)?;
    if !rest.trim().is_empty() {
        return Err(invalid());
    }
    Ok(TagFilter { name, value: Some(value) })
}

impl TagFilter {
    fn matches(&self, tags: Option<&Value>) -> bool {
        tag_map(tags)
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case(&self.name) && self.value.as_ref().is_none_or(|want| want == v))
    }
}

/// Largest `$top` ARM honours on a generic resource list: more is served as this.
pub(crate) const MAX_TOP: usize = 1000;

/// One resource of a generic list, rendered only when its page is asked for.
struct Listed<'a> {
    id: &'a str,
    name: &'a str,
    kind: &'static str,
    location: &'a str,
    tags: Option<&'a Value>,
    provisioning_state: &'static str,
}

/// The page size a `$top` asks for: 1..=[`MAX_TOP`] (more is capped), else 400.
pub(crate) fn parse_top(top: &str) -> Result<usize, ArmError> {
    match top.trim().parse::<i64>() {
        Ok(n) if n > 0 => Ok(usize::try_from(n).unwrap_or(MAX_TOP).min(MAX_TOP)),
        _ => Err(ArmError::new(
            StatusCode::BAD_REQUEST,
            "InvalidTopInQueryString",
            format!(
                "The value '{top}' specified for the '$top' query parameter is invalid. It must be a positive integer."
            ),
        )),
    }
}

/// `GET /subscriptions/S/resourceGroups/RG/resources[?$filter=...&$top=n&$expand=provisioningState]`:
/// VMs, NICs and disks. With `$expand=provisioningState` each item carries
/// `provisioningState` at its top level (ARM's `GenericResourceExpanded`): a
/// VM's as its GET shows it, `Succeeded` for NICs and disks.
pub(crate) fn list(ctx: &Ctx, req: &Req, sub: &str, rg: &str) -> Result<Response, ArmError> {
    let filter = req.param("$filter").filter(|f| !f.trim().is_empty()).map(parse_any_filter).transpose()?;
    let top = req.param("$top").map(parse_top).transpose()?;
    let expand = req.param("$expand").map(str::trim).filter(|e| !e.is_empty());
    let with_state =
        expand.is_some_and(|e| e.split(',').any(|part| part.trim().eq_ignore_ascii_case("provisioningState")));
    let now = Instant::now();
    let st = ctx.store.lock_at(now);
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let (s, r) = (sub.to_ascii_lowercase(), rg.to_ascii_lowercase());
    let in_rg = |k: &(String, String, String)| k.0 == s && k.1 == r;
    let mut all: Vec<Listed<'_>> = Vec::new();
    // A list filtered by type reads only those types.
    let wants = |kind: &str| match &filter {
        Some(Filter::Types(types)) => types.iter().any(|t| t.eq_ignore_ascii_case(kind)),
        _ => true,
    };
    let (vms, nics, disks) = (
        wants("Microsoft.Compute/virtualMachines"),
        wants("Microsoft.Network/networkInterfaces"),
        wants("Microsoft.Compute/disks"),
    );
    for (_, vm) in st.vms.iter().filter(|(k, vm)| vms && in_rg(k) && now >= vm.visible_at) {
        all.push(Listed {
            id: &vm.id,
            name: &vm.name,
            kind: "Microsoft.Compute/virtualMachines",
            location: &vm.location,
            tags: field(&vm.model, "tags"),
            provisioning_state: vm.phase.word(),
        });
    }
    for (_, nic) in st.nics.iter().filter(|(k, _)| nics && in_rg(k)) {
        all.push(Listed {
            id: &nic.id,
            name: &nic.name,
            kind: "Microsoft.Network/networkInterfaces",
            location: &nic.location,
            tags: field(&nic.model, "tags"),
            provisioning_state: "Succeeded",
        });
    }
    for (_, disk) in st.disks.iter().filter(|(k, _)| disks && in_rg(k)) {
        all.push(Listed {
            id: &disk.id,
            name: &disk.name,
            kind: "Microsoft.Compute/disks",
            location: &disk.location,
            tags: disk.tags.as_ref(),
            provisioning_state: "Succeeded",
        });
    }
    let items: Vec<(String, Listed<'_>)> = all
        .into_iter()
        // A type filter already chose what was read (`wants` above).
        .filter(|item| match &filter {
            Some(Filter::Tag(f)) => f.matches(item.tags),
            None | Some(Filter::Types(_)) => true,
        })
        .map(|item| (item.id.to_ascii_lowercase(), item))
        .collect();
    // Filtered by tag, ARM answers without the tags (Azure/azure-cli#3180).
    let with_tags = !matches!(filter, Some(Filter::Tag(_)));
    let size = top.unwrap_or(st.page_size);
    let mut extra: Vec<(&str, &str)> = Vec::new();
    if let Some(f) = req.param("$filter") {
        extra.push(("$filter", f));
    }
    if let Some(t) = req.param("$top") {
        extra.push(("$top", t));
    }
    if let Some(e) = expand {
        extra.push(("$expand", e));
    }
    let body = paging::page(
        items,
        req.param("$skiptoken"),
        size,
        &format!("{}{}", req.base, req.path),
        &extra,
        &req.api_version,
        |item| {
            let mut out = json!({"id": item.id, "name": item.name, "type": item.kind, "location": item.location});
            if let Some(tags) = item.tags.filter(|_| with_tags) {
                out["tags"] = tags.clone();
            }
            if with_state {
                out["provisioningState"] = json!(item.provisioning_state);
            }
            out
        },
    );
    Ok(respond(StatusCode::OK, Some(body), &[]))
}

/// `GET`/`HEAD /subscriptions/S/resourceGroups/RG`.
pub(crate) fn resource_group(ctx: &Ctx, sub: &str, rg: &str, head: bool) -> Result<Response, ArmError> {
    let st = ctx.store.lock_at(Instant::now());
    let Some(group) = st.resource_group(sub, rg) else {
        if head {
            return Ok(respond(StatusCode::NOT_FOUND, None, &[]));
        }
        return Err(ArmError::resource_group_not_found(rg));
    };
    if head {
        return Ok(respond(StatusCode::NO_CONTENT, None, &[]));
    }
    Ok(respond(
        StatusCode::OK,
        Some(json!({
            "id": format!("/subscriptions/{}/resourceGroups/{}", group.sub, group.name),
            "name": group.name,
            "type": "Microsoft.Resources/resourceGroups",
            "location": group.location,
            "properties": {"provisioningState": "Succeeded"},
        })),
        &[],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse() {
        assert_eq!(
            parse_filter("tagName eq 'kubernetes.io-cluster-x' and tagValue eq '1'").expect("ok"),
            TagFilter { name: "kubernetes.io-cluster-x".into(), value: Some("1".into()) }
        );
        assert_eq!(parse_filter("TAGNAME EQ 'a''b'").expect("ok"), TagFilter { name: "a'b".into(), value: None });
        assert_eq!(parse_filter("resourceType eq 'x'").expect_err("bad").code, "InvalidFilterInQueryString");
        assert_eq!(
            parse_any_filter("resourceType eq 'Microsoft.Compute/disks' or resourceType eq 'X/y'").expect("ok"),
            Filter::Types(vec!["microsoft.compute/disks".into(), "x/y".into()])
        );
        assert!(parse_any_filter("resourceType eq 'a' and tagName eq 'b'").is_err());
        assert!(parse_filter("tagName eq 'a' or tagValue eq 'b'").is_err());
    }

    #[test]
    fn top_is_capped_at_1000_and_must_be_positive() {
        assert_eq!(parse_top("5").expect("ok"), 5);
        assert_eq!(parse_top("5000").expect("capped"), MAX_TOP);
        for bad in ["0", "-1", "x", ""] {
            let err = parse_top(bad).expect_err("bad $top");
            assert_eq!((err.status, err.code.as_str()), (StatusCode::BAD_REQUEST, "InvalidTopInQueryString"));
        }
    }
}
