//! Glance: visibility, the image list, owner-only updates and the member flow.

#![allow(clippy::unwrap_used)]

mod common;

use common::Fake;
use fake_openstack::{ALLOWED_IMAGE, NOT_ALLOWED_IMAGE, OWNER_PROJECT_ID, PROJECT_ID, PUBLIC_IMAGE};
use reqwest::Method;
use serde_json::{Value, json};

const PATCH: (&str, &str) = ("Content-Type", "application/openstack-images-v2.1-json-patch");

async fn list(fake: &Fake, token: &str, query: &str) -> Vec<String> {
    let body = fake.send(Method::GET, &format!("/image/v2/images{query}"), Some(token), None, &[]).await.expect(200);
    body["images"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap().to_owned()).collect()
}

async fn image(
    fake: &Fake,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
    patch: bool,
) -> common::Answer {
    let headers: &[(&str, &str)] = if patch { &[PATCH] } else { &[] };
    fake.send(method, &format!("/image/v2/images/{path}"), Some(token), body, headers).await
}

#[tokio::test]
async fn visibility_and_the_member_flow() {
    let fake = Fake::start().await;
    let (cluster, owner) = (fake.cluster.clone(), fake.owner.clone());
    assert_eq!(list(&fake, &cluster, "").await, [PUBLIC_IMAGE]);
    assert_eq!(list(&fake, &owner, "").await.len(), 3);
    let answer = image(&fake, &cluster, Method::GET, ALLOWED_IMAGE, None, false).await;
    assert_eq!(answer.status, 404);
    assert_eq!(answer.text, format!("404 Not Found\n\nNo image found with ID {ALLOWED_IMAGE}\n\n   "));
    assert!(answer.header("content-type").starts_with("text/plain"));

    let answer = image(
        &fake,
        &owner,
        Method::POST,
        &format!("{ALLOWED_IMAGE}/members"),
        Some(json!({"member": PROJECT_ID})),
        false,
    )
    .await;
    assert_eq!(answer.status, 403, "only shared images have members");
    let answer = image(
        &fake,
        &owner,
        Method::PATCH,
        ALLOWED_IMAGE,
        Some(json!([{"op": "replace", "path": "/visibility", "value": "shared"}])),
        false,
    )
    .await;
    assert_eq!(answer.status, 415);
    let shared = image(
        &fake,
        &owner,
        Method::PATCH,
        ALLOWED_IMAGE,
        Some(json!([{"op": "replace", "path": "/visibility", "value": "shared"}])),
        true,
    )
    .await
    .expect(200);
    assert_eq!(shared["visibility"], "shared");
    let member = image(
        &fake,
        &owner,
        Method::POST,
        &format!("{ALLOWED_IMAGE}/members"),
        Some(json!({"member": PROJECT_ID})),
        false,
    )
    .await
    .expect(200);
    assert_eq!((member["member_id"].as_str(), member["status"].as_str()), (Some(PROJECT_ID), Some("pending")));
    let answer = image(
        &fake,
        &owner,
        Method::POST,
        &format!("{ALLOWED_IMAGE}/members"),
        Some(json!({"member": PROJECT_ID})),
        false,
    )
    .await;
    assert_eq!(answer.status, 409);

    image(&fake, &cluster, Method::GET, ALLOWED_IMAGE, None, false).await.expect(200);
    assert_eq!(list(&fake, &cluster, "").await, [PUBLIC_IMAGE], "pending: gettable, not listed");
    assert_eq!(list(&fake, &cluster, "?visibility=shared&member_status=pending").await, [ALLOWED_IMAGE]);
    let answer = image(
        &fake,
        &owner,
        Method::PUT,
        &format!("{ALLOWED_IMAGE}/members/{PROJECT_ID}"),
        Some(json!({"status": "accepted"})),
        false,
    )
    .await;
    assert_eq!(answer.status, 403, "the owner may not accept for the member");
    image(
        &fake,
        &cluster,
        Method::PUT,
        &format!("{ALLOWED_IMAGE}/members/{PROJECT_ID}"),
        Some(json!({"status": "maybe"})),
        false,
    )
    .await
    .expect(400);
    let accepted = image(
        &fake,
        &cluster,
        Method::PUT,
        &format!("{ALLOWED_IMAGE}/members/{PROJECT_ID}"),
        Some(json!({"status": "accepted"})),
        false,
    )
    .await
    .expect(200);
    assert_eq!(accepted["status"], "accepted");
    let mut listed = list(&fake, &cluster, "").await;
    listed.sort();
    let mut expected = vec![PUBLIC_IMAGE.to_owned(), ALLOWED_IMAGE.to_owned()];
    expected.sort();
    assert_eq!(listed, expected);
    let members = image(&fake, &owner, Method::GET, &format!("{ALLOWED_IMAGE}/members"), None, false).await.expect(200);
    assert_eq!(members["members"].as_array().unwrap().len(), 1);
    image(&fake, &cluster, Method::GET, &format!("{ALLOWED_IMAGE}/members/{PROJECT_ID}"), None, false)
        .await
        .expect(200);
    let answer = image(
        &fake,
        &cluster,
        Method::PATCH,
        ALLOWED_IMAGE,
        Some(json!([{"op": "replace", "path": "/name", "value": "x"}])),
        true,
    )
    .await;
    assert_eq!(answer.status, 403);
    assert!(answer.text.contains("You are not permitted to modify 'name' on this image."));
    let answer =
        image(&fake, &cluster, Method::DELETE, &format!("{ALLOWED_IMAGE}/members/{PROJECT_ID}"), None, false).await;
    assert_eq!(answer.status, 403, "a member may not remove itself");

    let inventory = fake.inventory().await;
    let entry = inventory["images"].as_array().unwrap().iter().find(|i| i["id"] == ALLOWED_IMAGE).unwrap().clone();
    assert_eq!(entry["members"], json!([{"member": PROJECT_ID, "status": "accepted"}]));
    assert_eq!(entry["owner"], OWNER_PROJECT_ID);

    image(&fake, &owner, Method::DELETE, &format!("{ALLOWED_IMAGE}/members/{PROJECT_ID}"), None, false)
        .await
        .expect(204);
    image(&fake, &cluster, Method::GET, ALLOWED_IMAGE, None, false).await.expect(404);
    assert_eq!(list(&fake, &cluster, "").await, [PUBLIC_IMAGE]);
    image(&fake, &owner, Method::DELETE, &format!("{ALLOWED_IMAGE}/members/{PROJECT_ID}"), None, false)
        .await
        .expect(404);
    image(&fake, &cluster, Method::GET, NOT_ALLOWED_IMAGE, None, false).await.expect(404);
}

#[tokio::test]
async fn image_lists_filter_and_page() {
    let fake = Fake::start().await;
    let owner = fake.owner.clone();
    assert_eq!(list(&fake, &owner, "?visibility=public").await, [PUBLIC_IMAGE]);
    assert_eq!(list(&fake, &owner, "?visibility=private").await.len(), 2);
    assert_eq!(list(&fake, &owner, "?name=owner-internal").await, [NOT_ALLOWED_IMAGE]);
    let first = fake.send(Method::GET, "/image/v2/images?limit=2", Some(&owner), None, &[]).await.expect(200);
    assert_eq!(first["images"].as_array().unwrap().len(), 2);
    let next = first["next"].as_str().unwrap();
    assert!(next.starts_with("/v2/images?marker="), "{next}");
    let second = fake.send(Method::GET, &format!("/image{next}"), Some(&owner), None, &[]).await.expect(200);
    assert_eq!(second["images"].as_array().unwrap().len(), 1);
    assert!(second.get("next").is_none());
    let answer = fake.send(Method::GET, "/image/v2/images?marker=nope", Some(&owner), None, &[]).await;
    assert_eq!(answer.status, 400);
    let one = image(&fake, &owner, Method::GET, PUBLIC_IMAGE, None, false).await.expect(200);
    assert_eq!(
        (one["self"].as_str(), one["status"].as_str()),
        (Some(format!("/v2/images/{PUBLIC_IMAGE}").as_str()), Some("active"))
    );
}
