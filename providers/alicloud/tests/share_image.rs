//! ShareImage on the fake ECS: what the consumer can launch really changes.

#![allow(clippy::unwrap_used)]

mod support;

use machine_driver_api::{Driver, ErrorKind, OwnerSecret, RevokeImageShare, ShareImage};
use support::{FakeCloud, ctx};

fn request(cloud: &FakeCloud, image: &str, owner: bool) -> ShareImage {
    ShareImage {
        image: image.to_string(),
        region: Some("eu-central-1".into()),
        owner_secret: owner.then(|| OwnerSecret::new(cloud.owner_secret()).unwrap()),
        consumer_secret: cloud.secret.clone(),
        consumer_account: None,
    }
}

fn revoke_request(cloud: &FakeCloud, image: &str) -> RevokeImageShare {
    RevokeImageShare {
        image: image.to_string(),
        region: Some("eu-central-1".into()),
        owner_secret: OwnerSecret::new(cloud.owner_secret()).unwrap(),
        consumer_secret: cloud.secret.clone(),
        consumer_account: None,
    }
}

#[tokio::test]
async fn a_private_image_is_shared_once_and_then_launchable() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    // Before the share, the consumer cannot launch the owner's image.
    let mut create = cloud.create_request("s-1");
    let mut spec: serde_json::Value = serde_json::from_slice(&create.class.provider_spec).unwrap();
    spec["imageID"] = fake_ecs::ALLOWED_IMAGE.into();
    create.class.provider_spec = serde_json::to_vec(&spec).unwrap();
    let refused = driver.create_machine(&ctx("create", 30), create.clone()).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::NotFound, "{refused:?}");

    let missing_owner =
        driver.share_image(&ctx("share", 10), request(&cloud, fake_ecs::ALLOWED_IMAGE, false)).await.unwrap_err();
    assert_eq!(missing_owner.kind(), ErrorKind::FailedPrecondition);
    assert_eq!(missing_owner.reason(), "OWNER_CREDENTIALS_REQUIRED");

    let shared = driver.share_image(&ctx("share", 10), request(&cloud, fake_ecs::ALLOWED_IMAGE, true)).await.unwrap();
    assert!(shared.granted_now);
    assert_eq!(shared.consumer_account, fake_ecs::ACCOUNT_ID);
    let again = driver.share_image(&ctx("share", 10), request(&cloud, fake_ecs::ALLOWED_IMAGE, true)).await.unwrap();
    assert!(!again.granted_now);

    // A new machine uid: the refused attempt's ClientToken is not reused.
    create.machine.uid = "uid-s-1-after-share".into();
    driver.create_machine(&ctx("create", 30), create.clone()).await.unwrap();

    // Revoked: the consumer can no longer launch it; a repeat changes nothing.
    let revoked =
        driver.revoke_image_share(&ctx("revoke", 10), revoke_request(&cloud, fake_ecs::ALLOWED_IMAGE)).await.unwrap();
    assert!(revoked.revoked_now);
    assert_eq!(revoked.consumer_account, fake_ecs::ACCOUNT_ID);
    let again =
        driver.revoke_image_share(&ctx("revoke", 10), revoke_request(&cloud, fake_ecs::ALLOWED_IMAGE)).await.unwrap();
    assert!(!again.revoked_now);
    create.machine.uid = "uid-s-1-after-revoke".into();
    create.machine.name = "s-2".into();
    let refused = driver.create_machine(&ctx("create", 30), create).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::NotFound, "{refused:?}");
}

#[tokio::test]
async fn a_public_image_needs_no_owner() {
    let cloud = FakeCloud::start().await;
    let driver = cloud.driver();
    let shared = driver.share_image(&ctx("share", 10), request(&cloud, fake_ecs::PUBLIC_IMAGE, false)).await.unwrap();
    assert!(!shared.granted_now);
    assert_eq!(shared.consumer_account, fake_ecs::ACCOUNT_ID);
    assert_eq!(cloud.calls().await.breakdown(), "DescribeImages×1, GetCallerIdentity×1");
}
