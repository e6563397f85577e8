//! Neutron ports: CRUD, fixed IPs, allowed address pairs (replace, add, remove), revision
//! checks, tags and the list filters and paging; networks, subnets and security groups.

#![allow(clippy::unwrap_used)]

mod common;

use common::Fake;
use fake_openstack::{NETWORK_ID, NETWORK_NAME, SECURITY_GROUP_ID, SECURITY_GROUP_NAME, SUBNET_ID, SUBNET_V6_ID};
use reqwest::Method;
use serde_json::{Value, json};

async fn create(fake: &Fake, port: Value) -> Value {
    fake.call(Method::POST, "/network/v2.0/ports", Some(json!({"port": port}))).await.expect(201)["port"].clone()
}

async fn put(fake: &Fake, path: &str, body: Value) -> common::Answer {
    fake.call(Method::PUT, &format!("/network/v2.0/ports/{path}"), Some(body)).await
}

fn pairs(port: &Value) -> Vec<String> {
    port["allowed_address_pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["ip_address"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn ports_crud_with_fixed_ips() {
    let fake = Fake::start().await;
    let port = create(&fake, json!({"network_id": NETWORK_ID, "name": "p0", "fixed_ips": [{"subnet_id": SUBNET_ID}], "security_groups": [SECURITY_GROUP_ID], "description": "d"})).await;
    assert_eq!(port["fixed_ips"], json!([{"subnet_id": SUBNET_ID, "ip_address": "10.250.0.10"}]));
    assert_eq!(port["security_groups"], json!([SECURITY_GROUP_ID]));
    assert_eq!(
        (port["status"].as_str(), port["device_id"].as_str(), port["revision_number"].as_u64()),
        (Some("DOWN"), Some(""), Some(1))
    );
    assert!(port["mac_address"].as_str().unwrap().starts_with("fa:16:3e:"));
    let both = create(&fake, json!({"network_id": NETWORK_ID})).await;
    let subnets: Vec<&str> =
        both["fixed_ips"].as_array().unwrap().iter().map(|f| f["subnet_id"].as_str().unwrap()).collect();
    assert_eq!(subnets, [SUBNET_ID, SUBNET_V6_ID]);
    assert_eq!(both["fixed_ips"][0]["ip_address"], "10.250.0.11");
    let fixed = create(
        &fake,
        json!({"network_id": NETWORK_ID, "fixed_ips": [{"subnet_id": SUBNET_ID, "ip_address": "10.250.9.9"}]}),
    )
    .await;
    assert_eq!(fixed["fixed_ips"][0]["ip_address"], "10.250.9.9");
    let answer = fake.call(Method::POST, "/network/v2.0/ports", Some(json!({"port": {"network_id": NETWORK_ID, "fixed_ips": [{"subnet_id": SUBNET_ID, "ip_address": "10.250.9.9"}]}}))).await;
    assert_eq!(
        (answer.status.as_u16(), answer.body["NeutronError"]["type"].as_str()),
        (409, Some("IpAddressAlreadyAllocated"))
    );
    let answer = fake
        .call(
            Method::POST,
            "/network/v2.0/ports",
            Some(json!({"port": {"network_id": NETWORK_ID, "fixed_ips": [{"subnet_id": "nope"}]}})),
        )
        .await;
    assert_eq!((answer.status.as_u16(), answer.body["NeutronError"]["type"].as_str()), (400, Some("InvalidInput")));
    let answer = fake.call(Method::POST, "/network/v2.0/ports", Some(json!({"port": {"network_id": "nope"}}))).await;
    assert_eq!((answer.status.as_u16(), answer.body["NeutronError"]["type"].as_str()), (404, Some("NetworkNotFound")));
    let answer = fake
        .call(
            Method::POST,
            "/network/v2.0/ports",
            Some(json!({"port": {"network_id": NETWORK_ID, "security_groups": ["nope"]}})),
        )
        .await;
    assert_eq!(
        (answer.status.as_u16(), answer.body["NeutronError"]["type"].as_str()),
        (404, Some("SecurityGroupNotFound"))
    );
    let answer = fake
        .call(Method::POST, "/network/v2.0/ports", Some(json!({"port": {"network_id": NETWORK_ID, "bogus": 1}})))
        .await;
    assert_eq!(answer.status, 400);
    fake.call(Method::POST, "/network/v2.0/ports", Some(json!("nope"))).await.expect(400);

    let id = port["id"].as_str().unwrap();
    let got = fake.get(&format!("/network/v2.0/ports/{id}")).await.expect(200);
    assert_eq!(got["port"]["name"], "p0");
    let renamed = put(&fake, id, json!({"port": {"name": "p0-renamed"}})).await.expect(200);
    assert_eq!(
        (renamed["port"]["name"].as_str(), renamed["port"]["revision_number"].as_u64()),
        (Some("p0-renamed"), Some(2))
    );
    fake.call(Method::DELETE, &format!("/network/v2.0/ports/{id}"), None).await.expect(204);
    let answer = fake.get(&format!("/network/v2.0/ports/{id}")).await;
    assert_eq!((answer.status.as_u16(), answer.body["NeutronError"]["type"].as_str()), (404, Some("PortNotFound")));
    assert_eq!(answer.body["NeutronError"]["message"], format!("Port {id} could not be found."));
    fake.call(Method::DELETE, &format!("/network/v2.0/ports/{id}"), None).await.expect(404);
    let gone = fake.inventory().await["dependents"].as_array().unwrap().iter().find(|d| d["id"] == id).unwrap().clone();
    assert_eq!((gone["live"].as_bool(), gone["kind"].as_str()), (Some(false), Some("port")));
}

#[tokio::test]
async fn allowed_address_pairs_replace_add_and_remove() {
    let fake = Fake::start().await;
    let port =
        create(&fake, json!({"network_id": NETWORK_ID, "allowed_address_pairs": [{"ip_address": "10.96.0.0/11"}]}))
            .await;
    let id = port["id"].as_str().unwrap().to_owned();
    let mac = port["mac_address"].as_str().unwrap();
    assert_eq!(port["allowed_address_pairs"], json!([{"ip_address": "10.96.0.0/11", "mac_address": mac}]));
    let body = put(&fake, &id, json!({"port": {"allowed_address_pairs": [{"ip_address": "100.64.0.0/10"}, {"ip_address": "fd00::/48", "mac_address": "fa:16:3e:00:00:01"}]}})).await.expect(200);
    assert_eq!(pairs(&body["port"]), ["100.64.0.0/10", "fd00::/48"], "a given list replaces the old one");
    let body = put(
        &fake,
        &format!("{id}/add_allowed_address_pairs"),
        json!({"port": {"allowed_address_pairs": [{"ip_address": "100.64.0.0/10"}, {"ip_address": "192.168.0.1"}]}}),
    )
    .await
    .expect(200);
    assert_eq!(pairs(&body["port"]), ["100.64.0.0/10", "fd00::/48", "192.168.0.1"], "add merges without duplicates");
    let body = put(
        &fake,
        &format!("{id}/remove_allowed_address_pairs"),
        json!({"port": {"allowed_address_pairs": [{"ip_address": "100.64.0.0/10"}]}}),
    )
    .await
    .expect(200);
    assert_eq!(pairs(&body["port"]), ["fd00::/48", "192.168.0.1"]);
    let body = put(&fake, &id, json!({"port": {"allowed_address_pairs": []}})).await.expect(200);
    assert!(pairs(&body["port"]).is_empty());

    let answer = put(
        &fake,
        &id,
        json!({"port": {"allowed_address_pairs": [{"ip_address": "1.2.3.4"}, {"ip_address": "1.2.3.4"}]}}),
    )
    .await;
    assert_eq!(answer.status, 400);
    let answer = put(&fake, &id, json!({"port": {"allowed_address_pairs": [{"ip_address": "nope"}]}})).await;
    assert_eq!(answer.status, 400);
    let eleven: Vec<Value> = (0..11).map(|i| json!({"ip_address": format!("10.1.0.{i}")})).collect();
    let answer = put(&fake, &id, json!({"port": {"allowed_address_pairs": eleven}})).await;
    assert_eq!(
        (answer.status.as_u16(), answer.body["NeutronError"]["type"].as_str()),
        (400, Some("AllowedAddressPairExhausted"))
    );

    let revision =
        fake.get(&format!("/network/v2.0/ports/{id}")).await.expect(200)["port"]["revision_number"].as_u64().unwrap();
    let stale = format!("revision_number={}", revision - 1);
    let answer = fake
        .send(
            Method::PUT,
            &format!("/network/v2.0/ports/{id}"),
            Some(&fake.cluster),
            Some(json!({"port": {"name": "x"}})),
            &[("If-Match", &stale)],
        )
        .await;
    assert_eq!(
        (answer.status.as_u16(), answer.body["NeutronError"]["type"].as_str()),
        (412, Some("RevisionNumberConstraintFailed"))
    );
    let current = format!("revision_number={revision}");
    fake.send(
        Method::PUT,
        &format!("/network/v2.0/ports/{id}"),
        Some(&fake.cluster),
        Some(json!({"port": {"name": "x"}})),
        &[("If-Match", &current)],
    )
    .await
    .expect(200);
}

#[tokio::test]
async fn tags_replace_and_filter() {
    let fake = Fake::start().await;
    let a = create(&fake, json!({"network_id": NETWORK_ID, "name": "a"})).await["id"].as_str().unwrap().to_owned();
    let b = create(&fake, json!({"network_id": NETWORK_ID, "name": "b", "tags": ["cluster"]})).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let body = put(&fake, &format!("{a}/tags"), json!({"tags": ["cluster", "machine-a"]})).await.expect(200);
    assert_eq!(body["tags"], json!(["cluster", "machine-a"]));
    let body = put(&fake, &format!("{a}/tags"), json!({"tags": ["cluster", "role"]})).await.expect(200);
    assert_eq!(body["tags"], json!(["cluster", "role"]), "PUT tags replaces");
    put(&fake, &format!("{b}/tags/extra"), json!({})).await.expect(201);
    let ids = |body: Value| -> Vec<String> {
        body["ports"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(ids(fake.get("/network/v2.0/ports?tags=cluster,role").await.expect(200)), [a.as_str()]);
    let mut both = ids(fake.get("/network/v2.0/ports?tags=cluster").await.expect(200));
    both.sort();
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort();
    assert_eq!(both, expected);
    assert_eq!(ids(fake.get("/network/v2.0/ports?tags-any=role,extra").await.expect(200)).len(), 2);
    assert_eq!(ids(fake.get("/network/v2.0/ports?tags=cluster&tags=extra").await.expect(200)), [b.as_str()]);
    assert_eq!(ids(fake.get("/network/v2.0/ports?name=b").await.expect(200)), [b.as_str()]);
    assert_eq!(ids(fake.get("/network/v2.0/ports?fixed_ips=ip_address%3D10.250.0.10").await.expect(200)), [a.as_str()]);
    fake.call(Method::DELETE, &format!("/network/v2.0/ports/{b}/tags/extra"), None).await.expect(204);
    assert!(ids(fake.get("/network/v2.0/ports?tags=extra").await.expect(200)).is_empty());
    let inventory = fake.inventory().await;
    let dep = inventory["dependents"].as_array().unwrap().iter().find(|d| d["id"] == a.as_str()).unwrap().clone();
    assert_eq!(dep["tags"], json!({"cluster": "", "role": ""}));
}

#[tokio::test]
async fn port_lists_page_with_markers() {
    let fake = Fake::start().await;
    for i in 0..5 {
        create(&fake, json!({"network_id": NETWORK_ID, "name": format!("p{i}")})).await;
    }
    fake.admin("openstack/page-size", json!({"size": 2})).await;
    let mut seen = Vec::new();
    let mut path = "/network/v2.0/ports".to_owned();
    loop {
        let body = fake.get(&path).await.expect(200);
        seen.extend(body["ports"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap().to_owned()));
        let Some(next) = body["ports_links"][0]["href"].as_str() else { break };
        path = next.trim_start_matches(&fake.handle.url()).to_owned();
    }
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!((seen.len(), sorted.len()), (5, 5));
    assert_eq!(seen, sorted, "Neutron pages in id order");
    fake.get("/network/v2.0/ports?marker=nope").await.expect(400);
}

#[tokio::test]
async fn networks_subnets_and_security_groups() {
    let fake = Fake::start().await;
    let nets = fake.get(&format!("/network/v2.0/networks?name={NETWORK_NAME}")).await.expect(200);
    assert_eq!(nets["networks"][0]["id"], NETWORK_ID);
    assert_eq!(nets["networks"][0]["subnets"], json!([SUBNET_ID, SUBNET_V6_ID]));
    fake.get(&format!("/network/v2.0/networks/{NETWORK_ID}")).await.expect(200);
    let answer = fake.get("/network/v2.0/networks/nope").await;
    assert_eq!(answer.body["NeutronError"]["type"], "NetworkNotFound");
    let subnets = fake.get(&format!("/network/v2.0/subnets?network_id={NETWORK_ID}")).await.expect(200);
    let cidrs: Vec<&str> = subnets["subnets"].as_array().unwrap().iter().map(|s| s["cidr"].as_str().unwrap()).collect();
    assert_eq!(cidrs.len(), 2);
    assert!(cidrs.contains(&"10.250.0.0/16") && cidrs.contains(&"fd00:10:250::/64"));
    let subnet = fake.get(&format!("/network/v2.0/subnets/{SUBNET_ID}")).await.expect(200);
    assert_eq!(
        (subnet["subnet"]["ip_version"].as_u64(), subnet["subnet"]["gateway_ip"].as_str()),
        (Some(4), Some("10.250.0.1"))
    );
    let groups = fake.get(&format!("/network/v2.0/security-groups?name={SECURITY_GROUP_NAME}")).await.expect(200);
    assert_eq!(groups["security_groups"].as_array().unwrap().len(), 1);
    assert_eq!(groups["security_groups"][0]["id"], SECURITY_GROUP_ID);
    fake.get(&format!("/network/v2.0/security-groups/{SECURITY_GROUP_ID}")).await.expect(200);
    assert_eq!(
        fake.get("/network/v2.0/security-groups/nope").await.body["NeutronError"]["type"],
        "SecurityGroupNotFound"
    );
}

#[tokio::test]
async fn bulk_create_is_all_or_nothing_and_repeated_filters_are_any_of() {
    let fake = Fake::start().await;
    let answer = fake
        .call(
            Method::POST,
            "/network/v2.0/ports",
            Some(json!({"ports": [
                {"network_id": NETWORK_ID, "name": "bulk-a", "fixed_ips": [{"subnet_id": SUBNET_ID}]},
                {"network_id": NETWORK_ID, "name": "bulk-b", "fixed_ips": [{"subnet_id": SUBNET_ID}], "tags": ["t"]},
            ]})),
        )
        .await
        .expect(201);
    let made = answer["ports"].as_array().unwrap();
    let names: Vec<&str> = made.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["bulk-a", "bulk-b"], "answered in the order asked");
    assert_ne!(made[0]["fixed_ips"][0]["ip_address"], made[1]["fixed_ips"][0]["ip_address"]);
    assert_eq!(made[1]["tags"], json!(["t"]));

    // One refused item refuses the request, and none of its ports is left.
    let answer = fake
        .call(
            Method::POST,
            "/network/v2.0/ports",
            Some(json!({"ports": [
                {"network_id": NETWORK_ID, "name": "bulk-c"},
                {"network_id": "nope", "name": "bulk-d"},
            ]})),
        )
        .await;
    assert_eq!((answer.status.as_u16(), answer.body["NeutronError"]["type"].as_str()), (404, Some("NetworkNotFound")));
    let answer = fake.call(Method::POST, "/network/v2.0/ports", Some(json!({"ports": []}))).await;
    assert_eq!(answer.status.as_u16(), 400);

    let listed =
        fake.call(Method::GET, "/network/v2.0/ports?name=bulk-a&name=bulk-c&name=bulk-b", None).await.expect(200);
    let mut names: Vec<&str> =
        listed["ports"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["bulk-a", "bulk-b"]);
}
