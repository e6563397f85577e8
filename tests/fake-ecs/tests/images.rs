//! Image visibility per account, ModifyImageSharePermission (share, revoke, quota, owner
//! only) and DescribeImageSharePermission.

#![allow(clippy::unwrap_used)]

mod common;

use common::{CLUSTER, Fake, OWNER};
use fake_ecs::{ACCOUNT_ID, ALLOWED_IMAGE, NOT_ALLOWED_IMAGE, OWNER_ACCOUNT_ID, PUBLIC_IMAGE, REGION};
use serde_json::{Value, json};

async fn images(fake: &Fake, identity: (&str, &str), extra: &[(&str, &str)]) -> Value {
    let mut params = vec![("RegionId", REGION)];
    params.extend_from_slice(extra);
    fake.call_as(identity, "DescribeImages", &params).await.ok()
}

fn ids(body: &Value) -> Vec<String> {
    body["Images"]["Image"].as_array().unwrap().iter().map(|i| i["ImageId"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn visibility_follows_sharing_and_revocation() {
    let fake = Fake::start().await;
    let body = images(&fake, CLUSTER, &[]).await;
    assert_eq!(ids(&body), vec![PUBLIC_IMAGE.to_owned()]);
    assert_eq!(body["Images"]["Image"][0]["ImageOwnerAlias"], "system");
    assert_eq!(body["Images"]["Image"][0]["IsPublic"], true);
    assert_eq!(body["Images"]["Image"][0]["Status"], "Available");
    assert_eq!(
        images(&fake, CLUSTER, &[("ImageId", ALLOWED_IMAGE)]).await["TotalCount"],
        0,
        "not an error, just absent"
    );
    let owner = images(&fake, OWNER, &[("ImageOwnerAlias", "self")]).await;
    assert_eq!(ids(&owner), vec![ALLOWED_IMAGE.to_owned(), NOT_ALLOWED_IMAGE.to_owned()]);
    assert_eq!(owner["Images"]["Image"][0]["ImageOwnerAlias"], "self");

    // The consumer cannot share someone else's image.
    fake.call_as(
        CLUSTER,
        "ModifyImageSharePermission",
        &[("RegionId", REGION), ("ImageId", ALLOWED_IMAGE), ("AddAccount.1", ACCOUNT_ID)],
    )
    .await
    .expect(404, "InvalidImageId.NotFound");
    fake.call_as(
        OWNER,
        "ModifyImageSharePermission",
        &[("RegionId", REGION), ("ImageId", PUBLIC_IMAGE), ("AddAccount.1", ACCOUNT_ID)],
    )
    .await
    .expect(403, "InvalidImageId.IsSystemImage");

    // Share: the consumer sees it as `others` and can launch it.
    let share = [("RegionId", REGION), ("ImageId", ALLOWED_IMAGE), ("AddAccount.1", ACCOUNT_ID)];
    fake.call_as(OWNER, "ModifyImageSharePermission", &share).await.ok();
    fake.call_as(OWNER, "ModifyImageSharePermission", &share).await.ok(); // adding again is a no-op
    let body = images(&fake, CLUSTER, &[("ImageId", ALLOWED_IMAGE)]).await;
    assert_eq!(body["TotalCount"], 1);
    assert_eq!(body["Images"]["Image"][0]["ImageOwnerAlias"], "others");
    assert_eq!(images(&fake, CLUSTER, &[("ImageOwnerAlias", "others")]).await["TotalCount"], 1);
    assert_eq!(images(&fake, CLUSTER, &[("ImageId", NOT_ALLOWED_IMAGE)]).await["TotalCount"], 0);
    let launched = fake.run(&[("ImageId", ALLOWED_IMAGE)]).await;
    assert_eq!(launched.len(), 1);
    let permission = fake
        .call_as(OWNER, "DescribeImageSharePermission", &[("RegionId", REGION), ("ImageId", ALLOWED_IMAGE)])
        .await
        .ok();
    assert_eq!(permission["Accounts"]["Account"], json!([{"AliyunId": ACCOUNT_ID}]));
    assert_eq!(permission["ImageId"], ALLOWED_IMAGE);
    assert_eq!(permission["TotalCount"], 1);
    assert_eq!(permission["ShareGroups"]["ShareGroup"], json!([]));
    fake.call_as(CLUSTER, "DescribeImageSharePermission", &[("RegionId", REGION), ("ImageId", ALLOWED_IMAGE)])
        .await
        .expect(404, "InvalidImageId.NotFound");
    let inventory = fake.inventory().await;
    let image = inventory["images"].as_array().unwrap().iter().find(|i| i["id"] == ALLOWED_IMAGE).unwrap().clone();
    assert_eq!(image["owner"], OWNER_ACCOUNT_ID);
    assert_eq!(image["shared_with"], json!([ACCOUNT_ID]));

    // Revoke: invisible again and no longer launchable.
    fake.call_as(
        OWNER,
        "ModifyImageSharePermission",
        &[("RegionId", REGION), ("ImageId", ALLOWED_IMAGE), ("RemoveAccount.1", ACCOUNT_ID)],
    )
    .await
    .ok();
    assert_eq!(images(&fake, CLUSTER, &[("ImageId", ALLOWED_IMAGE)]).await["TotalCount"], 0);
    fake.run_as(CLUSTER, &[("ImageId", ALLOWED_IMAGE)]).await.expect(404, "InvalidImageId.NotFound");
    let permission = fake
        .call_as(OWNER, "DescribeImageSharePermission", &[("RegionId", REGION), ("ImageId", ALLOWED_IMAGE)])
        .await
        .ok();
    assert_eq!(permission["Accounts"]["Account"], json!([]));

    // Public: everyone sees it.
    fake.call_as(
        OWNER,
        "ModifyImageSharePermission",
        &[("RegionId", REGION), ("ImageId", NOT_ALLOWED_IMAGE), ("IsPublic", "true")],
    )
    .await
    .ok();
    assert_eq!(images(&fake, CLUSTER, &[("ImageId", NOT_ALLOWED_IMAGE)]).await["TotalCount"], 1);
    let permission = fake
        .call_as(OWNER, "DescribeImageSharePermission", &[("RegionId", REGION), ("ImageId", NOT_ALLOWED_IMAGE)])
        .await
        .ok();
    assert_eq!(permission["ShareGroups"]["ShareGroup"], json!([{"Group": "all"}]));

    fake.admin_client.reset().await.expect("reset");
    assert_eq!(images(&fake, CLUSTER, &[]).await["TotalCount"], 1, "reset restores the seeds");
}

#[tokio::test]
async fn share_limits_and_paging() {
    let fake = Fake::start().await;
    fake.admin("ecs/share-quota", json!({"accounts": 12})).await;
    let accounts: Vec<String> = (0..12).map(|n| format!("51000000000000{n:02}")).collect();
    let mut first: Vec<(String, String)> =
        vec![("RegionId".into(), REGION.into()), ("ImageId".into(), ALLOWED_IMAGE.into())];
    first.extend(accounts[..10].iter().enumerate().map(|(i, a)| (format!("AddAccount.{}", i + 1), a.clone())));
    let params: Vec<(&str, &str)> = first.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    fake.call_as(OWNER, "ModifyImageSharePermission", &params).await.ok();
    let eleven = [("RegionId", REGION), ("ImageId", ALLOWED_IMAGE), ("AddAccount.11", accounts[10].as_str())];
    fake.call_as(OWNER, "ModifyImageSharePermission", &eleven).await.expect(400, "InvalidParameter");
    let more = [
        ("RegionId", REGION),
        ("ImageId", ALLOWED_IMAGE),
        ("AddAccount.1", accounts[10].as_str()),
        ("AddAccount.2", accounts[11].as_str()),
        ("AddAccount.3", ACCOUNT_ID),
    ];
    fake.call_as(OWNER, "ModifyImageSharePermission", &more).await.expect(403, "QuotaExceed.ShareImageUser");
    let permission = fake
        .call_as(
            OWNER,
            "DescribeImageSharePermission",
            &[("RegionId", REGION), ("ImageId", ALLOWED_IMAGE), ("PageSize", "4"), ("PageNumber", "3")],
        )
        .await
        .ok();
    assert_eq!(permission["TotalCount"], 10, "the refused call changed nothing");
    assert_eq!(permission["Accounts"]["Account"], json!([{"AliyunId": accounts[8]}, {"AliyunId": accounts[9]}]));
    fake.call_as(
        OWNER,
        "ModifyImageSharePermission",
        &[("RegionId", REGION), ("ImageId", ALLOWED_IMAGE), ("AddAccount.1", "not-an-account")],
    )
    .await
    .expect(404, "InvalidAccount.NotFound");
    // Remove and add in one call.
    let swap = [
        ("RegionId", REGION),
        ("ImageId", ALLOWED_IMAGE),
        ("RemoveAccount.1", accounts[0].as_str()),
        ("AddAccount.1", accounts[10].as_str()),
        ("AddAccount.2", accounts[11].as_str()),
    ];
    fake.call_as(OWNER, "ModifyImageSharePermission", &swap).await.ok();
    let permission = fake
        .call_as(
            OWNER,
            "DescribeImageSharePermission",
            &[("RegionId", REGION), ("ImageId", ALLOWED_IMAGE), ("PageSize", "100")],
        )
        .await
        .ok();
    assert_eq!(permission["TotalCount"], 11);
    assert!(!permission["Accounts"]["Account"].as_array().unwrap().contains(&json!({"AliyunId": accounts[0]})));
}
