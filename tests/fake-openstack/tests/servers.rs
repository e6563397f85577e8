//! Nova: server lifecycle with its port and volume effects, failures, listing, paging,
//! validation, microversions, consistency, quota and project isolation.

#![allow(clippy::unwrap_used)]

mod common;

use common::Fake;
use fake_cloud_support::{OpClass, Timing};
use fake_openstack::{
    KEY_NAME, NETWORK_ID, NETWORK_NAME, PROJECT_ID, PUBLIC_IMAGE, SECURITY_GROUP_NAME, SERVER_GROUP_ID,
};
use reqwest::Method;
use serde_json::{Value, json};

async fn ports_of(fake: &Fake, server: &str) -> Vec<Value> {
    let body = fake.get(&format!("/network/v2.0/ports?device_id={server}")).await.expect(200);
    body["ports"].as_array().unwrap().clone()
}

#[tokio::test]
async fn lifecycle_build_active_delete_gone_with_ports_and_volumes() {
    let fake = Fake::start().await;
    let port = fake
        .call(Method::POST, "/network/v2.0/ports", Some(json!({"port": {"network_id": NETWORK_ID, "name": "m0-port"}})))
        .await
        .expect(201)["port"]
        .clone();
    let port_id = port["id"].as_str().unwrap();
    let answer = fake
        .nova(
            Method::POST,
            "/servers",
            Some(json!({"server": {
                "name": "machine-0", "imageRef": "", "flavorRef": format!("{}/compute/v2.1/flavors/4", fake.handle.url()),
                "networks": [{"port": port_id}, {"uuid": NETWORK_ID}],
                "metadata": {"cluster": "shoot"}, "user_data": "I2Nsb3VkLWNvbmZpZw==", "key_name": KEY_NAME,
                "availability_zone": "az-2", "config_drive": true, "security_groups": [{"name": SECURITY_GROUP_NAME}],
                "block_device_mapping_v2": [{"boot_index": 0, "uuid": PUBLIC_IMAGE, "source_type": "image", "destination_type": "volume",
                    "volume_size": 50, "volume_type": "ssd", "delete_on_termination": true}],
            }, "os:scheduler_hints": {"group": SERVER_GROUP_ID}})),
        )
        .await;
    assert_eq!(answer.status, 202, "{}", answer.text);
    assert_eq!(answer.header("openstack-api-version"), "compute 2.96");
    assert!(answer.header("location").ends_with(answer.body["server"]["id"].as_str().unwrap()));
    assert!(answer.body["server"]["adminPass"].is_string());
    let id = answer.body["server"]["id"].as_str().unwrap().to_owned();

    let building = fake.server(&id).await;
    assert_eq!(building["status"], "BUILD");
    assert_eq!(building["OS-EXT-STS:vm_state"], "building");
    assert!(matches!(building["OS-EXT-STS:task_state"].as_str(), Some("scheduling" | "spawning")));
    let seen = fake.wait_server(&id, "ACTIVE").await;
    assert_eq!(seen.first().map(String::as_str), Some("BUILD"));
    let server = fake.server(&id).await;
    assert_eq!(server["OS-EXT-STS:power_state"], 1);
    assert_eq!(server["OS-EXT-STS:task_state"], Value::Null);
    assert_eq!(server["flavor"]["original_name"], "m1.large");
    assert_eq!(server["image"], "", "booted from volume");
    assert_eq!(server["config_drive"], "True");
    assert_eq!(server["OS-EXT-AZ:availability_zone"], "az-2");
    assert_eq!(server["tenant_id"], PROJECT_ID);
    let addresses = server["addresses"][NETWORK_NAME].as_array().unwrap();
    assert_eq!(addresses.len(), 4, "user port (v4+v6) and the Nova port (v4+v6): {addresses:?}");
    let volumes = server["os-extended-volumes:volumes_attached"].as_array().unwrap();
    assert_eq!(volumes.len(), 1);
    let volume_id = volumes[0]["id"].as_str().unwrap().to_owned();
    let volume = fake.get(&format!("{}/{volume_id}", fake.volumes_path())).await.expect(200)["volume"].clone();
    assert_eq!(
        (volume["status"].as_str(), volume["bootable"].as_str(), volume["size"].as_u64()),
        (Some("in-use"), Some("true"), Some(50))
    );
    assert_eq!(volume["volume_type"], "ssd");
    assert_eq!(volume["attachments"][0]["server_id"], id.as_str());

    let ports = ports_of(&fake, &id).await;
    assert_eq!(ports.len(), 2);
    assert!(ports.iter().all(|p| p["status"] == "ACTIVE" && p["device_owner"] == "compute:az-2"));
    let nova_port = ports.iter().find(|p| p["id"] != port_id).unwrap()["id"].as_str().unwrap().to_owned();

    let inventory = fake.inventory().await;
    let entry = inventory["instances"].as_array().unwrap().iter().find(|i| i["id"] == id.as_str()).unwrap();
    assert_eq!((entry["state"].as_str(), entry["live"].as_bool()), (Some("ACTIVE"), Some(true)));
    assert_eq!(entry["tags"], json!({"cluster": "shoot"}));
    assert_eq!(entry["user_data"], "I2Nsb3VkLWNvbmZpZw==");
    assert_eq!(entry["server_group"], SERVER_GROUP_ID);
    let dependents = inventory["dependents"].as_array().unwrap();
    let dep = |dep_id: &str| dependents.iter().find(|d| d["id"] == dep_id).unwrap().clone();
    assert_eq!(
        (dep(&nova_port)["name"].as_str(), dep(&nova_port)["made_by"].as_str()),
        (Some("machine-0"), Some("nova"))
    );
    assert_eq!((dep(port_id)["name"].as_str(), dep(port_id)["made_by"].as_str()), (Some("m0-port"), Some("user")));
    assert_eq!(
        (dep(&volume_id)["kind"].as_str(), dep(&volume_id)["name"].as_str()),
        (Some("volume"), Some("machine-0"))
    );

    fake.nova(Method::DELETE, &format!("/servers/{id}"), None).await.expect(204);
    assert_eq!(fake.server(&id).await["OS-EXT-STS:task_state"], "deleting");
    fake.nova(Method::DELETE, &format!("/servers/{id}"), None).await.expect(204);
    fake.wait_server(&id, "gone").await;
    let answer = fake.nova(Method::GET, &format!("/servers/{id}"), None).await;
    assert_eq!(answer.status, 404);
    assert_eq!(answer.body["itemNotFound"]["message"], format!("Instance {id} could not be found."));
    fake.nova(Method::DELETE, &format!("/servers/{id}"), None).await.expect(404);
    let user_port = fake.get(&format!("/network/v2.0/ports/{port_id}")).await.expect(200)["port"].clone();
    assert_eq!((user_port["device_id"].as_str(), user_port["status"].as_str()), (Some(""), Some("DOWN")));
    fake.get(&format!("/network/v2.0/ports/{nova_port}")).await.expect(404);
    fake.get(&format!("{}/{volume_id}", fake.volumes_path())).await.expect(404);
    let inventory = fake.inventory().await;
    let entry = inventory["instances"].as_array().unwrap().iter().find(|i| i["id"] == id.as_str()).unwrap();
    assert_eq!((entry["state"].as_str(), entry["live"].as_bool()), (Some("DELETED"), Some(false)));
}

#[tokio::test]
async fn server_failures_end_in_error_with_a_fault() {
    let fake = Fake::start().await;
    let port = fake
        .call(Method::POST, "/network/v2.0/ports", Some(json!({"port": {"network_id": NETWORK_ID}})))
        .await
        .expect(201);
    let port_id = port["port"]["id"].as_str().unwrap().to_owned();
    fake.admin("openstack/server-failures", json!({"times": 1})).await;
    let id = fake.create_server("doomed", json!({"networks": [{"port": port_id}, {"uuid": NETWORK_ID}]})).await;
    assert_eq!(fake.wait_server(&id, "ERROR").await, ["BUILD", "ERROR"]);
    let server = fake.server(&id).await;
    assert_eq!(server["OS-EXT-STS:vm_state"], "error");
    assert_eq!(server["fault"]["code"], 500);
    assert_eq!(server["fault"]["message"], "No valid host was found. There are not enough hosts available.");
    let ports = ports_of(&fake, &id).await;
    assert_eq!(ports.len(), 1, "the Nova-made port is gone, the user port stays attached");
    assert_eq!(ports[0]["id"], port_id.as_str());
    let next = fake.create_server("fine", json!({})).await;
    fake.wait_server(&next, "ACTIVE").await;
    fake.admin(
        "openstack/server-failures",
        json!({"times": 2, "message": "Exceeded maximum number of retries.", "code": 500}),
    )
    .await;
    let failing = fake.create_server("failing", json!({})).await;
    fake.wait_server(&failing, "ERROR").await;
    assert_eq!(fake.server(&failing).await["fault"]["message"], "Exceeded maximum number of retries.");
    fake.admin_client.delete("openstack/server-failures").await.expect("clear server failures");
    let ok = fake.create_server("ok", json!({})).await;
    fake.wait_server(&ok, "ACTIVE").await;
}

#[tokio::test]
async fn list_filters_by_regex_and_pages_with_markers() {
    let fake = Fake::start().await;
    for name in ["web-1", "web-2", "web-3", "db-1", "web-4"] {
        fake.create_server(name, json!({"networks": "none"})).await;
    }
    fake.admin("openstack/page-size", json!({"size": 2})).await;
    let mut names = Vec::new();
    let mut path = "/servers/detail?name=%5Eweb-".to_owned();
    let mut pages = 0;
    loop {
        let body = fake.nova(Method::GET, &path, None).await.expect(200);
        pages += 1;
        names.extend(body["servers"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap().to_owned()));
        let Some(next) = body["servers_links"][0]["href"].as_str() else { break };
        assert!(next.contains("name=%5Eweb-") && next.contains("limit=2"), "{next}");
        path = next.split("/compute/v2.1").nth(1).unwrap().to_owned();
    }
    assert_eq!(names, ["web-4", "web-3", "web-2", "web-1"]);
    assert_eq!(pages, 3, "two full pages, then an empty one");
    let brief = fake.nova(Method::GET, "/servers?name=db", None).await.expect(200);
    assert_eq!(brief["servers"].as_array().unwrap().len(), 1);
    assert!(brief["servers"][0].get("status").is_none(), "the brief list has id, name and links only");
    let answer = fake.nova(Method::GET, "/servers/detail?marker=nope", None).await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.body["badRequest"]["message"], "marker [nope] not found");
    fake.nova(Method::GET, "/servers/detail?name=%28", None).await.expect(400);
    let active = fake.nova(Method::GET, "/servers/detail?status=ACTIVE", None).await.expect(200);
    assert!(active["servers"].as_array().unwrap().is_empty(), "still building");
}

#[tokio::test]
async fn create_validation_answers_novas_errors() {
    let started = Fake::start().await;
    let fake = &started;
    let create = |server: Value| async move {
        let mut base = json!({"name": "x", "imageRef": PUBLIC_IMAGE, "flavorRef": "2", "networks": "none"});
        for (k, v) in server.as_object().unwrap() {
            base[k] = v.clone();
        }
        fake.nova(Method::POST, "/servers", Some(json!({"server": base}))).await
    };
    let message = |answer: common::Answer| answer.body["badRequest"]["message"].as_str().unwrap_or("").to_owned();
    assert_eq!(message(create(json!({"flavorRef": "99"})).await), "Flavor 99 could not be found.");
    assert!(message(create(json!({"imageRef": fake_openstack::ALLOWED_IMAGE})).await).contains("could not be found"));
    assert_eq!(message(create(json!({"user_data": "%%%"})).await), "User data needs to be valid base 64.");
    assert_eq!(
        message(create(json!({"availability_zone": "moon"})).await),
        "The requested availability zone is not available"
    );
    assert_eq!(message(create(json!({"key_name": "other"})).await), "Invalid key_name provided.");
    assert!(message(create(json!({"networks": [{"uuid": "nope"}]})).await).contains("Network nope could not be found"));
    assert!(message(create(json!({"networks": [{"port": "nope"}]})).await).contains("Port id nope could not be found"));
    assert!(
        message(create(json!({"security_groups": [{"name": "nope"}]})).await).contains("Security group nope not found")
    );
    let answer = fake
        .nova(
            Method::POST,
            "/servers",
            Some(json!({"server": {"name": "x", "imageRef": PUBLIC_IMAGE, "flavorRef": "2"}})),
        )
        .await;
    assert_eq!(answer.status, 400, "networks is required from 2.37");
    fake.nova(Method::POST, "/servers", Some(json!({"nope": 1}))).await.expect(400);
    let raw = fake.send(Method::POST, "/compute/v2.1/servers", Some(&fake.cluster), None, &[]).await;
    assert_eq!(raw.status, 400, "an empty body");

    let port = fake
        .call(Method::POST, "/network/v2.0/ports", Some(json!({"port": {"network_id": NETWORK_ID}})))
        .await
        .expect(201);
    let port_id = port["port"]["id"].as_str().unwrap().to_owned();
    fake.create_server("a", json!({"networks": [{"port": port_id}]})).await;
    let answer = create(json!({"networks": [{"port": port_id}]})).await;
    assert_eq!(answer.status, 409);
    assert_eq!(answer.body["conflictingRequest"]["message"], format!("Port {port_id} is still in use."));

    fake.admin("openstack/quota", json!({"instances": 1})).await;
    let answer = create(json!({})).await;
    assert_eq!(answer.status, 403);
    assert_eq!(
        answer.body["forbidden"]["message"],
        "Quota exceeded for instances: Requested 1, but already used 1 of 1 instances"
    );
}

#[tokio::test]
async fn microversions_are_negotiated_and_echoed() {
    let fake = Fake::start().await;
    let plain = fake.get("/compute/v2.1/flavors").await;
    assert_eq!(plain.header("x-openstack-nova-api-version"), "2.1");
    let latest = fake
        .send(
            Method::GET,
            "/compute/v2.1/flavors",
            Some(&fake.cluster),
            None,
            &[("X-OpenStack-Nova-API-Version", "latest")],
        )
        .await;
    assert_eq!(latest.header("openstack-api-version"), "compute 2.96");
    let answer = fake
        .send(
            Method::GET,
            "/compute/v2.1/flavors",
            Some(&fake.cluster),
            None,
            &[("OpenStack-API-Version", "compute 3.0")],
        )
        .await;
    assert_eq!(answer.status, 406);
    assert!(answer.body["notAcceptable"]["message"].as_str().unwrap().contains("maximum is 2.96"));
    let answer = fake
        .send(
            Method::GET,
            "/compute/v2.1/flavors",
            Some(&fake.cluster),
            None,
            &[("OpenStack-API-Version", "compute two")],
        )
        .await;
    assert_eq!(answer.status, 400);
    let id = fake.create_server("old", json!({})).await;
    let old = fake
        .send(Method::GET, &format!("/compute/v2.1/servers/{id}"), Some(&fake.cluster), None, &[])
        .await
        .expect(200);
    assert_eq!(old["server"]["flavor"]["id"], "2", "below 2.47 the flavor is a reference");
    let flavors = fake.get("/compute/v2.1/flavors/detail").await.expect(200);
    assert_eq!(flavors["flavors"].as_array().unwrap().len(), 4);
    fake.get("/compute/v2.1/flavors/4").await.expect(200);
    fake.get("/compute/v2.1/flavors/42").await.expect(404);
}

#[tokio::test]
async fn new_servers_are_invisible_for_the_consistency_window() {
    let fake = Fake::start().await;
    fake.admin_client.set_invisible_ms(300).await.expect("consistency");
    let id = fake.create_server("late", json!({})).await;
    fake.nova(Method::GET, &format!("/servers/{id}"), None).await.expect(404);
    let list = fake.nova(Method::GET, "/servers/detail", None).await.expect(200);
    assert!(list["servers"].as_array().unwrap().is_empty());
    tokio::time::sleep(std::time::Duration::from_millis(350)).await;
    fake.nova(Method::GET, &format!("/servers/{id}"), None).await.expect(200);
}

#[tokio::test]
async fn projects_do_not_see_each_others_resources() {
    let fake = Fake::start().await;
    let id = fake.create_server("mine", json!({})).await;
    let owner = fake.owner.clone();
    fake.nova_as(&owner, Method::GET, &format!("/servers/{id}"), None).await.expect(404);
    fake.nova_as(&owner, Method::DELETE, &format!("/servers/{id}"), None).await.expect(404);
    let list = fake.nova_as(&owner, Method::GET, "/servers/detail", None).await.expect(200);
    assert!(list["servers"].as_array().unwrap().is_empty());
    let ports = fake.send(Method::GET, "/network/v2.0/ports", Some(&owner), None, &[]).await.expect(200);
    assert!(ports["ports"].as_array().unwrap().is_empty());
    let answer = fake
        .send(Method::POST, "/network/v2.0/ports", Some(&owner), Some(json!({"port": {"network_id": NETWORK_ID}})), &[])
        .await;
    assert_eq!(answer.status, 404);
    assert_eq!(answer.body["NeutronError"]["type"], "NetworkNotFound");
    let answer = fake
        .nova_as(
            &owner,
            Method::POST,
            "/servers",
            Some(json!({"server": {"name": "x", "imageRef": PUBLIC_IMAGE, "flavorRef": "2", "networks": "auto"}})),
        )
        .await;
    assert_eq!(answer.status, 400, "the owner project has no network");
}

#[tokio::test]
async fn terminate_deletes_the_server_at_once_and_keeps_its_user_ports() {
    let fake = Fake::start().await;
    let port = fake
        .call(Method::POST, "/network/v2.0/ports", Some(json!({"port": {"network_id": NETWORK_ID, "name": "m9-port"}})))
        .await
        .expect(201)["port"]
        .clone();
    let port_id = port["id"].as_str().unwrap().to_owned();
    let id = fake
        .create_server(
            "machine-9",
            json!({"imageRef": "", "networks": [{"port": port_id}, {"uuid": NETWORK_ID}],
                "block_device_mapping_v2": [
                    {"boot_index": 0, "uuid": PUBLIC_IMAGE, "source_type": "image", "destination_type": "volume",
                     "volume_size": 20, "delete_on_termination": true},
                    {"source_type": "blank", "destination_type": "volume", "volume_size": 10}]}),
        )
        .await;
    let other = fake.create_server("machine-10", json!({})).await;
    fake.wait_server(&id, "ACTIVE").await;
    let ports = ports_of(&fake, &id).await;
    assert_eq!(ports.len(), 2);
    let nova_port = ports.iter().find(|p| p["id"] != port_id.as_str()).unwrap()["id"].as_str().unwrap().to_owned();
    let attached = fake.server(&id).await["os-extended-volumes:volumes_attached"].clone();
    let volume_of = |delete: bool| {
        attached.as_array().unwrap().iter().find(|v| v["delete_on_termination"] == delete).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (boot_volume, data_volume) = (volume_of(true), volume_of(false));
    let calls_before = fake.calls().await.total;
    let terminate = |id: String| {
        let url = format!("{}/instances/{id}/terminate", fake.handle.admin_url());
        let http = fake.http.clone();
        async move {
            let resp = http.post(url).send().await.unwrap();
            (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
        }
    };

    assert_eq!(terminate(id.clone()).await.0, 200);
    assert_eq!(fake.calls().await.total, calls_before, "the hook counts no call");
    let answer = fake.nova(Method::GET, &format!("/servers/{id}"), None).await;
    assert_eq!(answer.status, 404, "gone at once, no deleting phase");
    assert_eq!(answer.body["itemNotFound"]["message"], format!("Instance {id} could not be found."));
    let listed = fake.nova(Method::GET, "/servers/detail", None).await.expect(200);
    let listed: Vec<&str> = listed["servers"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(listed, [other.as_str()]);
    fake.nova(Method::DELETE, &format!("/servers/{id}"), None).await.expect(404);

    // The pre-created port stays, unbound; the port Nova made goes, as on a server DELETE.
    let user_port = fake.get(&format!("/network/v2.0/ports/{port_id}")).await.expect(200)["port"].clone();
    assert_eq!(
        (user_port["device_id"].as_str(), user_port["device_owner"].as_str(), user_port["status"].as_str()),
        (Some(""), Some(""), Some("DOWN"))
    );
    assert_eq!(user_port["fixed_ips"], port["fixed_ips"], "keeps its addresses");
    fake.get(&format!("/network/v2.0/ports/{nova_port}")).await.expect(404);
    assert!(ports_of(&fake, &id).await.is_empty());
    // Volumes follow delete_on_termination.
    fake.get(&format!("{}/{boot_volume}", fake.volumes_path())).await.expect(404);
    let left = fake.get(&format!("{}/{data_volume}", fake.volumes_path())).await.expect(200);
    assert_eq!(left["volume"]["status"], "available");

    let inventory = fake.inventory().await;
    let find =
        |kind: &str, want: &str| inventory[kind].as_array().unwrap().iter().find(|i| i["id"] == want).unwrap().clone();
    let entry = find("instances", &id);
    assert_eq!((entry["state"].as_str(), entry["live"].as_bool()), (Some("DELETED"), Some(false)));
    assert_eq!(find("instances", &other)["live"], true, "other servers are untouched");
    let kept = find("dependents", &port_id);
    assert_eq!((kept["live"].as_bool(), kept["device_id"].as_str()), (Some(true), Some("")));
    assert_eq!(find("dependents", &nova_port)["live"], false);
    assert_eq!(find("dependents", &boot_volume)["live"], false);
    assert_eq!(find("dependents", &data_volume)["live"], true);

    let (status, body) = terminate(id.clone()).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"], format!("no live instance {id}"));
    assert_eq!(terminate(port_id.clone()).await.0, 404, "a port is not an instance");
}

/// Server metadata as the compute API reference describes it: merge, replace,
/// one item, Nova's key rule, the 128-item quota and the server's state.
#[tokio::test]
async fn server_metadata_merge_replace_items_quota_and_state() {
    let fake = Fake::start().await;
    fake.admin_client.set_timing(Timing { boot_ms: 300, ..Timing::default() }).await.expect("timing");
    let id = fake.create_server("meta-0", json!({"metadata": {"a": "1"}})).await;
    let path = format!("/servers/{id}/metadata");
    let building = fake.nova(Method::POST, &path, Some(json!({"metadata": {"b": "2"}}))).await.expect(409);
    assert!(building.to_string().contains("vm_state building"), "{building}");
    fake.wait_server(&id, "ACTIVE").await;
    let merged = fake.nova(Method::POST, &path, Some(json!({"metadata": {"b": "2"}}))).await.expect(200);
    assert_eq!(merged["metadata"], json!({"a": "1", "b": "2"}));
    let replaced = fake.nova(Method::PUT, &path, Some(json!({"metadata": {"c": "3"}}))).await.expect(200);
    assert_eq!(replaced["metadata"], json!({"c": "3"}));
    fake.nova(Method::PUT, &format!("{path}/d"), Some(json!({"meta": {"d": "4"}}))).await.expect(200);
    fake.nova(Method::PUT, &format!("{path}/d"), Some(json!({"meta": {"e": "4"}}))).await.expect(400);
    assert_eq!(fake.nova(Method::GET, &format!("{path}/d"), None).await.expect(200)["meta"], json!({"d": "4"}));
    fake.nova(Method::DELETE, &format!("{path}/c"), None).await.expect(204);
    fake.nova(Method::DELETE, &format!("{path}/c"), None).await.expect(404);
    fake.nova(Method::POST, &path, Some(json!({"metadata": {"a/b": "1"}}))).await.expect(400);
    let many: serde_json::Map<String, Value> = (0..128).map(|i| (format!("k{i}"), json!("v"))).collect();
    let over = fake.nova(Method::POST, &path, Some(json!({"metadata": many}))).await.expect(403);
    assert!(over.to_string().contains("metadata_items"), "{over}");
    assert_eq!(fake.server(&id).await["metadata"], json!({"d": "4"}), "a refused write changes nothing");
    let inventory = fake.inventory().await;
    let entry = inventory["instances"].as_array().unwrap().iter().find(|i| i["id"] == id.as_str()).unwrap().clone();
    assert_eq!(entry["tags"], json!({"d": "4"}));
    let calls = fake.calls().await;
    assert_eq!(calls.of("servers.metadata.update"), 4, "{calls:?}");
    assert!(calls.of_class(OpClass::Write) >= 8, "{calls:?}");
}
