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
