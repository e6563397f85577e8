//! Azure Resource Graph (`POST /providers/Microsoft.ResourceGraph/resources`)
//! for the driver's NIC query: rows, `$skipToken` paging, `$top`, the index
//! lag, the per-user quota, refusal of any other query; and the generic
//! resource list's `$expand=provisioningState`, `$top` and lazy paging.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{Fake, rg_path, vm_body, vm_path};
use fake_arm::{OWNER_SUBSCRIPTION_ID, RESOURCE_GROUP, SUBSCRIPTION_ID};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const GRAPH: &str = "/providers/Microsoft.ResourceGraph/resources?api-version=2021-03-01";

/// The driver's query shape for resource group `rg` (a KQL string literal).
fn nic_query(rg_literal: &str) -> String {
    format!(
        "Resources | where type =~ 'microsoft.network/networkinterfaces' and resourceGroup =~ {rg_literal} \
         | where isnotempty(properties.virtualMachine.id) \
         | mv-expand ipconfig = properties.ipConfigurations \
         | where tobool(ipconfig.properties.primary) \
         | project vmId = tostring(properties.virtualMachine.id), nic = name, primary = tobool(properties.primary), \
         privateIp = tostring(ipconfig.properties.privateIPAddress)"
    )
}

fn tags(machine: &str) -> Value {
    json!({"kubernetes.io-cluster-shoot--dev--conf": "1", "kubernetes.io-role-node": "1", "machine": machine})
}

async fn graph(fake: &Fake, subscriptions: &[&str], query: &str, options: Value) -> common::Answer {
    fake.call(Method::POST, GRAPH, Some(json!({"subscriptions": subscriptions, "query": query, "options": options})))
        .await
}

async fn make_vms(fake: &Fake, n: usize) {
    for i in 0..n {
        let name = format!("vm-{i}");
        let nic = fake.put_nic(&format!("{name}-nic"), tags(&name)).await;
        assert_eq!(nic.status, StatusCode::CREATED, "{}", nic.body);
        let vm = fake.put_vm(&name, vm_body(&name, &format!("{name}-nic"), tags(&name), "")).await;
        assert_eq!(vm.status, StatusCode::CREATED, "{}", vm.body);
    }
}

async fn graph_calls(fake: &Fake) -> u64 {
    fake.admin_get("calls").await["calls"]["resourceGraph.resources"].as_u64().unwrap_or(0)
}

#[tokio::test]
async fn graph_shows_nics_after_its_lag_and_pages_by_skip_token() {
    let fake = Fake::start().await;
    fake.admin("azure/graph-lag", json!({"millis": 500})).await;
    make_vms(&fake, 3).await;
    let query = nic_query(&format!("'{RESOURCE_GROUP}'"));
    let early = graph(&fake, &[SUBSCRIPTION_ID], &query, json!({"resultFormat": "objectArray"})).await;
    assert_eq!(early.status, StatusCode::OK, "{}", early.body);
    assert_eq!((early.body["totalRecords"].as_u64(), early.body["count"].as_u64()), (Some(0), Some(0)), "lagging");
    assert!(early.header("x-ms-user-quota-remaining").is_some());
    tokio::time::sleep(Duration::from_millis(600)).await;

    let first = graph(&fake, &[SUBSCRIPTION_ID], &query, json!({"$top": 2, "resultFormat": "objectArray"})).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    assert_eq!(first.body["totalRecords"], 3);
    assert_eq!(first.body["count"], 2);
    assert_eq!(first.body["resultTruncated"], "false");
    let token = first.body["$skipToken"].as_str().unwrap().to_owned();
    let second = graph(&fake, &[SUBSCRIPTION_ID], &query, json!({"$top": 2, "$skipToken": token})).await;
    assert_eq!(second.body["count"], 1, "{}", second.body);
    assert!(second.body.get("$skipToken").is_none(), "the last page has none");
    let rows: Vec<Value> =
        first.body["data"].as_array().unwrap().iter().chain(second.body["data"].as_array().unwrap()).cloned().collect();
    let mut vms: Vec<String> =
        rows.iter().map(|r| r["vmId"].as_str().unwrap().rsplit('/').next().unwrap().into()).collect();
    vms.sort();
    assert_eq!(vms, ["vm-0", "vm-1", "vm-2"]);
    for row in &rows {
        assert_eq!(row["primary"], true);
        assert!(row["privateIp"].as_str().unwrap().starts_with("10.250."), "{row}");
        assert!(row["nic"].as_str().unwrap().ends_with("-nic"));
        assert!(row["vmId"].as_str().unwrap().starts_with(&format!("/subscriptions/{SUBSCRIPTION_ID}/")));
    }
    // The default page is 100 rows; the group literal may be escaped; other groups show nothing.
    let all = graph(&fake, &[SUBSCRIPTION_ID], &nic_query(&format!("'{RESOURCE_GROUP}'")), json!({})).await;
    assert_eq!(all.body["count"], 3);
    let other = graph(&fake, &[SUBSCRIPTION_ID], &nic_query(r"'other\'rg'"), json!({})).await;
    assert_eq!((other.status, other.body["count"].as_u64()), (StatusCode::OK, Some(0)));
    // A subscription the caller may not read is skipped, not refused.
    let hidden = graph(&fake, &[OWNER_SUBSCRIPTION_ID], &query, json!({})).await;
    assert_eq!((hidden.status, hidden.body["totalRecords"].as_u64()), (StatusCode::OK, Some(0)));
    let both = graph(&fake, &[OWNER_SUBSCRIPTION_ID, SUBSCRIPTION_ID], &query, json!({})).await;
    assert_eq!(both.body["totalRecords"], 3);

    // A deleted VM's NIC (deleteOption Delete) stays in the graph for the lag, then goes.
    let deleted = fake.call(Method::DELETE, &vm_path("vm-0"), None).await;
    assert_eq!(deleted.status, StatusCode::ACCEPTED);
    fake.wait_gone(&vm_path("vm-0")).await;
    let lingering = graph(&fake, &[SUBSCRIPTION_ID], &query, json!({})).await;
    assert_eq!(lingering.body["totalRecords"], 3, "the graph still shows the deleted NIC: {}", lingering.body);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let after = graph(&fake, &[SUBSCRIPTION_ID], &query, json!({})).await;
    assert_eq!(after.body["totalRecords"], 2, "{}", after.body);
    assert_eq!(graph_calls(&fake).await, 9, "every query is counted");
}

#[tokio::test]
async fn graph_refuses_other_queries_and_bad_options() {
    let fake = Fake::start().await;
    let refused = graph(&fake, &[SUBSCRIPTION_ID], "Resources | project name", json!({})).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::BAD_REQUEST, "BadRequest"), "{}", refused.body);
    assert_eq!(refused.body["error"]["details"][0]["code"], "InvalidQuery");
    let extended = graph(&fake, &[SUBSCRIPTION_ID], &format!("{} | take 1", nic_query("'rg'")), json!({})).await;
    assert_eq!(extended.body["error"]["details"][0]["code"], "InvalidQuery");
    for top in [json!(0), json!(1001), json!("x")] {
        let bad = graph(&fake, &[SUBSCRIPTION_ID], &nic_query("'rg'"), json!({"$top": top})).await;
        assert_eq!((bad.status, bad.code()), (StatusCode::BAD_REQUEST, "BadRequest"), "{top}: {}", bad.body);
    }
    let ok = graph(&fake, &[SUBSCRIPTION_ID], &nic_query("'rg'"), json!({"$top": 1000})).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
}

#[tokio::test]
async fn graph_quota_answers_429_with_its_headers() {
    let fake = Fake::start().await;
    fake.admin("azure/graph-quota", json!({"queries": 2, "windowMillis": 60000})).await;
    let query = nic_query(&format!("'{RESOURCE_GROUP}'"));
    let one = graph(&fake, &[SUBSCRIPTION_ID], &query, json!({})).await;
    assert_eq!(one.header("x-ms-user-quota-remaining"), Some("1"));
    let two = graph(&fake, &[SUBSCRIPTION_ID], &query, json!({})).await;
    assert_eq!(two.header("x-ms-user-quota-remaining"), Some("0"));
    let throttled = graph(&fake, &[SUBSCRIPTION_ID], &query, json!({})).await;
    assert_eq!(throttled.status, StatusCode::TOO_MANY_REQUESTS, "{}", throttled.body);
    assert_eq!(throttled.code(), "RateLimiting");
    assert_eq!(throttled.header("x-ms-user-quota-remaining"), Some("0"));
    let resets = throttled.header("x-ms-user-quota-resets-after").unwrap();
    assert!(resets == "00:01:00" || resets == "00:00:59", "{resets}");
    assert!(throttled.header("retry-after").unwrap().parse::<u64>().unwrap() >= 59);
    // A new window: the quota is back.
    fake.admin("azure/graph-quota", json!({"queries": 15, "windowMillis": 5000})).await;
    assert_eq!(graph(&fake, &[SUBSCRIPTION_ID], &query, json!({})).await.status, StatusCode::OK);
    assert_eq!(graph_calls(&fake).await, 4);
}

/// Every page of the generic resource list at `url`.
async fn generic_list(fake: &Fake, url: &str) -> (Vec<Value>, usize) {
    let mut items = Vec::new();
    let mut pages = 0;
    let mut url = fake.url(url);
    loop {
        let page = fake.get(&url).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        pages += 1;
        items.extend(page.body["value"].as_array().unwrap().iter().cloned());
        match page.body["nextLink"].as_str() {
            Some(next) => {
                assert!(next.contains("%24expand=provisioningState") && next.contains("%24top="), "{next}");
                url = next.to_owned();
            }
            None => return (items, pages),
        }
    }
}

#[tokio::test]
async fn the_generic_list_expands_provisioning_state_and_honours_top() {
    let fake = Fake::start().await;
    make_vms(&fake, 3).await;
    let filter = "resourceType%20eq%20%27Microsoft.Compute%2FvirtualMachines%27";
    let base = format!("{}/resources?api-version=2021-04-01&$filter={filter}&$expand=provisioningState", rg_path());
    let (vms, pages) = generic_list(&fake, &format!("{base}&$top=1")).await;
    assert_eq!((vms.len(), pages), (3, 3));
    for vm in &vms {
        let get = fake.get(&vm_path(vm["name"].as_str().unwrap())).await;
        assert_eq!(vm["provisioningState"], get.body["properties"]["provisioningState"], "{vm}");
        assert_eq!(vm["type"], "Microsoft.Compute/virtualMachines");
    }
    let (capped, pages) = generic_list(&fake, &format!("{base}&$top=5000")).await;
    assert_eq!((capped.len(), pages), (3, 1), "$top over 1000 is served as 1000");
    let all = fake.get(&format!("{}/resources?$expand=provisioningState", rg_path())).await;
    let nics: Vec<&Value> = all.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["type"] == "Microsoft.Network/networkInterfaces")
        .collect();
    assert!(!nics.is_empty() && nics.iter().all(|n| n["provisioningState"] == "Succeeded"), "{}", all.body);
    let plain = fake.get(&format!("{}/resources?$filter={filter}", rg_path())).await;
    assert!(plain.body["value"][0].get("provisioningState").is_none(), "only when expanded");
    for bad in ["0", "-3", "many"] {
        let answer = fake.get(&format!("{}/resources?$top={bad}", rg_path())).await;
        assert_eq!((answer.status, answer.code()), (StatusCode::BAD_REQUEST, "InvalidTopInQueryString"), "{bad}");
        assert!(answer.body["error"]["message"].is_string());
    }
}

#[tokio::test]
async fn lazy_pages_are_what_a_get_renders() {
    let fake = Fake::start().await;
    fake.admin("azure/page-size", json!({"size": 2})).await;
    make_vms(&fake, 5).await;
    let mut url = fake.url(&format!("{}/providers/Microsoft.Compute/virtualMachines", rg_path()));
    let mut names = Vec::new();
    loop {
        let page = fake.get(&url).await;
        let items = page.body["value"].as_array().unwrap();
        assert!(items.len() <= 2);
        for vm in items {
            let name = vm["name"].as_str().unwrap();
            let get = fake.get(&vm_path(name)).await;
            assert_eq!(vm["properties"]["vmId"], get.body["properties"]["vmId"]);
            assert_eq!(vm["properties"]["networkProfile"], get.body["properties"]["networkProfile"]);
            assert_eq!(vm["properties"]["storageProfile"], get.body["properties"]["storageProfile"]);
            names.push(name.to_owned());
        }
        match page.body["nextLink"].as_str() {
            Some(next) => url = next.to_owned(),
            None => break,
        }
    }
    assert_eq!(names, ["vm-0", "vm-1", "vm-2", "vm-3", "vm-4"]);
}
