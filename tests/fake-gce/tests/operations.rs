//! `zoneOperations.list`: the regex name filter the driver's shared operation wait
//! sends, statuses as they change, `maxResults` pages and errors — over plain HTTP.

mod common;

use common::{Fake, PROJECT, ZONE, instance_body, uuid};
use fake_cloud_support::Timing;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// `GET zones/Z/operations` with `query`.
async fn list_ops(fake: &Fake, query: &[(&str, &str)]) -> (StatusCode, Value) {
    fake.send(fake.http.get(fake.zonal("operations")).query(query)).await
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|items| items.iter().map(|i| i["name"].as_str().unwrap_or_default().to_string()).collect())
        .unwrap_or_default()
}

/// `name eq "(?:a|b)"`, as the driver builds it.
fn name_filter(ops: &[&str]) -> String {
    format!("name eq \"(?:{})\"", ops.join("|"))
}

#[tokio::test]
async fn list_filters_operations_by_name_and_pages() {
    let fake = Fake::start().await;
    // Boot long enough that the inserts are still RUNNING at the first list.
    fake.admin_client.set_timing(Timing { boot_ms: 1500, stop_ms: 200, operation_ms: None }).await.expect("timing");
    let mut ops = Vec::new();
    for name in ["vm-a", "vm-b", "vm-c"] {
        let (status, op) = fake.insert(&instance_body(name, json!({})), Some(&uuid())).await;
        assert_eq!(status, StatusCode::OK, "{op}");
        ops.push(op["name"].as_str().expect("op name").to_string());
    }
    let (a, b, c) = (ops[0].as_str(), ops[1].as_str(), ops[2].as_str());
    let mut wanted = vec![a.to_string(), c.to_string()];
    wanted.sort();
    let filter = name_filter(&[a, c]);

    // The filter selects two of the three, in name order, still RUNNING.
    let (status, list) = list_ops(&fake, &[("filter", &filter)]).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["kind"], "compute#operationList");
    assert_eq!(
        list["selfLink"],
        format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE}/operations")
    );
    assert!(list.get("nextPageToken").is_none(), "{list}");
    assert_eq!(names(&list), wanted);
    for item in list["items"].as_array().expect("items") {
        assert_eq!(item["kind"], "compute#operation");
        assert_eq!(item["operationType"], "insert");
        assert_eq!(item["status"], "RUNNING", "{item}");
        assert!(item.get("error").is_none());
        let target = item["targetLink"].as_str().expect("targetLink");
        let vm = if item["name"] == a { "vm-a" } else { "vm-c" };
        assert_eq!(
            target,
            format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE}/instances/{vm}")
        );
        assert!(item["targetId"].is_string());
        assert!(item["zone"].as_str().is_some_and(|z| z.ends_with(&format!("/zones/{ZONE}"))), "{item}");
    }
    // Without a filter: all three; status filters too.
    let (_, all) = list_ops(&fake, &[]).await;
    assert_eq!(names(&all).len(), 3, "{all}");
    assert!(names(&all).contains(&b.to_string()));
    let (_, running) = list_ops(&fake, &[("filter", "status eq RUNNING")]).await;
    assert_eq!(names(&running).len(), 3, "{running}");
    let (_, done) = list_ops(&fake, &[("filter", "status eq DONE")]).await;
    assert!(done.get("items").is_none(), "no items field when nothing matches: {done}");
    assert_eq!(done["kind"], "compute#operationList");

    // Pages of one over the filter: each match once, a token only while more match.
    let (status, first) = list_ops(&fake, &[("filter", &filter), ("maxResults", "1")]).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(names(&first), [wanted[0].clone()]);
    let token = first["nextPageToken"].as_str().expect("a next page token").to_string();
    let (status, second) = list_ops(&fake, &[("filter", &filter), ("maxResults", "1"), ("pageToken", &token)]).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(names(&second), [wanted[1].clone()]);
    assert!(second.get("nextPageToken").is_none(), "{second}");

    // Once done, the same filter shows them DONE (progress 100, an end time).
    fake.wait_done(a).await;
    fake.wait_done(c).await;
    let (_, list) = list_ops(&fake, &[("filter", &filter)]).await;
    assert_eq!(names(&list), wanted);
    for item in list["items"].as_array().expect("items") {
        assert_eq!(item["status"], "DONE", "{item}");
        assert_eq!(item["progress"], 100);
        assert!(item["endTime"].is_string());
    }
    // A delete adds its own operation; the insert filter does not see it.
    let (_, del) = fake.delete("vm-b", Some(&uuid())).await;
    let del_name = del["name"].as_str().expect("delete op").to_string();
    let (_, list) = list_ops(&fake, &[("filter", &filter)]).await;
    assert_eq!(names(&list), wanted);
    let (_, only_delete) = list_ops(&fake, &[("filter", &name_filter(&[&del_name]))]).await;
    assert_eq!(names(&only_delete), [del_name]);
    assert_eq!(only_delete["items"][0]["operationType"], "delete");

    // Errors as instances.list answers them.
    for query in [
        vec![("maxResults", "501")],
        vec![("pageToken", "garbage!")],
        vec![("filter", "name eq \"operation-(\"")],
        vec![("filter", "name eq a OR name eq b")],
    ] {
        let (status, err) = list_ops(&fake, &query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query:?}: {err}");
        assert_eq!(err["error"]["errors"][0]["reason"], "invalid", "{query:?}");
    }
    let (status, _) =
        fake.send(fake.http.get(fake.api(&format!("projects/{PROJECT}/zones/nowhere-9z/operations")))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let calls = fake.calls().await;
    assert!(calls.of("zoneOperations.list") >= 10, "{calls:?}");
}
