//! Azure Resource Graph: the private IPs of a resource group's VMs in one
//! query (`POST {arm}/providers/Microsoft.ResourceGraph/resources`,
//! api-version 2021-03-01), for status polls whose VMs came from the generic
//! resource list and so carry no NIC name.
//!
//! One fixed query shape over the group's NICs (the resource group, escaped
//! as a KQL string literal, is its only variable part): each NIC attached to
//! a VM with the VM's id, the NIC's name, whether it is the VM's primary NIC,
//! and the private IP of its primary IP configuration; 1000 rows a page,
//! paged by `$skipToken`.
//!
//! Resource Graph lags ARM by seconds: a VM the graph does not show yet has no
//! address in the answer (and none is remembered, so a later poll asks
//! again). Absence from the graph never means the VM is gone: only ARM says
//! that. The service allows 15 queries per user and 5 seconds; a 429 carries
//! `Retry-After` or `x-ms-user-quota-resets-after` and is resent once like
//! any throttled ARM call.

use std::collections::HashMap;

use machine_driver_api::{DriverError, PageTokens};
use serde::Deserialize;
use serde_json::json;

use crate::clients::Api;

/// API version of the Resource Graph query.
const GRAPH_API_VERSION: &str = "2021-03-01";
/// Rows per page (the service's maximum).
const GRAPH_TOP: u32 = 1000;
/// Most pages one query follows (10,000,000 NICs; [`PageTokens`] stops it there and at a repeated token).
const MAX_PAGES: usize = 10_000;

/// A KQL string literal of `text`: single quotes, `\` and `'` escaped.
fn kql_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// The query: the NICs of `resource_group` attached to a VM, with the VM's
/// id, the NIC's name, its primary flag and its primary private IP.
pub(crate) fn nic_query(resource_group: &str) -> String {
    format!(
        "Resources | where type =~ 'microsoft.network/networkinterfaces' and resourceGroup =~ {} \
         | where isnotempty(properties.virtualMachine.id) \
         | mv-expand ipconfig = properties.ipConfigurations \
         | where tobool(ipconfig.properties.primary) \
         | project vmId = tostring(properties.virtualMachine.id), nic = name, primary = tobool(properties.primary), \
         privateIp = tostring(ipconfig.properties.privateIPAddress)",
        kql_string(resource_group)
    )
}

/// One page of a Resource Graph answer (`resultFormat: objectArray`).
#[derive(Deserialize)]
struct GraphPage {
    #[serde(default)]
    data: Vec<GraphRow>,
    #[serde(rename = "$skipToken", default)]
    skip_token: Option<String>,
}

/// One row of [`nic_query`] (its `nic` column, the NIC's name, is not needed).
#[derive(Deserialize)]
struct GraphRow {
    #[serde(rename = "vmId", default)]
    vm_id: Option<String>,
    #[serde(default)]
    primary: Option<bool>,
    #[serde(rename = "privateIp", default)]
    private_ip: Option<String>,
}

/// Per VM name (lowercase) the private IP of its primary NIC (the NIC marked
/// primary, else the only one), as far as the graph shows it now. A VM two
/// NICs claim alike gets none: the graph lags, and a VM made again under its
/// name (a failed one replaced, its old NIC still reserved) may still show
/// the old generation's NIC; the address comes from a later read instead.
fn addresses_of_rows(rows: Vec<GraphRow>) -> HashMap<String, String> {
    // (primary, IP, ambiguous) per VM.
    let mut best: HashMap<String, (bool, String, bool)> = HashMap::new();
    for row in rows {
        let Some(vm) = row.vm_id.as_deref().and_then(|id| id.rsplit('/').next()).filter(|n| !n.is_empty()) else {
            continue;
        };
        let Some(ip) = row.private_ip.filter(|ip| !ip.is_empty()) else { continue };
        let primary = row.primary.unwrap_or(false);
        match best.get_mut(&vm.to_ascii_lowercase()) {
            None => {
                best.insert(vm.to_ascii_lowercase(), (primary, ip, false));
            }
            Some(old) if primary && !old.0 => *old = (true, ip, false),
            Some(old) if primary == old.0 && ip != old.1 => old.2 = true,
            Some(_) => {}
        }
    }
    best.into_iter().filter(|(_, (_, _, ambiguous))| !ambiguous).map(|(vm, (_, ip, _))| (vm, ip)).collect()
}

/// The primary private IPs of the VMs of `resource_group` Resource Graph
/// shows now, by lowercase VM name: 1 `resourcegraph resources` call per
/// 1000 NICs.
pub(crate) async fn private_ips(
    api: &Api<'_>,
    subscription: &str,
    resource_group: &str,
) -> Result<HashMap<String, String>, DriverError> {
    let url = api.arm_url(&["providers", "Microsoft.ResourceGraph", "resources"], GRAPH_API_VERSION);
    let query = nic_query(resource_group);
    let mut rows = Vec::new();
    let mut pages = PageTokens::with_cap("resourcegraph.resources", MAX_PAGES);
    let mut skip_token: Option<String> = None;
    loop {
        let mut options = json!({"$top": GRAPH_TOP, "resultFormat": "objectArray"});
        if let Some(token) = &skip_token {
            options["$skipToken"] = json!(token);
        }
        let body = json!({"subscriptions": [subscription], "query": query, "options": options});
        let body = serde_json::to_vec(&body).map_err(|_| DriverError::internal("building the graph query failed"))?;
        let answer = api.post_raw("resourcegraph", "resources", &url, &body).await?;
        let page: GraphPage = serde_json::from_slice(&answer.body)
            .map_err(|_| DriverError::internal("resourcegraph resources answered a body that is not a query result"))?;
        rows.extend(page.data);
        skip_token = pages.next(page.skip_token.as_deref())?;
        if skip_token.is_none() {
            return Ok(addresses_of_rows(rows));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resource_group_is_a_kql_string_literal() {
        assert_eq!(kql_string("shoot--dev--conf"), "'shoot--dev--conf'");
        assert_eq!(kql_string(r"a'b\c"), r"'a\'b\\c'");
        assert_eq!(kql_string("rg.(1)_ü"), "'rg.(1)_ü'");
        let q = nic_query("my-rg");
        assert!(q.contains("resourceGroup =~ 'my-rg' |"), "{q}");
        assert_eq!(q.matches("my-rg").count(), 1, "the group is the only variable part");
    }

    #[test]
    fn the_primary_nic_gives_the_address() {
        let rows: Vec<GraphRow> = serde_json::from_value(json!([
            {"vmId": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/VM-1", "nic": "b", "primary": false, "privateIp": "10.0.0.9"},
            {"vmId": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-1", "nic": "a-nic", "primary": true, "privateIp": "10.0.0.4"},
            {"vmId": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-2", "nic": "z", "primary": false, "privateIp": "10.0.0.7"},
            {"vmId": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-2", "nic": "c", "primary": false, "privateIp": "10.0.0.6"},
            {"vmId": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-3", "nic": "n", "primary": true, "privateIp": ""},
            {"vmId": "", "nic": "orphan", "primary": true, "privateIp": "10.0.0.5"},
            {"vmId": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-4", "nic": "vm-4-nic", "primary": true, "privateIp": "10.0.0.8"},
            {"vmId": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-4", "nic": "vm-4-nic-1", "primary": true, "privateIp": "10.0.0.10"},
            {"vmId": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-5", "nic": "only", "primary": false, "privateIp": "10.0.0.11"}
        ]))
        .unwrap();
        let got = addresses_of_rows(rows);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got["vm-1"], "10.0.0.4", "the primary NIC wins over another");
        assert_eq!(got["vm-5"], "10.0.0.11", "a lone NIC, even not marked primary");
        assert!(!got.contains_key("vm-2"), "two NICs, none primary: which is the VM's is unclear");
        assert!(!got.contains_key("vm-4"), "two primary NICs (the graph still shows a generation before): none");
    }

    #[test]
    fn pages_carry_their_skip_token() {
        let page: GraphPage = serde_json::from_value(json!({
            "totalRecords": 2, "count": 1, "resultTruncated": "false", "data": [{"vmId": "x"}], "$skipToken": "t"
        }))
        .unwrap();
        assert_eq!((page.data.len(), page.skip_token.as_deref()), (1, Some("t")));
    }
}
