//! TagResources and UntagResources on instances, as the ECS API reference
//! describes them: set/overwrite, remove by key or all, the 50-resource and
//! 20-tag limits, all-or-nothing on unknown ids, counted as writes.

#![allow(clippy::unwrap_used)]

mod common;

use fake_cloud_support::OpClass;
use std::collections::BTreeMap;

use common::{Fake, OWNER};
use fake_ecs::REGION;
use serde_json::json;

fn tags_of(instance: &serde_json::Value) -> BTreeMap<String, String> {
    instance["Tags"]["Tag"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["TagKey"].as_str().unwrap().to_owned(), t["TagValue"].as_str().unwrap().to_owned()))
        .collect()
}

fn pairs(tags: &[(&str, &str)]) -> BTreeMap<String, String> {
    tags.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[tokio::test]
async fn tags_are_set_overwritten_and_removed_on_every_resource_of_the_call() {
    let fake = Fake::start().await;
    let a = fake.run(&[("Tag.1.Key", "team"), ("Tag.1.Value", "a"), ("Tag.2.Key", "keep"), ("Tag.2.Value", "1")]).await;
    let b = fake.run(&[]).await;
    let (a, b) = (&a[0], &b[0]);
    let base = [("RegionId", REGION), ("ResourceType", "instance"), ("ResourceId.1", a.as_str()), ("ResourceId.2", b)];
    let mut set = base.to_vec();
    set.extend([("Tag.1.Key", "team"), ("Tag.1.Value", "b"), ("Tag.2.Key", "new"), ("Tag.2.Value", "")]);
    fake.call("TagResources", &set).await.ok();
    assert_eq!(tags_of(&fake.describe_one(a).await), pairs(&[("team", "b"), ("keep", "1"), ("new", "")]));
    assert_eq!(tags_of(&fake.describe_one(b).await), pairs(&[("team", "b"), ("new", "")]));

    let mut unset = base.to_vec();
    unset.extend([("TagKey.1", "team"), ("TagKey.2", "absent")]);
    fake.call("UntagResources", &unset).await.ok();
    assert_eq!(tags_of(&fake.describe_one(a).await), pairs(&[("keep", "1"), ("new", "")]));
    // No TagKey and no All: nothing; All=true: every tag.
    fake.call("UntagResources", &base).await.ok();
    assert_eq!(tags_of(&fake.describe_one(b).await).len(), 1);
    let mut all = base.to_vec();
    all.push(("All", "true"));
    fake.call("UntagResources", &all).await.ok();
    assert!(tags_of(&fake.describe_one(a).await).is_empty());
    let inventory = fake.inventory().await;
    let entry = inventory["instances"].as_array().unwrap().iter().find(|i| i["id"] == a.as_str()).unwrap().clone();
    assert_eq!(entry["tags"], json!({}), "the inventory shows the tags as they are");
    let calls = fake.calls().await;
    assert_eq!(calls.of("TagResources"), 1);
    assert_eq!(calls.of("UntagResources"), 3);
    assert_eq!(calls.of_class(OpClass::Write), 4);
}

#[tokio::test]
async fn bad_requests_change_nothing() {
    let fake = Fake::start().await;
    let id = fake.run(&[("Tag.1.Key", "team"), ("Tag.1.Value", "a")]).await.remove(0);
    let call = |extra: &[(&'static str, &'static str)]| {
        let mut p: Vec<(&str, &str)> = vec![("RegionId", REGION), ("ResourceType", "instance")];
        p.extend_from_slice(extra);
        p
    };
    let one = [("ResourceId.1", id.as_str())];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut p = call(extra);
        p.extend_from_slice(&one);
        p
    };
    fake.call("TagResources", &with(&[])).await.expect(400, "MissingParameter");
    fake.call("TagResources", &call(&[("Tag.1.Key", "x"), ("Tag.1.Value", "1")])).await.expect(400, "MissingParameter");
    fake.call("TagResources", &with(&[("Tag.1.Key", "acs:x"), ("Tag.1.Value", "1")]))
        .await
        .expect(400, "InvalidTagKey.Malformed");
    fake.call("TagResources", &with(&[("Tag.1.Key", "x"), ("Tag.1.Value", "acs:1")]))
        .await
        .expect(400, "InvalidTagValue.Malformed");
    fake.call("TagResources", &with(&[("Tag.21.Key", "x"), ("Tag.21.Value", "1")]))
        .await
        .expect(400, "InvalidParameter.TagCount");
    let mut wrong_type = with(&[("Tag.1.Key", "x"), ("Tag.1.Value", "1")]);
    wrong_type[1] = ("ResourceType", "bucket");
    fake.call("TagResources", &wrong_type).await.expect(400, "InvalidResourceType.NotFound");
    // One unknown id: nothing is tagged, not even the known one.
    let mut unknown = with(&[("Tag.1.Key", "x"), ("Tag.1.Value", "1")]);
    unknown.push(("ResourceId.2", "i-gw8doesnotexist0000001"));
    fake.call("TagResources", &unknown).await.expect(404, "InvalidResourceId.NotFound");
    // Another account's instance is unknown to the caller.
    let theirs = fake.call_as(OWNER, "TagResources", &with(&[("Tag.1.Key", "x"), ("Tag.1.Value", "1")])).await;
    theirs.expect(404, "InvalidResourceId.NotFound");
    assert_eq!(tags_of(&fake.describe_one(&id).await), pairs(&[("team", "a")]));

    // 20 tags at most on a resource: the 21st is refused and nothing changes.
    let keys: Vec<(String, String)> = (1..=19).map(|n| (format!("Tag.{n}.Key"), format!("k{n}"))).collect();
    let mut full = call(&[]);
    full.extend_from_slice(&one);
    full.extend(keys.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    fake.call("TagResources", &full).await.ok();
    assert_eq!(tags_of(&fake.describe_one(&id).await).len(), 20);
    fake.call("TagResources", &with(&[("Tag.1.Key", "one-more"), ("Tag.1.Value", "1")]))
        .await
        .expect(403, "OperationDenied.QuotaExceed");
    fake.call("TagResources", &with(&[("Tag.1.Key", "team"), ("Tag.1.Value", "b")])).await.ok();
    let now = tags_of(&fake.describe_one(&id).await);
    assert_eq!((now.len(), now["team"].as_str()), (20, "b"), "overwriting a key adds none");
}
