//! Azure Resource Graph: `POST /providers/Microsoft.ResourceGraph/resources`
//! (`resources`, api-version 2021-03-01), for the queries of the clients it serves:
//! - this driver's: the NICs of one resource group with their VM, primary flag and
//!   the private IP of their primary IP configuration;
//! - gardener's Go Azure provider's orphan listing
//!   (machine-controller-manager-provider-azure `pkg/azure/provider/helpers/resourcegraphprocessor.go`
//!   `listVmsNICsAndDisksQueryTemplate`): the VMs, NICs and disks of one resource group
//!   whose tag keys `has` both given keys, projected to `type` (lowercase, as the graph
//!   stores it) and `name`. `has` is KQL's term match, case-insensitive: the key must
//!   appear in a tag key at alphanumeric boundaries (so `has 'kubernetes.io-role-node'`
//!   also matches a key `kubernetes.io-role-node-x`, as on the real service).
//!
//! Any other query answers 400 `BadRequest` / `InvalidQuery`: the fake has no KQL engine.
//!
//! As the real service:
//! - subscriptions the caller may not read are skipped (not an error);
//! - `options.$top` is 1..=1000 (default 100), paged by an opaque `$skipToken`
//!   in the answer, absent on the last page; `resultFormat` `objectArray`;
//! - the graph lags ARM: a NIC shows [`State::graph_lag`] after it is made and
//!   stays that long after it is gone (`POST /_admin/azure/graph-lag`);
//! - per-user quota: [`State::graph_quota`] queries per [`State::graph_window`]
//!   (15 per 5 s), else 429 with `Retry-After`, `x-ms-user-quota-remaining`
//!   and `x-ms-user-quota-resets-after` (`hh:mm:ss`); successful answers carry
//!   the two quota headers too (`POST /_admin/azure/graph-quota`).

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine as _;
use serde_json::{Value, json};

use super::{Ctx, Req, respond};
use crate::error::ArmError;
use crate::state::{NicRecord, State};

/// Most rows one page answers.
const MAX_TOP: u64 = 1000;
/// Rows per page when `$top` is not given.
const DEFAULT_TOP: u64 = 100;

/// The query the fake understands, up to the resource group literal
/// (whitespace runs are compared as one space).
pub(crate) const QUERY_HEAD: &str =
    "Resources | where type =~ 'microsoft.network/networkinterfaces' and resourceGroup =~ ";
/// The query the fake understands, after the resource group literal.
pub(crate) const QUERY_TAIL: &str = " | where isnotempty(properties.virtualMachine.id) \
| mv-expand ipconfig = properties.ipConfigurations \
| where tobool(ipconfig.properties.primary) \
| project vmId = tostring(properties.virtualMachine.id), nic = name, primary = tobool(properties.primary), \
privateIp = tostring(ipconfig.properties.privateIPAddress)";

/// Gardener's Go provider's orphan query, around its three literals (resource group,
/// then the two tag keys); whitespace runs are compared as one space.
pub(crate) const TAGGED_QUERY: [&str; 4] = [
    "Resources | where type =~ 'microsoft.compute/virtualmachines' or type =~ 'microsoft.network/networkinterfaces' \
or type =~ 'microsoft.compute/disks' | where resourceGroup =~ ",
    " | extend tagKeys = bag_keys(tags) | where tagKeys has ",
    " and tagKeys has ",
    " | project type, name",
];

fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A KQL single-quoted string literal at the start of `text` (backslash
/// escapes), and what follows it.
fn kql_literal(text: &str) -> Option<(String, &str)> {
    let rest = text.strip_prefix('\'')?;
    let mut out = String::new();
    let mut chars = rest.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next()?.1 {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                other => out.push(other),
            },
            '\'' => return Some((out, &rest[i + 1..])),
            other => out.push(other),
        }
    }
    None
}

/// The resource group of the driver's query, `None` for any other query.
pub(crate) fn resource_group_of(query: &str) -> Option<String> {
    let query = normalize(query);
    let head = normalize(QUERY_HEAD);
    let rest = query.strip_prefix(&head)?.trim_start();
    let (rg, tail) = kql_literal(rest)?;
    (normalize(tail) == normalize(QUERY_TAIL) && !rg.is_empty()).then_some(rg)
}

/// The literals of `query` when it is `pieces` with a KQL string literal between each two
/// (whitespace runs compared as one space), `None` otherwise.
fn literals_of(query: &str, pieces: &[&str]) -> Option<Vec<String>> {
    let query = normalize(query);
    let mut rest = query.as_str();
    let mut literals = Vec::new();
    for (index, piece) in pieces.iter().enumerate() {
        rest = rest.trim_start().strip_prefix(normalize(piece).as_str())?;
        if index + 1 < pieces.len() {
            let (literal, tail) = kql_literal(rest.trim_start())?;
            literals.push(literal);
            rest = tail;
        }
    }
    rest.trim().is_empty().then_some(literals)
}

/// The resource group and the two tag keys of the Go provider's orphan query.
pub(crate) fn tagged_query_of(query: &str) -> Option<(String, [String; 2])> {
    let literals = literals_of(query, &TAGGED_QUERY)?;
    let [rg, first, second]: [String; 3] = literals.try_into().ok()?;
    (!rg.is_empty() && !first.is_empty() && !second.is_empty()).then_some((rg, [first, second]))
}

/// KQL `has`: `needle` occurs in `text`, case-insensitively, starting and ending at term
/// boundaries (the characters around it, if any, are not alphanumeric).
fn has_term(text: &str, needle: &str) -> bool {
    let (text, needle) = (text.to_lowercase(), needle.to_lowercase());
    if needle.is_empty() {
        return false;
    }
    let alnum_at = |i: Option<char>| i.is_some_and(char::is_alphanumeric);
    text.match_indices(&needle).any(|(start, _)| {
        let before = text[..start].chars().next_back();
        let after = text[start + needle.len()..].chars().next();
        !alnum_at(before) && !alnum_at(after)
    })
}

/// Whether some tag key of `tags` (a JSON object, or absent) `has` `needle`.
fn tag_keys_have(tags: Option<&Value>, needle: &str) -> bool {
    tags.and_then(Value::as_object).is_some_and(|tags| tags.keys().any(|key| has_term(key, needle)))
}

/// A row of an answer, rendered only when its page is.
enum Row<'a> {
    /// This driver's NIC row.
    Nic(&'a NicRecord),
    /// `type` and `name` of the Go provider's orphan query.
    Resource(&'static str, &'a str),
}

impl Row<'_> {
    fn render(&self) -> Option<Value> {
        match self {
            Row::Nic(nic) => row(nic),
            Row::Resource(kind, name) => Some(json!({"type": kind, "name": name})),
        }
    }
}

fn bad_request(message: &str, code: &str, detail: &str) -> Response {
    respond(
        StatusCode::BAD_REQUEST,
        Some(json!({"error": {
            "code": "BadRequest",
            "message": message,
            "details": [{"code": code, "message": detail}],
        }})),
        &[],
    )
}

/// `hh:mm:ss` of a duration, rounded up to the second.
fn hms(d: Duration) -> String {
    let secs = d.as_millis().div_ceil(1000);
    format!("{:02}:{:02}:{:02}", secs / 3600, (secs / 60) % 60, secs % 60)
}

/// Takes one query from `client`'s quota: `Ok(remaining, resets_after)` or
/// `Err(resets_after)` when the window's quota is spent.
fn take_quota(st: &mut State, client: &str, now: Instant) -> Result<(u32, Duration), Duration> {
    let (quota, window) = (st.graph_quota, st.graph_window);
    let usage = st.graph_usage.entry(client.to_ascii_lowercase()).or_insert((now, 0));
    if now.saturating_duration_since(usage.0) >= window {
        *usage = (now, 0);
    }
    let resets = (usage.0 + window).saturating_duration_since(now);
    if usage.1 >= quota {
        return Err(resets);
    }
    usage.1 += 1;
    Ok((quota - usage.1, resets))
}

/// Whether the graph shows `nic` at `now` (made at least `lag` ago).
fn indexed(nic: &NicRecord, lag: Duration, now: Instant) -> bool {
    now.saturating_duration_since(nic.created_at) >= lag
}

/// A row of the query for `nic`, when it is attached to a VM.
fn row(nic: &NicRecord) -> Option<Value> {
    let vm = nic.vm.as_deref()?;
    Some(json!({"vmId": vm, "nic": nic.name, "primary": true, "privateIp": nic.private_ip}))
}

/// `POST /providers/Microsoft.ResourceGraph/resources`.
pub(crate) fn query(ctx: &Ctx, req: &Req) -> Result<Response, ArmError> {
    let now = Instant::now();
    let body = req.json_body()?;
    let mut st = ctx.store.lock_at(now);
    let (remaining, resets) = match take_quota(&mut st, &req.caller.client_id, now) {
        Ok(left) => left,
        Err(resets) => {
            let secs = resets.as_millis().div_ceil(1000).max(1);
            return Ok(respond(
                StatusCode::TOO_MANY_REQUESTS,
                Some(json!({"error": {
                    "code": "RateLimiting",
                    "message": "Please provide below info when asking for support: the time of the request.",
                    "details": [{"code": "RateLimiting", "message": "Client application has been throttled and should not attempt to repeat the request until an amount of time has elapsed. Please see https://aka.ms/resourcegraph-throttling for help."}],
                }})),
                &[
                    ("Retry-After", secs.to_string()),
                    ("x-ms-user-quota-remaining", "0".to_owned()),
                    ("x-ms-user-quota-resets-after", hms(resets)),
                ],
            ));
        }
    };
    let quota_headers =
        [("x-ms-user-quota-remaining", remaining.to_string()), ("x-ms-user-quota-resets-after", hms(resets))];
    let Some(query) = body.get("query").and_then(Value::as_str) else {
        return Ok(bad_request("Please provide a query.", "InvalidQuery", "The request has no query."));
    };
    let (rg, tag_keys) = match (resource_group_of(query), tagged_query_of(query)) {
        (Some(rg), _) => (rg, None),
        (None, Some((rg, keys))) => (rg, Some(keys)),
        (None, None) => {
            return Ok(bad_request(
                "Please provide below info when asking for support: the query.",
                "InvalidQuery",
                "Query is invalid. Please refer to the documentation for the Azure Resource Graph service and fix the error before retrying.",
            ));
        }
    };
    let options = body.get("options").cloned().unwrap_or_else(|| json!({}));
    let top = match options.get("$top") {
        None => DEFAULT_TOP,
        Some(v) => match v.as_u64().filter(|n| (1..=MAX_TOP).contains(n)) {
            Some(n) => n,
            None => {
                return Ok(bad_request(
                    "Please provide below info when asking for support: the request options.",
                    "InvalidQueryOptionValue",
                    "The value of '$top' must be between 1 and 1000.",
                ));
            }
        },
    };
    if let Some(format) = options.get("resultFormat").and_then(Value::as_str)
        && !format.eq_ignore_ascii_case("objectArray")
    {
        return Ok(bad_request(
            "Please provide below info when asking for support: the request options.",
            "UnsupportedResultFormat",
            "This fake answers resultFormat objectArray only.",
        ));
    }
    let after = match options.get("$skipToken").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        None => None,
        Some(token) => match base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
        {
            Some(key) => Some(key),
            None => {
                return Ok(bad_request(
                    "Please provide below info when asking for support: the request options.",
                    "InvalidSkipToken",
                    "The $skipToken is invalid.",
                ));
            }
        },
    };
    // Subscriptions the caller may not read are skipped, as the service does.
    let subscriptions: Vec<String> = body
        .get("subscriptions")
        .and_then(Value::as_array)
        .map(|subs| subs.iter().filter_map(Value::as_str).map(str::to_ascii_lowercase).collect())
        .unwrap_or_default();
    let caller = req.caller.subscription.to_ascii_lowercase();
    let visible = subscriptions.contains(&caller);
    let (s, r) = (caller, rg.to_ascii_lowercase());
    let lag = st.graph_lag;
    // Rows by resource id; only the page's rows are rendered.
    let mut rows: Vec<(String, Row<'_>)> = Vec::new();
    if let (true, Some(keys)) = (visible, &tag_keys) {
        // VMs and disks are indexed as they are made and dropped as they go; NICs lag.
        let in_group = |ks: &str, kr: &str| ks == s && kr == r;
        let tagged = |tags: Option<&Value>| keys.iter().all(|k| tag_keys_have(tags, k));
        rows.extend(
            st.vms
                .iter()
                .filter(|((ks, kr, _), vm)| in_group(ks, kr) && tagged(crate::wire::field(&vm.model, "tags")))
                .map(|(_, vm)| {
                    (vm.id.to_ascii_lowercase(), Row::Resource("microsoft.compute/virtualmachines", &vm.name))
                }),
        );
        rows.extend(
            st.nics
                .iter()
                .filter(|((ks, kr, _), nic)| {
                    in_group(ks, kr) && indexed(nic, lag, now) && tagged(crate::wire::field(&nic.model, "tags"))
                })
                .map(|(_, nic)| {
                    (nic.id.to_ascii_lowercase(), Row::Resource("microsoft.network/networkinterfaces", &nic.name))
                }),
        );
        rows.extend(
            st.gone_nics
                .iter()
                .filter(|g| {
                    in_group(&g.nic.sub.to_ascii_lowercase(), &g.nic.rg.to_ascii_lowercase())
                        && indexed(&g.nic, lag, now)
                        && now.saturating_duration_since(g.gone_at) < lag
                        && tagged(crate::wire::field(&g.nic.model, "tags"))
                })
                .map(|g| {
                    (g.nic.id.to_ascii_lowercase(), Row::Resource("microsoft.network/networkinterfaces", &g.nic.name))
                }),
        );
        rows.extend(
            st.disks
                .iter()
                .filter(|((ks, kr, _), disk)| in_group(ks, kr) && tagged(disk.tags.as_ref()))
                .map(|(_, disk)| (disk.id.to_ascii_lowercase(), Row::Resource("microsoft.compute/disks", &disk.name))),
        );
    } else if visible {
        rows.extend(
            st.nics
                .iter()
                .filter(|((ks, kr, _), nic)| *ks == s && *kr == r && nic.vm.is_some() && indexed(nic, lag, now))
                .map(|(_, nic)| (nic.id.to_ascii_lowercase(), Row::Nic(nic))),
        );
        rows.extend(
            st.gone_nics
                .iter()
                .filter(|g| {
                    g.nic.sub.eq_ignore_ascii_case(&s)
                        && g.nic.rg.eq_ignore_ascii_case(&r)
                        && g.nic.vm.is_some()
                        && indexed(&g.nic, lag, now)
                        && now.saturating_duration_since(g.gone_at) < lag
                })
                .map(|g| (g.nic.id.to_ascii_lowercase(), Row::Nic(&g.nic))),
        );
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows.dedup_by(|a, b| a.0 == b.0);
    let total = rows.len();
    let start = after.as_deref().map_or(0, |after| rows.partition_point(|(k, _)| k.as_str() <= after));
    let size = usize::try_from(top).unwrap_or(1000);
    let page: Vec<(String, Value)> =
        rows.into_iter().skip(start).take(size).filter_map(|(k, row)| Some((k, row.render()?))).collect();
    let mut answer = json!({
        "totalRecords": total,
        "count": page.len(),
        "resultTruncated": "false",
        "facets": [],
    });
    if start + page.len() < total
        && let Some((last, _)) = page.last()
    {
        answer["$skipToken"] = json!(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(last));
    }
    answer["data"] = Value::Array(page.into_iter().map(|(_, v)| v).collect());
    Ok(respond(StatusCode::OK, Some(answer), &quota_headers))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query_for(rg_literal: &str) -> String {
        format!("{QUERY_HEAD}{rg_literal}{QUERY_TAIL}")
    }

    #[test]
    fn only_the_drivers_query_is_understood() {
        assert_eq!(resource_group_of(&query_for("'shoot--dev--conf'")).as_deref(), Some("shoot--dev--conf"));
        assert_eq!(resource_group_of(&query_for(r"'a\'b\\c'")).as_deref(), Some(r"a'b\c"));
        // Whitespace runs do not matter.
        let spaced = query_for("'rg'").replace(" | ", "\n|   ");
        assert_eq!(resource_group_of(&spaced).as_deref(), Some("rg"));
        assert_eq!(resource_group_of("Resources | project name"), None);
        assert_eq!(resource_group_of(&query_for("'rg' | take 1")), None);
        assert_eq!(resource_group_of(&query_for("'unterminated")), None);
        assert_eq!(resource_group_of(&query_for("''")), None);
    }

    fn go_query(rg: &str, first: &str, second: &str) -> String {
        // As the Go provider formats it: a raw string with newlines and tabs.
        format!(
            "\n\tResources\n\t| where type =~ 'microsoft.compute/virtualmachines' or type =~ 'microsoft.network/networkinterfaces' or type =~ 'microsoft.compute/disks'\n\t| where resourceGroup =~ '{rg}'\n\t| extend tagKeys = bag_keys(tags)\n\t| where tagKeys has '{first}' and tagKeys has '{second}'\n\t| project type, name\n\t"
        )
    }

    #[test]
    fn the_go_providers_orphan_query_is_understood() {
        let query = go_query("shoot--dev--conf", "kubernetes.io-cluster-shoot--dev--conf", "kubernetes.io-role-node");
        let (rg, keys) = tagged_query_of(&query).unwrap();
        assert_eq!(rg, "shoot--dev--conf");
        assert_eq!(keys, ["kubernetes.io-cluster-shoot--dev--conf".to_owned(), "kubernetes.io-role-node".to_owned()]);
        assert_eq!(resource_group_of(&query), None, "not the driver's query");
        assert_eq!(tagged_query_of(&query_for("'rg'")), None);
        assert_eq!(tagged_query_of(&format!("{query} | take 1")), None);
        assert_eq!(tagged_query_of(&go_query("rg", "", "k")), None);
    }

    #[test]
    fn has_is_a_case_insensitive_term_match() {
        assert!(has_term("kubernetes.io-role-node", "kubernetes.io-role-node"));
        assert!(has_term("Kubernetes.IO-Role-Node", "kubernetes.io-role-node"));
        assert!(has_term("kubernetes.io-role-node-extra", "kubernetes.io-role-node"), "ends at '-'");
        assert!(!has_term("kubernetes.io-role-nodes", "kubernetes.io-role-node"), "inside a term");
        assert!(!has_term("xkubernetes.io-role-node", "kubernetes.io-role-node"));
        assert!(!has_term("kubernetes.io-cluster-shoot--dev", "kubernetes.io-cluster-shoot--dev--conf"));
        let tags = json!({"kubernetes.io-cluster-shoot--dev--conf": "1"});
        assert!(tag_keys_have(Some(&tags), "kubernetes.io-cluster-shoot--dev--conf"));
        assert!(!tag_keys_have(Some(&tags), "1"), "values are not keys");
        assert!(!tag_keys_have(None, "k"));
    }

    #[test]
    fn quota_windows_reset() {
        let mut st = State::initial();
        st.graph_quota = 2;
        let t0 = Instant::now();
        assert_eq!(take_quota(&mut st, "c", t0).map(|r| r.0), Ok(1));
        assert_eq!(take_quota(&mut st, "c", t0).map(|r| r.0), Ok(0));
        assert!(take_quota(&mut st, "c", t0).is_err());
        assert!(take_quota(&mut st, "other", t0).is_ok(), "per user");
        let window = st.graph_window;
        assert!(take_quota(&mut st, "c", t0 + window).is_ok(), "a new window");
        assert_eq!(hms(Duration::from_millis(4001)), "00:00:05");
    }
}
