//! Compute Gallery direct sharing: owner share Add/Remove, the consumer's shared-gallery
//! view, and creating VMs from gallery images.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Fake, vm_body};
use fake_arm::{
    ALLOWED_IMAGE, OWNER_CLIENT_ID, OWNER_CLIENT_SECRET, OWNER_SUBSCRIPTION_ID, SUBSCRIPTION_ID, VISIBLE_IMAGE,
};
use reqwest::{Method, StatusCode};
use serde_json::json;

fn gallery_path(name: &str) -> String {
    format!("/subscriptions/{OWNER_SUBSCRIPTION_ID}/resourceGroups/images/providers/Microsoft.Compute/galleries/{name}")
}

fn consumer_path(unique: &str, image: &str) -> String {
    format!(
        "/subscriptions/{SUBSCRIPTION_ID}/providers/Microsoft.Compute/locations/westeurope/sharedGalleries/{unique}/images/{image}/versions/1.0.0"
    )
}

#[tokio::test]
async fn share_add_remove_and_consumer_view() {
    let fake = Fake::start().await;
    let owner = fake.token_for(OWNER_CLIENT_ID, OWNER_CLIENT_SECRET).await;
    let unique = format!("{OWNER_SUBSCRIPTION_ID}-GARDENLINUX");

    let gallery = fake.call_as(&owner, Method::GET, &gallery_path("gardenlinux"), None).await;
    assert_eq!(gallery.status, StatusCode::OK);
    assert_eq!(gallery.body["properties"]["identifier"]["uniqueName"], unique.as_str());
    assert_eq!(gallery.body["properties"]["sharingProfile"]["permissions"], "Groups");
    let version = fake.call_as(&owner, Method::GET, ALLOWED_IMAGE, None).await;
    assert_eq!(version.status, StatusCode::OK, "{}", version.body);
    assert_eq!(version.body["name"], "1.0.0");

    let before = fake.get(&consumer_path(&unique, "gardenlinux")).await;
    assert_eq!((before.status, before.code()), (StatusCode::NOT_FOUND, "ResourceNotFound"));
    let visible = fake.get(&consumer_path(&format!("{OWNER_SUBSCRIPTION_ID}-shared"), "gardenlinux")).await;
    assert_eq!(visible.status, StatusCode::OK, "the seeded shared gallery is visible (case-insensitive name)");

    let share = |op: &'static str| json!({"operationType": op, "groups": [{"type": "Subscriptions", "ids": [SUBSCRIPTION_ID]}]});
    for _ in 0..2 {
        let added = fake
            .call_as(&owner, Method::POST, &format!("{}/share", gallery_path("gardenlinux")), Some(share("Add")))
            .await;
        assert_eq!(added.status, StatusCode::ACCEPTED, "{}", added.body);
        assert_eq!(fake.wait_op_as(&owner, added.header("azure-asyncoperation").unwrap()).await["status"], "Succeeded");
        let result = fake.call_as(&owner, Method::GET, added.header("location").unwrap(), None).await;
        assert_eq!(result.status, StatusCode::OK);
        assert_eq!(result.body["groups"][0]["ids"], json!([SUBSCRIPTION_ID]), "Add is idempotent");
    }
    let gallery = fake.call_as(&owner, Method::GET, &gallery_path("gardenlinux"), None).await;
    assert_eq!(
        gallery.body["properties"]["sharingProfile"]["groups"],
        json!([{"type": "Subscriptions", "ids": [SUBSCRIPTION_ID]}])
    );
    let shared = fake.get(&consumer_path(&unique, "gardenlinux")).await;
    assert_eq!(shared.status, StatusCode::OK, "{}", shared.body);
    assert_eq!(
        shared.body["identifier"]["uniqueId"],
        format!("/SharedGalleries/{unique}/Images/gardenlinux/Versions/1.0.0")
    );
    // The consumer may not call the consumer path of the owner's subscription.
    let foreign =
        fake.get(&consumer_path(&unique, "gardenlinux").replace(SUBSCRIPTION_ID, OWNER_SUBSCRIPTION_ID)).await;
    assert_eq!(foreign.status, StatusCode::FORBIDDEN);

    // A VM from the shared image works now.
    fake.put_nic("vm-s-nic", json!({})).await;
    let mut body = vm_body("vm-s", "vm-s-nic", json!({}), "");
    body["properties"]["osProfile"].as_object_mut().unwrap().remove("customData");
    body["properties"]["storageProfile"]["imageReference"] =
        json!({"sharedGalleryImageId": format!("/SharedGalleries/{unique}/Images/gardenlinux/Versions/1.0.0")});
    let created = fake.put_vm("vm-s", body.clone()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);

    let removed = fake
        .call_as(&owner, Method::POST, &format!("{}/share", gallery_path("gardenlinux")), Some(share("Remove")))
        .await;
    assert_eq!(removed.status, StatusCode::ACCEPTED);
    let after = fake.get(&consumer_path(&unique, "gardenlinux")).await;
    assert_eq!(after.status, StatusCode::NOT_FOUND);
    fake.put_nic("vm-t-nic", json!({})).await;
    body["properties"]["networkProfile"]["networkInterfaces"][0]["id"] = json!(common::nic_id("vm-t-nic"));
    let refused = fake.put_vm("vm-t", body).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::NOT_FOUND, "GalleryImageNotFound"));

    // The owner's ARM id cannot be used from the cluster subscription.
    fake.put_nic("vm-u-nic", json!({})).await;
    let mut body = vm_body("vm-u", "vm-u-nic", json!({}), "aGk=");
    body["properties"]["storageProfile"]["imageReference"] = json!({"id": VISIBLE_IMAGE});
    let refused = fake.put_vm("vm-u", body).await;
    assert_eq!((refused.status, refused.code()), (StatusCode::FORBIDDEN, "LinkedAuthorizationFailed"));

    let bad = fake
        .call_as(
            &owner,
            Method::POST,
            &format!("{}/share", gallery_path("gardenlinux")),
            Some(json!({"operationType": "EnableCommunity"})),
        )
        .await;
    assert_eq!((bad.status, bad.code()), (StatusCode::CONFLICT, "OperationNotAllowed"));
    let calls = fake.admin_get("calls").await;
    assert_eq!(calls["calls"]["gallerySharingProfile.update"], 4);
    assert!(calls["classes"]["write"].as_u64().unwrap() >= 4);
}
