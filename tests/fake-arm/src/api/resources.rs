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

/// `GET /subscriptions/S/resourceGroups/RG/resources[?$filter=...&$top=n]`: VMs, NICs and disks.
pub(crate) fn list(ctx: &Ctx, req: &Req, sub: &str, rg: &str) -> Result<Response, ArmError> {
    let filter = req.param("$filter").filter(|f| !f.trim().is_empty()).map(parse_any_filter).transpose()?;
    let now = Instant::now();
    let st = ctx.store.lock_at(now);
    st.resource_group(sub, rg).ok_or_else(|| ArmError::resource_group_not_found(rg))?;
    let (s, r) = (sub.to_ascii_lowercase(), rg.to_ascii_lowercase());
    let in_rg = |k: &(String, String, String)| k.0 == s && k.1 == r;
    let mut items: Vec<(String, Value)> = Vec::new();
    let mut push = |id: &str, name: &str, kind: &str, location: &str, tags: Option<&Value>| {
        let (selected, with_tags) = match &filter {
            None => (true, true),
            Some(Filter::Tag(f)) => (f.matches(tags), false),
            Some(Filter::Types(types)) => (types.iter().any(|t| t.eq_ignore_ascii_case(kind)), true),
        };
        if selected {
            let mut item = json!({"id": id, "name": name, "type": kind, "location": location});
            if let Some(tags) = tags.filter(|_| with_tags) {
                item["tags"] = tags.clone();
            }
            items.push((id.to_ascii_lowercase(), item));
        }
    };
    for (k, vm) in st.vms.iter().filter(|(k, vm)| in_rg(k) && now >= vm.visible_at) {
        let _ = k;
        push(&vm.id, &vm.name, "Microsoft.Compute/virtualMachines", &vm.location, field(&vm.model, "tags"));
    }
    for (_, nic) in st.nics.iter().filter(|(k, _)| in_rg(k)) {
        push(&nic.id, &nic.name, "Microsoft.Network/networkInterfaces", &nic.location, field(&nic.model, "tags"));
    }
    for (_, disk) in st.disks.iter().filter(|(k, _)| in_rg(k)) {
        push(&disk.id, &disk.name, "Microsoft.Compute/disks", &disk.location, disk.tags.as_ref());
    }
    items.sort_by(|a, b| a.0.cmp(&b.0));
    let size = req.param("$top").and_then(|t| t.parse::<usize>().ok()).filter(|t| *t > 0).unwrap_or(st.page_size);
    let mut extra: Vec<(&str, &str)> = Vec::new();
    if let Some(f) = req.param("$filter") {
        extra.push(("$filter", f));
    }
    if let Some(t) = req.param("$top") {
        extra.push(("$top", t));
    }
    let body = paging::page(
        items,
        req.param("$skiptoken"),
        size,
        &format!("{}{}", req.base, req.path),
        &extra,
        &req.api_version,
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
}
