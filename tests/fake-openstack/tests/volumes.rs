//! Cinder: volume lifecycle, listing and the project in the path.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::Fake;
use fake_openstack::OWNER_PROJECT_ID;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn volumes_create_list_delete() {
    let fake = Fake::start().await;
    let path = fake.volumes_path();
    let answer = fake
        .call(
            Method::POST,
            &path,
            Some(json!({"volume": {"name": "data-0", "size": 10, "volume_type": "ssd", "metadata": {"role": "data"}}})),
        )
        .await;
    assert_eq!(answer.status, 202, "{}", answer.text);
    let volume = &answer.body["volume"];
    assert_eq!((volume["status"].as_str(), volume["bootable"].as_str()), (Some("creating"), Some("false")));
    let id = volume["id"].as_str().unwrap().to_owned();
    let mut status = String::new();
    for _ in 0..100 {
        status = fake.get(&format!("{path}/{id}")).await.expect(200)["volume"]["status"].as_str().unwrap().to_owned();
        if status == "available" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(status, "available");
    let listed = fake.get(&format!("{path}/detail?name=data-0")).await.expect(200);
    assert_eq!(listed["volumes"][0]["id"], id.as_str());
    assert_eq!(listed["volumes"][0]["volume_type"], "ssd");
    let by_meta = fake.get(&format!("{path}/detail?metadata=%7B%22role%22%3A%22data%22%7D")).await.expect(200);
    assert_eq!(by_meta["volumes"].as_array().unwrap().len(), 1);
    let none = fake.get(&format!("{path}/detail?metadata=%7B%27role%27%3A%27other%27%7D")).await.expect(200);
    assert!(none["volumes"].as_array().unwrap().is_empty());

    fake.call(Method::POST, &path, Some(json!({"volume": {"size": 0}}))).await.expect(400);
    fake.call(Method::POST, &path, Some(json!({"volume": {"size": 1, "volume_type": "gold"}}))).await.expect(404);
    let answer = fake.get(&format!("{path}/nope")).await;
    assert_eq!(answer.status, 404);
    assert_eq!(answer.body["itemNotFound"]["message"], "Volume nope could not be found.");

    fake.call(Method::DELETE, &format!("{path}/{id}"), None).await.expect(202);
    assert_eq!(fake.get(&format!("{path}/{id}")).await.expect(200)["volume"]["status"], "deleting");
    tokio::time::sleep(Duration::from_millis(250)).await;
    fake.get(&format!("{path}/{id}")).await.expect(404);
}

#[tokio::test]
async fn in_use_volumes_cannot_be_deleted_and_the_path_project_must_match() {
    let fake = Fake::start().await;
    let server = fake
        .create_server(
            "boot",
            json!({"imageRef": "", "block_device_mapping_v2": [{"boot_index": 0, "uuid": fake_openstack::PUBLIC_IMAGE,
            "source_type": "image", "destination_type": "volume", "volume_size": 20}]}),
        )
        .await;
    let detail = fake.nova(Method::GET, &format!("/servers/{server}"), None).await.expect(200);
    let volume = detail["server"]["os-extended-volumes:volumes_attached"][0]["id"].as_str().unwrap().to_owned();
    let answer = fake.call(Method::DELETE, &format!("{}/{volume}", fake.volumes_path()), None).await;
    assert_eq!(answer.status, 400);
    assert!(
        answer.body["badRequest"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Invalid volume: Volume status must be available")
    );
    fake.get(&format!("/volume/v3/{OWNER_PROJECT_ID}/volumes/detail")).await.expect(403);
    fake.nova(Method::DELETE, &format!("/servers/{server}"), None).await.expect(204);
    fake.wait_server(&server, "gone").await;
    let left = fake.get(&format!("{}/{volume}", fake.volumes_path())).await.expect(200);
    assert_eq!(left["volume"]["status"], "available", "not delete_on_termination: detached");
}

/// Creates a volume in the cluster project (from `image` when given) and waits until it is available.
async fn available_volume(fake: &Fake, name: &str, image: Option<&str>) -> String {
    let path = fake.volumes_path();
    let mut volume = json!({"name": name, "size": 20, "volume_type": "standard"});
    if let Some(image) = image {
        volume["imageRef"] = json!(image);
    }
    let answer = fake.call(Method::POST, &path, Some(json!({"volume": volume}))).await.expect(202);
    let id = answer["volume"]["id"].as_str().unwrap().to_owned();
    for _ in 0..100 {
        if fake.get(&format!("{path}/{id}")).await.expect(200)["volume"]["status"] == "available" {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("volume {id} never became available");
}

/// Nova boots from a pre-created volume (`source_type: volume`, as gardener's OpenStack
/// provider does for classes with `rootDiskType`): attached in-use, no image on the server,
/// detached (not deleted) with the server; refused when missing, in use or not bootable.
#[tokio::test]
async fn servers_boot_from_an_existing_volume_and_leave_it_detached() {
    let fake = Fake::start().await;
    let root = available_volume(&fake, "machine-v", Some(fake_openstack::PUBLIC_IMAGE)).await;
    let bdm = |uuid: &str| {
        json!({"imageRef": fake_openstack::PUBLIC_IMAGE, "block_device_mapping_v2": [{"boot_index": 0, "uuid": uuid,
        "source_type": "volume", "destination_type": "volume", "volume_size": 20, "delete_on_termination": false}]})
    };
    let server = fake.create_server("machine-v", bdm(&root)).await;
    let volume = fake.get(&format!("{}/{root}", fake.volumes_path())).await.expect(200)["volume"].clone();
    assert_eq!(volume["status"], "in-use");
    assert_eq!(volume["attachments"][0]["server_id"], server.as_str());
    fake.wait_server(&server, "ACTIVE").await;
    let detail = fake.server(&server).await;
    assert_eq!(detail["image"], "", "booted from volume");
    assert_eq!(detail["os-extended-volumes:volumes_attached"][0]["id"], root.as_str());
    assert_eq!(detail["os-extended-volumes:volumes_attached"][0]["delete_on_termination"], false);
    // Nova's usage timestamp: naive, microseconds, no zone (gophercloud parses exactly this).
    let launched = detail["OS-SRV-USG:launched_at"].as_str().unwrap();
    assert_eq!(launched.len(), "2026-12-01T10:00:00.000000".len(), "{launched}");
    assert!(!launched.ends_with('Z') && launched.as_bytes()[19] == b'.', "{launched}");

    let refused = |what: &str, answer: common::Answer, contains: &str| {
        assert_eq!(answer.status, 400, "{what}: {}", answer.text);
        let message = answer.body["badRequest"]["message"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains(contains), "{what}: {message}");
    };
    let body = |extra: serde_json::Value| {
        let mut server = json!({"name": "other", "flavorRef": "2", "networks": [{"uuid": fake_openstack::NETWORK_ID}]});
        for (k, v) in extra.as_object().unwrap() {
            server[k] = v.clone();
        }
        json!({"server": server})
    };
    let in_use = fake.nova(Method::POST, "/servers", Some(body(bdm(&root)))).await;
    refused("in-use volume", in_use, "current status is in-use");
    let missing = fake.nova(Method::POST, "/servers", Some(body(bdm("0b0e0e0e-0000-4000-8000-000000000000")))).await;
    refused("unknown volume", missing, "failed to get volume");
    let blank = available_volume(&fake, "blank", None).await;
    let not_bootable = fake.nova(Method::POST, "/servers", Some(body(bdm(&blank)))).await;
    refused("blank volume", not_bootable, "is not bootable");

    fake.nova(Method::DELETE, &format!("/servers/{server}"), None).await.expect(204);
    fake.wait_server(&server, "gone").await;
    let left = fake.get(&format!("{}/{root}", fake.volumes_path())).await.expect(200)["volume"].clone();
    assert_eq!(left["status"], "available", "pre-created volume detached, not deleted");
    assert_eq!(left["attachments"], json!([]));
    fake.call(Method::DELETE, &format!("{}/{root}", fake.volumes_path()), None).await.expect(202);
}
